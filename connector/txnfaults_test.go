package connector

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/internal/kfaketest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/e2e/kafkatest/faultproxy"
)

// txnFaultRig is a cluster-mode worker whose target is behind a fault
// proxy, copying "orders" (parts partitions) from a kfake source.
type txnFaultRig struct {
	t        *testing.T
	src, dst *kfake.Cluster
	proxy    *faultproxy.Proxy
	srcCl    *kgo.Client
	parts    int32
	produced int
}

func newTxnFaultRig(t *testing.T, parts int32) *txnFaultRig {
	t.Helper()
	src, dst := kfaketest.Clusters(t)
	proxy, err := faultproxy.New(dst.ListenAddrs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	r := &txnFaultRig{t: t, src: src, dst: dst, proxy: proxy, parts: parts,
		srcCl: kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))}
	if _, err := kadm.NewClient(r.srcCl).CreateTopic(context.Background(), parts, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	return r
}

// start runs a worker with one slot whose clients reach the target
// through the proxy.
func (r *txnFaultRig) start(tune ...func(*Config)) *clusterWorker {
	return startClusterWorker(r.t, r.src, r.dst, 1, append([]func(*Config){func(c *Config) {
		c.TargetOpts = []kgo.Opt{kgo.SeedBrokers(r.proxy.Addrs()...)}
	}}, tune...)...)
}

// produce writes n more records to every partition of the source.
func (r *txnFaultRig) produce(n int) {
	r.t.Helper()
	var recs []*kgo.Record
	for i := r.produced; i < r.produced+n; i++ {
		for p := range r.parts {
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
	}
	if err := r.srcCl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		r.t.Fatal(err)
	}
	r.produced += n
}

// exactlyOnce waits until every produced record is on the target, read
// committed, and checks each is there once, in order.
func (r *txnFaultRig) exactlyOnce(desc string) {
	r.t.Helper()
	for p := range r.parts {
		var want []string
		for i := range r.produced {
			want = append(want, fmt.Sprintf("%d-%d", p, i))
		}
		kfaketest.WaitFor(r.t, func() bool { return len(kfaketest.ReadCommitted(r.t, r.dst, "src.orders", p)) >= len(want) }, fmt.Sprintf("%s: partition %d copied", desc, p))
		if got := kfaketest.ReadCommitted(r.t, r.dst, "src.orders", p); fmt.Sprint(got) != fmt.Sprint(want) {
			r.t.Fatalf("%s: partition %d holds %d records, want the %d source records once each, in order:\n got %v", desc, p, len(got), len(want), got)
		}
	}
}

// TestTxnCommitOutcomeUnknown: the coordinator commits a slot's
// transaction but its answer is lost (here: the answer replaced by
// UNKNOWN_SERVER_ERROR, as a dropped connection or a timeout leaves the
// producer not knowing). The transaction committed: the records must not
// be copied again. The copier learns the outcome from the slot's committed
// progress, which was in the same transaction.
func TestTxnCommitOutcomeUnknown(t *testing.T) {
	t.Parallel()
	r := newTxnFaultRig(t, 2)
	r.produce(50)
	r.start()
	r.exactlyOnce("before the fault")

	var lost atomic.Int32
	r.proxy.SetHook(kmsg.EndTxn, func(req kmsg.Request, resp kmsg.Response) faultproxy.Action {
		if req.(*kmsg.EndTxnRequest).Commit && resp.(*kmsg.EndTxnResponse).ErrorCode == 0 && lost.CompareAndSwap(0, 1) {
			resp.(*kmsg.EndTxnResponse).ErrorCode = kerr.UnknownServerError.Code
		}
		return faultproxy.Pass
	})
	r.produce(50)
	kfaketest.WaitFor(t, func() bool { return lost.Load() == 1 }, "a commit whose answer is lost")
	r.produce(50)
	r.exactlyOnce("after a commit whose outcome was unknown")
}

// TestSlotStopBounded: a worker whose target refuses every record
// (NOT_ENOUGH_REPLICAS, retried by the producer for as long as it may) stops
// within its shutdown timeout: the slot's poll loop blocked in a flush or a
// produce must not hold SIGTERM or a rebalance.
func TestSlotStopBounded(t *testing.T) {
	t.Parallel()
	r := newTxnFaultRig(t, 2)
	r.produce(20)
	const shutdownTimeout = 2 * time.Second
	w := r.start(func(c *Config) { c.ShutdownTimeout = shutdownTimeout })
	r.exactlyOnce("before the fault")

	var refused atomic.Int32
	r.proxy.SetAnswer(kmsg.Produce, func(req kmsg.Request, resp kmsg.Response) faultproxy.Action {
		refused.Add(1)
		return faultproxy.ProduceError(kerr.NotEnoughReplicas.Code)(req, resp)
	})
	r.produce(20)
	kfaketest.WaitFor(t, func() bool { return refused.Load() >= 3 }, "the target to refuse produce requests")

	begin := time.Now()
	stop := w.stop
	w.stop = nil // stopped here, not by the cleanup
	stop()
	select {
	case err := <-w.done:
		t.Logf("stopped in %v: %v", time.Since(begin).Round(time.Millisecond), err)
	case <-time.After(shutdownTimeout + 5*time.Second):
		t.Fatalf("the worker still runs %v after it was stopped (shutdown timeout %v)", time.Since(begin).Round(time.Millisecond), shutdownTimeout)
	}
}

// TestTxnTooLargeBatchIsolated: in a transaction, the target refuses a
// batch as too large although each of its records fits. The copier
// produces the records one at a time (isolation) and then in batches
// again: every record is committed once. Before, the partition stayed
// paused after the first isolated record, with no error.
func TestTxnTooLargeBatchIsolated(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	const topic, progress = "orders", "kmirror.m.progress.internal"
	h := newPassHarness(t, src, dst)
	ctx := context.Background()
	if _, err := h.srcAdm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	if _, err := h.dstAdm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": kadmStr("10000")}, "src."+topic); err != nil {
		t.Fatal(err)
	}
	cl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	var want []string
	for i := range 10 {
		v := make([]byte, 3<<10)
		rand.Read(v) // incompressible: ten of them exceed 10 KB whatever the codec
		v = fmt.Appendf(v[:0], "r-%d-", i)[:len(v)]
		recs = append(recs, &kgo.Record{Topic: topic, Value: v})
		want = append(want, string(v))
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil { // one source batch
		t.Fatal(err)
	}
	c := startTxnCopier(t, src, dst, topic, 1, progress)
	tp := data.TopicPartition{Topic: topic, Partition: 0}
	kfaketest.WaitFor(t, func() bool { return c.committed(tp) == 10 }, "all 10 records committed after the batch was refused")
	if got := kfaketest.ReadCommitted(t, dst, "src."+topic, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("target holds %d records, want the 10 source records once each, in order", len(got))
	}

	// A record too large even alone stops the partition there, and
	// says so: the partition's status carries the refusal.
	big := make([]byte, 50<<10)
	rand.Read(big)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: big}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool {
		_, _, err := c.cp.Partition(tp).Status()
		return err != nil && strings.Contains(err.Error(), "offset 10")
	}, "the partition's status to name the record refused alone")
	if n := c.committed(tp); n != 10 {
		t.Fatalf("committed %d, want 10: nothing past the refused record", n)
	}
}

// txnPoisonSetup copies orders (one partition: r-0 to r-40, r-20 too large
// for the target topic, each record with header h=x) with a slot's copier
// in transactions, writing refused records to deadLetter if not empty.
// It returns the copier and the values the target topic must hold.
func txnPoisonSetup(t *testing.T, deadLetter string) (c *txnHarness, dst *kfake.Cluster, want []string) {
	t.Helper()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst) // creates the progress topic
	ctx := context.Background()
	if _, err := h.srcAdm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	want = producePoison(t, h, src, deadLetter)
	c = startTxnCopier(t, src, dst, "orders", 1, "kmirror.m.progress.internal", func(o *data.CopierOpts) { o.DeadLetter = deadLetter })
	return c, dst, want
}

// TestTxnPoisonRecordDeadLettered: with exactly-once, a record the target
// refuses for good (MESSAGE_TOO_LARGE) is found by isolation and written
// to the dead-letter topic inside the slot's transaction, together with
// the progress past it; the partition moves on. read_committed: every
// other record on the target once, in order, and the refused one once in
// the dead-letter topic, with headers naming its origin. Before, a mirror
// with exactly_once could not have a dead_letter.
func TestTxnPoisonRecordDeadLettered(t *testing.T) {
	t.Parallel()
	c, dst, want := txnPoisonSetup(t, "dlq")
	tp := data.TopicPartition{Topic: "orders", Partition: 0}
	kfaketest.WaitFor(t, func() bool { return c.committed(tp) == 41 }, "orders/0 committed past the refused record")
	if got := kfaketest.ReadCommitted(t, dst, "src.orders", 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("target holds %d records, want the 40 accepted ones once each, in order:\n got %v", len(got), got)
	}
	dl := consumeRecords(t, dst.ListenAddrs(), "dlq")
	if len(dl) != 1 {
		t.Fatalf("dead-letter topic holds %d committed records, want 1", len(dl))
	}
	hs := map[string]string{}
	for _, hd := range dl[0].Headers {
		hs[hd.Key] = string(hd.Value)
	}
	if hs[data.HeaderSourceTopic] != "orders" || hs[data.HeaderSourcePartition] != "0" || hs[data.HeaderSourceOffset] != "20" ||
		!strings.Contains(hs[data.HeaderError], "MESSAGE_TOO_LARGE") || hs[data.HeaderTruncated] != "true" || hs["h"] != "x" {
		t.Fatalf("dead-letter headers = %v", hs)
	}
	if !dl[0].Attrs.IsTransactional() {
		t.Fatal("the dead-letter record was written outside the slot's transaction")
	}
	// The index skips the refused record: a group committed at 20
	// resumes at the record after it (its target offset counts the
	// aborted attempts and the markers too).
	r21 := int64(-1)
	for off, v := range kfaketest.ConsumeFrom(t, dst.ListenAddrs(), "src.orders", 0, 0) {
		if v == "r-21" {
			r21 = off
		}
	}
	ps := c.cp.Partition(tp)
	ps.Mu.Lock()
	to, err := ps.Index.Translate(20)
	ps.Mu.Unlock()
	if err != nil || to != r21 {
		t.Fatalf("translate(20) = %d, %v; want %d (r-21 on the target)", to, err, r21)
	}
}

// TestTxnPoisonRecordStopsPartition: with exactly-once and no dead-letter
// topic, the partition stops at the refused record with everything before
// it committed (the refusal aborts the transaction that held them; before,
// they were copied again only as the retries' backoff allowed), failed
// with the reason, and goes on once the target accepts the record.
func TestTxnPoisonRecordStopsPartition(t *testing.T) {
	t.Parallel()
	c, dst, want := txnPoisonSetup(t, "")
	tp := data.TopicPartition{Topic: "orders", Partition: 0}
	kfaketest.WaitFor(t, func() bool {
		_, _, err := c.cp.Partition(tp).Status()
		return c.committed(tp) == 20 && err != nil && strings.Contains(err.Error(), "offset 20") && strings.Contains(err.Error(), "MESSAGE_TOO_LARGE")
	}, "orders/0 committed up to the refused record, failed with the reason")
	if got := kfaketest.ReadCommitted(t, dst, "src.orders", 0); fmt.Sprint(got) != fmt.Sprint(want[:20]) {
		t.Fatalf("target holds %v, want r-0 to r-19", got)
	}
	alterOn(t, kfaketest.Client(t, dst), "src.orders", map[string]string{"max.message.bytes": "1048576"})
	kfaketest.WaitFor(t, func() bool {
		_, _, err := c.cp.Partition(tp).Status()
		return c.committed(tp) == 41 && err == nil
	}, "orders/0 to go on once the target accepts the record")
	if got := kfaketest.ReadCommitted(t, dst, "src.orders", 0); len(got) != 41 {
		t.Fatalf("target holds %d records, want 41", len(got))
	}
}
