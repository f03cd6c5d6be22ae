package connector

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/kmirror/kmirror/connector/recordbatch"
	"hash/crc32"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPassthroughKeepsTopicID: the batch path never follows a topic that
// was deleted and recreated under the same name to its new ID (it would
// copy the new topic's records into the old one's target before the
// control plane has seen the change); once the copier purges the topic, a
// new assignment meets the new ID.
func TestPassthroughKeepsTopicID(t *testing.T) {
	src, _ := testClusters(t)
	cl := newClient(t, src)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	create := func() {
		t.Helper()
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, "phoenix")
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	create()
	p := newPassthrough(&Copier{}, nil)
	p.src = cl
	tp := TopicPartition{"phoenix", 0}
	if _, err := p.leader(ctx, cl, &p.srcMeta, tp); err != nil {
		t.Fatalf("leader of the new topic: %v", err)
	}
	first := p.topicID(&p.srcMeta, "phoenix")

	if _, err := adm.DeleteTopics(ctx, "phoenix"); err != nil {
		t.Fatal(err)
	}
	create()
	p.forgetLeaders(&p.srcMeta, "phoenix") // as a failed fetch does
	_, err := p.leader(ctx, cl, &p.srcMeta, tp)
	if !errors.Is(err, errTopicRecreated) {
		t.Fatalf("leader after the topic was recreated: err = %v, want %v", err, errTopicRecreated)
	}
	if got := p.topicID(&p.srcMeta, "phoenix"); got != first {
		t.Fatalf("topic ID changed to %x (was %x): the batch path adopted the recreated topic", got, first)
	}

	p.purge([]string{"phoenix"}, nil)
	if _, err := p.leader(ctx, cl, &p.srcMeta, tp); err != nil {
		t.Fatalf("leader after purge: %v", err)
	}
	if got := p.topicID(&p.srcMeta, "phoenix"); got == first || got == ([16]byte{}) {
		t.Fatalf("after purge the topic ID is %x, want the new topic's (old %x)", got, first)
	}
}

// TestPassthroughIdleFetchNotHandedOver: an empty fetch is handed to the
// poll loop (for the lag) only when its watermarks moved: with 100,000
// idle partitions, handing every empty fetch over was most of the work.
func TestPassthroughIdleFetchNotHandedOver(t *testing.T) {
	p := newPassthrough(&Copier{}, nil)
	tp := TopicPartition{"idle", 0}
	p.add(tp, 5, p.newGen())
	empty := func(hw, lso int64) kmsg.FetchResponseTopicPartition {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset = hw, lso
		return rp
	}
	for i, step := range []struct {
		hw, lso int64
		want    bool
	}{
		{5, 5, true},  // the first: the lag is known from it
		{5, 5, false}, // nothing moved
		{7, 5, true},  // records not yet stable
		{7, 7, true},  // a commit marker
		{7, 7, false},
	} {
		p.mu.Lock()
		gen := p.parts[tp].gen
		p.mu.Unlock()
		p.fetchRequest(1, []ptWant{{tp, 5, gen}}) // joins broker 1's session, unless still in it
		if got := p.accept(1, tp, empty(step.hw, step.lso)); got != step.want {
			t.Fatalf("step %d (hw %d, lso %d): handed over = %v, want %v", i, step.hw, step.lso, got, step.want)
		}
		if got := len(p.take()); got != map[bool]int{true: 1, false: 0}[step.want] {
			t.Fatalf("step %d: %d fetches ready", i, got)
		}
	}
}

// TestPassthroughPipelinedFaults: the batch path keeps several batches of a
// partition in flight, and a failure among them (a retriable refusal, a
// dropped connection) loses nothing, duplicates nothing and reorders
// nothing: the target answers the batches sent after a refused one with
// OUT_OF_ORDER_SEQUENCE_NUMBER (those behind a dropped connection are not
// read), and they are sent again after it, in order.
func TestPassthroughPipelinedFaults(t *testing.T) {
	t.Parallel()
	src, dst := testClusters(t)
	const partitions, calls, per = 2, 150, 4
	createTopic(t, src, "orders", partitions)
	// One batch per partition per call: many batches to pipeline.
	// Uncompressed, so that the target's control function can tell the
	// batches of partition 0 by their values (requests name topics by ID).
	cl := newClient(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
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
		cp := slotCopier(m, TopicPartition{"orders", 0})
		if cp == nil || cp.pt == nil {
			return 0
		}
		cp.pt.mu.Lock()
		defer cp.pt.mu.Unlock()
		if q := cp.pt.queues[TopicPartition{"orders", 0}]; q != nil {
			return q.sent
		}
		return 0
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
			return refuseProduce(req, kerr.NotLeaderForPartition.Code), nil, true
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
			src, dst := testClusters(t)
			createTopic(t, src, "orders", 1)
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
								return refuseProduce(req, kerr.CorruptMessage.Code), nil, true
							}
						}
					}
					return nil, nil, false
				})
			}

			logs := &lockedBuffer{}
			m, stop := runOrdersMirror(t, src, dst, func(c *Config) {
				c.SourceCompression = tc.batchPath
				c.Logger = slog.New(slog.NewTextHandler(logs, nil))
			})
			t.Cleanup(stop)
			adm := kadm.NewClient(newClient(t, dst))
			waitFor(t, func() bool { return targetRecords(adm, "src.orders") >= 3 }, "the records before the undecodable batch on the target")
			produceOrders(t, src, 1, 3, "d") // offsets 12-14
			ps := slotCopier(m, TopicPartition{"orders", 0}).Partition(TopicPartition{"orders", 0})

			if tc.warning == "" {
				// a-* (0-2), the undecodable batch as it is (3-5), c-*, d-*.
				waitFor(t, func() bool { return targetRecords(adm, "src.orders") >= 12 }, "a-*, the undecodable batch, c-* and d-* on the target")
				if got := targetValuesFrom(t, dst, 6); fmt.Sprint(got) != fmt.Sprint(tc.wantTargetValues[3:]) {
					t.Fatalf("target holds %v after the undecodable batch, want %v", got, tc.wantTargetValues[3:])
				}
				return
			}
			waitFor(t, func() bool { return logs.count(tc.warning) > 0 }, fmt.Sprintf("the warning %q", tc.warning))
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
	end := targetEnds(t, dst, "src.orders")[0]
	cl := newClient(t, dst, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"src.orders": {0: kgo.NewOffset().At(from)}}))
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
	cl := newClient(t, c)
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
