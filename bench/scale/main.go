// Command scale (make bench-scale) measures kmirror, the plain loop and,
// on real Kafka, MirrorMaker 2 with many partitions, one worker each
// (issue 14):
//
//   - start: -topics topics of -partitions partitions, one record in each,
//     are on the source before the contender starts; the figure is the time
//     from its start to the first record of the last partition visible at
//     the target (the loop creates the target topics itself, kmirror
//     discovers and creates them), with the peak RSS;
//   - idle: the contender's CPU over -idle with no traffic, and over its
//     second half (the first may still hold the end of the start);
//   - trickle: -trickle-rate records a second spread over every partition
//     for -trickle: CPU, and RSS at its start, 12 times during it and at
//     its end (memory that grows with time shows here; -trickle 1h for the
//     hour-long run);
//   - restart (kmirror): SIGTERM, one more record in every partition,
//     start again: the time until the target holds every source record
//     (state loaded, copying resumed), with the peak RSS of the new process.
//
// The target must then hold exactly the source's records per partition.
// MirrorMaker 2 (-backend kafka only, dedicated mode, one JVM, as
// bench-mm2) gets -mm2-wait to bring every partition's first record over:
// a run that does not is reported as such (how far it got), not as a
// failure of the bench; MM2 copies at least once, so its final check
// reports records over the source's rather than failing.
// Backends: kfake (-backend kfake: two kfakesrv processes, each the only
// broker of its cluster) and real Apache Kafka 4.3.1 from the Maven jars
// (-backend kafka, as bench-mm2). Every contender gets a fresh pair of
// clusters. Usage:
//
//	go run ./bench/scale -backend kfake -topics 10000 -partitions 10
//	go run ./bench/scale -backend kafka -topics 2000 -partitions 5
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/bench/internal/kfakeproc"
	"github.com/kmirror/kmirror/bench/internal/workload"
	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/internal/machine"
)

// The loop's copy settings: kmirror's defaults (as bench-mm2).
var limitSettings = workload.LimitConfig{FetchMaxWait: 500 * time.Millisecond, Linger: 5 * time.Millisecond, BatchMaxBytes: 1 << 20}

const (
	topicPrefix  = "sc-"
	targetPrefix = "src." // the default replication policy with source alias "src"
)

type options struct {
	backend            string
	topics, partitions int
	contenders         []string
	idle, trickle      time.Duration
	trickleRate        int
	brokerHeap         string
	mm2Heap            string
	mm2Wait            time.Duration
	out                string
	keep               bool
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "limit-child" {
		os.Exit(workload.LimitChild(os.Args[2:], limitSettings))
	}
	log.SetFlags(log.Ltime)
	log.SetPrefix("bench-scale: ")
	os.Exit(run())
}

func run() int {
	var o options
	var contenders string
	flag.StringVar(&o.backend, "backend", "kfake", "kfake or kafka")
	flag.IntVar(&o.topics, "topics", 0, "source topics (default: 10000 on kfake, 2000 on kafka)")
	flag.IntVar(&o.partitions, "partitions", 0, "partitions per topic (default: 10 on kfake, 5 on kafka)")
	flag.StringVar(&contenders, "contenders", "", "limit, kmirror, kmirror-eos (exactly_once: true), mm2 (default: limit,kmirror,kmirror-eos on kfake, limit,kmirror,kmirror-eos,mm2 on kafka)")
	flag.DurationVar(&o.idle, "idle", 20*time.Second, "idle phase (its second half is reported on its own: the first may hold the end of the start)")
	flag.DurationVar(&o.trickle, "trickle", 60*time.Second, "trickle phase")
	flag.IntVar(&o.trickleRate, "trickle-rate", 1000, "trickle: records per second over all partitions")
	flag.StringVar(&o.brokerHeap, "broker-heap", "2g", "kafka: each broker's -Xmx")
	flag.StringVar(&o.mm2Heap, "mm2-heap", "1g", "MirrorMaker 2's -Xmx")
	flag.DurationVar(&o.mm2Wait, "mm2-wait", 10*time.Minute, "how long MirrorMaker 2 gets to bring every partition's first record over")
	flag.StringVar(&o.out, "out", "", "also write the report here when every run passed (default bench/results/scale-<backend>.md; \"-\" to skip)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (the contenders' logs and configs) and print its path")
	flag.Parse()
	switch o.backend {
	case "kfake":
		o.topics, o.partitions = or(o.topics, 10000), or(o.partitions, 10)
		if contenders == "" {
			contenders = "limit,kmirror,kmirror-eos"
		}
	case "kafka":
		o.topics, o.partitions = or(o.topics, 2000), or(o.partitions, 5)
		if contenders == "" {
			contenders = "limit,kmirror,kmirror-eos,mm2"
		}
	default:
		log.Printf("unknown backend %q (want kfake or kafka)", o.backend)
		return 2
	}
	for _, n := range strings.Split(contenders, ",") {
		switch n = strings.TrimSpace(n); {
		case n == "mm2" && o.backend != "kafka":
			log.Printf("contender mm2 needs -backend kafka")
			return 2
		case n != "limit" && !isKmirror(n) && n != "mm2":
			log.Printf("unknown contender %q (want limit, kmirror, kmirror-eos or mm2)", n)
			return 2
		}
		o.contenders = append(o.contenders, n)
	}
	switch o.out {
	case "":
		o.out = "bench/results/scale-" + o.backend + ".md"
	case "-":
		o.out = ""
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e, err := newEnv(ctx, &o)
	if err != nil {
		log.Print(err)
		return 1
	}
	if o.keep {
		log.Printf("work directory (kept): %s", e.dir)
	} else {
		defer os.RemoveAll(e.dir)
	}
	rep := report{o: &o, started: time.Now(), load0: machine.Loadavg(), kmirrorVersion: e.kmirrorVersion}
	var failed error
	for _, name := range o.contenders {
		log.Printf("%s: %d topics x %d partitions on %s (load %s)", name, o.topics, o.partitions, o.backend, machine.Loadavg())
		r, err := e.runContender(ctx, name)
		if err != nil {
			failed = fmt.Errorf("%s: %w", name, err)
			log.Print(failed)
			break
		}
		rep.rows = append(rep.rows, r)
		if r.unfinished != "" {
			log.Printf("  %s: %s", name, r.unfinished)
			continue
		}
		log.Printf("  %s: every partition's first record after %.1fs, peak RSS %s MiB", name, r.start.Seconds(), mib(r.startRSS))
	}
	out := o.out
	return workload.Publish(rep.render(failed), out, failed)
}

// isKmirror tells kmirror's contenders (at least once, and kmirror-eos)
// from the loop and MM2: they restart, and their copy must be exact.
func isKmirror(name string) bool { return name == "kmirror" || name == "kmirror-eos" }

func or(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// env is what the runs share: the built kmirror binary and kfakesrv (or
// the Kafka runtime), this binary (the loop's child) and a scratch
// directory.
type env struct {
	o                    *options
	dir                  string
	self, kmirror, kfake string
	kmirrorVersion       string
	rt                   *kafkatest.Runtime
	brokerJVM            []string
	clusterSeq           int
	pairStop             func()
	srcAddr, dstAddr     string
	brokerPids           []int
}

func newEnv(ctx context.Context, o *options) (*env, error) {
	dir, err := os.MkdirTemp("", "kmirror-bench-scale-")
	if err != nil {
		return nil, err
	}
	e := &env{o: o, dir: dir}
	if e.self, err = os.Executable(); err != nil {
		return nil, err
	}
	e.kmirror = filepath.Join(dir, "kmirror")
	build := exec.CommandContext(ctx, "go", "build", "-o", e.kmirror, "./cmd/kmirror")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/kmirror: %w", err)
	}
	if out, err := exec.Command(e.kmirror, "version").CombinedOutput(); err == nil {
		e.kmirrorVersion = strings.TrimSpace(string(out))
	}
	switch o.backend {
	case "kfake":
		if e.kfake, err = kfakeproc.Build(dir); err != nil {
			return nil, err
		}
	case "kafka":
		if e.rt, err = kafkatest.Find(); err != nil {
			return nil, err
		}
		if err := e.rt.Ensure(ctx, os.Stderr); err != nil {
			return nil, err
		}
		e.brokerJVM = []string{"-XX:TieredStopAtLevel=4"}
	}
	return e, nil
}

// startPair starts a fresh source and target.
func (e *env) startPair(ctx context.Context) error {
	e.clusterSeq++
	switch e.o.backend {
	case "kfake":
		p, err := kfakeproc.StartPair(e.kfake, 1)
		if err != nil {
			return err
		}
		e.srcAddr, e.dstAddr, e.pairStop = p.Src.Addrs[0], p.Dst.Addrs[0], p.Stop
		e.brokerPids = []int{p.Src.Pid(), p.Dst.Pid()}
		return nil
	}
	var cs []*kafkatest.Cluster
	for _, n := range []string{"source", "target"} {
		c, err := e.rt.NewCluster(kafkatest.Config{Name: n, Dir: filepath.Join(e.dir, fmt.Sprintf("%s-%d", n, e.clusterSeq)), Heap: e.o.brokerHeap, JVMOpts: e.brokerJVM})
		if err != nil {
			return err
		}
		if err := c.Start(ctx); err != nil {
			return err
		}
		cs = append(cs, c)
	}
	e.srcAddr, e.dstAddr = cs[0].Addr(kafkatest.PLAINTEXT), cs[1].Addr(kafkatest.PLAINTEXT)
	e.brokerPids = []int{cs[0].Pid(), cs[1].Pid()}
	e.pairStop = func() {
		for _, c := range cs {
			_ = c.Stop(60 * time.Second)
		}
	}
	return nil
}

// row is one contender's figures.
type row struct {
	name                  string
	create                time.Duration // the source topics, by this harness
	start                 time.Duration
	startRSS, startCPU    int64
	idleCPU, idleLateCPU  time.Duration // over -idle, and over its second half
	trickleCPU            time.Duration
	trickleRecords        int
	rssBefore, rssAfter   int64
	rssDuring             []int64       // RSS every trickle/rssSamples during the trickle
	restart               time.Duration // -1: not measured
	restartRSS            int64
	brokerCPU             time.Duration
	loadBefore, loadAfter string
	verified              int64
	// unfinished says how far a contender got that did not bring every
	// partition's first record over in its time (MM2); extra, the
	// records it wrote more than once (MM2 copies at least once).
	unfinished string
	extra      int64
}

func (e *env) runContender(ctx context.Context, name string) (r row, err error) {
	r.name, r.restart, r.loadBefore = name, -1, machine.Loadavg()
	if err := e.startPair(ctx); err != nil {
		return r, err
	}
	defer e.pairStop()
	srcCl, err := kgo.NewClient(kgo.SeedBrokers(e.srcAddr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(100_000), kgo.UnknownTopicRetries(-1), kgo.RecordDeliveryTimeout(5*time.Minute))
	if err != nil {
		return r, err
	}
	defer srcCl.Close()
	srcAdm := kadm.NewClient(srcCl)
	var topics []string
	for i := range e.o.topics {
		topics = append(topics, fmt.Sprintf("%s%05d", topicPrefix, i))
	}
	t0 := time.Now()
	for chunk := range slices.Chunk(topics, 1000) {
		res, err := srcAdm.CreateTopics(ctx, int32(e.o.partitions), 1, nil, chunk...)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			return r, fmt.Errorf("create source topics: %w", err)
		}
	}
	if err := produceEach(ctx, srcCl, topics, e.o.partitions, "first"); err != nil {
		return r, err
	}
	r.create = time.Since(t0)
	log.Printf("  %d source partitions with a record each in %.1fs", len(topics)*e.o.partitions, r.create.Seconds())
	time.Sleep(2 * time.Second) // let the brokers settle

	dir := filepath.Join(e.dir, fmt.Sprintf("%s-%d", name, e.clusterSeq))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	brokers0 := e.brokerCPU()
	proc, err := e.startContender(name, dir)
	if err != nil {
		return r, err
	}
	defer func() {
		if proc != nil {
			proc.Stop(60 * time.Second)
			if err != nil {
				log.Printf("  %s log %s, last lines:\n%s", name, proc.LogPath, proc.Tail(30))
			}
		}
	}()
	dstAdm, closeDst, err := admin(e.dstAddr)
	if err != nil {
		return r, err
	}
	defer closeDst()
	targets := make([]string, len(topics))
	for i, t := range topics {
		targets[i] = targetPrefix + t
	}
	// At least once, a target partition's end offset is its record
	// count. Exactly once, each transaction adds a marker per partition
	// (and an aborted one its records): the timings poll the last stable
	// offsets, a partition being done once it moved by a record and its
	// commit marker (eosStep), and the last check counts the records
	// with a read_committed consumer. A consumer polling all along would
	// slow the target broker down (kfake's most of all: each Fetch walks
	// its 100,000 partitions).
	eos := name == "kmirror-eos"
	listing := func(ctx context.Context) (map[string]map[int32]int64, error) {
		if eos {
			return workload.StableOffsets(ctx, dstAdm, targets...)
		}
		return workload.EndOffsets(ctx, dstAdm, targets...)
	}
	step := int64(1)
	if eos {
		step = eosStep
	}
	wait := 15 * time.Minute
	if name == "mm2" {
		wait = e.o.mm2Wait
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := waitTarget(wctx, proc, listing, targets, e.o.partitions, func(p int64) bool { return p >= step }); err != nil {
		var short *shortError
		if name == "mm2" && errors.As(err, &short) && ctx.Err() == nil {
			st, _ := kafkatest.ReadProcStat(proc.Pid())
			r.startRSS, r.startCPU = st.PeakRSS, int64(st.CPU)
			r.unfinished = fmt.Sprintf("%d of %d partitions had their first record on the target after %s", short.done, short.total, wait)
			if cause := commonestException(proc.LogPath); cause != "" {
				r.unfinished += fmt.Sprintf(" (the commonest exception in its log: %q)", cause)
			}
			r.brokerCPU = e.brokerCPU() - brokers0
			r.loadAfter = machine.Loadavg()
			return r, nil
		}
		return r, fmt.Errorf("start: %w", err)
	}
	r.start = time.Since(proc.Started)
	st, _ := kafkatest.ReadProcStat(proc.Pid())
	r.startRSS, r.startCPU = st.PeakRSS, int64(st.CPU)

	// Idle: over the whole phase, which starts as the last partition's
	// first record lands (what the start still does after it counts),
	// and over its second half (settled).
	idle0 := st.CPU
	time.Sleep(e.o.idle / 2)
	mid, _ := kafkatest.ReadProcStat(proc.Pid())
	time.Sleep(e.o.idle - e.o.idle/2)
	st, _ = kafkatest.ReadProcStat(proc.Pid())
	r.idleCPU, r.idleLateCPU = st.CPU-idle0, st.CPU-mid.CPU

	// Trickle: round-robin over every partition at the rate.
	r.rssBefore = st.RSS
	trickle0 := st.CPU
	sampled := sampleRSS(proc.Pid(), e.o.trickle/rssSamples)
	n, err := trickle(ctx, srcCl, topics, e.o.partitions, e.o.trickleRate, e.o.trickle)
	r.rssDuring = sampled()
	if err != nil {
		return r, err
	}
	r.trickleRecords = n
	st, _ = kafkatest.ReadProcStat(proc.Pid())
	r.trickleCPU, r.rssAfter = st.CPU-trickle0, st.RSS

	if isKmirror(name) {
		// Restart: stop, one more record everywhere, start again.
		if _, killed := proc.Stop(60 * time.Second); killed {
			return r, fmt.Errorf("%s did not stop within 60s of SIGTERM", name)
		}
		if err := produceEach(ctx, srcCl, topics, e.o.partitions, "after-restart"); err != nil {
			return r, err
		}
		want, err := workload.EndOffsets(ctx, srcAdm, topics...)
		if err != nil {
			return r, err
		}
		var before map[string]map[int32]int64 // exactly once: the stable offsets at the stop
		if eos {
			if before, err = listing(ctx); err != nil {
				return r, err
			}
		}
		if proc, err = e.startContender(name, dir); err != nil {
			return r, err
		}
		wctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
		defer cancel()
		if eos {
			err = poll(wctx, proc, listing, targets, e.o.partitions, func(got map[string]map[int32]int64, t string, p int32) bool {
				return got[t][p] >= before[t][p]+step
			})
		} else {
			err = waitTargetExact(wctx, proc, listing, targets, e.o.partitions, want)
		}
		if err != nil {
			return r, fmt.Errorf("restart: %w", err)
		}
		r.restart = time.Since(proc.Started)
		st, _ = kafkatest.ReadProcStat(proc.Pid())
		r.restartRSS = st.PeakRSS
	}
	// Every source record, once.
	want, err := workload.EndOffsets(ctx, srcAdm, topics...)
	if err != nil {
		return r, err
	}
	vctx, cancel2 := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel2()
	count := listing
	if eos {
		c, err := startCommittedCounter(vctx, e.dstAddr, "^"+regexp.QuoteMeta(targetPrefix+topicPrefix))
		if err != nil {
			return r, err
		}
		defer c.stop()
		count = c.counts
	}
	if name == "mm2" {
		// At least once: every record there, duplicates counted.
		if err := waitTargetAll(vctx, proc, count, targets, e.o.partitions, want); err != nil {
			return r, fmt.Errorf("final check: %w", err)
		}
	} else if err := waitTargetExact(vctx, proc, count, targets, e.o.partitions, want); err != nil {
		return r, fmt.Errorf("final check: %w", err)
	}
	for _, ps := range want {
		for _, v := range ps {
			r.verified += v
		}
	}
	if name == "mm2" {
		got, err := workload.EndOffsets(ctx, dstAdm, targets...)
		if err != nil {
			return r, err
		}
		for _, ps := range got {
			for _, v := range ps {
				r.extra += v
			}
		}
		r.extra -= r.verified
	}
	r.brokerCPU = e.brokerCPU() - brokers0
	r.loadAfter = machine.Loadavg()
	return r, nil
}

func (e *env) brokerCPU() time.Duration {
	var d time.Duration
	for _, pid := range e.brokerPids {
		if st, err := kafkatest.ReadProcStat(pid); err == nil {
			d += st.CPU
		}
	}
	return d
}

// startContender starts kmirror (its binary, with a config of defaults but
// the topic pattern and replication factor 1) or the loop (this binary's
// limit-child).
func (e *env) startContender(name, dir string) (*kafkatest.Process, error) {
	switch name {
	case "limit":
		cmd := exec.Command(e.self, "limit-child", "-src", e.srcAddr, "-dst", e.dstAddr, "-topics", topicPrefix+".*", "-prefix", targetPrefix)
		return kafkatest.StartProcess(cmd, filepath.Join(dir, "limit.log"))
	case "mm2":
		path := filepath.Join(dir, "mm2.properties")
		if err := os.WriteFile(path, []byte(e.mm2Properties()), 0o644); err != nil {
			return nil, err
		}
		return e.rt.StartMirrorMaker(dir, path, append([]string{"-Xms256m", "-Xmx" + e.o.mm2Heap}, kafkatest.MirrorMakerJVMOpts[2:]...))
	}
	cfg := fmt.Sprintf(`# generated by bench/scale
clusters:
  src: {bootstrap_servers: [%q]}
  dst: {bootstrap_servers: [%q]}
mirrors:
  - name: scale
    source: src
    target: dst
    replication_factor: 1
    exactly_once: %t
    topics: {include: [%q]}
http: {listen: "127.0.0.1:0"}
`, e.srcAddr, e.dstAddr, name == "kmirror-eos", topicPrefix+".*")
	path := filepath.Join(dir, "kmirror.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return kafkatest.StartProcess(exec.Command(e.kmirror, "run", "--config", path), filepath.Join(dir, "kmirror.log"))
}

// mm2Properties is MirrorMaker 2's configuration (dedicated mode): one
// way, no heartbeats, checkpoints or offset syncs (kmirror and the loop
// copy records only here too), the default replication policy ("src."
// prefix, as kmirror's), the topic refresh at kmirror's interval, and the
// Java clients' defaults otherwise. One task: one worker, as the others.
func (e *env) mm2Properties() string {
	var b strings.Builder
	w := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, v) }
	b.WriteString("# generated by bench/scale: MirrorMaker 2, dedicated mode\n")
	w("clusters", "src, dst")
	w("src.bootstrap.servers", e.srcAddr)
	w("dst.bootstrap.servers", e.dstAddr)
	w("src->dst.enabled", "true")
	w("src->dst.topics", topicPrefix+".*")
	w("dst->src.enabled", "false")
	w("emit.heartbeats.enabled", "false")
	w("emit.checkpoints.enabled", "false")
	w("sync.group.offsets.enabled", "false")
	w("emit.offset-syncs.enabled", "false")
	w("sync.topic.acls.enabled", "false")
	w("tasks.max", "1")
	w("refresh.topics.interval.seconds", "10")
	for _, k := range []string{"replication.factor", "offset.storage.replication.factor", "config.storage.replication.factor", "status.storage.replication.factor"} {
		w(k, "1")
	}
	w("dst.scheduled.rebalance.max.delay.ms", "0")
	w("src.consumer.isolation.level", "read_committed")
	return b.String()
}

func admin(addr string) (*kadm.Client, func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// produceEach writes one record to every partition of topics.
func produceEach(ctx context.Context, cl *kgo.Client, topics []string, partitions int, tag string) error {
	var failed workload.ErrOnce
	for _, t := range topics {
		for p := range partitions {
			cl.Produce(ctx, &kgo.Record{Topic: t, Partition: int32(p), Value: []byte(tag)}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Set(err)
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if err := failed.Get(); err != nil {
		return fmt.Errorf("produce to every partition: %w", err)
	}
	return nil
}

// rssSamples is how many times the trickle samples the contender's RSS:
// memory that grows under steady traffic shows as a rising series.
const rssSamples = 12

// sampleRSS reads pid's RSS every interval until the returned function is
// called, which returns the samples.
func sampleRSS(pid int, every time.Duration) func() []int64 {
	var mu sync.Mutex
	var out []int64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if st, err := kafkatest.ReadProcStat(pid); err == nil {
					mu.Lock()
					out = append(out, st.RSS)
					mu.Unlock()
				}
			}
		}
	}()
	return func() []int64 {
		close(done)
		<-finished
		return out
	}
}

// trickle produces rate records a second, one partition after the other,
// for d, and returns how many it produced.
func trickle(ctx context.Context, cl *kgo.Client, topics []string, partitions, rate int, d time.Duration) (int, error) {
	var failed workload.ErrOnce
	total := int(d.Seconds() * float64(rate))
	begin := time.Now()
	for i := range total {
		// Pace by the clock, ten sends a second.
		if i%max(1, rate/10) == 0 {
			due := begin.Add(time.Duration(float64(i) / float64(rate) * float64(time.Second)))
			time.Sleep(time.Until(due))
		}
		part := i % (len(topics) * partitions)
		cl.Produce(ctx, &kgo.Record{Topic: topics[part/partitions], Partition: int32(part % partitions), Value: []byte("trickle")}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Set(err)
			}
		})
		if err := ctx.Err(); err != nil {
			return i, err
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return total, err
	}
	return total, failed.Get()
}

// waitTarget polls the target's end offsets (every second: listing tens
// of thousands of partitions is not free) until every partition of
// targets satisfies ok, failing when the contender exits.
func waitTarget(ctx context.Context, proc *kafkatest.Process, count countFunc, targets []string, partitions int, ok func(int64) bool) error {
	return poll(ctx, proc, count, targets, partitions, func(got map[string]map[int32]int64, t string, p int32) bool { return ok(got[t][p]) })
}

// waitTargetExact waits until every target partition's end offset equals
// its source partition's, and fails at once if one is above it.
func waitTargetExact(ctx context.Context, proc *kafkatest.Process, count countFunc, targets []string, partitions int, want map[string]map[int32]int64) error {
	var over error
	err := poll(ctx, proc, count, targets, partitions, func(got map[string]map[int32]int64, t string, p int32) bool {
		w := want[strings.TrimPrefix(t, targetPrefix)][p]
		if got[t][p] > w && over == nil {
			over = fmt.Errorf("%s/%d holds %d records, the source %d: copied twice", t, p, got[t][p], w)
		}
		return got[t][p] == w
	})
	return errors.Join(over, err)
}

// poll counts the target's records every second until done holds for
// every one of the partitions of every target topic. A partition the
// count left out (its topic not created yet, or its offset not listed)
// is not done.
func poll(ctx context.Context, proc *kafkatest.Process, count countFunc, targets []string, partitions int, done func(map[string]map[int32]int64, string, int32) bool) error {
	var last int
	var lastErr error
	logged := time.Now()
	for {
		if exited, err := proc.Exited(); exited {
			return fmt.Errorf("the contender exited (%v):\n%s", err, proc.Tail(20))
		}
		got, err := count(ctx)
		lastErr = err
		if err == nil {
			n := 0
			for _, t := range targets {
				for p := range int32(partitions) {
					if _, listed := got[t][p]; listed && done(got, t, p) {
						n++
					}
				}
			}
			last = n
			if n == len(targets)*partitions {
				return nil
			}
		}
		if time.Since(logged) > 30*time.Second {
			log.Printf("  %d of %d target partitions done (listing the target: %v)", last, len(targets)*partitions, err)
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return &shortError{done: last, total: len(targets) * partitions, listErr: lastErr, err: ctx.Err()}
		case <-time.After(time.Second):
		}
	}
}

// commonestException returns the exception message the log at path holds
// most often ("" when none): why a Java contender got nowhere.
func commonestException(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	counts := make(map[string]int)
	best := ""
	for line := range strings.Lines(string(data)) {
		i := strings.LastIndex(line, "Exception: ")
		if i < 0 {
			continue
		}
		start := strings.LastIndexAny(line[:i], " \t") + 1
		msg := strings.TrimSpace(line[start:])
		counts[msg]++
		if counts[msg] > counts[best] {
			best = msg
		}
	}
	return best
}

// shortError is a wait that ended before every partition was done.
type shortError struct {
	done, total int
	listErr     error // the last listing's
	err         error
}

func (e *shortError) Error() string {
	return fmt.Sprintf("%d of %d target partitions done (last listing error: %v): %v", e.done, e.total, e.listErr, e.err)
}

func (e *shortError) Unwrap() error { return e.err }

// waitTargetAll waits until every target partition holds at least its
// source partition's records (a contender that copies at least once).
func waitTargetAll(ctx context.Context, proc *kafkatest.Process, count countFunc, targets []string, partitions int, want map[string]map[int32]int64) error {
	return poll(ctx, proc, count, targets, partitions, func(got map[string]map[int32]int64, t string, p int32) bool {
		return got[t][p] >= want[strings.TrimPrefix(t, targetPrefix)][p]
	})
}

func mib(b int64) string { return fmt.Sprintf("%.0f", float64(b)/(1<<20)) }

type report struct {
	o              *options
	started        time.Time
	load0          string
	kmirrorVersion string
	rows           []row
}

func (r *report) render(failed error) string {
	o := r.o
	var b strings.Builder
	parts := o.topics * o.partitions
	fmt.Fprintf(&b, "# Scale: %d partitions (%d topics × %d) on %s, one worker\n\n", parts, o.topics, o.partitions, o.backend)
	fmt.Fprintf(&b, "- date: %s (took %s)\n", r.started.UTC().Format(time.RFC3339), time.Since(r.started).Round(time.Second))
	fmt.Fprintf(&b, "- machine: %d cores, GOMAXPROCS %d, %s/%s; load average at start %s, at end %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, r.load0, machine.Loadavg())
	fmt.Fprintf(&b, "- kmirror: %s; command: `go run ./bench/scale %s`\n", r.kmirrorVersion, strings.Join(os.Args[1:], " "))
	if o.backend == "kafka" {
		fmt.Fprintf(&b, "- clusters: Apache Kafka %s, a fresh pair of single-node KRaft clusters (-Xmx%s) per contender, on loopback\n", kafkatest.Version, o.brokerHeap)
	} else {
		fmt.Fprintf(&b, "- clusters: a fresh pair of kfake clusters (one broker each, bench/internal/kfakesrv processes) per contender, on loopback\n")
	}
	fmt.Fprintf(&b, "- workload: one record in every source partition before the contender starts; then %s idle; then %d records/s spread over every partition for %s; kmirror then restarts with one more record in every partition\n\n", o.idle, o.trickleRate, o.trickle)
	b.WriteString("| contender | start → every partition's first record s | peak RSS MiB | CPU to there s | idle CPU % | idle CPU, second half % | trickle CPU % | RSS before → after trickle MiB | restart → every record s | peak RSS after restart MiB | broker CPU s | records checked | load before → after |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|\n")
	for _, w := range r.rows {
		if w.unfinished != "" {
			fmt.Fprintf(&b, "| %s | not finished: %s | %s | %.1f | - | - | - | - | - | - | %.0f | - | %s → %s |\n",
				w.name, w.unfinished, mib(w.startRSS), time.Duration(w.startCPU).Seconds(), w.brokerCPU.Seconds(), w.loadBefore, w.loadAfter)
			continue
		}
		restart, rrss := "-", "-"
		if w.restart >= 0 {
			restart, rrss = fmt.Sprintf("%.1f", w.restart.Seconds()), mib(w.restartRSS)
		}
		checked := fmt.Sprint(w.verified)
		if w.extra > 0 {
			checked += fmt.Sprintf(" (+%d copied twice)", w.extra)
		}
		fmt.Fprintf(&b, "| %s | %.1f | %s | %.1f | %.1f | %.1f | %.1f | %s → %s | %s | %s | %.0f | %s | %s → %s |\n",
			w.name, w.start.Seconds(), mib(w.startRSS), time.Duration(w.startCPU).Seconds(),
			100*w.idleCPU.Seconds()/o.idle.Seconds(), 100*w.idleLateCPU.Seconds()/(o.idle-o.idle/2).Seconds(), 100*w.trickleCPU.Seconds()/o.trickle.Seconds(),
			mib(w.rssBefore), mib(w.rssAfter), restart, rrss, w.brokerCPU.Seconds(), checked, w.loadBefore, w.loadAfter)
	}
	for _, w := range r.rows {
		if len(w.rssDuring) > 0 {
			samples := make([]string, len(w.rssDuring))
			for i, v := range w.rssDuring {
				samples[i] = mib(v)
			}
			fmt.Fprintf(&b, "\n%s's RSS during the trickle, MiB, every %s: %s\n", w.name, o.trickle/rssSamples, strings.Join(samples, ", "))
		}
	}
	b.WriteString("\nstart: from the contender's process start; the loop lists the topics once and creates the target topics itself, kmirror discovers and creates them. Target end offsets are polled every second (listing this many partitions is not free), so figures are within a second; for kmirror-eos (exactly_once: true) the last stable offsets are polled, a partition being there once its offset moved by a record and its commit marker (2), and the last check counts the records with a read_committed consumer (offsets also count transaction markers). CPU %: of one core; the idle phase starts as the last first record lands, so its first half may hold what the start still does after that (the second half is the settled figure). The last check: every target partition holds exactly its source partition's records.\n")
	var lim, km, eos, mm *row
	for i := range r.rows {
		switch r.rows[i].name {
		case "limit":
			lim = &r.rows[i]
		case "kmirror":
			km = &r.rows[i]
		case "kmirror-eos":
			eos = &r.rows[i]
		case "mm2":
			mm = &r.rows[i]
		}
	}
	if mm != nil {
		b.WriteString("\nMirrorMaker 2: dedicated mode, one task, -Xmx" + o.mm2Heap + "; no heartbeats, checkpoints or offset syncs; the Java clients' defaults otherwise; not restarted (it copies at least once, so its last check counts the records it wrote twice rather than failing).\n")
	}
	if lim != nil && km != nil {
		fmt.Fprintf(&b, "\n**kmirror / loop, start to every partition's first record: %.2f×** (%.1f s / %.1f s).\n", km.start.Seconds()/lim.start.Seconds(), km.start.Seconds(), lim.start.Seconds())
	}
	if lim != nil && eos != nil {
		fmt.Fprintf(&b, "\n**kmirror-eos / loop, start to every partition's first record: %.2f×** (%.1f s / %.1f s).\n", eos.start.Seconds()/lim.start.Seconds(), eos.start.Seconds(), lim.start.Seconds())
	}
	if mm != nil && km != nil && mm.unfinished == "" {
		fmt.Fprintf(&b, "\n**MirrorMaker 2 / kmirror, start to every partition's first record: %.2f×** (%.1f s / %.1f s).\n", mm.start.Seconds()/km.start.Seconds(), mm.start.Seconds(), km.start.Seconds())
	}
	if failed != nil {
		fmt.Fprintf(&b, "\n**FAILED:** %v\n", failed)
	}
	return b.String()
}

// eosStep is how far a partition's last stable offset moves at least when
// a record is copied with exactly_once: the record and its transaction's
// commit marker. (An aborted attempt moves it too; the last check, which
// counts records, catches what that timing would miss.)
const eosStep = 2

// countFunc returns the records of every target partition counted so far
// (partitions it does not know yet are left out).
type countFunc func(context.Context) (map[string]map[int32]int64, error)

// committedCounter counts the committed records of every topic matching a
// pattern on the target as a read_committed consumer sees them: aborted
// records and transaction markers are not counted. It reads each record
// once (from the start of each topic, as the topic appears), so a count is
// a copy of a map, not a new scan.
type committedCounter struct {
	cl   *kgo.Client
	done chan struct{}
	mu   sync.Mutex
	n    map[string]map[int32]int64

	logged time.Time // the last fetch error logged (the poll goroutine's)
}

func startCommittedCounter(ctx context.Context, addr, pattern string) (*committedCounter, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeRegex(), kgo.ConsumeTopics(pattern),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.MetadataMaxAge(time.Second), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return nil, err
	}
	c := &committedCounter{cl: cl, done: make(chan struct{}), n: map[string]map[int32]int64{}}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
			fs.EachError(func(t string, p int32, err error) {
				// The client retries what can be retried; what reaches
				// here shows in the log, and the count stays short.
				if ctx.Err() == nil && time.Since(c.logged) > 10*time.Second {
					log.Printf("  counting %s/%d on the target: %v", t, p, err)
					c.logged = time.Now()
				}
			})
			c.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if c.n[r.Topic] == nil {
					c.n[r.Topic] = map[int32]int64{}
				}
				c.n[r.Topic][r.Partition]++
			})
			c.mu.Unlock()
		}
	}()
	return c, nil
}

func (c *committedCounter) counts(context.Context) (map[string]map[int32]int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]map[int32]int64, len(c.n))
	for t, ps := range c.n {
		out[t] = maps.Clone(ps)
	}
	return out, nil
}

func (c *committedCounter) stop() {
	c.cl.Close()
	<-c.done
}
