package connector

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnHarness is one slot's transactional copier over two kfake clusters.
type txnHarness struct {
	cp     *data.Copier
	dst    *kgo.Client
	stop   context.CancelFunc
	done   chan struct{}
	cancel context.CancelFunc // the produce context
}

// startTxnCopier fences the slot's transactional ID, loads the committed
// progress (read_committed, as a new owner does) and starts copying
// topic's partitions from there.
func startTxnCopier(t *testing.T, src, dst *kfake.Cluster, topic string, partitions int32, progressTopic string, tune ...func(*data.CopierOpts)) *txnHarness {
	t.Helper()
	dstCl := kfaketest.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("kmirror.m.slot-0"),
		kgo.TransactionTimeout(10*time.Second))
	ctx := context.Background()
	if err := data.Fence(ctx, dstCl); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(dstCl)
	ld, err := data.LoadProgress(ctx, nil, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, adm, progressTopic)
	if err != nil {
		t.Fatal(err)
	}
	produceCtx, cancelProduce := context.WithCancel(ctx)
	var opts data.CopierOpts
	for _, f := range tune {
		f(&opts)
	}
	cp := data.NewCopier(kfaketest.Logger(), nil, dstCl, produceCtx, opts)
	cp.Transactional("kmirror.m.slot-0", 50*time.Millisecond, data.NewProgressWriter(progressTopic, 1, dstCl, cp, data.Sealer{}, nil), nil, nil)
	var as []data.Assignment
	for p := range partitions {
		tp := data.TopicPartition{Topic: topic, Partition: p}
		next := int64(-1)
		if pos, ok := ld.Positions[tp]; ok {
			next = pos.Next
		}
		as = append(as, data.Assignment{TP: tp, Target: "src." + topic, Next: next, Index: ld.Indexes[tp]})
	}
	if _, err := cp.Assign(as, []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	h := &txnHarness{cp: cp, dst: dstCl, stop: stop, done: make(chan struct{}), cancel: cancelProduce}
	go func() {
		defer close(h.done)
		cp.Run(runCtx)
	}()
	t.Cleanup(func() { h.kill(); cp.Close() })
	return h
}

// kill stops the copier where it is, its transaction left open: what a
// kill -9 leaves behind.
func (h *txnHarness) kill() {
	h.stop()
	<-h.done
	h.cancel()
}

func (h *txnHarness) committed(tp data.TopicPartition) int64 {
	ps := h.cp.Partition(tp)
	if ps == nil {
		return -1
	}
	ps.Mu.Lock()
	defer ps.Mu.Unlock()
	return ps.Committed
}

// TestTxnCopierExactlyOnceAcrossTakeover: a slot's copier writes records,
// progress and index in transactions. Killed with a transaction open, its
// successor fences it, resumes from the committed progress and the target
// read with read_committed holds every source record exactly once, in
// order. The fenced copier can never commit again.
func TestTxnCopierExactlyOnceAcrossTakeover(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	const topic, progress = "orders", "kmirror.m.progress.internal"
	h0 := newPassHarness(t, src, dst)
	ctx := context.Background()
	if _, err := h0.srcAdm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	if _, err := h0.dstAdm.CreateTopic(ctx, 2, 1, nil, "src."+topic); err != nil {
		t.Fatal(err)
	}
	produceBoth := func(prefix string, n int) {
		t.Helper()
		cl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var recs []*kgo.Record
		for i := range n {
			for p := range int32(2) {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d", prefix, p, i)})
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produceBoth("a", 300)
	first := startTxnCopier(t, src, dst, topic, 2, progress)
	for p := range int32(2) {
		kfaketest.WaitFor(t, func() bool { return first.committed(data.TopicPartition{Topic: topic, Partition: p}) == 300 }, fmt.Sprintf("partition %d committed at 300", p))
	}
	// More records, then a kill with a transaction open: whatever it
	// wrote since its last commit is aborted by the successor's fence.
	produceBoth("b", 200)
	kfaketest.WaitFor(t, func() bool {
		ps := first.cp.Partition(data.TopicPartition{Topic: topic, Partition: 0})
		acked, _, _ := ps.Status()
		return acked > 300
	}, "the first copier to copy past its last commit")
	first.stop()
	<-first.done

	second := startTxnCopier(t, src, dst, topic, 2, progress)
	// The fenced producer can never write again.
	if err := zombieWrite(ctx, first.dst, "src."+topic); !data.IsFenced(err) {
		t.Fatalf("a write by the fenced producer: %v, want it fenced", err)
	}
	produceBoth("c", 100)
	for p := range int32(2) {
		kfaketest.WaitFor(t, func() bool { return second.committed(data.TopicPartition{Topic: topic, Partition: p}) == 600 }, fmt.Sprintf("partition %d committed at 600", p))
	}
	for p := range int32(2) {
		vals := kfaketest.ReadCommitted(t, dst, "src."+topic, p)
		var want []string
		for _, pre := range []struct {
			s string
			n int
		}{{"a", 300}, {"b", 200}, {"c", 100}} {
			for i := range pre.n {
				want = append(want, fmt.Sprintf("%s-%d-%d", pre.s, p, i))
			}
		}
		if len(vals) != len(want) {
			t.Fatalf("partition %d: target holds %d committed records, want %d (each source record once)", p, len(vals), len(want))
		}
		for i := range want {
			if vals[i] != want[i] {
				t.Fatalf("partition %d: record %d is %q, want %q", p, i, vals[i], want[i])
			}
		}
	}
}

// zombieWrite tries to commit one record in a transaction with cl.
func zombieWrite(ctx context.Context, cl *kgo.Client, topic string) error {
	// The killed copier may have left its own transaction open: write
	// into it, as a paused worker waking up would.
	_ = cl.BeginTransaction()
	perr := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("zombie")}).FirstErr()
	end := kgo.TryCommit
	if perr != nil {
		end = kgo.TryAbort
	}
	if err := cl.EndTransaction(ctx, end); err != nil {
		return err
	}
	return perr
}
