package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/bench/internal/workload"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// contenderRun is one contender in one phase: its process and where it writes.
type contenderRun struct {
	e    *env
	p    *pair
	c    contender
	dir  string
	proc *kafkatest.Process
	// more are the contender's other workers (kmirror-eos-2w): CPU and
	// RSS are the sum over every worker, timings count from the first.
	more []*kafkatest.Process
	// settings are the exact settings the contender ran with.
	settings string
}

func (e *env) begin(ctx context.Context, c contender, phase string) (*contenderRun, error) {
	p, err := e.startPair(ctx, phase+"-"+c.name)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(p.dir, c.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.stop(false)
		return nil, err
	}
	return &contenderRun{e: e, p: p, c: c, dir: dir}, nil
}

func (r *contenderRun) startContender(s spec) error {
	s.exactlyOnce, s.wanTuned, s.defaultTasks = r.c.exactlyOnce, r.c.wanTuned, r.c.defaultTasks
	if s.exactlyOnce {
		s.slots = cmp.Or(r.c.slots, r.e.eosSlots)
	}
	proc, settings, err := r.c.start(r.e, r.p, s, r.dir)
	r.proc, r.settings = proc, settings
	for i := 2; err == nil && i <= r.c.workers; i++ {
		// Each worker its own directory: the same config, its own log.
		dir := filepath.Join(r.dir, fmt.Sprintf("worker-%d", i))
		if err = os.MkdirAll(dir, 0o755); err != nil {
			break
		}
		var more *kafkatest.Process
		more, _, err = r.c.start(r.e, r.p, s, dir)
		if more != nil {
			r.more = append(r.more, more)
		}
	}
	if r.c.workers > 1 {
		r.settings = fmt.Sprintf("# %d workers of this mirror, each started with:\n%s", r.c.workers, r.settings)
	}
	return err
}

// procs are the contender's workers, the first one first.
func (r *contenderRun) procs() []*kafkatest.Process {
	return append([]*kafkatest.Process{r.proc}, r.more...)
}

// stopContender stops the contender (SIGTERM, then SIGKILL after 60s).
func (r *contenderRun) stopContender() {
	for _, proc := range r.procs() {
		if proc == nil {
			continue
		}
		if took, killed := proc.Stop(60 * time.Second); killed {
			log.Printf("  %s did not stop within %v of SIGTERM: killed", r.c.name, took)
		}
	}
}

func (r *contenderRun) end(failed bool) {
	r.finish(failed)
	r.p.stop(r.e.keep || failed)
	if failed {
		log.Printf("  kept %s", r.p.dir)
	}
}

// finish stops the contender, and logs the end of its logs when the run
// failed.
func (r *contenderRun) finish(failed bool) {
	r.stopContender()
	if failed {
		for _, proc := range r.procs() {
			if proc != nil {
				log.Printf("  %s log %s, last lines:\n%s", r.c.name, proc.LogPath, proc.Tail(40))
			}
		}
	}
}

// alive fails when the contender exited.
func (r *contenderRun) alive() error {
	for _, proc := range r.procs() {
		if done, err := proc.Exited(); done {
			return fmt.Errorf("%s exited (%v); log %s:\n%s", r.c.name, err, proc.LogPath, proc.Tail(30))
		}
	}
	return nil
}

// stat is the contender's CPU and memory: summed over its workers (peak
// RSS is the sum of each worker's peak).
func (r *contenderRun) stat() kafkatest.ProcStat {
	st, _ := kafkatest.ReadProcStat(r.proc.Pid())
	for _, proc := range r.more {
		more, _ := kafkatest.ReadProcStat(proc.Pid())
		st.CPU += more.CPU
		st.PeakRSS += more.PeakRSS
		st.RSS += more.RSS
	}
	return st
}

// waitTarget polls the target's end offsets of topics every interval until
// done says so, failing if the contender exits or ctx ends. onFirst is
// called at the first poll that sees any record.
func (r *contenderRun) waitTarget(ctx context.Context, topics []string, every time.Duration, done func(map[string]map[int32]int64) bool, onFirst func(int64)) (map[string]map[int32]int64, error) {
	// kadm caches metadata for MetadataMinAge (default 5s): a topic that
	// did not exist at the first poll would stay invisible that long.
	_, adm, err := client(r.p.dst.Addr(kafkatest.PLAINTEXT), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	first := onFirst == nil
	t := time.NewTicker(every)
	defer t.Stop()
	var last map[string]map[int32]int64
	for {
		if err := r.alive(); err != nil {
			return nil, err
		}
		ends, err := workload.EndOffsets(ctx, adm, topics...)
		if err == nil {
			last = ends
			if !first {
				if n := sum(ends); n > 0 {
					first = true
					onFirst(n)
				}
			}
			if done(ends) {
				return ends, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the target (%d records so far): %w", sum(last), ctx.Err())
		case <-t.C:
		}
	}
}

// verify checks that each target topic holds exactly its source topic's
// records per partition.
func (r *contenderRun) verify(ctx context.Context, topics ...string) error {
	_, sadm, err := client(r.p.src.Addr(kafkatest.PLAINTEXT))
	if err != nil {
		return err
	}
	defer sadm.Close()
	_, dadm, err := client(r.p.dst.Addr(kafkatest.PLAINTEXT))
	if err != nil {
		return err
	}
	defer dadm.Close()
	var targets []string
	for _, t := range topics {
		targets = append(targets, targetTopic(t))
	}
	src, err := workload.EndOffsets(ctx, sadm, topics...)
	if err != nil {
		return err
	}
	dst, err := workload.EndOffsets(ctx, dadm, targets...)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range topics {
		if len(src[t]) == 0 {
			errs = append(errs, fmt.Errorf("source topic %s has no partitions", t))
		}
		if len(dst[targetTopic(t)]) != len(src[t]) {
			errs = append(errs, fmt.Errorf("%s: source has %d partitions, target %d", t, len(src[t]), len(dst[targetTopic(t)])))
		}
		for p, want := range src[t] {
			if got := dst[targetTopic(t)][p]; got != want {
				errs = append(errs, fmt.Errorf("%s/%d: source %d records, target %d", t, p, want, got))
			}
		}
		if len(errs) > 10 {
			errs = append(errs, errors.New("..."))
			break
		}
	}
	return errors.Join(errs...)
}

// ---- (a) throughput ----

type throughput struct {
	records, windowRecords int64
	total, window          time.Duration // start to done; first record at the target to done
	cpuTotal, cpuWindow    time.Duration
	peakRSS                int64
	brokerCPU, otherCPU    time.Duration
	steal                  time.Duration
	load                   string
	// verify is `kmirror verify` over the copy (-verify, kmirror and
	// kmirror-eos only; verify.go), nil when not run.
	verify *verifyRun
}

func (t throughput) recordsPerSec() float64 { return float64(t.windowRecords) / t.window.Seconds() }

func throughputPhase(ctx context.Context, e *env, o *options, c contender) (res throughput, settings string, err error) {
	r, err := e.begin(ctx, c, "throughput")
	if err != nil {
		return res, "", err
	}
	defer func() { r.end(err != nil) }()
	const topic = "bench"
	src := r.p.src.Addr(kafkatest.PLAINTEXT)
	if err := workload.CreateTopic(ctx, []string{src}, topic, o.partitions); err != nil {
		return res, "", err
	}
	t := time.Now()
	if err := workload.Preload(ctx, []string{src}, topic, o.records, o.partitions, o.valueSize); err != nil {
		return res, "", err
	}
	log.Printf("  preloaded %d records in %.1fs", o.records, time.Since(t).Seconds())
	settle()
	dist := startDisturbance(r.p)
	if err := r.startContender(spec{topics: topic, partitions: o.partitions}); err != nil {
		return res, r.settings, err
	}
	var t1, t2 time.Time
	var st1, st2 kafkatest.ProcStat
	var n1 int64
	// afterDone is the brokers' CPU after the copy was done and before
	// the phase ends: exactly-once's settle and read_committed scan, which
	// at least once does after the phase (verify).
	var afterDone func() time.Duration
	want := int64(o.records)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute+time.Duration(o.records/2000)*time.Second)
	defer cancel()
	if c.exactlyOnce {
		perPartition, err := workload.PartitionCounts(ctx, []string{src}, topic)
		if err != nil {
			return res, r.settings, err
		}
		// Timed by the last stable offsets and checked with
		// read_committed (eos.go); that check is this run's verify.
		w, err := r.waitCommitted(wctx, targetTopic(topic), perPartition, 20*time.Millisecond)
		if err != nil {
			return res, r.settings, err
		}
		t1, st1, n1, t2, st2 = w.first.at, w.first.st, w.firstN, w.done.at, w.done.st
		afterDone = func() time.Duration { return r.p.brokerCPU() - (w.done.srcCPU + w.done.dstCPU) }
	} else {
		_, err = r.waitTarget(wctx, []string{targetTopic(topic)}, 20*time.Millisecond,
			func(m map[string]map[int32]int64) bool { return sum(m) >= want },
			func(n int64) { t1, st1, n1 = time.Now(), r.stat(), n })
		if err != nil {
			return res, r.settings, err
		}
		t2, st2 = time.Now(), r.stat()
	}
	res = throughput{
		records: want, windowRecords: want - n1,
		total: t2.Sub(r.proc.Started), window: t2.Sub(t1),
		cpuTotal: st2.CPU, cpuWindow: st2.CPU - st1.CPU, peakRSS: st2.PeakRSS,
	}
	res.brokerCPU, res.otherCPU, res.steal, res.load = dist.end(r.p, st2.CPU)
	if afterDone != nil {
		res.brokerCPU -= max(0, afterDone())
	}
	r.stopContender()
	if !c.exactlyOnce {
		if err := r.verify(ctx, topic); err != nil {
			return res, r.settings, fmt.Errorf("throughput: %w", err)
		}
	}
	if o.verify && c.verify {
		// The copy is checked and kmirror stopped: kmirror verify reads
		// both clusters alone (but for the brokers).
		v, err := r.kmirrorVerify(ctx, want, verifyTimeout(o.records))
		if err != nil {
			return res, r.settings, fmt.Errorf("throughput: %w", err)
		}
		res.verify = &v
	}
	return res, r.settings, nil
}

// ---- (b) latency ----

type latency struct {
	p50, p99, max time.Duration
	ready         time.Duration // start to the primer records visible
	cpu           time.Duration // over the steady phase
	peakRSS       int64
	records       int
	otherCPU      time.Duration
	load          string
}

func latencyPhase(ctx context.Context, e *env, o *options, c contender) (res latency, err error) {
	r, err := e.begin(ctx, c, "latency")
	if err != nil {
		return res, err
	}
	defer func() { r.end(err != nil) }()
	const topic = "latency"
	if err := workload.CreateTopic(ctx, []string{r.p.src.Addr(kafkatest.PLAINTEXT)}, topic, o.partitions); err != nil {
		return res, err
	}
	if err := r.startContender(spec{topics: topic, partitions: o.partitions}); err != nil {
		return res, err
	}
	return r.measureLatency(ctx, o, topic, o.partitions, o.latencyDuration)
}

// measureLatency measures the latency of -rate records/s to topic for
// duration after the warm-up, once the contender (started on it) copies;
// then it stops the contender and checks the copy of topic.
func (r *contenderRun) measureLatency(ctx context.Context, o *options, topic string, partitions int, duration time.Duration) (res latency, err error) {
	c := r.c
	src := r.p.src.Addr(kafkatest.PLAINTEXT)
	dst := r.p.dst.Addr(kafkatest.PLAINTEXT)
	// Readiness: one primer record per partition (no time header, so the
	// reader skips it), visible at the target.
	if err := producePrimers(ctx, src, topic, partitions); err != nil {
		return res, err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	_, err = r.waitTarget(rctx, []string{targetTopic(topic)}, 20*time.Millisecond, func(m map[string]map[int32]int64) bool {
		n := 0
		for _, v := range m[targetTopic(topic)] {
			if v > 0 {
				n++
			}
		}
		return n == partitions
	}, nil)
	if err != nil {
		return res, fmt.Errorf("latency: contender not ready: %w", err)
	}
	res.ready = time.Since(r.proc.Started)
	skip := int(warmup.Seconds() * float64(o.rate))
	total := skip + int(duration.Seconds()*float64(o.rate))
	lctx, cancel2 := context.WithTimeout(ctx, warmup+duration+2*time.Minute)
	defer cancel2()
	lr, err := workload.StartLatencyReader(lctx, []string{dst}, targetTopic(topic), partitions, total+partitions, skip)
	if err != nil {
		return res, err
	}
	dist := startDisturbance(r.p)
	st0 := r.stat()
	if err := workload.ProduceAtRate(lctx, []string{src}, topic, partitions, o.valueSize, o.rate, total); err != nil {
		cancel2()
		lr.Wait()
		return res, fmt.Errorf("latency producer: %w", err)
	}
	lat, got := lr.Wait()
	st1 := r.stat()
	res.cpu, res.peakRSS = st1.CPU-st0.CPU, st1.PeakRSS
	_, res.otherCPU, _, res.load = dist.end(r.p, res.cpu)
	if err := r.alive(); err != nil {
		return res, err
	}
	if got != total+partitions {
		return res, fmt.Errorf("latency: %d of %d records arrived at the target", got, total+partitions)
	}
	r.stopContender()
	verify := r.verify
	if c.exactlyOnce {
		verify = func(ctx context.Context, topics ...string) error { return r.verifyCommitted(ctx, topics[0]) }
	}
	if err := verify(ctx, topic); err != nil {
		return res, fmt.Errorf("latency: %w", err)
	}
	if len(lat) == 0 {
		return res, errors.New("latency: no records measured")
	}
	res.records = len(lat)
	res.p50, res.p99, res.max = workload.Quantile(lat, 0.50), workload.Quantile(lat, 0.99), lat[len(lat)-1]
	return res, nil
}

// warmup is produced at the start of the latency phase and not counted.
const warmup = time.Second

func producePrimers(ctx context.Context, addr, topic string, partitions int) error {
	cl, err := workload.HarnessProducer([]string{addr})
	if err != nil {
		return err
	}
	defer cl.Close()
	for p := range partitions {
		r := &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte("primer")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return fmt.Errorf("primer: %w", err)
		}
	}
	return nil
}

// ---- (c) startup ----

type startup struct {
	topics  int
	took    time.Duration // process start to the last topic's record visible
	cpu     time.Duration
	peakRSS int64
	load    string
}

func startupPhase(ctx context.Context, e *env, o *options, c contender) (res startup, err error) {
	r, err := e.begin(ctx, c, "startup")
	if err != nil {
		return res, err
	}
	defer func() { r.end(err != nil) }()
	src := r.p.src.Addr(kafkatest.PLAINTEXT)
	var topics, targets []string
	for i := range o.startupTopics {
		topics = append(topics, fmt.Sprintf("st-%04d", i))
		targets = append(targets, targetTopic(topics[i]))
	}
	// Just-created topics take a moment to have leaders: keep retrying.
	cl, adm, err := client(src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(o.startupTopics+1),
		kgo.UnknownTopicRetries(-1), kgo.RecordDeliveryTimeout(2*time.Minute))
	if err != nil {
		return res, err
	}
	t := time.Now()
	for chunk := range slices.Chunk(topics, 250) {
		if _, err := adm.CreateTopics(ctx, 1, 1, nil, chunk...); err != nil {
			cl.Close()
			return res, fmt.Errorf("create startup topics: %w", err)
		}
	}
	var failed workload.ErrOnce
	for i, tp := range topics {
		cl.Produce(ctx, &kgo.Record{Topic: tp, Value: binary.BigEndian.AppendUint64(nil, uint64(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Set(err)
			}
		})
	}
	err = cl.Flush(ctx)
	cl.Close()
	if err == nil {
		err = failed.Get()
	}
	if err != nil {
		return res, fmt.Errorf("startup records: %w", err)
	}
	log.Printf("  created %d topics with one record each in %.1fs", len(topics), time.Since(t).Seconds())
	settle()
	dist := startDisturbance(r.p)
	if err := r.startContender(spec{topics: "st-.*", partitions: o.partitions, manyPartitions: true}); err != nil {
		return res, err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	_, err = r.waitTarget(wctx, targets, 100*time.Millisecond, func(m map[string]map[int32]int64) bool {
		n := 0
		for _, ps := range m {
			if ps[0] > 0 {
				n++
			}
		}
		return n == len(targets)
	}, nil)
	if err != nil {
		return res, fmt.Errorf("startup: %w", err)
	}
	res.took = time.Since(r.proc.Started)
	st := r.stat()
	res.topics, res.cpu, res.peakRSS = len(topics), st.CPU, st.PeakRSS
	_, _, _, res.load = dist.end(r.p, st.CPU)
	r.stopContender()
	if err := r.verify(ctx, topics...); err != nil {
		return res, fmt.Errorf("startup: %w", err)
	}
	return res, nil
}

// ---- (d) failover: group offset translation ----

type failover struct {
	consumed, remaining int64 // on the source before the failover; after it
	redelivered         int64 // received on the target, already consumed on the source
	skipped             int64 // never consumed on the source, not received on the target
	exact               int   // partitions whose target commit is the source commit
	partitions          int
	syncedAfter         time.Duration // source commit to the target group complete and stable
	detail              string
}

// failoverLags are how far behind the end of each partition the source
// group commits: at the head, a few records behind, around offset.lag.max,
// and far behind.
var failoverLags = []int64{0, 3, 42, 99, 150, 777, 2500, 4321}

const failoverGroup = "fo-app"

func failoverPhase(ctx context.Context, e *env, o *options, c contender) (res failover, err error) {
	r, err := e.begin(ctx, c, "failover")
	if err != nil {
		return res, err
	}
	defer func() { r.end(err != nil) }()
	const topic = "fo"
	parts := len(failoverLags)
	per := int64(o.failoverRecords)
	src := r.p.src.Addr(kafkatest.PLAINTEXT)
	dst := r.p.dst.Addr(kafkatest.PLAINTEXT)
	if err := workload.CreateTopic(ctx, []string{src}, topic, parts); err != nil {
		return res, err
	}
	if err := r.startContender(spec{topics: topic, partitions: parts, groups: true}); err != nil {
		return res, err
	}
	// The data first: 1 KiB records, seq header i (partition i % parts,
	// so the source offset of seq i is i / parts).
	if err := workload.Preload(ctx, []string{src}, topic, int(per)*parts, parts, 1024); err != nil {
		return res, err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := r.waitTarget(wctx, []string{targetTopic(topic)}, 50*time.Millisecond,
		func(m map[string]map[int32]int64) bool { return sum(m) >= per*int64(parts) }, nil); err != nil {
		return res, fmt.Errorf("failover: mirroring the data: %w", err)
	}
	// The application on the source reads up to its commit point in each
	// partition and commits there: mid-batch, arbitrary offsets.
	commits := map[int32]int64{}
	for p, lag := range failoverLags {
		commits[int32(p)] = per - min(lag, per-1)
	}
	if err := consumeAndCommit(wctx, src, topic, commits); err != nil {
		return res, err
	}
	committedAt := time.Now()
	// The contender syncs the group to the target: wait until every
	// partition has a target commit that has not changed for 8s.
	got, err := waitGroupSynced(wctx, r, dst, targetTopic(topic), parts, 8*time.Second)
	if err != nil {
		return res, err
	}
	res.syncedAfter = time.Since(committedAt)
	r.stopContender()
	// Fail over: the application reads the target with the same group.
	res.partitions = parts
	received, err := consumeTarget(ctx, dst, targetTopic(topic), parts, got)
	if err != nil {
		return res, err
	}
	var detail []string
	for p := range int32(parts) {
		c := commits[p]
		res.consumed += c
		res.remaining += per - c
		if got[p] == c {
			res.exact++
		}
		var redel, after int64
		for off, n := range received[p] {
			if off < c {
				redel += int64(n)
			} else {
				after++
			}
		}
		res.redelivered += redel
		res.skipped += (per - c) - after
		detail = append(detail, fmt.Sprintf("p%d: source commit %d (lag %d), target commit %d, re-delivered %d, skipped %d",
			p, c, per-c, got[p], redel, (per-c)-after))
	}
	res.detail = fmt.Sprint(detail)
	return res, nil
}

// consumeAndCommit reads topic with a group until each partition reached
// its commit point, commits those offsets and leaves the group.
func consumeAndCommit(ctx context.Context, addr, topic string, commits map[int32]int64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(failoverGroup), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	reached := map[int32]bool{}
	epochs := map[int32]int32{}
	for len(reached) < len(commits) {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("source group: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= commits[r.Partition] {
				reached[r.Partition] = true
				epochs[r.Partition] = r.LeaderEpoch
			}
		})
		for p, c := range commits {
			if c == 0 {
				reached[p] = true
			}
		}
	}
	offs := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for p, c := range commits {
		offs[topic][p] = kgo.EpochOffset{Epoch: epochs[p], Offset: c}
	}
	var cerr error
	cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		cerr = err
		if err == nil {
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 && cerr == nil {
						cerr = fmt.Errorf("commit %s/%d: error code %d", t.Topic, p.Partition, p.ErrorCode)
					}
				}
			}
		}
	})
	return cerr
}

// waitGroupSynced waits until the target group has a commit on every
// partition of topic, unchanged for stable, and returns it.
func waitGroupSynced(ctx context.Context, r *contenderRun, addr, topic string, parts int, stable time.Duration) (map[int32]int64, error) {
	_, adm, err := client(addr)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	var last map[int32]int64
	var since time.Time
	for {
		if err := r.alive(); err != nil {
			return nil, err
		}
		cur := map[int32]int64{}
		if offs, err := adm.FetchOffsets(ctx, failoverGroup); err == nil {
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Topic == topic && o.Err == nil && o.At >= 0 {
					cur[o.Partition] = o.At
				}
			})
		}
		if len(cur) == parts {
			if !mapsEqual(cur, last) {
				last, since = cur, time.Now()
			} else if time.Since(since) >= stable {
				return cur, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("failover: target group %s has commits on %d of %d partitions (%v): %w", failoverGroup, len(cur), parts, cur, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func mapsEqual(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// consumeTarget reads topic on the target as the failed-over application:
// a member of the group, from the group's commits, to the end. It returns
// the source offsets (from the seq header) received per partition.
func consumeTarget(ctx context.Context, addr, topic string, parts int, commits map[int32]int64) (map[int32]map[int64]int, error) {
	_, adm, err := client(addr)
	if err != nil {
		return nil, err
	}
	ends, err := workload.EndOffsets(ctx, adm, topic)
	adm.Close()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(failoverGroup), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	received := map[int32]map[int64]int{}
	done := map[int32]bool{}
	for p := range int32(parts) {
		received[p] = map[int64]int{}
		if commits[p] >= ends[topic][p] {
			done[p] = true
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for len(done) < parts {
		fs := cl.PollFetches(cctx)
		if err := fs.Err0(); err != nil {
			return nil, fmt.Errorf("target group: %w (done %d of %d partitions)", err, len(done), parts)
		}
		fs.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == "seq" && len(h.Value) == 8 {
					seq := int64(binary.BigEndian.Uint64(h.Value))
					received[r.Partition][seq/int64(parts)]++
				}
			}
			if r.Offset+1 >= ends[topic][r.Partition] {
				done[r.Partition] = true
			}
		})
	}
	return received, nil
}
