package data

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/recordbatch"
	"github.com/kmirror/kmirror/connector/state"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTxnFencedProgressWriteStops: a slot's producer is fenced while its
// transaction holds only progress and index writes (no record yet: a
// takeover another worker began and then gave up, say). The refused writes
// abort the transaction; the copier must see that it was fenced and stop,
// so that the slot is taken over again. Before, the abort went through,
// and every BeginTransaction after it failed with the fatal
// PRODUCER_FENCED, twice a second, until the worker died (the chaos soak,
// seed 7021084470302495820: slot 4 stalled 15 s).
func TestTxnFencedProgressWriteStops(t *testing.T) {
	t.Parallel()
	_, dst := kfaketest.Clusters(t)
	ctx := context.Background()
	const progress = "kmirror.m.progress.internal"
	if _, err := state.EnsureCompacted(ctx, kadm.NewClient(kfaketest.Client(t, dst)), progress, 1, 1); err != nil {
		t.Fatal(err)
	}
	slot := func() *kgo.Client {
		// As a slot's producer: classic transactions (fenceSlot).
		cl := kfaketest.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("kmirror.m.slot-4"),
			kgo.TransactionTimeout(10*time.Second), kgo.MaxVersions(ClassicTransactions()))
		if err := Fence(ctx, cl); err != nil {
			t.Fatal(err)
		}
		return cl
	}
	dstCl := slot()
	cp := NewCopier(kfaketest.Logger(), nil, dstCl, ctx, CopierOpts{})
	t.Cleanup(cp.Close)
	cp.txn = &TxnCycle{every: time.Hour, writer: NewProgressWriter(progress, 1, dstCl, cp, Sealer{}, nil)}
	if !cp.txnStep(ctx) {
		t.Fatal("the first transaction did not begin")
	}
	slot() // another worker fences the slot, and leaves

	// The transaction's progress write is refused as fenced.
	tp := TopicPartition{"orders", 0}
	k, v := EncodeProgress(tp, Position{Next: 10})
	err := dstCl.ProduceSync(ctx, &kgo.Record{Topic: progress, Key: k, Value: Sealer{}.Seal(v)}).FirstErr()
	if err == nil {
		t.Fatal("a fenced producer's write was acknowledged")
	}
	cp.txn.writer.fail("progress", tp, err)
	cp.txn.produced = true
	cp.TxnEnd(ctx)
	for range 3 {
		if cp.txnStep(ctx) {
			t.Fatalf("the copier goes on after its producer was fenced (fenced %v, unknown %v)", cp.txn.fenced, cp.txn.unknown)
		}
	}
	if cp.txn.fenced == nil {
		t.Fatalf("the copier stopped, but not as fenced (unknown %v)", cp.txn.unknown)
	}
}

// TestTxnBatchPathFenced: another producer takes the slot's transactional
// ID over (a new owner's fence). The batch path writes with the slot
// producer's ID and epoch, so its next write is refused as fenced: the
// copier stops as fenced, and nothing it read after the fence reaches the
// target, committed or not.
func TestTxnBatchPathFenced(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	const progress = "kmirror.m.progress.internal"
	ctx := context.Background()
	if _, err := state.EnsureCompacted(ctx, kadm.NewClient(kfaketest.Client(t, dst)), progress, 1, 1); err != nil {
		t.Fatal(err)
	}
	kfaketest.CreateTopic(t, src, "orders", 1)
	kfaketest.CreateTopic(t, dst, "src.orders", 1)
	srcCl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	produce := func(tag string) {
		t.Helper()
		var recs []*kgo.Record
		for i := range 20 {
			recs = append(recs, &kgo.Record{Topic: "orders", Value: fmt.Appendf(nil, "%s-%d", tag, i)})
		}
		if err := srcCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	slotClient := func(ends *EndTxnCounter) *kgo.Client {
		cl := kfaketest.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("kmirror.m.slot-0"),
			kgo.TransactionTimeout(10*time.Second), kgo.MaxVersions(ClassicTransactions()), kgo.WithHooks(ends))
		if err := Fence(ctx, cl); err != nil {
			t.Fatal(err)
		}
		return cl
	}
	ends := new(EndTxnCounter)
	dstCl := slotClient(ends)
	produceCtx, cancelProduce := context.WithCancel(ctx)
	defer cancelProduce()
	cp := NewCopier(kfaketest.Logger(), nil, dstCl, produceCtx, CopierOpts{Passthrough: true, DstOpts: []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}})
	cp.txn = &TxnCycle{every: 50 * time.Millisecond, writer: NewProgressWriter(progress, 1, dstCl, cp, Sealer{}, nil), endTxns: ends}
	cp.pt.useTransactions("kmirror.m.slot-0")
	if _, err := cp.Assign([]Assignment{{TP: TopicPartition{"orders", 0}, Target: "src.orders", Next: -1}}, []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		cp.Run(runCtx)
	}()
	t.Cleanup(func() { stop(); <-done; cp.Close() })

	produce("a")
	kfaketest.WaitFor(t, func() bool { return len(kfaketest.ReadCommitted(t, dst, "src.orders", 0)) >= 20 }, "the first records committed")
	if cp.pt.pending() != 0 || cp.ptTxn() != true {
		t.Fatal("the batch path is not the copier's")
	}
	slotClient(new(EndTxnCounter)) // the next owner
	produce("b")
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the fenced copier still runs 30s after the fence")
	}
	if cp.txn.fenced == nil {
		t.Fatalf("the copier stopped, but not as fenced (unknown: %v)", cp.txn.unknown)
	}
	var written int32
	for _, b := range kfaketest.RawLog(t, dst, "src.orders", 0) {
		if h, _ := recordbatch.Parse(b); !h.Control() {
			written += h.Count
		}
	}
	if written != 20 {
		t.Fatalf("the target holds %d records, committed or not: records read after the fence reached it", written)
	}
}

// TestPollWaitsForTheCommit: a transactional copier's poll loop waits for
// records only until its open transaction, once it holds records, is due
// to commit: the commit is made between polls, and a whole poll timeout
// without new records kept those written invisible that much longer.
func TestPollWaitsForTheCommit(t *testing.T) {
	c := &Copier{}
	now := time.Now()
	if got := c.pollWait(now); got != pollTimeout {
		t.Fatalf("without transactions: wait %v, want %v", got, pollTimeout)
	}
	c.txn = &TxnCycle{every: 100 * time.Millisecond, open: true, began: now.Add(-70 * time.Millisecond)}
	if got := c.pollWait(now); got != pollTimeout {
		t.Fatalf("open transaction with nothing written: wait %v, want %v", got, pollTimeout)
	}
	c.txn.produced = true
	if got := c.pollWait(now); got != 30*time.Millisecond {
		t.Fatalf("transaction with records, due in 30ms: wait %v, want 30ms", got)
	}
	c.txn.began = now.Add(-time.Second)
	if got := c.pollWait(now); got != time.Millisecond {
		t.Fatalf("transaction past due: wait %v, want 1ms", got)
	}
}

// TestConcurrentTxnBackoffShort: while the last transaction's markers are
// written (CONCURRENT_TRANSACTIONS), a slot asks again every 20 ms for the
// first second, so its next transaction starts within 20 ms of the markers
// (a backoff doubling from 10 ms started it up to 150 ms late); a stall
// that lasts backs off to a second.
func TestConcurrentTxnBackoffShort(t *testing.T) {
	for stalled := time.Duration(0); stalled <= time.Second; stalled += time.Millisecond {
		if b := concurrentTxnBackoff(stalled); b > 20*time.Millisecond {
			t.Fatalf("stalled %v: waits %v, want at most 20ms", stalled, b)
		}
	}
	if b := concurrentTxnBackoff(time.Minute); b != time.Second {
		t.Fatalf("stalled a minute: waits %v, want 1s", b)
	}
	prev := time.Duration(0)
	for stalled := time.Duration(0); stalled <= 10*time.Second; stalled += 10 * time.Millisecond {
		b := concurrentTxnBackoff(stalled)
		if b < prev {
			t.Fatalf("stalled %v: waits %v, less than %v before", stalled, b, prev)
		}
		prev = b
	}
}

// TestTxnCadenceFromCommitStart: a slot's commits follow one another every
// commit interval counted from the last commit's start, so a commit's own
// time is not added to the next transaction's wait; a commit slower than
// half an interval still leaves the next transaction half an interval to
// copy in.
func TestTxnCadenceFromCommitStart(t *testing.T) {
	now := time.Now()
	tc := &TxnCycle{every: 100 * time.Millisecond}
	if got := tc.nextBegan(now); !got.Equal(now) {
		t.Fatalf("first transaction: began %v before now, want now", now.Sub(got))
	}
	tc.lastCommit = now.Add(-30 * time.Millisecond) // a commit of 30ms
	if got := tc.nextBegan(now); !got.Equal(tc.lastCommit) {
		t.Fatalf("after a 30ms commit: began %v before now, want 30ms (due 70ms from now)", now.Sub(got))
	}
	tc.lastCommit = now.Add(-80 * time.Millisecond) // a commit of 80ms
	if got := tc.nextBegan(now); !got.Equal(now.Add(-50 * time.Millisecond)) {
		t.Fatalf("after an 80ms commit: began %v before now, want 50ms (half an interval open)", now.Sub(got))
	}
}
