package main

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// The settings every contender's target producer and source consumer get:
// kmirror's defaults (linger 5ms, batch_max_bytes 1 MiB; compression none
// outside the compressed phase, where kmirror keeps its default, source;
// fetch max wait 500ms as in connector/data/copier.go) and franz-go's fetch
// defaults but FetchMaxBytes 16 MiB as kmirror (FetchMaxPartitionBytes 1 MiB, min 1 B),
// which are also the Java consumer's defaults.
const (
	linger         = 5 * time.Millisecond
	batchMaxBytes  = 1 << 20
	fetchMaxWait   = 500 * time.Millisecond
	fetchMaxBytes  = 50 << 20
	partFetchBytes = 1 << 20
)

// Cluster aliases, the same for every contender: the default replication
// policy names the copy of topic t "src.t" (MM2's DefaultReplicationPolicy
// and kmirror's default policy agree).
const (
	srcAlias = "src"
	dstAlias = "dst"
)

func targetTopic(t string) string { return srcAlias + "." + t }

// spec is what a contender is asked to mirror.
type spec struct {
	// topics is a regular expression of source topics (whole name).
	topics string
	// partitions is the most partitions of one topic (MM2's tasks.max);
	// in the WAN phase, those of both its topics.
	partitions int
	// groups turns group offset translation on (the failover phase only).
	groups bool
	// manyPartitions: the startup phase (1,000 single-partition topics).
	manyPartitions bool
	// exactlyOnce: the target is written in transactions (kmirror
	// `exactly_once: true`, MM2 `exactly.once.source.support = enabled`).
	exactlyOnce bool
	// slots: with exactlyOnce, kmirror's cluster.slots (0: its default).
	slots int
	// codec: the compressed phase's source codec. The limit and MM2
	// produce with it; kmirror runs with its defaults (compression:
	// source).
	codec string
	// via is where the contender reaches the source cluster (the WAN
	// phase's latency proxy); empty: the source itself. The bench's own
	// clients always use the source directly.
	via string
	// wanTuned: MM2's consumer tuned for a high-latency link (mm2-wan).
	wanTuned bool
	// defaultTasks: MM2 with tasks.max and its clients at their defaults
	// (mm2-defaults).
	defaultTasks bool
	// rateLimit is kmirror's mirrors[].rate_limit as written in the
	// config ("20MB"); empty: none (the WAN phase's extras, wanextra.go).
	rateLimit string
	// kmirrorDefaults: kmirror keeps its default compression (source)
	// outside the compressed phase too.
	kmirrorDefaults bool
}

// sourceAddr is the source bootstrap address the contender is given.
func (s spec) sourceAddr(p *pair) string {
	return cmp.Or(s.via, p.src.Addr(kafkatest.PLAINTEXT))
}

// contender starts one mirroring process for a spec on a pair of clusters
// and returns it with the exact settings it runs with.
type contender struct {
	name  string
	start func(e *env, p *pair, s spec, dir string) (proc *kafkatest.Process, settings string, err error)
	// exactlyOnce contenders copy in transactions: they are timed by the
	// target's last stable offsets and checked with read_committed
	// (eos.go), and run the throughput and latency phases only.
	exactlyOnce bool
	// workers is how many processes of the contender share the mirror
	// (0: one). On one 2-core machine a second worker shows what the
	// coordination costs, not how it scales.
	workers int
	// slots is kmirror's cluster.slots for an exactly-once contender (0:
	// -eos-slots, else kmirror's default).
	slots int
	// verify: the throughput phase also times `kmirror verify` over the
	// copy (-verify; verify.go).
	verify bool
	// wanTuned: MM2 with the WAN tuning operators apply (mm2-wan), in the
	// WAN phase only: everywhere else its settings would only cost heap.
	wanTuned bool
	// defaultTasks: MM2 with its defaults: tasks.max 1 (one consumer for
	// every partition) and the Java producer's and consumer's defaults,
	// which is what a deployment that tuned nothing runs (mm2-defaults;
	// the WAN phase only: issue 27 compares against it). The mm2
	// contender runs a task per partition and kmirror's batching
	// everywhere, which favours MM2.
	defaultTasks bool
}

// runs reports whether contender c takes part in phase.
func (c contender) runs(phase string) bool {
	switch {
	case phase == "failover" && c.name == "limit":
		return false // the limit translates no groups
	case c.wanTuned, c.defaultTasks:
		return phase == "wan"
	case c.workers > 1:
		return phase == "throughput"
	case c.exactlyOnce:
		return phase == "throughput" || phase == "latency" || phase == "compressed"
	}
	return true
}

var allContenders = []contender{
	{name: "limit", start: startLimit},
	{name: "kmirror", start: startKmirror, verify: true},
	{name: "mm2", start: startMM2},
	{name: "mm2-defaults", start: startMM2, defaultTasks: true},
	{name: "mm2-wan", start: startMM2, wanTuned: true},
	{name: "kmirror-eos", start: startKmirror, exactlyOnce: true, verify: true},
	{name: "kmirror-eos-2w", start: startKmirror, exactlyOnce: true, workers: 2},
	{name: "mm2-eos", start: startMM2, exactlyOnce: true},
	// Four slots: each slot is a transactional producer, and a request
	// carries only its own slot's partitions (docs/cluster.md, Cost).
	{name: "kmirror-eos-4s", start: startKmirror, exactlyOnce: true, slots: 4},
	{name: "kmirror-prof", start: startKmirrorProf},
	{name: "kmirror-eos-prof", start: startKmirrorProf, exactlyOnce: true},
}

// startLimit runs this binary as "limit-child": the plain consume-then-
// produce loop of bench/ (workload.Limit), as its own process so that its
// CPU and RSS are its own.
func startLimit(e *env, p *pair, s spec, dir string) (*kafkatest.Process, string, error) {
	args := []string{"limit-child", "-src", s.sourceAddr(p), "-dst", p.dst.Addr(kafkatest.PLAINTEXT), "-topics", s.topics}
	codecName := "NoCompression"
	if s.codec != "" {
		args = append(args, "-codec", s.codec)
		codecName = s.codec + " compression (the source's codec)"
	}
	cmd := exec.Command(e.self, args...)
	cmd.Env = os.Environ()
	proc, err := kafkatest.StartProcess(cmd, filepath.Join(dir, "limit.log"))
	settings := fmt.Sprintf("bench-mm2 %s\n# workload.Limit: franz-go %s; consumer: ConsumePartitions from the start, read_committed, FetchMaxWait %s, FetchMaxBytes 16 MiB as kmirror, other fetch settings franz-go defaults (FetchMaxPartitionBytes 1 MiB); producer: ManualPartitioner, linger %s, ProducerBatchMaxBytes %d, MaxBufferedBytes 32 MiB as kmirror, %s, acks=all, idempotent (franz-go defaults); target topics created by the loop itself (same partitions, RF 1); GOGC/GOMAXPROCS defaults",
		strings.Join(args, " "), franzVersion(), fetchMaxWait, linger, batchMaxBytes, codecName)
	return proc, settings, err
}

func kmirrorConfig(p *pair, s spec) string {
	groups := "false"
	if s.groups {
		groups = "true"
	}
	// extra: the mirror's settings beyond the common ones.
	extra := ""
	if s.exactlyOnce {
		// Cluster mode with its defaults: 16 slots, each a transactional
		// producer committing every 100ms (docs/cluster.md).
		extra = "\n    exactly_once: true"
		if s.slots > 0 {
			extra += fmt.Sprintf("\n    cluster: {slots: %d}", s.slots)
		}
	}
	// The compressed phase runs kmirror with its default compression
	// (source); the other phases compare uncompressed copies.
	compression := ", compression: none"
	if s.codec != "" || s.kmirrorDefaults {
		compression = ""
	}
	if s.rateLimit != "" {
		extra += "\n    rate_limit: " + s.rateLimit
	}
	return fmt.Sprintf(`# generated by bench/mm2
clusters:
  %[1]s: {bootstrap_servers: [%[3]q]}
  %[2]s: {bootstrap_servers: [%[4]q]}
mirrors:
  - name: bench
    source: %[1]s
    target: %[2]s
    replication_factor: 1%[8]s
    topics: {include: [%[5]q], refresh_interval: 1s}
    producer: {linger: 5ms, batch_max_bytes: %[6]d%[9]s}
    sync:
      # MM2's checkpoints and group sync are off outside the failover run; so is this.
      group_offsets: {enabled: %[7]s, interval: 1s}
http: {listen: "127.0.0.1:0"}
log: {level: info}
`, srcAlias, dstAlias, s.sourceAddr(p), p.dst.Addr(kafkatest.PLAINTEXT), s.topics, batchMaxBytes, groups, extra, compression)
}

func startKmirror(e *env, p *pair, s spec, dir string) (*kafkatest.Process, string, error) {
	cfg := kmirrorConfig(p, s)
	path := filepath.Join(dir, "kmirror.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, "", err
	}
	cmd := exec.Command(e.kmirror, "run", "--config", path)
	proc, err := kafkatest.StartProcess(cmd, filepath.Join(dir, "kmirror.log"))
	return proc, fmt.Sprintf("%s run --config kmirror.yaml   # %s; GOGC/GOMAXPROCS defaults\n%s", filepath.Base(e.kmirror), e.kmirrorVersion, cfg), err
}

// mm2Properties writes MM2's configuration; restPort is its internal REST
// listener, used with exactly-once only.
func mm2Properties(p *pair, s spec, restPort int) string {
	var b strings.Builder
	w := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, v) }
	b.WriteString("# generated by bench/mm2: MirrorMaker 2, dedicated mode\n")
	w("clusters", srcAlias+", "+dstAlias)
	w(srcAlias+".bootstrap.servers", s.sourceAddr(p))
	w(dstAlias+".bootstrap.servers", p.dst.Addr(kafkatest.PLAINTEXT))
	w(srcAlias+"->"+dstAlias+".enabled", "true")
	w(srcAlias+"->"+dstAlias+".topics", s.topics)
	w(srcAlias+"->"+dstAlias+".groups", ".*")
	// One way only: no dst->src herder, no heartbeats anywhere.
	w(dstAlias+"->"+srcAlias+".enabled", "false")
	w("emit.heartbeats.enabled", "false")
	if s.defaultTasks {
		b.WriteString("# tasks.max: default (1): one task, one consumer for every partition\n")
	} else {
		w("tasks.max", fmt.Sprint(s.partitions))
	}
	// replication.policy.class: the default (DefaultReplicationPolicy, "src.<topic>").
	w("refresh.topics.interval.seconds", "1")
	w("refresh.groups.interval.seconds", "1")
	w("sync.topic.acls.enabled", "false")
	if s.groups {
		w("emit.checkpoints.enabled", "true")
		w("emit.checkpoints.interval.seconds", "1")
		w("sync.group.offsets.enabled", "true")
		w("sync.group.offsets.interval.seconds", "1")
		w("emit.offset-syncs.enabled", "true")
		b.WriteString("# offset.lag.max: default (100)\n")
		// Delayed offset syncs are flushed on task commit (default 60 s):
		// 1 s lets translation reach the head quickly (favours MM2).
		w(dstAlias+".offset.flush.interval.ms", "1000")
	} else {
		w("emit.checkpoints.enabled", "false")
		w("sync.group.offsets.enabled", "false")
		w("emit.offset-syncs.enabled", "false")
	}
	// Single-broker clusters. (MM2 refuses offset-syncs.* and checkpoint
	// settings while those features are off.)
	rf := []string{"replication.factor", "offset.storage.replication.factor", "config.storage.replication.factor", "status.storage.replication.factor"}
	if s.groups {
		rf = append(rf, "offset-syncs.topic.replication.factor", "checkpoints.topic.replication.factor")
	}
	for _, k := range rf {
		w(k, "1")
	}
	w(dstAlias+".scheduled.rebalance.max.delay.ms", "0")
	if s.defaultTasks {
		// mm2-defaults: the producer and the consumer as Java makes them.
		b.WriteString("# mm2-defaults: the Java producer's and consumer's defaults (batch.size 16384, linger.ms 5,\n# fetch.max.bytes 50 MiB, max.partition.fetch.bytes 1 MiB, fetch.max.wait.ms 500)\n")
	} else {
		// The target producer (Connect's worker producer, one per task): the
		// same batching as kmirror's. Connect sets max.in.flight=1; franz-go's
		// idempotent producer keeps up to 5 in flight per broker, so MM2 gets
		// 5 too (idempotence, on by default, keeps the order).
		w(dstAlias+".producer.linger.ms", "5")
		if s.manyPartitions {
			// The Java producer allocates batch.size up front for every
			// partition with a record in its accumulator: 1 MiB × 1,000
			// partitions exhausts a 1 GiB heap (OutOfMemoryError in
			// RecordAccumulator.append, tasks killed, records never
			// mirrored). franz-go grows batches as records arrive, so the
			// Java default (16384) is the fair equivalent here.
			b.WriteString("# batch.size: Java default (16384); 1 MiB × 1,000 partitions runs a 1 GiB heap out of memory\n")
		} else {
			w(dstAlias+".producer.batch.size", fmt.Sprint(batchMaxBytes))
		}
		if s.codec != "" {
			w(dstAlias+".producer.compression.type", s.codec)
		} else {
			w(dstAlias+".producer.compression.type", "none")
		}
		w(dstAlias+".producer.max.in.flight.requests.per.connection", "5")
		w(dstAlias+".producer.enable.idempotence", "true")
		// The source consumer: franz-go's (and the Java client's) default fetch
		// sizes, kmirror's fetch wait, read_committed as kmirror; mm2-wan
		// fetches more per round trip.
		partFetch := partFetchBytes
		if s.wanTuned {
			partFetch = wanPartFetchBytes
			b.WriteString(mm2WANTuning)
			w(srcAlias+".consumer.receive.buffer.bytes", "-1")
			w(dstAlias+".producer.buffer.memory", fmt.Sprint(wanProducerBuffer))
		}
		w(srcAlias+".consumer.fetch.max.bytes", fmt.Sprint(fetchMaxBytes))
		w(srcAlias+".consumer.max.partition.fetch.bytes", fmt.Sprint(partFetch))
		w(srcAlias+".consumer.fetch.min.bytes", "1")
		w(srcAlias+".consumer.fetch.max.wait.ms", fmt.Sprint(fetchMaxWait.Milliseconds()))
		w(srcAlias+".consumer.isolation.level", "read_committed")
	}
	b.WriteString("# max.poll.records: default (500)\n")
	if s.exactlyOnce {
		// KIP-618 in dedicated mode (Kafka's georeplication docs, "Exactly
		// once"): a worker setting, so it takes the target prefix; the
		// source consumer already reads committed data, which is what
		// MirrorSourceConnector needs to report exactly-once support.
		// Transactions commit per poll (transaction.boundary default).
		w(dstAlias+".exactly.once.source.support", "enabled")
		w("dedicated.mode.enable.internal.rest", "true")
		w("listeners", fmt.Sprintf("http://127.0.0.1:%d", restPort))
	}
	return b.String()
}

// mm2-wan's max.partition.fetch.bytes and producer buffer.memory.
const (
	wanPartFetchBytes = 16 << 20
	wanProducerBuffer = 8 << 20
)

// mm2WANTuning says, in mm2-wan's properties, what its tuning is and why:
// the consumer settings operators raise for a high-latency link (Red Hat
// Streams for Apache Kafka, "Increasing bandwidth for high latency
// connections" and "Handling high volumes of messages"; Klarrio, "Mirroring
// High-Throughput Topics with Kafka MirrorMaker 2", 2024).
const mm2WANTuning = `# mm2-wan: the source consumer tuned for a high-latency link, as operators do
# (socket buffers sized to the bandwidth-delay product; bigger fetches; more tasks):
# - receive.buffer.bytes -1: the OS default, which Linux auto-tunes up to tcp_rmem's
#   max, as the Go contenders get; Java's 64 KiB default caps a connection at 64 KiB
#   per round trip on a real WAN (the bench's proxy applies the window: faultproxy's
#   SetReceiveWindows);
# - max.partition.fetch.bytes 16 MiB (default 1 MiB): a partition copies at most
#   this per fetch round trip, and the Java consumer fetches a partition again only
#   once its buffered records are polled;
# - fetch.max.bytes stays 50 MiB (the default; a broker caps a response at its own
#   fetch.max.bytes, 55 MiB by default);
# - tasks.max = partitions, as for mm2: MirrorSourceConnector runs
#   min(tasks.max, partitions) tasks, each one consumer with its own connection, so
#   one task per partition overlaps the most round trips; with one partition no
#   task count helps;
# - the producer as mm2's (batch.size 1 MiB, above Strimzi's 327680; linger 5 ms),
#   as it writes to the target, on this side of the link, but buffer.memory 8 MiB
#   (Red Hat's high-volume example: a task's producer need not buffer a whole fetch):
#   each task has a producer, and at 32 MiB each the tasks' buffers alone could
#   take MM2's 1 GiB heap, which the 16 MiB fetches already press (full GCs seen).
`

func startMM2(e *env, p *pair, s spec, dir string) (*kafkatest.Process, string, error) {
	var restPort int
	if s.exactlyOnce {
		var err error
		if restPort, err = kafkatest.FreePort(); err != nil {
			return nil, "", err
		}
	}
	props := mm2Properties(p, s, restPort)
	path := filepath.Join(dir, "mm2.properties")
	if err := os.WriteFile(path, []byte(props), 0o644); err != nil {
		return nil, "", err
	}
	proc, err := e.rt.StartMirrorMaker(dir, path, e.mm2JVM)
	settings := fmt.Sprintf("java %s -cp \"<lib>/*\" %s mm2.properties   # %s\n%s",
		strings.Join(e.mm2JVM, " "), kafkatest.MirrorMakerClass, e.javaVersion, props)
	return proc, settings, err
}
