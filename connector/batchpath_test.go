package connector

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/recordbatch"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPassthroughPipelinedFaults: the batch path keeps several batches of a
// partition in flight, and a failure among them (a retriable refusal, a
// dropped connection) loses nothing, duplicates nothing and reorders
// nothing: the target answers the batches sent after a refused one with
// OUT_OF_ORDER_SEQUENCE_NUMBER (those behind a dropped connection are not
// read), and they are sent again after it, in order.
func TestPassthroughPipelinedFaults(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	const partitions, calls, per = 2, 150, 4
	kfaketest.CreateTopic(t, src, "orders", partitions)
	// One batch per partition per call: many batches to pipeline.
	// Uncompressed, so that the target's control function can tell the
	// batches of partition 0 by their values (requests name topics by ID).
	cl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for c := range calls {
		var recs []*kgo.Record
		for p := range int32(partitions) {
			for i := c * per; i < (c+1)*per; i++ {
				recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: fmt.Appendf(nil, "a-%d-%d", p, i)})
			}
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// The target answers each batch of src.orders partition 0 after a
	// pause (so that the next ones are sent meanwhile). It refuses the
	// 20th with NOT_LEADER_FOR_PARTITION, once more batches of the
	// partition are in flight behind it, and drops the connection at the
	// 60th.
	var mirror atomic.Pointer[Mirror]
	inFlight := func() int { // batches of orders/0 sent and not settled
		m := mirror.Load()
		if m == nil {
			return 0
		}
		cp := slotCopier(m, data.TopicPartition{Topic: "orders", Partition: 0})
		if cp == nil {
			return 0
		}
		return cp.BatchesInFlight(data.TopicPartition{Topic: "orders", Partition: 0})
	}
	var mu sync.Mutex
	var seqs []int32 // first sequences of partition 0's batches, as they arrive
	refusedAt, droppedAt, behind := int32(-1), int32(-1), 0
	dst.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		var seq int32 = -1
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				var rb kmsg.RecordBatch
				if rp.Partition == 0 && bytes.Contains(rp.Records, []byte("a-0-")) && rb.ReadFrom(rp.Records) == nil {
					seq = rb.FirstSequence
				}
			}
		}
		if seq < 0 {
			return nil, nil, false
		}
		mu.Lock()
		seqs = append(seqs, seq)
		n := len(seqs)
		mu.Unlock()
		dst.SleepControl(func() { time.Sleep(5 * time.Millisecond) })
		switch n {
		case 20:
			dst.SleepControl(func() {
				for deadline := time.Now().Add(10 * time.Second); inFlight() < 2 && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
			})
			mu.Lock()
			refusedAt, behind = seq, inFlight()-1
			mu.Unlock()
			return kfaketest.RefuseProduce(req, kerr.NotLeaderForPartition.Code), nil, true
		case 60:
			mu.Lock()
			droppedAt = seq
			mu.Unlock()
			return nil, errors.New("connection dropped by the test"), true
		}
		return nil, nil, false
	})

	m, stop := runOrdersMirror(t, src, dst, func(c *Config) { c.SourceCompression = true })
	mirror.Store(m)
	t.Cleanup(stop)
	copiedExactly(t, dst, partitions, calls*per, "a")

	mu.Lock()
	defer mu.Unlock()
	// Batches reach the target in the order of their sequences, but for
	// the failed ones sent again.
	for i := 1; i < len(seqs); i++ {
		if seqs[i] < seqs[i-1] && seqs[i] != refusedAt && seqs[i] != droppedAt {
			t.Errorf("batch with sequence %d arrived after %d (%v): the requests were not written in order", seqs[i], seqs[i-1], seqs[max(0, i-4):min(len(seqs), i+4)])
		}
	}
	if behind < 1 {
		t.Errorf("no batch of partition 0 was in flight behind the refused one (waited 10s for one): batches are not pipelined")
	}
	for _, f := range []struct {
		what string
		at   int32
	}{{"refused", refusedAt}, {"dropped", droppedAt}} {
		if f.at < 0 {
			t.Fatalf("the %s batch never came: %d batches of partition 0 seen", f.what, len(seqs))
		}
		// The failed batch is sent again; after a refusal, the batches
		// sent behind it came first (a dropped connection loses them
		// unread).
		i := slices.Index(seqs, f.at)
		j := slices.Index(seqs[i+1:], f.at)
		if j < 0 {
			t.Fatalf("the %s batch (sequence %d) was not sent again: %v", f.what, f.at, seqs)
		}
		if j == 0 && f.what == "refused" {
			t.Errorf("the %s batch (sequence %d) was sent again right after: no batch was in flight behind it (%v)", f.what, f.at, seqs[i:min(len(seqs), i+8)])
		}
		t.Logf("%s batch: sequence %d, followed by %v", f.what, f.at, seqs[i:min(len(seqs), i+2+j)])
	}
}

// TestUndecodableBatchNeverSkipped: a source batch that cannot be decoded
// (compressed, its payload garbage, its CRC valid) is never skipped. The
// record path stops the partition there: the records before it are
// copied, the position stays at it and franz-go's error is logged, every
// fetch. The batch path does the same where it decodes, and forwards it as
// it is where it does not: a target that checks it (Kafka decompresses
// what it is sent) refuses it, and the partition falls back to the record
// path, stopped there; one that does not (kfake) keeps it, and what
// follows is copied after it. The batch path's fallback (a fetch's records
// decoded by franz-go, here for an aborted transaction in it) used to move
// the position past the whole fetch while franz-go returned only the
// records before the bad batch, with no error: the batch and those after
// it were never fetched again.
func TestUndecodableBatchNeverSkipped(t *testing.T) {
	for _, tc := range []struct {
		name             string
		batchPath        bool
		targetRefuses    bool
		warning          string
		wantTargetValues []string // from offset 0; the undecodable batch reads as nothing
	}{
		{"record_path", false, false, "fetch from source failed", []string{"a-0-0", "a-0-1", "a-0-2"}},
		{"batch_path_target_refuses", true, true, "fetch from source failed", []string{"a-0-0", "a-0-1", "a-0-2"}},
		{"batch_path_target_keeps", true, false, "", []string{"a-0-0", "a-0-1", "a-0-2", "c-0-0", "c-0-1", "c-0-2", "d-0-0", "d-0-1", "d-0-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src, dst := kfaketest.Clusters(t)
			kfaketest.CreateTopic(t, src, "orders", 1)
			// An aborted transaction (offsets 0-1, its marker 2) makes the
			// batch path decode the fetch that holds it (the fallback),
			// with the batches after it: a-* (3-5), the undecodable batch
			// (6-8), c-* (9-11).
			produceTxn(t, src, "orders", []string{"x-0-0", "x-0-1"}, false)
			produceOrders(t, src, 1, 3, "a")
			bad := undecodableBatch(t)
			produceRawBatch(t, src, "orders", bad)
			var cs []*kgo.Record
			for i := range 3 {
				cs = append(cs, &kgo.Record{Value: fmt.Appendf(nil, "c-0-%d", i), Timestamp: time.Now()})
			}
			produceRawBatch(t, src, "orders", rawBatch(t, cs, 0))
			if tc.targetRefuses {
				payload := bad[recordbatch.HeaderLen:]
				dst.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
					dst.KeepControl()
					req := kr.(*kmsg.ProduceRequest)
					for _, rt := range req.Topics {
						for _, rp := range rt.Partitions {
							if bytes.Contains(rp.Records, payload) {
								return kfaketest.RefuseProduce(req, kerr.CorruptMessage.Code), nil, true
							}
						}
					}
					return nil, nil, false
				})
			}

			logs := &kfaketest.LockedBuffer{}
			m, stop := runOrdersMirror(t, src, dst, func(c *Config) {
				c.SourceCompression = tc.batchPath
				c.Logger = slog.New(slog.NewTextHandler(logs, nil))
			})
			t.Cleanup(stop)
			adm := kadm.NewClient(kfaketest.Client(t, dst))
			kfaketest.WaitFor(t, func() bool { return targetRecords(adm, "src.orders") >= 3 }, "the records before the undecodable batch on the target")
			produceOrders(t, src, 1, 3, "d") // offsets 12-14
			ps := slotCopier(m, data.TopicPartition{Topic: "orders", Partition: 0}).Partition(data.TopicPartition{Topic: "orders", Partition: 0})

			if tc.warning == "" {
				// a-* (0-2), the undecodable batch as it is (3-5), c-*, d-*.
				kfaketest.WaitFor(t, func() bool { return targetRecords(adm, "src.orders") >= 12 }, "a-*, the undecodable batch, c-* and d-* on the target")
				if got := targetValuesFrom(t, dst, 6); fmt.Sprint(got) != fmt.Sprint(tc.wantTargetValues[3:]) {
					t.Fatalf("target holds %v after the undecodable batch, want %v", got, tc.wantTargetValues[3:])
				}
				return
			}
			kfaketest.WaitFor(t, func() bool { return logs.Count(tc.warning) > 0 }, fmt.Sprintf("the warning %q", tc.warning))
			// Nothing past the undecodable batch is ever copied, and the
			// position stays at it: a skip shows as d-* copied (and the
			// position past them) with c-* missing.
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if n := targetRecords(adm, "src.orders"); n != 3 {
					t.Fatalf("the target holds %d records, want the 3 before the undecodable batch (offset 6): %v", n, targetValuesFrom(t, dst, 0))
				}
				if acked, _, _ := ps.Status(); acked > 6 {
					t.Fatalf("position %d: moved past the undecodable batch at offset 6", acked)
				}
			}
			if got := targetValuesFrom(t, dst, 0); fmt.Sprint(got) != fmt.Sprint(tc.wantTargetValues) {
				t.Fatalf("target holds %v, want %v", got, tc.wantTargetValues)
			}
		})
	}
}

// targetValuesFrom reads the values of src.orders partition 0 on the
// target from offset from to its end.
func targetValuesFrom(t *testing.T, dst *kfake.Cluster, from int64) []string {
	t.Helper()
	end := kfaketest.EndOffsets(t, dst, "src.orders")[0]
	cl := kfaketest.Client(t, dst, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"src.orders": {0: kgo.NewOffset().At(from)}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	for pos := from; pos < end; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read the target from %d: at %d of %d: %v", from, pos, end, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, string(r.Value))
			pos = r.Offset + 1
		})
	}
	return out
}

// rawBatch builds a batch of recs as a client produces it (offset deltas
// 0..n-1, no producer), compressed with codec.
func rawBatch(t *testing.T, recs []*kgo.Record, codec int8) []byte {
	t.Helper()
	b, err := recordbatch.Encode(recs, codec, recordbatch.Compressors()[codec])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// undecodableBatch is a zstd batch of three records whose compressed
// payload is garbage and whose CRC is valid: only decompressing it tells
// (a broker that does not decompress what it is sent, like kfake, keeps
// it).
func undecodableBatch(t *testing.T) []byte {
	t.Helper()
	b := rawBatch(t, []*kgo.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}}, 4)
	for i := recordbatch.HeaderLen; i < len(b); i++ {
		b[i] = byte(i * 7)
	}
	binary.BigEndian.PutUint32(b[recordbatch.OffCRC:], crc32.Checksum(b[recordbatch.OffAttrs:], recordbatch.CRCTable))
	if _, err := kgo.DefaultDecompressor().Decompress(b[recordbatch.HeaderLen:], kgo.CodecZstd); err == nil {
		t.Fatal("the garbage payload decompresses")
	}
	return b
}

// produceRawBatch appends batch to partition 0 of topic as it is.
func produceRawBatch(t *testing.T, c *kfake.Cluster, topic string, batch []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := kfaketest.Client(t, c)
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, topics[topic].ID // Produce v13+ names topics by ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("produce a raw batch: %v", err)
	}
}

// fetchLog records the Fetch requests a kfake cluster receives, and can
// answer the next one that continues a session with an error.
type fetchLog struct {
	mu       sync.Mutex
	reqs     []fetchSeen
	failNext int16 // an error code for the next incremental fetch; 0: none
}

type fetchSeen struct {
	at                    time.Time
	sessionID, epoch      int32
	partitions, forgotten int
}

func watchFetches(c *kfake.Cluster) *fetchLog {
	l := &fetchLog{}
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		seen := fetchSeen{at: time.Now(), sessionID: req.SessionID, epoch: req.SessionEpoch}
		for _, t := range req.Topics {
			seen.partitions += len(t.Partitions)
		}
		for _, t := range req.ForgottenTopics {
			seen.forgotten += len(t.Partitions)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.reqs = append(l.reqs, seen)
		if code := l.failNext; code != 0 && req.SessionEpoch > 0 {
			l.failNext = 0
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			resp.ErrorCode = code
			return resp, nil, true
		}
		return nil, nil, false
	})
	return l
}

func (l *fetchLog) since(t time.Time) []fetchSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []fetchSeen
	for _, r := range l.reqs {
		if !r.at.Before(t) {
			out = append(out, r)
		}
	}
	return out
}

func (l *fetchLog) fail(code int16) {
	l.mu.Lock()
	l.failNext = code
	l.mu.Unlock()
}

// runBatchPathMirror runs a mirror of "orders" on the batch path
// (producer.compression: source) until the test ends, with one slot: one
// copier fetches every partition, in one fetch session per broker.
func runBatchPathMirror(t *testing.T, src, dst *kfake.Cluster) {
	t.Helper()
	t.Cleanup(startOrdersMirror(t, src, dst, func(c *Config) {
		c.SourceCompression = true
		c.Cluster = &ClusterConfig{Slots: 1, SessionTimeout: 6 * time.Second, CommitInterval: data.DefaultCommitInterval}
	}))
}

// targetValues reads every record of topic on the target: values by
// partition, in offset order.
func targetValues(t *testing.T, dst *kfake.Cluster, topic string, partitions int32) map[int32][]string {
	t.Helper()
	offsets := make(map[int32]kgo.Offset)
	for p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl := kfaketest.Client(t, dst, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	ends := kfaketest.EndOffsets(t, dst, topic)
	var want int64
	for _, e := range ends {
		want += e
	}
	out := make(map[int32][]string)
	var n int64
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d target records: %v", n, want, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], string(r.Value))
			n++
		})
	}
	return out
}

// copiedExactly waits until the target of "orders" holds per records in
// each of its partitions, then checks they are the source's, in order,
// each once.
func copiedExactly(t *testing.T, dst *kfake.Cluster, partitions int32, per int, tags ...string) {
	t.Helper()
	adm := kadm.NewClient(kfaketest.Client(t, dst))
	want := int64(partitions) * int64(per*len(tags))
	kfaketest.WaitFor(t, func() bool { return targetRecords(adm, "src.orders") >= want }, fmt.Sprintf("%d records on the target", want))
	got := targetValues(t, dst, "src.orders", partitions)
	for p := range partitions {
		var exp []string
		for _, tag := range tags {
			for i := range per {
				exp = append(exp, fmt.Sprintf("%s-%d-%d", tag, p, i))
			}
		}
		if fmt.Sprint(got[p]) != fmt.Sprint(exp) {
			t.Fatalf("target partition %d holds %d records %v, want the source's %d", p, len(got[p]), got[p], len(exp))
		}
	}
}

// TestFetchSessionIdle: the batch path fetches in a fetch session, so an
// idle worker's fetches name no partition (at 100,000 partitions, naming
// every one twice a second was most of an idle worker's CPU), and records
// that arrive later are still copied, each once.
func TestFetchSessionIdle(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	const partitions = 8
	kfaketest.CreateTopic(t, src, "orders", partitions)
	fetches := watchFetches(src)
	produceOrders(t, src, partitions, 20, "a")
	runBatchPathMirror(t, src, dst)
	copiedExactly(t, dst, partitions, 20, "a")

	// Once the partitions whose records were taken have joined again,
	// every fetch is a session's naming nothing, for as long as nothing
	// changes.
	idleShaped := func(f fetchSeen) bool {
		return f.sessionID != 0 && f.epoch > 0 && f.partitions == 0 && f.forgotten == 0
	}
	var idleFrom time.Time
	kfaketest.WaitFor(t, func() bool {
		fs := fetches.since(time.Time{})
		if last := fs[len(fs)-1]; idleShaped(last) {
			idleFrom = last.at
			return true
		}
		return false
	}, "a fetch naming no partition")
	time.Sleep(4 * data.FetchWait)
	idle := fetches.since(idleFrom)
	if len(idle) < 2 {
		t.Fatalf("%d fetches in %v of idling, want the long polls to go on", len(idle), 4*data.FetchWait)
	}
	for _, f := range idle {
		if !idleShaped(f) {
			t.Fatalf("idle fetch %+v: want a session's (id and epoch set) naming no partition", f)
		}
	}

	produceOrders(t, src, partitions, 20, "b")
	copiedExactly(t, dst, partitions, 20, "a", "b")
}

// TestFetchSessionEvicted: a broker that no longer holds a session
// (evicted from its cache, or restarted) answers FETCH_SESSION_ID_NOT_FOUND;
// the batch path starts a new session with a full fetch of its partitions
// and copies on, nothing lost and nothing twice.
func TestFetchSessionEvicted(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	const partitions = 4
	kfaketest.CreateTopic(t, src, "orders", partitions)
	fetches := watchFetches(src)
	produceOrders(t, src, partitions, 10, "a")
	runBatchPathMirror(t, src, dst)
	copiedExactly(t, dst, partitions, 10, "a")

	before := time.Now()
	fetches.fail(kerr.FetchSessionIDNotFound.Code)
	kfaketest.WaitFor(t, func() bool {
		fetches.mu.Lock()
		defer fetches.mu.Unlock()
		return fetches.failNext == 0
	}, "an incremental fetch to be refused")
	produceOrders(t, src, partitions, 10, "b")
	copiedExactly(t, dst, partitions, 10, "a", "b")
	// The broker's sessions are its fetch lanes' (data.FetchLanes): a
	// topic's partitions take them in turn, so the refused one held half.
	full := false
	for _, f := range fetches.since(before) {
		if f.sessionID == 0 && f.epoch == 0 && f.partitions == partitions/data.FetchLanes {
			full = true
		}
	}
	if !full {
		t.Fatalf("no full fetch of the refused session's %d partitions after the refusal: %+v", partitions/data.FetchLanes, fetches.since(before))
	}
}
