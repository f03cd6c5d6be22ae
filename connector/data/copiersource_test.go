package data

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCopierSourceCreatedOnce: the record path's consumer is created by
// whichever goroutine first needs it, an assignment (the control pass) or
// a partition leaving the batch path (the poll loop), while the control
// pass reads it. Run with -race: the two must not race, and one consumer
// is created, not two.
func TestCopierSourceCreatedOnce(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	cp := NewCopier(kfaketest.Logger(), nil, kfaketest.Client(t, dst), context.Background(), CopierOpts{})
	t.Cleanup(cp.Close)
	opts := []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)}
	cp.srcMu.Lock()
	cp.srcOpts = opts
	cp.srcMu.Unlock()
	var wg sync.WaitGroup
	created := make(chan bool, 2)
	for _, topic := range []string{"a", "b"} {
		wg.Add(1)
		go func() { // as rewindFailed's fallback does, on the poll loop
			defer wg.Done()
			ok, err := cp.consume(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})
			if err != nil {
				t.Error(err)
			}
			created <- ok
		}()
	}
	wg.Add(1)
	go func() { // as the control pass does
		defer wg.Done()
		cp.Unassign([]TopicPartition{{"c", 0}})
	}()
	wg.Wait()
	close(created)
	n := 0
	for ok := range created {
		if ok {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d consumers created, want 1", n)
	}
}

// TestStaleFetchNotGivenToRestartedPartition: records the poll loop fetched
// for a partition before the control pass unassigned it and assigned it
// again with a new state (its target topic deleted: the copy starts over
// from the source's start) are not that state's. Given to it, the new
// state took the first of them as its start and skipped everything below:
// the copy never completed, and nothing said so (the record path's case
// of TestShutdownAfterTargetTopicRecopied, one run in a few under -race).
func TestStaleFetchNotGivenToRestartedPartition(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	ctx := context.Background()
	srcCl := kfaketest.Client(t, src)
	if _, err := kadm.NewClient(srcCl).CreateTopic(ctx, 1, 1, nil, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(kfaketest.Client(t, dst)).CreateTopic(ctx, 1, 1, nil, "src.c"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := srcCl.ProduceSync(ctx, &kgo.Record{Topic: "c", Value: fmt.Appendf(nil, "v-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cp := NewCopier(kfaketest.Logger(), nil, kfaketest.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner())), ctx, CopierOpts{})
	t.Cleanup(cp.Close)
	srcOpts := []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)}
	tp := TopicPartition{"c", 0}
	if _, err := cp.Assign([]Assignment{{TP: tp, Target: "src.c", Next: 5}}, srcOpts); err != nil {
		t.Fatal(err)
	}
	// The poll loop takes offsets 5-9 for the first assignment...
	pollSome := func() (kgo.Fetches, uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			f, gen := cp.poll(pctx, cp.source())
			cancel()
			if f.NumRecords() > 0 {
				return f, gen
			}
		}
		t.Fatal("no records fetched in 10s")
		return nil, 0
	}
	stale, gen := pollSome()
	// ... the pass starts the partition over meanwhile ...
	cp.Unassign([]TopicPartition{tp})
	cp.DropParked([]TopicPartition{tp})
	if _, err := cp.Assign([]Assignment{{TP: tp, Target: "src.c", Next: -1}}, srcOpts); err != nil {
		t.Fatal(err)
	}
	// ... and the poll loop goes on producing what it took.
	stale.EachPartition(func(fp kgo.FetchTopicPartition) { cp.producePartition(fp, gen) })
	ps := cp.Partition(tp)
	if acked, _, _ := ps.Status(); acked != -1 {
		t.Fatalf("the new state starts at offset %d, want the source's start (-1 until read): it was given the old assignment's records", acked)
	}
	// Its own records come from offset 0, and all of them are copied.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if acked, _, _ := ps.Status(); acked == 10 {
			break
		}
		if time.Now().After(deadline) {
			acked, _, _ := ps.Status()
			t.Fatalf("acked = %d after 10s, want 10", acked)
		}
		// Polled until acknowledged: all ten may be fetched before
		// their acknowledgements arrive.
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		f, gen := cp.poll(pctx, cp.source())
		cancel()
		f.EachPartition(func(fp kgo.FetchTopicPartition) { cp.producePartition(fp, gen) })
	}
	if copied, _ := ps.CopyStats(); copied != 10 {
		t.Fatalf("%d records copied, want the 10 from the source's start", copied)
	}
}

// TestStaleBatchFetchNotGivenToRestartedPartition: the batch path's form of
// TestStaleFetchNotGivenToRestartedPartition. The poll loop checks that a
// fetch is current, then finds the partition's state by name; the pass may
// unassign the partition and assign it again between the two (its target
// topic deleted: the copy starts over). The new state must not be given
// the old assignment's batches.
func TestStaleBatchFetchNotGivenToRestartedPartition(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	ctx := context.Background()
	srcCl := kfaketest.Client(t, src)
	if _, err := kadm.NewClient(srcCl).CreateTopic(ctx, 1, 1, nil, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(kfaketest.Client(t, dst)).CreateTopic(ctx, 1, 1, nil, "src.c"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := srcCl.ProduceSync(ctx, &kgo.Record{Topic: "c", Value: fmt.Appendf(nil, "v-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	dstOpts := []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}
	cp := NewCopier(kfaketest.Logger(), nil, kfaketest.Client(t, dst), ctx, CopierOpts{Passthrough: true, DstOpts: dstOpts})
	t.Cleanup(cp.Close)
	srcOpts := []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)}
	tp := TopicPartition{"c", 0}
	if _, err := cp.Assign([]Assignment{{TP: tp, Target: "src.c", Next: 5}}, srcOpts); err != nil {
		t.Fatal(err)
	}
	// The poll loop takes offsets 5-9 for the first assignment...
	var stale ptFetch
	for deadline := time.Now().Add(10 * time.Second); len(stale.batches) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no batch fetched in 10s")
		}
		for _, f := range cp.pt.take() {
			if f.tp == tp && len(f.batches) > 0 {
				stale = f
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	// ... the pass starts the partition over meanwhile ...
	cp.Unassign([]TopicPartition{tp})
	cp.DropParked([]TopicPartition{tp})
	if _, err := cp.Assign([]Assignment{{TP: tp, Target: "src.c", Next: -1}}, srcOpts); err != nil {
		t.Fatal(err)
	}
	// ... and the poll loop, past its check, found the new state.
	ps := cp.Partition(tp)
	cp.produceFetch(ps, stale)
	cp.pt.mu.Lock()
	queued := 0
	if q := cp.pt.queues[tp]; q != nil {
		queued = len(q.units)
	}
	cp.pt.mu.Unlock()
	ps.Mu.Lock()
	inflight := len(ps.inflight)
	ps.Mu.Unlock()
	if queued > 0 || inflight > 0 {
		t.Fatalf("the new state was given the old assignment's batches (offsets %d on): %d queued, %d records in flight", stale.from, queued, inflight)
	}
}
