package connector

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/fence"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/listeners"
)

// TestDivergentTailShown: fwd copies A to B, then A takes 5 records on
// orders/0 that fwd never copies; after the failover of fwd and the
// failback of back (B to A), back's worker shows A's 5 (offsets 20..25 of
// orders/0) as kmirror_divergent_records, in its status and to its
// listeners, and orders/1 (no divergent tail) nowhere.
func TestDivergentTailShown(t *testing.T) {
	t.Parallel()
	a, b := kfaketest.Clusters(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	aCl := kfaketest.Client(t, a, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if _, err := kadm.NewClient(aCl).CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produce := func(p int32, n int) {
		t.Helper()
		for i := range n {
			if err := aCl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: p, Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	newMirror := func(cfg Config) *Mirror {
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	// fwd copies A's 20 records of each partition to B, then stops; A
	// takes 5 more on orders/0.
	fwd := drMirror("fwd", a, b)
	produce(0, 20)
	produce(1, 20)
	_, stopFwd := runMirror(t, ctx, fwd)
	kfaketest.WaitFor(t, func() bool {
		return len(kfaketest.ReadCommitted(t, b, "orders", 0)) == 20 && len(kfaketest.ReadCommitted(t, b, "orders", 1)) == 20
	}, "fwd to copy A")
	stopFwd()
	produce(0, 5)
	if _, err := newMirror(fwd).Failover(ctx, FailoverOptions{FromCheckpoints: true}); err != nil {
		t.Fatalf("failover: %v", err)
	}

	// back is prepared, then runs with metrics and a listener.
	backCfg := drMirror("back", b, a)
	if rep, err := newMirror(backCfg).Failback(ctx, "fwd"); err != nil || rep.Divergent != 5 {
		t.Fatalf("failback: %v %+v, want 5 divergent", err, rep)
	}
	metrics := NewMetrics(prometheus.NewRegistry())
	n := &fakeNotifier{}
	backCfg.Metrics, backCfg.Notifier = metrics, n
	back, _ := runMirror(t, ctx, backCfg)
	notified := func() []listeners.Topic {
		n.mu.Lock()
		defer n.mu.Unlock()
		if len(n.topics) == 0 {
			return nil
		}
		return n.topics[len(n.topics)-1]
	}
	kfaketest.WaitFor(t, func() bool { return len(notified()) == 1 }, "back to hand orders to its listeners")

	want := []listeners.DivergentTail{{Partition: 0, From: 20, To: 25}}
	if got := notified()[0]; got.Upstream != "orders" || !slices.Equal(got.Divergent, want) {
		t.Fatalf("listeners told %+v, want orders with the divergent tail %+v", got, want)
	}
	if v := testutil.ToFloat64(metrics.divergent.WithLabelValues("back", "orders", "0")); v != 5 {
		t.Fatalf(`kmirror_divergent_records{mirror="back",topic="orders",partition="0"} = %v, want 5`, v)
	}
	if c := testutil.CollectAndCount(metrics.divergent); c != 1 {
		t.Fatalf("kmirror_divergent_records has %d series, want 1 (orders/1 has no divergent tail)", c)
	}
	st := back.Status()
	wantSt := []DivergentStatus{{Partition: 0, From: 20, To: 25, Records: 5}}
	if len(st.Topics) != 1 || !slices.Equal(st.Topics[0].Divergent, wantSt) {
		t.Fatalf("status topics %+v, want orders with the divergent tail %+v", st.Topics, wantSt)
	}
}

// TestSetReverseGauge: a fence record without a partition's divergent
// tail deletes its series, and a tail that changes sets it anew.
func TestSetReverseGauge(t *testing.T) {
	t.Parallel()
	cfg := passHarnessConfig()
	metrics := NewMetrics(prometheus.NewRegistry())
	cfg.Metrics = metrics
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.setReverse(fence.State{ReverseOf: "fwd", Divergent: []fence.Divergent{{Topic: "orders", Partition: 0, From: 20, To: 25}, {Topic: "orders", Partition: 3, From: 1, To: 2}}})
	m.setReverse(fence.State{ReverseOf: "fwd", Divergent: []fence.Divergent{{Topic: "orders", Partition: 0, From: 20, To: 27}}})
	if c := testutil.CollectAndCount(metrics.divergent); c != 1 {
		t.Fatalf("kmirror_divergent_records has %d series, want 1 (orders/3's tail is gone)", c)
	}
	if v := testutil.ToFloat64(metrics.divergent.WithLabelValues(cfg.Name, "orders", "0")); v != 7 {
		t.Fatalf("orders/0 = %v, want 7", v)
	}
	m.setReverse(fence.State{})
	if c := testutil.CollectAndCount(metrics.divergent); c != 0 {
		t.Fatalf("kmirror_divergent_records has %d series after a fence record without tails, want none", c)
	}
}
