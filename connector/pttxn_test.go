package connector

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/recordbatch"
	"github.com/kmirror/kmirror/internal/kfaketest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/e2e/kafkatest/faultproxy"
	"github.com/kmirror/kmirror/filters"
)

// markerType is a control batch's marker: 0 abort, 1 commit.
func markerType(t *testing.T, b []byte) int16 {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	recs, err := kgo.DefaultDecompressor().Decompress(rb.Records, kgo.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	// One record: length, attributes, timestamp and offset deltas, then
	// the key (version int16, type int16).
	var r kmsg.Record
	if err := r.ReadFrom(recs); err != nil {
		t.Fatal(err)
	}
	return int16(binary.BigEndian.Uint16(r.Key[2:]))
}

// eosBatchWorker runs a one-slot exactly-once worker with the batch path
// (producer.compression: source) copying the topics named in topics.
func eosBatchWorker(t *testing.T, src, dst *kfake.Cluster, topics string, tune ...func(*Config)) *clusterWorker {
	return startClusterWorker(t, src, dst, 1, append([]func(*Config){func(c *Config) {
		c.SourceCompression = true
		c.Filters = []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll(topics)}}
	}}, tune...)...)
}

// TestTxnBatchPathForwardsCompressed: a transactional slot forwards its
// zstd and lz4 source batches as they are, inside its transactions: each
// target data batch has its source batch's codec, record count and
// compressed bytes, with the transactional bit set and the slot's
// producer ID; read_committed sees every record once, in order. Before,
// exactly_once decoded every record and produced it again through
// franz-go, uncompressed.
func TestTxnBatchPathForwardsCompressed(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	const partitions, calls, per = 2, 20, 25
	codecs := map[string]int8{"orders-zstd": 4, "orders-lz4": 3} // batch attribute codecs
	for topic, codec := range codecs {
		cc := map[int8]kgo.CompressionCodec{4: kgo.ZstdCompression(), 3: kgo.Lz4Compression()}[codec]
		kfaketest.CreateTopic(t, src, topic, partitions)
		cl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(cc))
		for c := range calls {
			var recs []*kgo.Record
			for p := range int32(partitions) {
				for i := c * per; i < (c+1)*per; i++ {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d-%s", topic, p, i, bytes.Repeat([]byte("x"), 40))})
				}
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Kafka refuses transactional batches in a Produce request that names
	// no transactional ID (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); kfake
	// does not check, so the test does.
	var unnamed atomic.Int32
	dst.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		if req := kr.(*kmsg.ProduceRequest); len(req.Topics) > 0 && req.Topics[0].Topic != "" && req.Topics[0].Topic[:4] == "src." &&
			(req.TransactionID == nil || !strings.HasPrefix(*req.TransactionID, "kmirror.m.worker-")) {
			unnamed.Add(1)
		}
		return nil, nil, false
	})
	w := eosBatchWorker(t, src, dst, "orders-.*")
	for topic := range codecs {
		for p := range int32(partitions) {
			var want []string
			for i := range calls * per {
				want = append(want, fmt.Sprintf("%s-%d-%d-%s", topic, p, i, bytes.Repeat([]byte("x"), 40)))
			}
			kfaketest.WaitFor(t, func() bool { return len(kfaketest.ReadCommitted(t, dst, "src."+topic, p)) >= len(want) }, fmt.Sprintf("%s/%d copied", topic, p))
			if got := kfaketest.ReadCommitted(t, dst, "src."+topic, p); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s/%d: read_committed holds %d records, want the %d source records once each, in order", topic, p, len(got), len(want))
			}
		}
	}
	w.shutdown(t) // every transaction ended: the logs are complete
	if n := unnamed.Load(); n > 0 {
		t.Fatalf("%d Produce requests to the target topics named no transactional ID, or another one than the worker's", n)
	}

	for topic, codec := range codecs {
		for p := range int32(partitions) {
			srcBatches := kfaketest.RawLog(t, src, topic, p)
			var data [][]byte
			var pid int64 = -1
			for _, b := range kfaketest.RawLog(t, dst, "src."+topic, p) {
				h, err := recordbatch.Parse(b)
				if err != nil {
					t.Fatal(err)
				}
				if h.Control() {
					if m := markerType(t, b); m != 1 {
						t.Fatalf("%s/%d: a transaction marker of type %d: nothing was to abort", topic, p, m)
					}
					continue
				}
				if !h.Transactional() {
					t.Fatalf("%s/%d: a target batch at %d without the transactional bit", topic, p, h.Base)
				}
				if pid >= 0 && h.ProducerID != pid {
					t.Fatalf("%s/%d: target batches of producers %d and %d: one slot producer wrote them", topic, p, pid, h.ProducerID)
				}
				pid = h.ProducerID
				data = append(data, b)
			}
			if len(data) != len(srcBatches) {
				t.Fatalf("%s/%d: %d data batches on the target, %d at the source", topic, p, len(data), len(srcBatches))
			}
			for i, b := range data {
				s := srcBatches[i]
				hs, _ := recordbatch.Parse(s)
				hd, _ := recordbatch.Parse(b)
				if hd.Codec() != codec || hd.Codec() != hs.Codec() || hd.Count != hs.Count {
					t.Fatalf("%s/%d batch %d: codec %d, %d records; the source's: codec %d, %d records", topic, p, i, hd.Codec(), hd.Count, hs.Codec(), hs.Count)
				}
				if !bytes.Equal(b[recordbatch.HeaderLen:], s[recordbatch.HeaderLen:]) {
					t.Fatalf("%s/%d batch %d: the compressed records differ from the source's: decoded and encoded again", topic, p, i)
				}
			}
		}
	}
}

// TestTxnBatchPathAbortEnds: the target refuses a batch of the batch path
// after an earlier batch of the same transaction was appended, before
// franz-go wrote anything in it (the progress is written at the commit).
// The transaction aborts: the appended batch is marked aborted on the
// target (an abort marker follows it), the partition is read again from
// its committed position, and read_committed holds every record once.
// franz-go sends no EndTxn for a transaction it added no partition to:
// before endRaw, the coordinator's transaction stayed open, and the next
// commit committed the aborted batch with the rest (its records twice).
func TestTxnBatchPathAbortEnds(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	kfaketest.CreateTopic(t, src, "orders", 1)
	cl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	var want []string
	for _, tag := range []string{"a", "b"} { // two source batches
		var recs []*kgo.Record
		for i := range 5 {
			v := fmt.Sprintf("%s-0-%d", tag, i)
			recs = append(recs, &kgo.Record{Topic: "orders", Value: []byte(v)})
			want = append(want, v)
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The second Produce of the batch path (its second batch: one is in
	// flight until the first is acknowledged) is refused once.
	var produces, refused atomic.Int32
	dst.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		if len(req.Topics) == 0 || req.Topics[0].Topic != "src.orders" || refused.Load() > 0 {
			return nil, nil, false
		}
		if produces.Add(1) == 2 {
			refused.Add(1)
			return kfaketest.RefuseProduce(req, kerr.PolicyViolation.Code), nil, true
		}
		return nil, nil, false
	})
	eosBatchWorker(t, src, dst, "orders")
	kfaketest.WaitFor(t, func() bool { return refused.Load() == 1 }, "the refusal")
	kfaketest.WaitFor(t, func() bool { return len(kfaketest.ReadCommitted(t, dst, "src.orders", 0)) >= len(want) }, "every record committed")
	time.Sleep(300 * time.Millisecond) // a later commit of the aborted batch would show now
	if got := kfaketest.ReadCommitted(t, dst, "src.orders", 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed holds %v, want the source records once each, in order: %v", got, want)
	}
	log := kfaketest.RawLog(t, dst, "src.orders", 0)
	if len(log) < 2 {
		t.Fatalf("the target holds %d batches", len(log))
	}
	if h, _ := recordbatch.Parse(log[0]); h.Control() || !h.Transactional() {
		t.Fatalf("the target's first batch is not the transactional data batch that was appended: %+v", h)
	}
	if h, _ := recordbatch.Parse(log[1]); !h.Control() || markerType(t, log[1]) != 0 {
		t.Fatalf("the batch after the aborted one is not an abort marker (%+v): its transaction was never aborted", h)
	}
}

// TestTxnBatchPathUnknownSequence: the target appends a batch of the
// batch path, but its answer is lost (replaced by UNKNOWN_SERVER_ERROR).
// The broker now holds the batch's sequence while kmirror cannot know it
// does: sending the batch again at the same epoch would be answered as a
// duplicate with the offsets of the aborted copy, and its records would
// be lost to read_committed consumers. The transaction aborts and the slot
// is taken over again: the fence's new epoch starts the sequences at 0,
// and every record is committed once.
func TestTxnBatchPathUnknownSequence(t *testing.T) {
	t.Parallel()
	r := newTxnFaultRig(t, 1)
	var produces, lost atomic.Int32
	r.proxy.SetHook(kmsg.Produce, func(req kmsg.Request, resp kmsg.Response) faultproxy.Action {
		pr := resp.(*kmsg.ProduceResponse)
		if len(pr.Topics) == 0 || pr.Topics[0].Topic != "src.orders" || pr.Topics[0].Partitions[0].ErrorCode != 0 || lost.Load() > 0 {
			return faultproxy.Pass
		}
		if produces.Add(1) == 2 {
			lost.Add(1)
			pr.Topics[0].Partitions[0].ErrorCode = kerr.UnknownServerError.Code
		}
		return faultproxy.Pass
	})
	for range 3 { // three source batches
		r.produce(5)
	}
	r.start(func(c *Config) { c.SourceCompression = true })
	kfaketest.WaitFor(t, func() bool { return lost.Load() == 1 }, "an answer lost")
	r.exactlyOnce("after a batch whose answer was lost")
}

// TestTxnBatchPathLeavesForRecordPath: the target refuses every batch the
// batch path forwards (here: each zstd batch, as INVALID_RECORD, a refusal
// the record path's own batches may not meet). The partition takes the
// record path. franz-go would write it from sequence 0 at the epoch whose
// sequences the batch path used, so the slot is taken over again first,
// and its next copier (a new epoch) starts the partition on the record
// path: every record is committed once.
func TestTxnBatchPathLeavesForRecordPath(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	kfaketest.CreateTopic(t, src, "orders", 1)
	cl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	var want []string
	for c := range 3 {
		var recs []*kgo.Record
		for i := range 5 {
			v := fmt.Sprintf("r-%d-%s", 5*c+i, bytes.Repeat([]byte("x"), 200)) // compressible: kgo keeps zstd
			recs = append(recs, &kgo.Record{Topic: "orders", Value: []byte(v)})
			want = append(want, v)
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var refused atomic.Int32
	dst.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == "src.orders" && len(rp.Records) > recordbatch.HeaderLen && rp.Records[recordbatch.OffAttrs+1]&recordbatch.AttrCodecMask == 4 {
					refused.Add(1)
					return kfaketest.RefuseProduce(req, kerr.InvalidRecord.Code), nil, true
				}
			}
		}
		return nil, nil, false
	})
	w := eosBatchWorker(t, src, dst, "orders")
	kfaketest.WaitFor(t, func() bool { return len(kfaketest.ReadCommitted(t, dst, "src.orders", 0)) >= len(want) }, "every record committed")
	if got := kfaketest.ReadCommitted(t, dst, "src.orders", 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed holds %v, want the source records once each, in order: %v", got, want)
	}
	if refused.Load() == 0 {
		t.Fatal("no batch of the batch path was refused")
	}
	if !w.m.slots.recordPath.Has(data.TopicPartition{Topic: "orders", Partition: 0}) {
		t.Fatal("the partition is not on the record path")
	}
	ps := w.m.slots.Partition(data.TopicPartition{Topic: "orders", Partition: 0})
	ps.Mu.Lock()
	defer ps.Mu.Unlock()
	if ps.OnBatchPath() {
		t.Fatal("the slot's copier copies the partition on the batch path")
	}
}
