//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// passthroughMetrics returns the batches written by path and the source
// batches that took the record path, by reason.
func passthroughMetrics(t testing.TB, addr string) (forwarded, records float64, fallbacks map[string]float64) {
	t.Helper()
	forwarded = mustScrapeMetric(t, addr, "kmirror_batches_total", map[string]string{"path": "passthrough"})
	records = mustScrapeMetric(t, addr, "kmirror_batches_total", map[string]string{"path": "records"})
	fallbacks = map[string]float64{}
	for _, reason := range []string{"aborted", "straddle", "offset_gaps", "log_append_time", "malformed", "target_refused"} {
		fallbacks[reason] = mustScrapeMetric(t, addr, "kmirror_passthrough_fallbacks_total", map[string]string{"reason": reason})
	}
	return forwarded, records, fallbacks
}

// TestPassthroughCodecs: with the default producer.compression (source),
// topics produced with zstd, lz4, snappy and gzip reach the target
// byte-identical (key, value, nil vs empty, headers, timestamps, at the
// same offsets), every target batch keeps its source batch's codec, and the
// batches went the pass-through path (a silent fallback to decoding fails
// the test).
func TestPassthroughCodecs(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 3})
		codecs := map[string]kgo.CompressionCodec{
			"zstd": kgo.ZstdCompression(), "lz4": kgo.Lz4Compression(),
			"snappy": kgo.SnappyCompression(), "gzip": kgo.GzipCompression(),
		}
		codecIDs := map[string]uint8{"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
		want := map[string]map[int32][]*kgo.Record{}
		for name, codec := range codecs {
			topic := e.topic("codec-" + name)
			createTopic(t, e.srcCl, topic, 2, nil)
			cl := newClient(t, e.src.Addrs(), kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(20*time.Millisecond))
			recs := richRecords(topic, 2, 600)
			produce(t, cl, recs...)
			want[topic] = byPartition(recs)
		}

		w := e.startWorker(e.writeConfig(e.defaultConfig()))
		addr := w.httpAddr(t)
		for name := range codecs {
			topic := e.topic("codec-" + name)
			got := e.waitTargetAtLeast(45*time.Second, "src."+topic, want[topic])
			src, err := readTopic(ctxTimeout(t, 30*time.Second), e.src.Addrs(), topic)
			if err != nil {
				t.Fatal(err)
			}
			compressed := 0
			for p := int32(0); p < 2; p++ {
				if d := diffRecords(p, want[topic][p], got[p]); d != "" {
					t.Errorf("%s: target differs from the source:\n%s", name, d)
				}
				for i, r := range src[p] {
					if i >= len(got[p]) {
						break
					}
					g := got[p][i]
					if g.Offset != r.Offset {
						t.Errorf("%s/%d: record %d at target offset %d, source offset %d", name, p, i, g.Offset, r.Offset)
					}
					if g.Attrs.CompressionType() != r.Attrs.CompressionType() {
						t.Fatalf("%s/%d offset %d: target batch codec %d, source batch codec %d", name, p, r.Offset, g.Attrs.CompressionType(), r.Attrs.CompressionType())
					}
					if r.Attrs.CompressionType() == codecIDs[name] {
						compressed++
					}
				}
			}
			if compressed == 0 {
				t.Errorf("%s: no source record in a %s batch: the test proves nothing", name, name)
			}
		}
		forwarded, records, fallbacks := passthroughMetrics(t, addr)
		t.Logf("batches forwarded %v, re-encoded %v, fallbacks %v", forwarded, records, fallbacks)
		if forwarded == 0 || records != 0 {
			t.Errorf("kmirror_batches_total: passthrough %v, records %v; want every batch forwarded", forwarded, records)
		}
		for reason, n := range fallbacks {
			if n != 0 {
				t.Errorf("kmirror_passthrough_fallbacks_total{reason=%q} = %v, want 0", reason, n)
			}
		}
	})
}

// TestPassthroughAbortedTransactions: a transactional source (committed,
// plain, aborted, committed) copied with the default producer.compression:
// no aborted record is visible on the target, committed and plain ones are,
// in order; the responses holding the aborted transaction took the record
// path (reason aborted), later plain batches passed through.
func TestPassthroughAbortedTransactions(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		topic := e.topic("payments")
		createTopic(t, e.srcCl, topic, 2, nil)
		before := produceTransactions(t, e.src.Addrs(), topic, "before", 2)

		w := e.startWorker(e.writeConfig(e.defaultConfig()))
		addr := w.httpAddr(t)
		e.waitTargetValues(45*time.Second, "src."+topic, before)
		e.waitMetric(addr, "kmirror_passthrough_fallbacks_total", map[string]string{"reason": "aborted"}, 30*time.Second, "> 0", func(v float64) bool { return v > 0 })

		after, wantAfter := seqRecords(topic, "after", 2, 50)
		produce(t, newClient(t, e.src.Addrs(), kgo.ProducerBatchCompression(kgo.ZstdCompression())), after...)
		e.waitTargetValues(45*time.Second, "src."+topic, appendWant(before, wantAfter))
		e.waitMetric(addr, "kmirror_batches_total", map[string]string{"path": "passthrough"}, 30*time.Second, "> 0", func(v float64) bool { return v > 0 })

		// A committed transaction after the aborted one: its batches are
		// forwarded (transactional bit cleared; the target would refuse a
		// transactional batch outside a transaction), never refused.
		before2 := mustScrapeMetric(t, addr, "kmirror_batches_total", map[string]string{"path": "passthrough"})
		txCl := newClient(t, e.src.Addrs(), kgo.TransactionalID("e2e-pt-"+topic), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
		if err := txCl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		committed, wantCommitted := seqRecords(topic, "committed-last", 2, 30)
		if err := txCl.ProduceSync(ctxTimeout(t, 30*time.Second), committed...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txCl.EndTransaction(ctxTimeout(t, 30*time.Second), kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		e.waitTargetValues(45*time.Second, "src."+topic, appendWant(appendWant(before, wantAfter), wantCommitted))
		e.waitMetric(addr, "kmirror_batches_total", map[string]string{"path": "passthrough"}, 30*time.Second, fmt.Sprintf("> %v", before2), func(v float64) bool { return v > before2 })
		forwarded, records, fallbacks := passthroughMetrics(t, addr)
		if fallbacks["target_refused"] != 0 {
			t.Errorf("kmirror_passthrough_fallbacks_total{reason=target_refused} = %v, want 0", fallbacks["target_refused"])
		}
		t.Logf("batches forwarded %v, re-encoded %v, fallbacks %v", forwarded, records, fallbacks)
		if records == 0 {
			t.Errorf("kmirror_batches_total{path=records} = 0: the aborted transaction's fetch should have been decoded")
		}
	})
}

// TestPassthroughTargetRefuses: a target topic whose max.message.bytes is
// smaller than the source's batches refuses them; the partition falls
// back to the record path (batches of producer.batch_max_bytes) and every
// record arrives, in order, nothing skipped; the fallback is counted
// (reason target_refused) and the record path's batches too.
func TestPassthroughTargetRefuses(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		topic := e.topic("big")
		createTopic(t, e.srcCl, topic, 1, nil)
		createTopic(t, e.dstCl, "src."+topic, 1, map[string]*string{"max.message.bytes": kmsg.StringPtr("20000")})
		rng := rand.New(rand.NewPCG(1, 2))
		var recs []*kgo.Record
		want := map[int32][]string{}
		for i := range 200 {
			v := make([]byte, 500)
			for j := range v {
				v[j] = byte(rng.Uint32()) // incompressible: the batch stays ~100 KB
			}
			v = append([]byte(fmt.Sprintf("r%03d-", i)), v...)
			recs = append(recs, &kgo.Record{Topic: topic, Value: v})
			want[0] = append(want[0], string(v))
		}
		produce(t, newClient(t, e.src.Addrs(), kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerLinger(50*time.Millisecond)), recs...)

		cfg := e.kmConfigFor()
		cfg.Mirrors[0].Producer = map[string]any{"batch_max_bytes": 8192}
		w := e.startWorker(e.kmWriteConfig(cfg))
		addr := w.httpAddr(t)
		e.waitTargetValues(60*time.Second, "src."+topic, want)
		forwarded, records, fallbacks := passthroughMetrics(t, addr)
		t.Logf("batches forwarded %v, record path %v, fallbacks %v", forwarded, records, fallbacks)
		if fallbacks["target_refused"] == 0 || records == 0 {
			t.Errorf("want the refused batch counted (target_refused %v) and the record path taken (records %v)", fallbacks["target_refused"], records)
		}
	})
}
