package verify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/data"
)

// readers reads both sides: one direct consumer per side, each fetching
// every partition being compared at once (franz-go sends one Fetch per
// broker for all of them), a bounded number of partitions at a time.
type readers struct {
	cfg      Config
	src, dst *kgo.Client
	// Partitions by their source and by their target name (read only
	// once reading starts).
	bySrc, byDst map[data.TopicPartition]*part
	parts        []*part
	done         chan *part // a partition ended (compared, or failed)
	records      atomic.Int64
}

// fetchMaxWait bounds how long a broker holds a Fetch with nothing new: a
// partition resumed after a pause joins the next Fetch to its broker.
const fetchMaxWait = 200 * time.Millisecond

func newReaders(cfg Config, parts []*part) (*readers, error) {
	read := []kgo.Opt{
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Control records come through so that a range ending in a
		// transaction marker is seen to its end; they are not compared.
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.FetchMaxPartitionBytes(4 << 20),
	}
	src, err := kgo.NewClient(append(append([]kgo.Opt(nil), cfg.SourceOpts...), read...)...)
	if err != nil {
		return nil, fmt.Errorf("mirror %s: source client: %w", cfg.Mirror, err)
	}
	dst, err := kgo.NewClient(append(append([]kgo.Opt(nil), cfg.TargetOpts...), read...)...)
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("mirror %s: target client: %w", cfg.Mirror, err)
	}
	r := &readers{cfg: cfg, src: src, dst: dst, parts: parts, done: make(chan *part, len(parts)),
		bySrc: make(map[data.TopicPartition]*part, len(parts)), byDst: make(map[data.TopicPartition]*part, len(parts))}
	for _, p := range parts {
		r.bySrc[data.TopicPartition{Topic: p.out.SourceTopic, Partition: p.out.Partition}] = p
		r.byDst[data.TopicPartition{Topic: p.out.TargetTopic, Partition: p.out.Partition}] = p
	}
	return r, nil
}

// run reads and compares every partition, parallel at a time, until all
// ended or ctx is done; then it closes the clients. Every partition not
// ended then gets an error saying how far it was read.
func (r *readers) run(ctx context.Context, parallel int) {
	defer r.dst.Close()
	defer r.src.Close()
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.poll(pctx, r.src, true) })
	wg.Go(func() { r.poll(pctx, r.dst, false) })
	defer func() {
		cancel()
		wg.Wait()
		r.expire(ctx)
	}()
	next, active := 0, 0
	for {
		for active < parallel && next < len(r.parts) {
			if r.start(r.parts[next]) {
				active++
			}
			next++
		}
		if active == 0 {
			return
		}
		select {
		case p := <-r.done:
			active--
			r.src.RemoveConsumePartitions(map[string][]int32{p.out.SourceTopic: {p.out.Partition}})
			r.dst.RemoveConsumePartitions(map[string][]int32{p.out.TargetTopic: {p.out.Partition}})
		case <-ctx.Done():
			return
		}
	}
}

// start adds p's sides to the consumers; false when there is nothing to
// read.
func (r *readers) start(p *part) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.skip || p.complete() {
		p.finished = true
		return false
	}
	if !p.srcDone {
		r.src.AddConsumePartitions(map[string]map[int32]kgo.Offset{p.out.SourceTopic: {p.out.Partition: kgo.NewOffset().At(p.srcNext)}})
	}
	if !p.dstDone {
		r.dst.AddConsumePartitions(map[string]map[int32]kgo.Offset{p.out.TargetTopic: {p.out.Partition: kgo.NewOffset().At(p.tRead)}})
	}
	return true
}

// expire gives every partition that did not end an error: it is not
// compared to its end, and what it lacks is unknown, not missing.
func (r *readers) expire(ctx context.Context) {
	why := "canceled"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		why = "timed out (--timeout)"
	}
	for _, p := range r.parts {
		p.mu.Lock()
		if !p.finished {
			p.finished = true
			p.fail("%s before the comparison ended: the source was read up to offset %d of %d, the target up to %d of %d",
				why, p.srcNext, p.srcEnd, p.dstNext, p.out.TargetTo)
		}
		p.mu.Unlock()
	}
}

func (r *readers) poll(ctx context.Context, cl *kgo.Client, source bool) {
	parts, side, explain := r.byDst, "target", r.cfg.DstErr
	if source {
		parts, side, explain = r.bySrc, "source", r.cfg.SrcErr
	}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			p := parts[data.TopicPartition{Topic: fp.Topic, Partition: fp.Partition}]
			if p == nil {
				return
			}
			r.records.Add(int64(len(fp.Records)))
			r.handle(p, fp, source, side, explain)
		})
	}
}

// handle gives p what one side fetched of it, and pauses, resumes or
// ends it as that leaves it.
func (r *readers) handle(p *part, fp kgo.FetchTopicPartition, source bool, side string, explain func(error) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	if fp.Err != nil {
		p.fail("reading the %s %s/%d failed: %v", side, fp.Topic, fp.Partition, explain(fp.Err))
		p.finished = true
		r.done <- p
		return
	}
	var pause bool
	if source {
		pause = p.addSource(fp.Records)
	} else {
		pause = p.addTarget(fp.Records)
	}
	if source && p.srcDone && !p.srcRemoved {
		p.srcRemoved = true // read to its end: fetch no further
		r.src.RemoveConsumePartitions(map[string][]int32{p.out.SourceTopic: {p.out.Partition}})
	}
	if !source && p.dstDone && !p.dstRemoved {
		p.dstRemoved = true
		r.dst.RemoveConsumePartitions(map[string][]int32{p.out.TargetTopic: {p.out.Partition}})
	}
	if pause {
		if source {
			r.src.PauseFetchPartitions(map[string][]int32{p.out.SourceTopic: {p.out.Partition}})
		} else {
			r.dst.PauseFetchPartitions(map[string][]int32{p.out.TargetTopic: {p.out.Partition}})
		}
	}
	if p.srcPaused && len(p.srcQ) < maxQueued/2 && p.srcBytes < maxQueuedBytes/2 {
		p.srcPaused = false
		r.src.ResumeFetchPartitions(map[string][]int32{p.out.SourceTopic: {p.out.Partition}})
	}
	if p.dstPaused && len(p.dstQ) < maxQueued/2 && p.dstBytes < maxQueuedBytes/2 {
		p.dstPaused = false
		r.dst.ResumeFetchPartitions(map[string][]int32{p.out.TargetTopic: {p.out.Partition}})
	}
	if p.complete() {
		r.done <- p
	}
}
