package main

// (e) Compressed topics (issue 13): JSON-like records (compressible about
// 4:1) produced with zstd and with lz4; the limit decodes and re-encodes
// with the same codec, kmirror runs with its defaults (producer.compression:
// source, batch pass-through), MirrorMaker 2 with compression.type set to
// the codec. Measured as the throughput phase (copy window, CPU, peak RSS),
// plus the bytes the topic takes on each broker's disk.

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/bench/internal/workload"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// compressedCodecs are the source codecs of the phase, in order.
var compressedCodecs = []string{"zstd", "lz4"}

func codecOf(name string) kgo.CompressionCodec {
	switch name {
	case "zstd":
		return kgo.ZstdCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "snappy":
		return kgo.SnappyCompression()
	case "gzip":
		return kgo.GzipCompression()
	}
	return kgo.NoCompression()
}

// compressed is one contender's run on one codec.
type compressed struct {
	throughput
	logical          int64 // bytes of the records (key, value, headers)
	srcDisk, dstDisk int64 // bytes of the topic's .log segments on each broker
	// The brokers' CPU over the copy window: the target's appends (its
	// cost grows with the number of batches and requests) and the
	// source's fetches.
	srcWindowCPU, dstWindowCPU time.Duration
}

// compressedPhase runs contender c once per codec; results by codec.
func compressedPhase(ctx context.Context, e *env, o *options, c contender) (map[string]compressed, string, error) {
	out := map[string]compressed{}
	var settings []string
	for _, codec := range compressedCodecs {
		r, s, err := compressedRun(ctx, e, o, c, codec)
		settings = append(settings, s)
		if err != nil {
			return out, strings.Join(settings, "\n"), fmt.Errorf("%s: %w", codec, err)
		}
		out[codec] = r
		log.Printf("  %s %s: %.0f records/s (start to done %.1f s), %.2f CPU s/GB, peak RSS %s, on disk source %s MiB, target %s MiB, brokers' CPU %.1f s (copy window: source %.1f s, target %.1f s), other %.1f s",
			c.name, codec, r.recordsPerSec(), r.total.Seconds(), cpuPerGBBytes(r.cpuWindow, r.logical*r.windowRecords/r.records), mib(r.peakRSS), mib(r.srcDisk), mib(r.dstDisk), r.brokerCPU.Seconds(), r.srcWindowCPU.Seconds(), r.dstWindowCPU.Seconds(), r.otherCPU.Seconds())
	}
	return out, strings.Join(settings, "\n"), nil
}

func compressedRun(ctx context.Context, e *env, o *options, c contender, codec string) (res compressed, settings string, err error) {
	r, err := e.begin(ctx, c, "compressed-"+codec)
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
	logical, err := preloadJSON(ctx, src, topic, o.compressedRecords, o.partitions, codec)
	if err != nil {
		return res, "", err
	}
	log.Printf("  preloaded %d JSON-like records (%s MiB) with %s in %.1fs", o.compressedRecords, mib(logical), codec, time.Since(t).Seconds())
	settle()
	dist := startDisturbance(r.p)
	if err := r.startContender(spec{topics: topic, partitions: o.partitions, codec: codec}); err != nil {
		return res, r.settings, err
	}
	var t1, t2 time.Time
	var st1, st2 kafkatest.ProcStat
	var n1 int64
	var src1, dst1 time.Duration
	want := int64(o.compressedRecords)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute+time.Duration(want/2000)*time.Second)
	defer cancel()
	if c.exactlyOnce {
		// Timed by the last stable offsets (transaction markers take
		// offsets too) and checked with read_committed (eos.go).
		perPartition, err := workload.PartitionCounts(ctx, []string{src}, topic)
		if err != nil {
			return res, r.settings, err
		}
		w, err := r.waitCommitted(wctx, targetTopic(topic), perPartition, 20*time.Millisecond)
		if err != nil {
			return res, r.settings, err
		}
		t1, st1, n1, t2, st2 = w.first.at, w.first.st, w.firstN, w.done.at, w.done.st
		res.srcWindowCPU, res.dstWindowCPU = w.done.srcCPU-w.first.srcCPU, w.done.dstCPU-w.first.dstCPU
	} else {
		_, err = r.waitTarget(wctx, []string{targetTopic(topic)}, 20*time.Millisecond,
			func(m map[string]map[int32]int64) bool { return sum(m) >= want },
			func(n int64) {
				t1, st1, n1, src1, dst1 = time.Now(), r.stat(), n, processCPU(r.p.src), processCPU(r.p.dst)
			})
		if err != nil {
			return res, r.settings, err
		}
		t2, st2 = time.Now(), r.stat()
		res.srcWindowCPU, res.dstWindowCPU = processCPU(r.p.src)-src1, processCPU(r.p.dst)-dst1
	}
	res.throughput = throughput{
		records: want, windowRecords: want - n1,
		total: t2.Sub(r.proc.Started), window: t2.Sub(t1),
		cpuTotal: st2.CPU, cpuWindow: st2.CPU - st1.CPU, peakRSS: st2.PeakRSS,
	}
	res.logical = logical
	res.brokerCPU, res.otherCPU, res.steal, res.load = dist.end(r.p, st2.CPU)
	r.stopContender()
	if !c.exactlyOnce { // waitCommitted checked it, read_committed
		if err := r.verify(ctx, topic); err != nil {
			return res, r.settings, err
		}
	}
	if res.srcDisk, err = logBytes(filepath.Join(r.p.dir, "source", "data"), topic); err != nil {
		return res, r.settings, err
	}
	if res.dstDisk, err = logBytes(filepath.Join(r.p.dir, "target", "data"), targetTopic(topic)); err != nil {
		return res, r.settings, err
	}
	return res, r.settings, nil
}

// logBytes sums the .log segment files of topic's partition directories
// under a broker's log.dirs. Index files are left out: Kafka preallocates
// the active segment's indexes (10 MiB, sparse) until the segment rolls.
func logBytes(dataDir, topic string) (int64, error) {
	dirs, err := filepath.Glob(filepath.Join(dataDir, topic+"-*"))
	if err != nil || len(dirs) == 0 {
		return 0, fmt.Errorf("no partition directories of %s under %s (%v)", topic, dataDir, err)
	}
	var n int64
	for _, d := range dirs {
		if rest := strings.TrimPrefix(filepath.Base(d), topic+"-"); strings.ContainsFunc(rest, func(r rune) bool { return r < '0' || r > '9' }) {
			continue // another topic with this prefix
		}
		segs, err := filepath.Glob(filepath.Join(d, "*.log"))
		if err != nil {
			return 0, err
		}
		for _, s := range segs {
			fi, err := os.Stat(s)
			if err != nil {
				return 0, err
			}
			n += fi.Size()
		}
	}
	return n, nil
}

// JSON-like events: field names repeat, values come from small
// vocabularies and random numbers, so a batch compresses about 4:1 with
// zstd, like typical application events.
var (
	jsonEvents    = []string{"page_view", "add_to_cart", "checkout", "search", "login", "logout", "purchase", "refund"}
	jsonCountries = []string{"DE", "FR", "US", "GB", "NL", "ES", "IT", "PL", "SE", "JP"}
	jsonAgents    = []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
		"Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
	}
)

func jsonValue(rng *rand.Rand, i int) []byte {
	id := rng.Uint64()
	return fmt.Appendf(nil, `{"event_id":"%016x-%08x","seq":%d,"type":%q,"user":{"id":%d,"country":%q,"segment":"tier-%d"},"session":"%012x","page":"/products/%d?ref=%s","amount":%d.%02d,"currency":"EUR","ts":"2026-11-%02dT%02d:%02d:%02d.%03dZ","agent":%q,"flags":{"mobile":%t,"beta":%t}}`,
		id, rng.Uint32(), i, jsonEvents[rng.IntN(len(jsonEvents))], rng.IntN(5_000_000), jsonCountries[rng.IntN(len(jsonCountries))], rng.IntN(4),
		rng.Uint64()&0xffffffffffff, rng.IntN(100_000), jsonEvents[rng.IntN(len(jsonEvents))], rng.IntN(500), rng.IntN(100),
		1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1000), jsonAgents[rng.IntN(len(jsonAgents))], rng.IntN(3) == 0, rng.IntN(10) == 0)
}

// preloadJSON produces n JSON-like records round-robin over the partitions
// with codec and returns their bytes (key, value, headers).
func preloadJSON(ctx context.Context, addr, topic string, n, partitions int, codec string) (int64, error) {
	cl, err := workload.HarnessProducer([]string{addr}, kgo.ProducerBatchCompression(codecOf(codec)), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(13, 4))
	var failed workload.ErrOnce
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.Set(err)
		}
	}
	var logical int64
	for i := range n {
		r := &kgo.Record{
			Topic:     topic,
			Partition: int32(i % partitions),
			Key:       fmt.Appendf(nil, "user-%07d", rng.IntN(5_000_000)),
			Value:     jsonValue(rng, i),
			Headers:   []kgo.RecordHeader{{Key: "seq", Value: binary.BigEndian.AppendUint64(nil, uint64(i))}},
		}
		logical += int64(len(r.Key) + len(r.Value) + len("seq") + 8)
		cl.Produce(ctx, r, promise)
		if i%10000 == 0 {
			if err := failed.Get(); err != nil {
				return 0, fmt.Errorf("preload %s: %w", topic, err)
			}
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, err
	}
	return logical, failed.Get()
}

// cpuPerGBBytes is CPU seconds per 10^9 bytes of records.
func cpuPerGBBytes(cpu time.Duration, bytes int64) float64 {
	if bytes <= 0 {
		return 0
	}
	return cpu.Seconds() / (float64(bytes) / 1e9)
}

// renderCompressed is the report's section for the phase ("" without it).
func renderCompressed(o *options, cp map[string]map[string]compressed) string {
	if len(cp) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## (e) Compressed topics: %d JSON-like records over %d partitions, produced with zstd and with lz4\n\n", o.compressedRecords, o.partitions)
	b.WriteString("| codec | contender | records/s | MB/s | copy s | CPU s | CPU s/GB | peak RSS MiB | source on disk MiB | target on disk MiB | target / source | source broker CPU s | target broker CPU s | other CPU s | load before → after |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, codec := range compressedCodecs {
		for _, n := range o.contenders {
			r, ok := cp[n][codec]
			if !ok {
				continue
			}
			bytes := r.logical * r.windowRecords / r.records
			fmt.Fprintf(&b, "| %s | %s | %.0f | %.1f | %.2f | %.2f | %.2f | %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.1f | %s |\n",
				codec, n, r.recordsPerSec(), float64(bytes)/r.window.Seconds()/1e6, r.window.Seconds(), r.cpuWindow.Seconds(),
				cpuPerGBBytes(r.cpuWindow, bytes), mib(r.peakRSS), float64(r.srcDisk)/(1<<20), float64(r.dstDisk)/(1<<20), float64(r.dstDisk)/float64(r.srcDisk),
				r.srcWindowCPU.Seconds(), r.dstWindowCPU.Seconds(), r.otherCPU.Seconds(), r.load)
		}
	}
	b.WriteString("\nGoals (issue 13), per codec: kmirror's CPU s/GB ≤ 0.3× the limit's and ≤ 0.1× MM2's, records/s ≥ 1.5× the limit's, target on disk within 5% of the source's.\n\n")
	for _, codec := range compressedCodecs {
		k, okK := cp["kmirror"][codec]
		if !okK {
			continue
		}
		kb := k.logical * k.windowRecords / k.records
		var parts []string
		if l, ok := cp["limit"][codec]; ok {
			lb := l.logical * l.windowRecords / l.records
			parts = append(parts, fmt.Sprintf("CPU s/GB %.2f× the limit's, records/s %.2f× the limit's",
				cpuPerGBBytes(k.cpuWindow, kb)/cpuPerGBBytes(l.cpuWindow, lb), k.recordsPerSec()/l.recordsPerSec()))
		}
		if m, ok := cp["mm2"][codec]; ok {
			mb := m.logical * m.windowRecords / m.records
			parts = append(parts, fmt.Sprintf("CPU s/GB %.2f× MM2's", cpuPerGBBytes(k.cpuWindow, kb)/cpuPerGBBytes(m.cpuWindow, mb)))
		}
		parts = append(parts, fmt.Sprintf("target on disk %.3f× the source's", float64(k.dstDisk)/float64(k.srcDisk)))
		fmt.Fprintf(&b, "- %s: kmirror %s\n", codec, strings.Join(parts, "; "))
	}
	// Issue 25: exactly once keeps the source's batches.
	var eos []string
	for _, codec := range compressedCodecs {
		for _, name := range []string{"kmirror-eos", "kmirror-eos-4s"} {
			e, okE := cp[name][codec]
			if !okE {
				continue
			}
			eb := e.logical * e.windowRecords / e.records
			parts := []string{fmt.Sprintf("target on disk %.3f× the source's (goal within 1%%)", float64(e.dstDisk)/float64(e.srcDisk))}
			if l, ok := cp["limit"][codec]; ok {
				lb := l.logical * l.windowRecords / l.records
				parts = append(parts, fmt.Sprintf("CPU s/GB %.2f× the limit's (goal ≤ 0.3×)", cpuPerGBBytes(e.cpuWindow, eb)/cpuPerGBBytes(l.cpuWindow, lb)))
			}
			if k, ok := cp["kmirror"][codec]; ok {
				parts = append(parts, fmt.Sprintf("records/s %.2f× kmirror's at least once (goal ≥ 0.85×)", e.recordsPerSec()/k.recordsPerSec()))
			}
			eos = append(eos, fmt.Sprintf("- %s: %s %s\n", codec, name, strings.Join(parts, "; ")))
		}
	}
	if len(eos) > 0 {
		b.WriteString("\nGoals (issue 25), exactly once, per codec:\n\n" + strings.Join(eos, ""))
	}
	b.WriteString("\nAs the throughput phase: over the copy window; MB and GB = 10^6 / 10^9 B of key+value+headers (uncompressed). On disk: the topic's `.log` segment files summed over its partition directories on each broker (index files are preallocated sparse and left out). Source and target broker CPU: each broker over the copy window; other CPU: the rest of the machine over the phase. The source's records are produced by franz-go with the codec (linger 5ms, 1 MiB batches). Settings as in the throughput phase (see Settings), except: kmirror without `compression` (its default, `source`: batches forwarded as they are); the limit with `-codec <codec>` (its producer compresses with the codec); MM2 with `dst.producer.compression.type = <codec>`.\n\n")
	return b.String()
}
