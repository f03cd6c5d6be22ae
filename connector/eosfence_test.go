package connector

// Tests of exactly_once with one transactional producer per worker
// (docs/design/one-producer-per-worker.md): the shared copier's producer,
// the fencing of its commits by the worker's membership in the slots
// group (slotPlane.Began and Commit, doom), the legacy per-slot IDs a new
// owner fences, and a new owner waiting until the slots' last commits are
// settled (settleSlots).

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/connector/slots"
	"github.com/kmirror/kmirror/connector/state"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// eosSource writes tagged records to a source topic and remembers them,
// to check the target holds each once, in order.
type eosSource struct {
	t     *testing.T
	cl    *kgo.Client
	topic string
	parts int32
	want  map[int32][]string
}

func newEOSSource(t *testing.T, src *kfake.Cluster, topic string, parts int32, opts ...kgo.Opt) *eosSource {
	t.Helper()
	kfaketest.CreateTopic(t, src, topic, parts)
	return &eosSource{t: t, topic: topic, parts: parts, want: make(map[int32][]string),
		cl: kfaketest.Client(t, src, append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)}
}

// produce writes n records tagged tag to every partition, in one call (a
// batch per partition).
func (s *eosSource) produce(tag string, n int) {
	s.t.Helper()
	var recs []*kgo.Record
	for p := range s.parts {
		for i := range n {
			v := fmt.Sprintf("%s-%d-%d-%s", tag, p, i, strings.Repeat("x", 40))
			recs = append(recs, &kgo.Record{Topic: s.topic, Partition: p, Value: []byte(v)})
			s.want[p] = append(s.want[p], v)
		}
	}
	if err := s.cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		s.t.Fatal(err)
	}
}

// exactlyOnce waits until the target topic (src.<topic>) holds, read
// committed, as many records as were produced to each partition, and
// checks they are the source's, once each, in order.
func (s *eosSource) exactlyOnce(dst *kfake.Cluster, desc string) {
	s.t.Helper()
	target := "src." + s.topic
	for p := range s.parts {
		want := s.want[p]
		kfaketest.WaitFor(s.t, func() bool { return len(kfaketest.ReadCommitted(s.t, dst, target, p)) >= len(want) },
			fmt.Sprintf("%s: %s/%d copied (%d records)", desc, target, p, len(want)))
		if got := kfaketest.ReadCommitted(s.t, dst, target, p); !slices.Equal(got, want) {
			s.t.Fatalf("%s: %s/%d holds %d records read committed, want the %d source records once each, in order:\n got %v\nwant %v",
				desc, target, p, len(got), len(want), got, want)
		}
	}
}

// assignedSlots are the slots the group gives w (whether or not taken
// over yet), sorted.
func (w *clusterWorker) assignedSlots() []int32 {
	p := w.m.slots
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int32
	for s, ok := range p.assigned {
		if ok {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// countKey counts the requests of key that c receives and match, from now
// on; kfake answers them.
func countKey(c *kfake.Cluster, key kmsg.Key, match func(kmsg.Request) bool) *atomic.Int32 {
	var n atomic.Int32
	c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if match == nil || match(req) {
			n.Add(1)
		}
		return nil, nil, false
	})
	return &n
}

// holdOnce holds, in kfake, the first request of key that matches once
// armed, until release is called (or the test ends): the client waits for
// its answer meanwhile, while kfake answers every other connection. held
// is closed when the request is held.
type holdOnce struct {
	armed   atomic.Bool
	held    chan struct{}
	release func()
}

func newHoldOnce(t *testing.T, c *kfake.Cluster, key kmsg.Key, match func(kmsg.Request) bool) *holdOnce {
	h := &holdOnce{held: make(chan struct{})}
	released := make(chan struct{})
	var once sync.Once
	h.release = func() { once.Do(func() { close(released) }) }
	t.Cleanup(h.release) // before the cluster closes: a worker may wait on it
	c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !match(req) || !h.armed.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		close(h.held)
		c.SleepControl(func() { <-released })
		return nil, nil, false
	})
	return h
}

// waitHeld waits until the request is held.
func (h *holdOnce) waitHeld(t *testing.T, what string) {
	t.Helper()
	select {
	case <-h.held:
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// eachPath runs test on the record path and on the batch path
// (producer.compression: source, the source batches zstd), side by side.
func eachPath(t *testing.T, test func(t *testing.T, batchPath bool)) {
	for _, batchPath := range []bool{false, true} {
		t.Run(map[bool]string{false: "record_path", true: "batch_path"}[batchPath], func(t *testing.T) {
			t.Parallel()
			test(t, batchPath)
		})
	}
}

// sourceCodec is how the source's records are written for a test on the
// batch path (zstd batches, forwarded as they are) or the record path.
func sourceCodec(batchPath bool) []kgo.Opt {
	if batchPath {
		return []kgo.Opt{kgo.ProducerBatchCompression(kgo.ZstdCompression())}
	}
	return nil
}

// producesTo reports whether a Produce request carries batches for topic.
func producesTo(req kmsg.Request, topic string) bool {
	for _, rt := range req.(*kmsg.ProduceRequest).Topics {
		if rt.Topic == topic && len(rt.Partitions) > 0 {
			return true
		}
	}
	return false
}

// TestEOSOneProducerPerWorker guards the point of the change: with
// exactly_once, every slot a worker owns is copied through one
// transactional producer (kmirror.<mirror>.worker-<random>), so that one
// Produce request carries the batches of several slots. With a producer
// per slot (kmirror.<mirror>.slot-<n>) a Produce request could carry one
// slot's batches only, and compressed topics were copied at half at least
// once's rate (bench/results/compressed-eos.md).
//
// A worker owning 4 slots copies a zstd topic of 8 partitions on the batch
// path. Every Produce request to the target topic names the same
// transactional ID, the worker's; at least one carries batches of
// partitions of two slots or more; read_committed holds every record once,
// in order.
func TestEOSOneProducerPerWorker(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	const parts, nSlots = 8, 4
	s := newEOSSource(t, src, "orders", parts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	for c := range 10 {
		s.produce(fmt.Sprint("r", c), 20)
	}
	var mu sync.Mutex
	ids := map[string]int{} // Produce requests to src.orders by transactional ID
	mostSlots := 0          // the most slots one such request carried batches of
	dst.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		in := map[int32]bool{}
		for _, rt := range req.Topics {
			if rt.Topic != "src.orders" {
				continue
			}
			for _, rp := range rt.Partitions {
				// The slot of the source partition: the target topic
				// has the source's partitions, one for one.
				in[slots.SlotOf("orders", rp.Partition, nSlots)] = true
			}
		}
		if len(in) == 0 {
			return nil, nil, false
		}
		id := "<none>"
		if req.TransactionID != nil {
			id = *req.TransactionID
		}
		mu.Lock()
		ids[id]++
		mostSlots = max(mostSlots, len(in))
		mu.Unlock()
		return nil, nil, false
	})
	w := startClusterWorker(t, src, dst, nSlots, func(c *Config) { c.SourceCompression = true })
	kfaketest.WaitFor(t, func() bool { return len(w.owned()) == nSlots }, "the worker owns the 4 slots")
	s.exactlyOnce(dst, "one worker of 4 slots")
	w.shutdown(t)

	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 1 {
		t.Fatalf("Produce requests to the target topic named %d transactional IDs (requests by ID: %v), want the worker's one", len(ids), ids)
	}
	for id := range ids {
		if !strings.HasPrefix(id, "kmirror.m.worker-") || id != w.m.slots.txnID {
			t.Fatalf("Produce requests to the target topic named transactional ID %q, want the worker's, kmirror.m.worker-<random> (%q)", id, w.m.slots.txnID)
		}
	}
	if mostSlots < 2 {
		t.Fatalf("no Produce request to the target topic carried batches of more than %d slot: the slots do not share a producer", mostSlots)
	}
}

// TestEOSCommitRefusesStaleMembership guards the plane's TxnFence.Commit
// (rules 2 and 3 of the design): a transaction during which a slot was
// lost (doom), or that began under another member ID (the worker's
// session expired and it joined again as a new member, maybe given the
// same slots back) or under none, must not commit its slots to the group.
// Kafka checks the member and generation of a TxnOffsetCommit, never which
// member owns a slot, so the check is kmirror's: Commit refuses, before
// any request, and the copier then aborts. A Commit for a transaction that
// began under the current membership is the control: it sends its
// TxnOffsetCommit.
//
// The worker copies nothing (no source topic), so every TxnOffsetCommit
// counted is the test's. The transaction Commit is given is a producer of
// the test's own.
func TestEOSCommitRefusesStaleMembership(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	commits := countKey(dst, kmsg.TxnOffsetCommit, nil)
	w := startClusterWorker(t, src, dst, 1)
	p := w.m.slots
	kfaketest.WaitFor(t, func() bool { return len(w.owned()) == 1 }, "the worker owns its slot")

	kfaketest.CreateTopic(t, dst, "scratch", 1)
	pr := kfaketest.Client(t, dst, kgo.TransactionalID("test.committer"), kgo.MaxVersions(data.ClassicTransactions()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pr.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	// A record, so that the transaction has a partition and ends with an
	// EndTxn (slots.CommitInTxn).
	if err := pr.ProduceSync(ctx, &kgo.Record{Topic: "scratch", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// Began before a slot was lost.
	began := p.Began()
	p.doom()
	if err := p.Commit(ctx, pr, began, data.TxnWrites{}); err == nil {
		t.Fatal("Commit of a transaction that began before a slot was lost (doom) succeeded")
	}
	if n := commits.Load(); n != 0 {
		t.Fatalf("Commit of a doomed transaction sent %d TxnOffsetCommit requests", n)
	}

	cur, ok := p.Began().(txnMembership)
	if !ok || cur.member == "" {
		t.Fatalf("Began() = %#v, want the member's ID", p.Began())
	}
	for _, b := range []any{
		txnMembership{member: cur.member + "-before", lost: cur.lost}, // another member ID
		txnMembership{member: "", lost: cur.lost},                     // not a member when it began
		nil,
	} {
		if err := p.Commit(ctx, pr, b, data.TxnWrites{}); err == nil {
			t.Fatalf("Commit of a transaction that began as %#v succeeded; the member is %q", b, cur.member)
		}
	}
	if n := commits.Load(); n != 0 {
		t.Fatalf("Commits under a stale membership sent %d TxnOffsetCommit requests", n)
	}

	// The control: began under the current membership, after the doom.
	if err := p.Commit(ctx, pr, p.Began(), data.TxnWrites{}); err != nil {
		t.Fatalf("Commit under the current membership: %v", err)
	}
	if n := commits.Load(); n != 1 {
		t.Fatalf("Commit under the current membership sent %d TxnOffsetCommit requests, want 1", n)
	}
	if err := pr.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
}

// TestEOSDoomAbortsOpenTransaction guards rule 2 end to end: a
// transaction open when the worker lost slots (doom, as release does
// when the session expired) aborts instead of committing: it may hold
// records of slots another worker copies now, and Kafka would commit
// them, whatever the group says. The copier then copies its partitions
// again from their committed positions: the target holds every record
// once.
//
// A Produce of the transaction's records is held in kfake while the
// worker is doomed, so that the transaction began before the doom and ends
// after it.
func TestEOSDoomAbortsOpenTransaction(t *testing.T) {
	t.Parallel()
	eachPath(t, testDoomAbortsOpenTransaction)
}

func testDoomAbortsOpenTransaction(t *testing.T, batchPath bool) {
	src, dst := kfaketest.Clusters(t)
	s := newEOSSource(t, src, "orders", 2, sourceCodec(batchPath)...)
	s.produce("a", 20)
	hold := newHoldOnce(t, dst, kmsg.Produce, func(req kmsg.Request) bool { return producesTo(req, "src.orders") })
	logs := &kfaketest.LockedBuffer{}
	metrics := NewMetrics(prometheus.NewRegistry())
	w := startClusterWorker(t, src, dst, 1, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.Metrics = metrics
		c.SourceCompression = batchPath
	})
	s.exactlyOnce(dst, "before the doom")
	aborts := metrics.txns.WithLabelValues("m", data.TxnAborted)
	commits := metrics.txns.WithLabelValues("m", data.TxnCommitted)
	abortsBefore := testutil.ToFloat64(aborts)

	hold.armed.Store(true)
	s.produce("b", 20)
	hold.waitHeld(t, "the worker to produce the second records")
	w.m.slots.doom()
	commitsAtDoom := testutil.ToFloat64(commits)
	hold.release()

	// The doomed transaction ends before any other: the first to end
	// after the release must be an abort.
	kfaketest.WaitFor(t, func() bool {
		return testutil.ToFloat64(aborts) > abortsBefore || testutil.ToFloat64(commits) > commitsAtDoom
	}, "the doomed transaction to end")
	if testutil.ToFloat64(aborts) == abortsBefore {
		t.Fatal("the transaction open across the doom committed")
	}
	if n := logs.Count("slots were lost during the transaction"); n == 0 {
		t.Fatalf("no log line says why the transaction aborted; the log:\n%s", logs)
	}
	s.exactlyOnce(dst, "after the doomed transaction aborted")
	if testutil.ToFloat64(commits) <= commitsAtDoom {
		t.Fatal("the records were copied, but no transaction committed after the doom")
	}
}

// TestEOSFencesLegacySlotProducer guards a rolling upgrade (the design's
// "new test"): a worker of the previous version wrote slot 0 with the
// transactional ID kmirror.<mirror>.slot-0, and may still, a zombie with a
// transaction open. The new owner of slot 0 writes under its own ID, which
// does not fence that one: it must take kmirror.m.slot-0 over
// (InitProducerID), which aborts the zombie's transaction and refuses it
// any further commit. Read committed, the target then holds the source's
// records once and never the zombie's.
func TestEOSFencesLegacySlotProducer(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	s := newEOSSource(t, src, "orders", 2)
	s.produce("a", 20)
	kfaketest.CreateTopic(t, dst, "src.orders", 2)
	zombie := kfaketest.Client(t, dst, kgo.TransactionalID("kmirror.m.slot-0"), kgo.MaxVersions(data.ClassicTransactions()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// Its coordinator does not abort it for the length of the test.
		kgo.TransactionTimeout(10*time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, &kgo.Record{Topic: "src.orders", Partition: 0, Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	w := startClusterWorker(t, src, dst, 1)
	kfaketest.WaitFor(t, func() bool { return len(w.owned()) == 1 }, "the worker takes slot 0 over")
	if err := zombie.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the previous version's producer of slot 0 committed after the new owner took the slot over: it was not fenced")
	} else if !data.IsFenced(err) {
		t.Logf("the zombie's commit failed with %v (not a fencing error)", err)
	}
	s.exactlyOnce(dst, "after the zombie was fenced")
}

// TestEOSNewOwnerWaitsForPendingCommit guards the new owner's wait
// (settleSlots, rule 1's other half): a worker's commit that carried a
// slot may still be pending when the group hands the slot on, its EndTxn
// sent but not yet done (here held in kfake past the first worker's
// shutdown timeout, so that its revocation gives up waiting and the
// group moves the slot). The slot's offset is pending in the group all
// that time, and the new owner must not read the slot's progress before
// it is committed: it would resume from before the transaction, whose
// records then commit too, and they would be on the target twice.
//
// Asserted in order: the second worker is given a slot and asks whether
// it is stable again and again, without taking it over, for as long as the
// EndTxn is held; once released, it takes the slot over, and the target
// holds every record once.
func TestEOSNewOwnerWaitsForPendingCommit(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	s := newEOSSource(t, src, "orders", 2) // one partition per slot
	s.produce("a", 20)
	tune := func(c *Config) {
		// The first worker's revocation stops waiting for its commit
		// after this; the held EndTxn is then still pending.
		c.ShutdownTimeout = 2 * time.Second
		// franz-go would give up on the held EndTxn after its 10s
		// request overhead; the copier's own bound is 30s.
		c.TargetOpts = append(c.TargetOpts, kgo.RequestTimeoutOverhead(time.Minute))
	}
	w1 := startClusterWorker(t, src, dst, 2, tune)
	kfaketest.WaitFor(t, func() bool { return len(w1.owned()) == 2 }, "the first worker owns both slots")
	s.exactlyOnce(dst, "the first worker alone")

	w1ID := w1.m.slots.txnID
	hold := newHoldOnce(t, dst, kmsg.EndTxn, func(req kmsg.Request) bool {
		r := req.(*kmsg.EndTxnRequest)
		return r.TransactionalID == w1ID && r.Commit
	})
	// OffsetFetch with RequireStable of the slots group's offsets: a
	// takeover asking whether its slots are stable (slots.AwaitStable),
	// or franz-go's group member fetching its assigned slots' offsets
	// (every second while unstable).
	stableAsks := countKey(dst, kmsg.OffsetFetch, func(req kmsg.Request) bool {
		r := req.(*kmsg.OffsetFetchRequest)
		return r.RequireStable && (r.Group == "kmirror.m" || slices.ContainsFunc(r.Groups, func(g kmsg.OffsetFetchRequestGroup) bool { return g.Group == "kmirror.m" }))
	})
	hold.armed.Store(true)
	s.produce("b", 20)
	hold.waitHeld(t, "the first worker's commit of the second records")

	// The second worker's producer taking its transactional ID over: its
	// takeover is under way (settleSlots comes next).
	w2Producer := countKey(dst, kmsg.InitProducerID, func(req kmsg.Request) bool {
		id := req.(*kmsg.InitProducerIDRequest).TransactionalID
		return id != nil && strings.HasPrefix(*id, "kmirror.m.worker-") && *id != w1ID
	})
	w2 := startClusterWorker(t, src, dst, 2, tune)
	kfaketest.WaitFor(t, func() bool { return len(w2.assignedSlots()) == 1 }, "the group to give the second worker a slot")
	moved := w2.assignedSlots()
	kfaketest.WaitFor(t, func() bool { return w2Producer.Load() > 0 }, "the second worker to begin taking its slot over")
	asked := stableAsks.Load()
	// Until it was asked thrice more, or the second worker (wrongly) took
	// the slot over.
	kfaketest.WaitFor(t, func() bool { return stableAsks.Load() >= asked+3 || len(w2.owned()) > 0 }, "the second worker to ask again and again whether its slot is stable")
	if owned := w2.owned(); len(owned) != 0 {
		t.Fatalf("the second worker took slot %v over while the first worker's commit of it was pending (EndTxn held)", owned)
	}
	if owned := w1.owned(); slices.Contains(owned, moved[0]) {
		t.Fatalf("the first worker still owns slot %d, given to the second", moved[0])
	}
	hold.release()

	kfaketest.WaitFor(t, func() bool { return slices.Equal(w2.owned(), moved) }, fmt.Sprintf("the second worker takes slot %v over once the commit is done", moved))
	s.produce("c", 20)
	s.exactlyOnce(dst, "after the handover")
}

// lagSlotZeroCommit builds, for TestEOSNewOwnerReadsUntilCommitDecided and
// TestEOSUnsettledTakeoverStaysMember, a slot 0 whose last commit cannot
// be decided yet: a first worker copies 20 records of s (one partition)
// and stops; then the previous owner's last transaction (producer
// "test.lagging": the next 20 records on the target and their progress) is
// left open, as if its markers had not landed yet, while another
// transaction commits slot 0 to the group with a mark naming it. kfake
// writes markers at once, hence the construction. The mark names no
// transactional ID, so that a new owner neither fences nor completes it
// (fenceDeparted, completeLostCommit): Kafka would let a commit whose
// markers lag complete first, where kfake would abort the open transaction
// built here. Committing the returned producer's transaction decides it.
func lagSlotZeroCommit(t *testing.T, s *eosSource, src, dst *kfake.Cluster) *kgo.Client {
	t.Helper()
	s.produce("a", 20)
	w1 := startClusterWorker(t, src, dst, 1)
	s.exactlyOnce(dst, "the first worker")
	w1.shutdown(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	progressTopic := policy.InternalTopic("m", "progress")
	dstAdm := kadm.NewClient(kfaketest.Client(t, dst))
	tp := data.TopicPartition{Topic: s.topic, Partition: 0}
	ld, err := data.LoadProgress(ctx, kfaketest.Logger(), []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, dstAdm, progressTopic)
	if err != nil {
		t.Fatal(err)
	}
	pos, ok := ld.Positions[tp]
	if !ok || pos.Next != 20 {
		t.Fatalf("the first worker's progress of %v: %+v (stored: %v), want next 20", tp, pos, ok)
	}
	n, err := state.Partitions(ctx, dstAdm, progressTopic)
	if err != nil {
		t.Fatal(err)
	}

	s.produce("b", 20)
	lagging := kfaketest.Client(t, dst, kgo.TransactionalID("test.lagging"), kgo.MaxVersions(data.ClassicTransactions()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(10*time.Minute))
	if err := lagging.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for _, v := range s.want[0][20:40] {
		recs = append(recs, &kgo.Record{Topic: "src." + s.topic, Partition: 0, Value: []byte(v)})
	}
	key, value := data.EncodeProgress(tp, data.Position{Next: 40, TopicID: pos.TopicID})
	progress := &kgo.Record{Topic: progressTopic, Partition: state.PartitionFor(n, tp.Topic, tp.Partition), Key: key, Value: data.Sealer{}.Seal(value)}
	if err := lagging.ProduceSync(ctx, append(recs, progress)...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, _, err := lagging.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Slot 0's commit in the group, done, naming that transaction's
	// progress record. Under no member (generation -1): the group has
	// none now, and Kafka takes such a commit unchecked.
	mark := data.Mark{ProducerID: pid, Offsets: map[int32]int64{progress.Partition: progress.Offset}}
	kfaketest.CreateTopic(t, dst, "scratch", 1)
	committer := kfaketest.Client(t, dst, kgo.TransactionalID("test.committer"), kgo.MaxVersions(data.ClassicTransactions()))
	commitSlotZero(t, ctx, committer, "test.committer", "scratch", "x", mark)
	if err := committer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	return lagging
}

// TestEOSNewOwnerReadsUntilCommitDecided guards the second half of the
// new owner's wait (settleSlots after slots.AwaitStable): Kafka answers
// EndTxn before it writes the transaction's markers, and nothing orders
// the marker that makes the slot's offset stable before the marker of the
// progress topic. So a slot may be stable, its last commit known, while
// the progress records that commit wrote still look open; read then, the
// progress is the one before that transaction, whose records commit
// anyway: copied twice. The committed offset's mark names the producer and
// the progress offsets to wait for, and the new owner reads the progress
// topic until they are decided.
//
// kfake writes the markers at once, so the lag is built: the previous
// owner's last transaction (producer "test.lagging": the second records on
// the target and their progress) is left open, as if its markers had not
// landed yet, while another transaction commits slot 0 to the group with a
// mark naming it. The new owner must not take the slot over until that
// transaction is decided; once it is, it resumes after those records: the
// target holds every record once.
func TestEOSNewOwnerReadsUntilCommitDecided(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	s := newEOSSource(t, src, "orders", 1)
	lagging := lagSlotZeroCommit(t, s, src, dst)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	progressTopic := policy.InternalTopic("m", "progress")

	// Each pass of the new owner's wait reads the progress topic to its
	// end (ListOffsets).
	progressReads := countKey(dst, kmsg.ListOffsets, func(req kmsg.Request) bool {
		return slices.ContainsFunc(req.(*kmsg.ListOffsetsRequest).Topics, func(rt kmsg.ListOffsetsRequestTopic) bool { return rt.Topic == progressTopic })
	})
	w2Producer := countKey(dst, kmsg.InitProducerID, func(req kmsg.Request) bool {
		id := req.(*kmsg.InitProducerIDRequest).TransactionalID
		return id != nil && strings.HasPrefix(*id, "kmirror.m.worker-")
	})
	w2 := startClusterWorker(t, src, dst, 1)
	kfaketest.WaitFor(t, func() bool { return w2Producer.Load() > 0 }, "the second worker to begin taking slot 0 over")
	read := progressReads.Load()
	// Until it read the progress topic thrice more, or (wrongly) took the
	// slot over.
	kfaketest.WaitFor(t, func() bool { return progressReads.Load() >= read+3 || len(w2.owned()) > 0 }, "the second worker to read the progress topic again and again")
	if owned := w2.owned(); len(owned) != 0 {
		t.Fatalf("the second worker took slot 0 over while the progress its last commit wrote was undecided")
	}
	if err := lagging.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool { return len(w2.owned()) == 1 }, "the second worker takes slot 0 over once that progress is decided")
	s.produce("c", 20)
	s.exactlyOnce(dst, "after the takeover")
}

// TestEOSRevokeCommitsBeforeHandover guards rule 1 of the design: a worker
// giving a slot up in a rebalance ends its one transaction, which holds
// records of every slot it copies, before the group hands the slot on, and
// that commit carries the given-up slot's progress: its partitions were
// taken out of the shared copier (parked) when the revocation began, and
// their progress must still go into the transaction. The new owner then
// resumes where the commit left the slot: nothing is copied twice, and
// nothing aborts.
//
// The first worker's records are held in kfake (a Produce) until the
// revocation has begun, so that the transaction open at the revocation
// holds records of both slots.
func TestEOSRevokeCommitsBeforeHandover(t *testing.T) {
	t.Parallel()
	eachPath(t, testRevokeCommitsBeforeHandover)
}

func testRevokeCommitsBeforeHandover(t *testing.T, batchPath bool) {
	src, dst := kfaketest.Clusters(t)
	s := newEOSSource(t, src, "orders", 2, sourceCodec(batchPath)...) // one partition per slot
	s.produce("a", 20)
	metrics := NewMetrics(prometheus.NewRegistry())
	path := func(c *Config) { c.SourceCompression = batchPath }
	w1 := startClusterWorker(t, src, dst, 2, path, func(c *Config) { c.Metrics = metrics })
	kfaketest.WaitFor(t, func() bool { return len(w1.owned()) == 2 }, "the first worker owns both slots")
	s.exactlyOnce(dst, "the first worker alone")
	aborts := metrics.txns.WithLabelValues("m", data.TxnAborted)
	abortsBefore := testutil.ToFloat64(aborts)

	hold := newHoldOnce(t, dst, kmsg.Produce, func(req kmsg.Request) bool { return producesTo(req, "src.orders") })
	hold.armed.Store(true)
	s.produce("b", 20)
	hold.waitHeld(t, "the first worker to produce the second records")

	w2 := startClusterWorker(t, src, dst, 2, path)
	kfaketest.WaitFor(t, func() bool { return len(w1.assignedSlots()) == 1 }, "the first worker to begin giving a slot up")
	kept := w1.assignedSlots()[0]
	hold.release()
	kfaketest.WaitFor(t, func() bool { return len(w2.owned()) == 1 && w2.owned()[0] != kept }, "the second worker takes the other slot over")
	s.produce("c", 20)
	s.exactlyOnce(dst, "after the handover")
	if n := testutil.ToFloat64(aborts) - abortsBefore; n != 0 {
		t.Fatalf("the first worker aborted %v transactions: its revocation did not commit", n)
	}
}

// TestEOSUnsettledTakeoverStaysMember guards takeoverAttempt: a takeover
// runs in the group's assignment callback, and the group's next rebalance
// waits for the callback to return. A takeover that waited a minute for a
// slot's last commit to settle (chaos seed 3673521089659424442, where it
// never did) kept its worker from rejoining: the coordinator ended the
// rebalance without it at the rebalance timeout, removing it from the
// group, and gave its slots to the next worker, whose takeover then waited
// the same way.
//
// Slot 0's last commit cannot be decided (lagSlotZeroCommit). A worker
// joins and is given it, then a second joins (given nothing: the group has
// one slot), and the first stops: the group gives slot 0 to the second in
// its assignment callback (a worker's first assignment is taken over
// outside it, once Join returned). A third worker then joins, which begins
// a rebalance. Once the third worker is in the group, the second must
// still be a member, with its member ID, and must take the slot over once
// the commit is decided: the target holds every record once.
func TestEOSUnsettledTakeoverStaysMember(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	s := newEOSSource(t, src, "orders", 1)
	lagging := lagSlotZeroCommit(t, s, src, dst)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A rebalance timeout of 8s (a try of 2s): a minute-long takeover in
	// the callback outlasts it by far.
	tune := func(c *Config) { c.Cluster.RebalanceTimeout = 8 * time.Second }
	memberID := func(w *clusterWorker) string {
		w.m.slots.mu.Lock()
		member := w.m.slots.member
		w.m.slots.mu.Unlock()
		if member == nil {
			return ""
		}
		id, _ := member.Generation()
		return id
	}
	first := startClusterWorker(t, src, dst, 1, tune)
	kfaketest.WaitFor(t, func() bool { return slices.Equal(first.assignedSlots(), []int32{0}) }, "the group to give the first worker slot 0")
	w2 := startClusterWorker(t, src, dst, 1, tune)
	kfaketest.WaitFor(t, func() bool { return memberID(w2) != "" }, "the second worker to join the group")
	first.shutdown(t)
	kfaketest.WaitFor(t, func() bool { return slices.Equal(w2.assignedSlots(), []int32{0}) }, "the group to give the second worker slot 0")
	w2ID := memberID(w2)
	if w2ID == "" || len(w2.owned()) != 0 {
		t.Fatalf("the second worker: member %q, owns %v; want a member not owning slot 0 yet (its last commit undecided)", w2ID, w2.owned())
	}

	w3 := startClusterWorker(t, src, dst, 1, tune)
	kfaketest.WaitFor(t, func() bool { return memberID(w3) != "" }, "the third worker to join the group")
	members, err := w3.m.slots.member.MemberIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !members[w2ID] || memberID(w2) != w2ID {
		t.Fatalf("the second worker (member %s, now %q) was removed from the group while it waited for slot 0's commit: members %v", w2ID, memberID(w2), members)
	}

	if err := lagging.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool { return len(w2.owned()) == 1 || len(w3.owned()) == 1 }, "a worker takes slot 0 over once its commit is decided")
	s.produce("c", 20)
	s.exactlyOnce(dst, "after the takeover")
}
