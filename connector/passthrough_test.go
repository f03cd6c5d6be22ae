package connector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
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
	p := newPassthrough(&copier{}, nil)
	p.src = cl
	tp := topicPartition{"phoenix", 0}
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
	p := newPassthrough(&copier{}, nil)
	tp := topicPartition{"idle", 0}
	p.add(tp, 5)
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
		m.mu.Lock()
		cp, _ := m.copier.(*copier)
		m.mu.Unlock()
		if cp == nil || cp.pt == nil {
			return 0
		}
		cp.pt.mu.Lock()
		defer cp.pt.mu.Unlock()
		if q := cp.pt.queues[topicPartition{"orders", 0}]; q != nil {
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
