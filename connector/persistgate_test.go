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

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestIdleMirrorSkipsProgressWalks: once everything copied is persisted,
// an idle mirror's change counter stands still (so the writer's ticks skip
// the walk over every partition); new records move it and are persisted;
// a progress write the target refuses moves it too, so that the write is
// redone on the next tick without waiting for new records or for the
// safety net's full walk (set to an hour here: not parallel).
func TestIdleMirrorSkipsProgressWalks(t *testing.T) {
	old := data.PersistFullWalk
	data.PersistFullWalk = time.Hour
	t.Cleanup(func() { data.PersistFullWalk = old })
	src, dst := kfaketest.Clusters(t)
	ctx := context.Background()
	if _, err := kadm.NewClient(kfaketest.Client(t, src)).CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
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
		Logger:           kfaketest.Logger(),
		// One slot: one copier and change counter for both partitions.
		Cluster: &ClusterConfig{Slots: 1, SessionTimeout: 6 * time.Second, CommitInterval: data.DefaultCommitInterval},
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
	copierOf := func() *data.Copier { return slotCopier(m, data.TopicPartition{Topic: "orders", Partition: 0}) }
	persistedAt := func(want int64) func() bool {
		return func() bool {
			cp := copierOf()
			if cp == nil {
				return false
			}
			for p := range int32(2) {
				ps := cp.Partition(data.TopicPartition{Topic: "orders", Partition: p})
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
	kfaketest.WaitFor(t, persistedAt(10), "10 records per partition copied and persisted")

	// Idle: a few control passes and many writer ticks, no change.
	cp := copierOf()
	before := cp.ChangeCount()
	for range 3 {
		last := m.Status().LastPassAt
		kfaketest.WaitFor(t, func() bool { return m.Status().LastPassAt.After(last) }, "another control pass")
	}
	if after := cp.ChangeCount(); after != before {
		t.Fatalf("the change counter moved from %d to %d while the mirror was idle: every writer tick walks every partition", before, after)
	}

	// The target refuses the progress writes (not retriable: franz-go
	// fails them) while more records are copied.
	fault := dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: m.progressTopic, Err: kerr.TopicAuthorizationFailed, Count: -1})
	produceOrders(t, src, 2, 5, "b")
	kfaketest.WaitFor(t, func() bool {
		cp := copierOf()
		for p := range int32(2) {
			ps := cp.Partition(data.TopicPartition{Topic: "orders", Partition: p})
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
	kfaketest.WaitFor(t, func() bool { return fault.Hits() > n }, "another refused progress write")
	fault.Remove()
	kfaketest.WaitFor(t, persistedAt(15), fmt.Sprintf("the refused progress written again (data.PersistFullWalk %v)", data.PersistFullWalk))
}
