package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/bench/internal/workload"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// Exactly-once contenders (kmirror-eos, mm2-eos) write the target in
// transactions. Their copies cannot be timed by end offsets as the others
// are: every committed transaction adds a marker per partition, so end
// offsets run ahead of the records, and a record is only visible to a
// read_committed consumer once its transaction commits. What counts is
// the last stable offset (LSO): everything below it is decided.
//
// The window is therefore found after the fact. While the contender
// copies, every poll records the time, the contender's CPU and each
// partition's LSO (a trace). Once the LSOs stand still at or above the
// record count, the target is read with read_committed: that gives each
// partition's data records (checked exactly once, in order, by the seq
// header) and the offset of its last data record. The copy was complete
// at the first poll whose LSO was past the last data record of every
// partition, and that poll ends the window: the same resolution as the
// end-offset polls of the other contenders, without a consumer competing
// for the cores while they copy.

// lsoPoll is one poll of the trace.
type lsoPoll struct {
	at  time.Time
	st  kafkatest.ProcStat
	lso map[int32]int64
	// srcCPU and dstCPU are the brokers' CPU at the poll: the copy
	// window's broker CPU ends at the poll that saw every record, not
	// after the settle and the read_committed scan that follow it.
	srcCPU, dstCPU time.Duration
}

// committedCopy is what the trace and the read_committed scan found.
type committedCopy struct {
	first, done lsoPoll // the first poll that saw a record, the poll that saw them all
	firstN      int64   // records visible at the first poll (LSOs summed: at most a few markers more)
}

// lastStableOffsets returns the LSO of every partition of topic, or an
// empty map while the topic does not exist yet.
func lastStableOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	if t, ok := md.Topics[topic]; !ok || t.Err != nil || len(t.Partitions) == 0 {
		return out, nil
	}
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil && len(lso) == 0 {
		return nil, err
	}
	lso.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			out[o.Partition] = o.Offset
		}
	})
	return out, nil
}

// waitCommitted follows topic's LSOs on the target every interval until
// want records are committed, and returns the copy window (see above). It
// fails when the contender exits, ctx ends, or the target holds a record
// twice or out of order. want is the source's record count per partition.
func (r *contenderRun) waitCommitted(ctx context.Context, topic string, want map[int32]int64, every time.Duration) (committedCopy, error) {
	_, adm, err := client(r.p.dst.Addr(kafkatest.PLAINTEXT), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		return committedCopy{}, err
	}
	defer adm.Close()
	// settle: LSOs unchanged this long, at or above want in total, are
	// worth a read_committed scan. A scan that finds records missing
	// (the contender paused) sends the loop back to polling.
	const settle = 3 * time.Second
	var trace []lsoPoll
	var changed time.Time
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := r.alive(); err != nil {
			return committedCopy{}, err
		}
		lso, err := lastStableOffsets(ctx, adm, topic)
		if err == nil {
			p := lsoPoll{at: time.Now(), st: r.stat(), lso: lso, srcCPU: processCPU(r.p.src), dstCPU: processCPU(r.p.dst)}
			if len(trace) == 0 || !mapsEqual(lso, trace[len(trace)-1].lso) {
				changed = p.at
			}
			if sumLSO(lso) > 0 || len(trace) > 0 {
				trace = append(trace, p)
			}
			if len(lso) == len(want) && sumLSO(lso) >= sumLSO(want) && time.Since(changed) >= settle {
				last, counts, err := scanCommitted(ctx, r.p.dst.Addr(kafkatest.PLAINTEXT), topic, lso)
				if err != nil {
					return committedCopy{}, err
				}
				if mapsEqual(counts, want) {
					return windowOf(trace, last)
				}
				if sumLSO(counts) > sumLSO(want) {
					return committedCopy{}, fmt.Errorf("%s: the target holds %d records, the source %d (per partition: target %v, source %v)", topic, sumLSO(counts), sumLSO(want), counts, want)
				}
				changed = time.Now() // incomplete: keep following
			}
		}
		select {
		case <-ctx.Done():
			var n int64
			if len(trace) > 0 {
				n = sumLSO(trace[len(trace)-1].lso)
			}
			return committedCopy{}, fmt.Errorf("waiting for %d committed records (LSOs sum to %d): %w", sumLSO(want), n, ctx.Err())
		case <-t.C:
		}
	}
}

// windowOf finds the copy window in trace: from the first poll that saw
// any record to the first whose LSOs were past every partition's last
// data record.
func windowOf(trace []lsoPoll, last map[int32]int64) (committedCopy, error) {
	var c committedCopy
	if len(trace) == 0 {
		return c, errors.New("no poll saw a committed record")
	}
	c.first, c.firstN = trace[0], sumLSO(trace[0].lso)
	for _, p := range trace {
		complete := true
		for part, off := range last {
			if p.lso[part] <= off {
				complete = false
				break
			}
		}
		if complete {
			c.done = p
			return c, nil
		}
	}
	return c, errors.New("no poll saw every record committed")
}

func sumLSO(m map[int32]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// scanCommitted reads topic on addr with read_committed below the given
// LSOs and returns each partition's last data record offset and its count
// of data records. Records carry the bench's seq header (Preload: seq i goes
// to partition i % partitions), so within a partition seq must rise: a
// record copied twice, or out of order, is an error.
func scanCommitted(ctx context.Context, addr, topic string, lso map[int32]int64) (last, counts map[int32]int64, err error) {
	from := map[int32]kgo.Offset{}
	pending := map[int32]bool{}
	last, counts = map[int32]int64{}, map[int32]int64{}
	for p, o := range lso {
		last[p], counts[p] = -1, 0
		if o > 0 {
			from[p] = kgo.NewOffset().AtStart()
			pending[p] = true
		}
	}
	if len(pending) == 0 {
		return last, counts, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	prev := map[int32]int64{}
	var bad []error
	for len(pending) > 0 {
		fs := cl.PollFetches(sctx)
		if err := sctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("read %s with read_committed: %w", topic, err)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			if rec.Offset >= lso[rec.Partition] {
				delete(pending, rec.Partition)
				return
			}
			if rec.Offset+1 >= lso[rec.Partition] {
				delete(pending, rec.Partition)
			}
			if rec.Attrs.IsControl() {
				return
			}
			counts[rec.Partition]++
			last[rec.Partition] = rec.Offset
			var seq int64 = -1
			for _, h := range rec.Headers {
				if h.Key == "seq" && len(h.Value) == 8 {
					seq = int64(binary.BigEndian.Uint64(h.Value))
				}
			}
			if p, ok := prev[rec.Partition]; ok && seq <= p && len(bad) < 10 {
				bad = append(bad, fmt.Errorf("%s/%d offset %d: seq %d after seq %d (a record twice or out of order)", topic, rec.Partition, rec.Offset, seq, p))
			}
			prev[rec.Partition] = seq
		})
	}
	return last, counts, errors.Join(bad...)
}

// verifyCommitted checks that topic's copy on the target, read with
// read_committed, holds every source record exactly once and in order
// per partition (the exactly-once contenders' verify).
func (r *contenderRun) verifyCommitted(ctx context.Context, topic string) error {
	want, err := workload.PartitionCounts(ctx, []string{r.p.src.Addr(kafkatest.PLAINTEXT)}, topic)
	if err != nil {
		return err
	}
	_, adm, err := client(r.p.dst.Addr(kafkatest.PLAINTEXT))
	if err != nil {
		return err
	}
	lso, err := lastStableOffsets(ctx, adm, targetTopic(topic))
	adm.Close()
	if err != nil {
		return err
	}
	_, got, err := scanCommitted(ctx, r.p.dst.Addr(kafkatest.PLAINTEXT), targetTopic(topic), lso)
	if err != nil {
		return err
	}
	if !mapsEqual(got, want) {
		return fmt.Errorf("%s: committed records per partition on the target %v, on the source %v", topic, got, want)
	}
	return nil
}
