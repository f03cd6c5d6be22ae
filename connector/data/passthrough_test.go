package data

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/recordbatch"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPassthroughKeepsTopicID: the batch path never follows a topic that
// was deleted and recreated under the same name to its new ID (it would
// copy the new topic's records into the old one's target before the
// control plane has seen the change); once the copier purges the topic, a
// new assignment meets the new ID.
func TestPassthroughKeepsTopicID(t *testing.T) {
	src, _ := kfaketest.Clusters(t)
	cl := kfaketest.Client(t, src)
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
	// Two batch paths share the cluster's leader cache, as the slots of a
	// worker do.
	leaders := NewLeaderCache()
	p := newPassthrough(&Copier{}, nil, leaders, nil)
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
	// The other batch path meets the topic only now, after a failed
	// fetch made the shared entry stale: the cache learns the new ID and
	// fresh leaders from it.
	other := newPassthrough(&Copier{}, nil, leaders, nil)
	other.forgetLeaders(&other.srcMeta, "phoenix")
	if _, err := other.leader(ctx, cl, &other.srcMeta, tp); err != nil {
		t.Fatalf("leader for a batch path that meets the recreated topic first: %v", err)
	}
	if _, ok := p.srcMeta.cachedLeader(tp, time.Now()); ok {
		t.Fatal("the first batch path uses the cached leader of the recreated topic")
	}
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
	p := newPassthrough(&Copier{}, nil, nil, nil)
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
		p.fetchRequest(broker1, []ptWant{{tp: tp, pos: 5, gen: gen}}) // joins broker 1's session, unless still in it
		if got, _ := p.accept(broker1, tp, empty(step.hw, step.lso)); got != step.want {
			t.Fatalf("step %d (hw %d, lso %d): handed over = %v, want %v", i, step.hw, step.lso, got, step.want)
		}
		if got := len(p.take()); got != map[bool]int{true: 1, false: 0}[step.want] {
			t.Fatalf("step %d: %d fetches ready", i, got)
		}
	}
}

// TestAcceptCopiesSmallFetches: a partition's few fetched bytes are copied
// out of the response buffer, so that a batch waiting to be sent does not
// keep the whole response alive; a large one keeps the buffer (copying it
// would cost more than it frees).
func TestAcceptCopiesSmallFetches(t *testing.T) {
	p := newPassthrough(&Copier{}, nil, nil, nil)
	comps := recordbatch.Compressors()
	for _, tc := range []struct {
		name    string
		records int
		copied  bool
	}{
		{"small", 3, true},
		{"large", 2000, false},
	} {
		tp := TopicPartition{tc.name, 0}
		p.add(tp, 0, p.newGen())
		var recs []*kgo.Record
		for i := range tc.records {
			recs = append(recs, &kgo.Record{Value: bytes.Repeat([]byte{byte(i)}, 100)})
		}
		batch, err := recordbatch.Encode(recs, 0, comps[0])
		if err != nil {
			t.Fatal(err)
		}
		if tc.copied != (len(batch) < ptCopyBelow) {
			t.Fatalf("%s: a batch of %d bytes does not test what it says (ptCopyBelow %d)", tc.name, len(batch), ptCopyBelow)
		}
		buf := append(make([]byte, 0, len(batch)+1024), batch...) // the response buffer
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset, rp.RecordBatches = int64(tc.records), int64(tc.records), buf
		p.mu.Lock()
		gen := p.parts[tp].gen
		p.mu.Unlock()
		p.fetchRequest(broker1, []ptWant{{tp: tp, pos: 0, gen: gen}})
		if got, _ := p.accept(broker1, tp, rp); !got {
			t.Fatalf("%s: the fetch was not handed over", tc.name)
		}
		fs := p.take()
		if len(fs) != 1 || len(fs[0].batches) != 1 {
			t.Fatalf("%s: %d fetches ready", tc.name, len(fs))
		}
		if shares := &fs[0].batches[0][0] == &buf[0]; shares == tc.copied {
			t.Fatalf("%s: the ready batch shares the response buffer: %v, want %v", tc.name, shares, !tc.copied)
		}
	}
}

// TestDropFrontLetsGo: acknowledged batches leave their queue's backing
// array, so that an idle partition's last batches (bytes, context) are not
// kept until it is written again.
func TestDropFrontLetsGo(t *testing.T) {
	units := []*ptUnit{{count: 1}, {count: 2}, {count: 3}}
	backing := units[:3:3]
	rest := dropFront(units, 2)
	if len(rest) != 1 || rest[0].count != 3 {
		t.Fatalf("dropFront(3 units, 2) = %d units, want the third", len(rest))
	}
	if backing[0] != nil || backing[1] != nil {
		t.Fatal("the dropped units are still referenced by the backing array")
	}
	if got := dropFront(rest, 1); got != nil {
		t.Fatalf("dropping every unit = %v, want nil (no array kept)", got)
	}
	if backing[2] != nil {
		t.Fatal("the last unit is still referenced by the backing array")
	}
}

// TestShrunk: an emptied map that once held many entries is made again
// (Go keeps a map's buckets after deletes); a small or non-empty one is
// kept.
func TestShrunk(t *testing.T) {
	m := map[int]bool{}
	peak := 0
	for i := range shrinkAbove + 1 {
		m[i] = true
		peak = max(peak, len(m))
	}
	if got := shrunk(m, &peak); len(got) != shrinkAbove+1 {
		t.Fatal("a non-empty map was replaced")
	}
	for k := range m {
		delete(m, k)
	}
	got := shrunk(m, &peak)
	got[1] = true
	if len(m) != 0 || peak != 0 {
		t.Fatalf("an emptied large map was kept (peak %d)", peak)
	}
	small := map[int]bool{}
	peak = 3
	if got := shrunk(small, &peak); got == nil || peak != 3 {
		t.Fatal("a small emptied map was replaced")
	}
	small[1] = true
	if len(shrunk(small, &peak)) != 1 {
		t.Fatal("shrunk lost an entry")
	}
}
