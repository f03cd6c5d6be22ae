package data

import (
	"sync/atomic"

	"context"
	"github.com/twmb/franz-go/pkg/kerr"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/state"
	"github.com/kmirror/kmirror/internal/kfaketest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/connector/offsets"
	"github.com/kmirror/kmirror/connector/policy"
)

// TestIndexPersistsWithProgress: the writer stores index chunks and the
// position; a restart reassembles the same index, and a rewrite after
// pruning deletes the dropped chunks.
func TestIndexPersistsWithProgress(t *testing.T) {
	t.Parallel()
	_, dst := kfaketest.Clusters(t)
	cl := kfaketest.Client(t, dst)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	topic := policy.InternalTopic("m", "progress")
	if _, err := state.EnsureCompacted(ctx, adm, topic, 1, -1); err != nil {
		t.Fatal(err)
	}
	cp := NewCopier(kfaketest.Logger(), nil, cl, ctx, CopierOpts{})
	tp := TopicPartition{"orders", 3}
	if _, err := cp.Assign([]Assignment{{TP: tp, Target: "src.orders", TopicID: "ID1", Next: 0}}, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Close)
	ps := cp.Partition(tp)
	for i := int64(0); i < 2*index.ChunkRuns+7; i++ { // a marker after every record
		ps.inflight = append(ps.inflight, 2*i)
		ps.Promise(&kgo.Record{Offset: i, Timestamp: time.Now()}, nil)
	}
	w := NewProgressWriter(topic, 1, cl, cp, Sealer{offsets.CodecZstd}, nil)
	load := func() Loaded {
		t.Helper()
		if err := w.WriteSync(ctx); err != nil {
			t.Fatal(err)
		}
		ld, err := LoadProgress(ctx, nil, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, adm, topic)
		if err != nil {
			t.Fatal(err)
		}
		return ld
	}
	ld := load()
	if pos := ld.Positions[tp]; pos.Next != 2*(2*index.ChunkRuns+6)+1 || pos.TopicID != "ID1" {
		t.Fatalf("position = %+v", pos)
	}
	if got := ld.Indexes[tp]; got == nil || !reflect.DeepEqual(got.Runs(), ps.Index.Runs()) || got.StoredChunks()[0] != 0 {
		t.Fatalf("reloaded index differs: %d runs in chunks %v", got.Len(), got.StoredChunks())
	}

	ps.Mu.Lock()
	ps.Index.Prune(2 * (index.ChunkRuns + 1)) // chunk 0 only maps deleted records
	ps.Mu.Unlock()
	ld = load()
	if got := ld.Indexes[tp]; got.StoredChunks()[0] != 1 || got.Len() != index.ChunkRuns+7 {
		t.Fatalf("after pruning: chunks %v, %d runs", got.StoredChunks(), got.Len())
	}
	if s, err := ld.Indexes[tp].Translate(2*(index.ChunkRuns+3) - 1); err != nil || s != index.ChunkRuns+3 {
		t.Fatalf("translate after reload = %d, %v", s, err)
	}
}

// TestProgressWritesBounded: a writer holds at most progressMaxOutstanding
// records unanswered, waiting for answers before it produces more (a start
// on 100,000 partitions buffered them all), and writes everything once the
// target answers.
func TestProgressWritesBounded(t *testing.T) {
	t.Parallel()
	_, dst := kfaketest.Clusters(t)
	cl := kfaketest.Client(t, dst)
	ctx := context.Background()
	topic := policy.InternalTopic("m", "progress")
	if _, err := state.EnsureCompacted(ctx, kadm.NewClient(cl), topic, 1, -1); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	dst.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		dst.SleepControl(func() { <-release })
		return nil, nil, false
	})
	cp := NewCopier(kfaketest.Logger(), nil, cl, ctx, CopierOpts{})
	t.Cleanup(cp.Close)
	n := 3 * progressMaxOutstanding
	as := make([]Assignment, n)
	for i := range as {
		as[i] = Assignment{TP: TopicPartition{"orders", int32(i)}, Target: "orders", Next: 0}
	}
	if _, err := cp.Assign(as, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}); err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		ps := cp.Partition(a.TP)
		ps.inflight = append(ps.inflight, 0)
		ps.Promise(&kgo.Record{Offset: 0, Timestamp: time.Now()}, nil)
	}
	w := NewProgressWriter(topic, 1, cl, cp, Sealer{}, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.WriteAsync(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for cl.BufferedProduceRecords() < progressMaxOutstanding && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // room to overshoot, were it not bounded
	select {
	case <-done:
		t.Fatalf("the writer produced every record while none was answered (%d buffered)", cl.BufferedProduceRecords())
	default:
	}
	if got := cl.BufferedProduceRecords(); got != progressMaxOutstanding {
		t.Fatalf("%d records buffered, want the bound %d", got, progressMaxOutstanding)
	}
	close(release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not finish once the target answered")
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if ps := cp.Partition(a.TP); ps.Persisted != 1 {
			t.Fatalf("%v: persisted %d, want 1", a.TP, ps.Persisted)
		}
	}
}

func TestSealerFallsBackToNone(t *testing.T) {
	t.Parallel()
	s := Sealer{offsets.CodecZstd}
	small := []byte(`{"next_offset":1}`)
	if _, c, err := offsets.Decode(s.Seal(small)); err != nil || c != offsets.CodecNone {
		t.Fatalf("a tiny record: codec %v, %v", c, err)
	}
	runs := make([]index.Run, index.ChunkRuns)
	for i := range runs {
		runs[i] = index.Run{Src: int64(2 * i), Dst: int64(i), N: 1}
	}
	payload := index.EncodeChunk(runs)
	sealed := s.Seal(payload)
	if _, c, err := offsets.Decode(sealed); err != nil || c != offsets.CodecZstd {
		t.Fatalf("an index chunk: codec %v, %v", c, err)
	}
	if ratio := float64(len(payload)) / float64(len(sealed)); ratio < 10 {
		t.Fatalf("zstd on a chunk: %.1fx smaller, want at least 10x", ratio)
	}
}

// TestLoadedDrained: once every loaded partition resumed, the holder can
// drop the maps (they keep their buckets after deletes); not before.
func TestLoadedDrained(t *testing.T) {
	a := TopicPartition{Topic: "a", Partition: 0}
	b := TopicPartition{Topic: "a", Partition: 1}
	ld := Loaded{
		Positions: map[TopicPartition]Position{a: {Next: 5}, b: {Next: 7}},
		Indexes:   map[TopicPartition]*index.Partition{a: index.New()},
	}
	if ld.Drained() {
		t.Fatal("drained before anything resumed")
	}
	if got := ld.Resume(Assignment{TP: a, Next: -1}); got.Next != 5 || got.Index == nil {
		t.Fatalf("resume a = next %d index %v, want 5 and the loaded index", got.Next, got.Index)
	}
	if ld.Drained() {
		t.Fatal("drained with b not resumed")
	}
	if got := ld.Resume(Assignment{TP: b, Next: -1}); got.Next != 7 {
		t.Fatalf("resume b = next %d, want 7", got.Next)
	}
	if !ld.Drained() {
		t.Fatal("not drained after every partition resumed")
	}
	if (Loaded{}).Drained() != true {
		t.Fatal("an empty Loaded is drained")
	}
}

// TestProgressFoldByTopic: the fold keeps each partition's position and
// chunks by topic, lets a topic go once nothing of it is left, and refuses
// a key naming an impossible partition rather than allocating for it.
func TestProgressFoldByTopic(t *testing.T) {
	st := newProgressState()
	a0, a3, b1 := TopicPartition{"a", 0}, TopicPartition{"a", 3}, TopicPartition{"b", 1}
	st.setPosition(a0, Position{Next: 5}, false)
	st.setPosition(a3, Position{Next: 9, Floor: &index.Run{Src: 2, Dst: 7}}, false)
	st.setChunk(b1, 0, []index.Run{{Src: 0, Dst: 0}})
	if pos, ok := st.position(a3); !ok || pos.Next != 9 {
		t.Fatalf("position of a/3 = %v %v, want 9", pos, ok)
	}
	if _, ok := st.position(TopicPartition{"a", 1}); ok {
		t.Fatal("a/1 has a position it was never given")
	}
	if _, ok := st.position(b1); ok {
		t.Fatal("b/1 has a position: it has only a chunk")
	}
	ld := st.loaded()
	if len(ld.Positions) != 2 || ld.Positions[a0].Next != 5 {
		t.Fatalf("loaded positions %v, want a/0 at 5 and a/3", ld.Positions)
	}
	if ld.Indexes[b1] == nil || ld.Indexes[a3] == nil || ld.Indexes[a0] != nil {
		t.Fatalf("loaded indexes for %v, want b/1 (its chunk) and a/3 (its MM2 floor) only", ld.Indexes)
	}
	view := st.copyOf(func(tp TopicPartition) bool { return tp.Topic == "a" })
	if _, ok := view.position(a0); !ok || len(view.topics) != 1 {
		t.Fatalf("copy of topic a holds %d topics", len(view.topics))
	}
	st.setPosition(a0, Position{}, true)
	st.setPosition(a3, Position{}, true)
	if _, ok := st.topics["a"]; ok {
		t.Fatal("topic a kept after its every position was deleted")
	}
	st.setChunk(b1, 0, nil)
	if len(st.topics) != 0 {
		t.Fatalf("%d topics left after every partition was deleted", len(st.topics))
	}
	key := []byte(`{"topic":"a","partition":2147483647}`)
	if err := st.apply(key, []byte("x")); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("apply of a key naming partition 2^31-1: %v, want out of range", err)
	}
}

// TestProgressWritesSourceEnd: a partition that copies nothing while the
// source grows (its copies refused) writes its position again for each new
// end it sees, once; a write the target refuses is written again at the
// next walk; an idle partition writes nothing.
func TestProgressWritesSourceEnd(t *testing.T) {
	t.Parallel()
	_, dst := kfaketest.Clusters(t)
	cl := kfaketest.Client(t, dst)
	ctx := context.Background()
	adm := kadm.NewClient(cl)
	topic := policy.InternalTopic("m", "progress")
	if _, err := state.EnsureCompacted(ctx, adm, topic, 1, -1); err != nil {
		t.Fatal(err)
	}
	var refuse atomic.Bool
	dst.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		if !refuse.Load() {
			return nil, nil, false
		}
		return kfaketest.RefuseProduce(kr.(*kmsg.ProduceRequest), kerr.InvalidRecord.Code), nil, true
	})
	cp := NewCopier(kfaketest.Logger(), nil, cl, ctx, CopierOpts{})
	t.Cleanup(cp.Close)
	tp := TopicPartition{"orders", 0}
	if _, err := cp.Assign([]Assignment{{TP: tp, Target: "orders", Next: 30}}, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}); err != nil {
		t.Fatal(err)
	}
	w := NewProgressWriter(topic, 1, cl, cp, Sealer{}, nil)
	ps := cp.Partition(tp)
	writes := func() int64 {
		t.Helper()
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := ends.Lookup(topic, 0)
		return o.Offset
	}
	setEnd := func(end int64) {
		ps.Mu.Lock()
		ps.End = end
		ps.Mu.Unlock()
	}
	w.WriteAsync(ctx)
	if n := writes(); n != 0 {
		t.Fatalf("an idle partition at its resume position wrote %d records", n)
	}
	setEnd(37)
	refuse.Store(true)
	w.WriteAsync(ctx)
	_ = cl.Flush(ctx)
	refuse.Store(false)
	if n := writes(); n != 0 {
		t.Fatalf("%d records written while the target refused them", n)
	}
	w.WriteAsync(ctx) // the refused write again
	if n := writes(); n != 1 {
		t.Fatalf("%d records written after the refusal; want the position once more", n)
	}
	w.WriteAsync(ctx)
	if n := writes(); n != 1 {
		t.Fatalf("the same end written again (%d records)", n)
	}
	ld, err := LoadProgress(ctx, nil, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	if pos := ld.Positions[tp]; pos.Next != 30 || pos.SourceEnd != 37 {
		t.Fatalf("stored %+v; want next 30 with source end 37", pos)
	}
}
