package connector

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/filters"
)

func TestPersistGate(t *testing.T) {
	t.Parallel()
	var g PersistGate
	now := time.Now()
	for _, step := range []struct {
		changes uint64
		after   time.Duration
		want    bool
	}{
		{0, 0, true},               // the first tick walks
		{0, time.Second, false},    // nothing new
		{1, time.Second, true},     // a change
		{1, time.Second, false},    // nothing new again
		{1, persistFullWalk, true}, // the safety net
		{1, persistFullWalk - time.Second, false},
	} {
		now = now.Add(step.after)
		if got := g.Due(step.changes, now); got != step.want {
			t.Fatalf("due(%d) after %v = %v, want %v", step.changes, step.after, got, step.want)
		}
	}
}

// TestIdleMirrorSkipsProgressWalks: once everything copied is persisted,
// an idle mirror's change counter stands still (so the writer's ticks skip
// the walk over every partition); new records move it and are persisted;
// a progress write the target refuses moves it too, so that the write is
// redone on the next tick without waiting for new records or for the
// safety net's full walk (set to an hour here: not parallel).
func TestIdleMirrorSkipsProgressWalks(t *testing.T) {
	old := persistFullWalk
	persistFullWalk = time.Hour
	t.Cleanup(func() { persistFullWalk = old })
	src, dst := testClusters(t)
	ctx := context.Background()
	if _, err := kadm.NewClient(newClient(t, src)).CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produceOrders(t, src, 2, 10, "a")
	m, err := New(Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		SourceOpts:       []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)},
		TargetOpts:       []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)},
		Filters:          []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll("orders")}},
		RefreshInterval:  100 * time.Millisecond,
		ProgressInterval: 20 * time.Millisecond,
		Logger:           discardLogger(),
		// One slot: one copier and change counter for both partitions.
		Cluster: &ClusterConfig{Slots: 1, SessionTimeout: 6 * time.Second, CommitInterval: DefaultCommitInterval},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return")
		}
	})
	copierOf := func() *Copier { return slotCopier(m, TopicPartition{"orders", 0}) }
	persistedAt := func(want int64) func() bool {
		return func() bool {
			cp := copierOf()
			if cp == nil {
				return false
			}
			for p := range int32(2) {
				ps := cp.Partition(TopicPartition{"orders", p})
				if ps == nil {
					return false
				}
				ps.Mu.Lock()
				ok := ps.Acked == want && ps.Persisted == want
				ps.Mu.Unlock()
				if !ok {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, persistedAt(10), "10 records per partition copied and persisted")

	// Idle: a few control passes and many writer ticks, no change.
	cp := copierOf()
	before := cp.changes.Load()
	for range 3 {
		last := m.Status().LastPassAt
		waitFor(t, func() bool { return m.Status().LastPassAt.After(last) }, "another control pass")
	}
	if after := cp.changes.Load(); after != before {
		t.Fatalf("the change counter moved from %d to %d while the mirror was idle: every writer tick walks every partition", before, after)
	}

	// The target refuses the progress writes (not retriable: franz-go
	// fails them) while more records are copied.
	fault := dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: m.progressTopic, Err: kerr.TopicAuthorizationFailed, Count: -1})
	produceOrders(t, src, 2, 5, "b")
	waitFor(t, func() bool {
		cp := copierOf()
		for p := range int32(2) {
			ps := cp.Partition(TopicPartition{"orders", p})
			ps.Mu.Lock()
			acked := ps.Acked
			ps.Mu.Unlock()
			if acked != 15 {
				return false
			}
		}
		return fault.Hits() > 0
	}, "the new records copied and a progress write refused")
	// Let the writes that were in flight when the last records were
	// acknowledged fail too, then stop refusing: nothing new is copied.
	n := fault.Hits()
	waitFor(t, func() bool { return fault.Hits() > n }, "another refused progress write")
	fault.Remove()
	waitFor(t, persistedAt(15), fmt.Sprintf("the refused progress written again (persistFullWalk %v)", persistFullWalk))
}
