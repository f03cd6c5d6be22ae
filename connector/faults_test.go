package connector

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// Faults that must never cost a duplicate, a re-copy or a rewind: each test
// injects one into a kfake cluster and checks the rule of issue 11.

// listingFault answers full topic listings (Metadata naming no topic, what
// kadm's ListTopics sends) of c from a snapshot taken now, in which topic is
// listed with the error code (or, with code 0, left out), until stop is
// called. Requests naming topics (the producer's, a second look) pass
// through untouched. It returns once adm's listings show the fault (kadm
// answers from the client's metadata cache for a while), and stop returns
// once they show the topic cleanly again.
func listingFault(t *testing.T, c *kfake.Cluster, adm *kadm.Client, topic string, code int16) (stop func()) {
	t.Helper()
	stopAnswers := metadataFromSnapshot(t, c, func(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) bool {
		if req.Topics != nil {
			return false
		}
		if code == 0 {
			resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.MetadataResponseTopic) bool { return t.Topic != nil && *t.Topic == topic })
		}
		for i := range resp.Topics {
			if t := resp.Topics[i].Topic; t != nil && *t == topic {
				resp.Topics[i].ErrorCode = code
				resp.Topics[i].Partitions = nil
			}
		}
		return true
	})
	listed := func() (ok bool, code int16) {
		lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tds, err := adm.ListTopics(lctx)
		if err != nil {
			t.Fatal(err)
		}
		td, ok := tds[topic]
		if !ok || td.Err == nil {
			return ok, 0
		}
		var ke *kerr.Error
		if errors.As(td.Err, &ke) {
			return true, ke.Code
		}
		return true, -1
	}
	kfaketest.WaitFor(t, func() bool {
		ok, got := listed()
		return (code == 0 && !ok) || (code != 0 && got == code)
	}, "the faulty listing of "+topic)
	return func() {
		stopAnswers()
		kfaketest.WaitFor(t, func() bool {
			ok, got := listed()
			return ok && got == 0
		}, "a clean listing of "+topic)
	}
}

// countCreates counts the topics in CreateTopics requests to c by name.
func countCreates(c *kfake.Cluster) func(topic string) int {
	var mu sync.Mutex
	n := map[string]int{}
	c.ControlKey(int16(kmsg.CreateTopics), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		for _, t := range kr.(*kmsg.CreateTopicsRequest).Topics {
			n[t.Topic]++
		}
		return nil, nil, false
	})
	return func(topic string) int {
		mu.Lock()
		defer mu.Unlock()
		return n[topic]
	}
}

// createWithProgress creates topic on the source and sets a stored position
// for each partition, as if an earlier run had copied that far.
func (h *passHarness) createWithProgress(t *testing.T, topic string, partitions int32, next int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := h.srcAdm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	tds, err := h.srcAdm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	id := tds[topic].ID.String()
	for p := range partitions {
		h.store(data.TopicPartition{Topic: topic, Partition: p}, data.Position{Next: next, TopicID: id})
	}
}

func (h *passHarness) mustPass(t *testing.T) {
	t.Helper()
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
}

// TestPassTargetListedWithErrorKeepsState: a target topic listed with a
// topic-level error (LEADER_NOT_AVAILABLE during a controller move) is
// unknown for the pass: its copy is not restarted, its progress not
// forgotten, and it is not "re-created".
func TestPassTargetListedWithErrorKeepsState(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	h.createWithProgress(t, "orders", 2, 40)
	h.mustPass(t)
	ps := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 0})
	if ps == nil || ps.Acked != 40 {
		t.Fatalf("partition 0 = %+v, want resumed at 40", ps)
	}
	creates := countCreates(dst)
	stop := listingFault(t, dst, h.dstAdm, "src.orders", kerr.LeaderNotAvailable.Code)
	for range 3 {
		h.mustPass(t)
	}
	stop()
	h.mustPass(t)
	if got := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 0}); got != ps {
		t.Fatalf("partition 0 was reassigned (%+v), want the same copy going on", got)
	}
	if ps.Acked != 40 {
		t.Fatalf("partition 0 acked = %d, want 40: the copy restarted", ps.Acked)
	}
	if n := creates("src.orders"); n != 0 {
		t.Fatalf("src.orders was created %d times while it existed", n)
	}
	// The loaded progress is the copier's once assigned: partition 1
	// goes on from it too.
	if ps1 := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 1}); ps1 == nil || ps1.Acked != 40 {
		t.Fatalf("partition 1 = %+v, want its copy going on from 40", ps1)
	}
	if st := h.topicStates()["orders"]; st != StateMirroring {
		t.Fatalf("state = %s, want mirroring", st)
	}
}

// TestPassSecondLookBeforeDeletion: a successful listing that lacks a
// target topic is not believed until a second look by name confirms it;
// a target topic really deleted is recreated and copied from the start.
func TestPassSecondLookBeforeDeletion(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	h.createWithProgress(t, "orders", 1, 25)
	h.mustPass(t)
	ps := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 0})
	if ps == nil || ps.Acked != 25 {
		t.Fatalf("partition 0 = %+v, want resumed at 25", ps)
	}
	stop := listingFault(t, dst, h.dstAdm, "src.orders", 0)
	h.mustPass(t)
	stop()
	if got := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 0}); got != ps || ps.Acked != 25 {
		t.Fatalf("a stale listing restarted the copy: partition 0 = %+v", got)
	}

	// Really deleted: the copy starts over in a new target topic.
	if _, err := h.dstAdm.DeleteTopic(context.Background(), "src.orders"); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool {
		h.mustPass(t)
		got := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 0})
		return got != nil && got != ps && got.Acked == -1
	}, "the deleted target topic to be recreated and copied from the start")
	if _, ok := targetPartitions(t, h.dst)["src.orders"]; !ok {
		t.Fatal("src.orders was not recreated")
	}
}

// TestPassTopicExistsLooksAgain: a create answered TOPIC_ALREADY_EXISTS
// (the listing was stale) is no reason to copy from the start: the topic is
// looked at again on the next pass and resumes from its progress.
func TestPassTopicExistsLooksAgain(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	h.createWithProgress(t, "orders", 1, 12)
	if _, err := h.dstAdm.CreateTopic(context.Background(), 1, 1, nil, "src.orders"); err != nil {
		t.Fatal(err)
	}
	stop := listingFault(t, dst, h.dstAdm, "src.orders", 0)
	h.mustPass(t)
	stop()
	if ps := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 0}); ps != nil {
		t.Fatalf("assigned after TOPIC_ALREADY_EXISTS (%+v): want a second look first", ps)
	}
	// The next passes (once the client's metadata cache has expired)
	// see the topic and resume from the stored position.
	kfaketest.WaitFor(t, func() bool {
		h.mustPass(t)
		return h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 0}) != nil
	}, "orders to be assigned")
	if ps := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 0}); ps.Acked != 12 {
		t.Fatalf("partition 0 acked = %d, want resumed from the stored position 12", ps.Acked)
	}
}

// TestPassSourceListedWithErrorKeepsState: the same rule on the source
// side, for an error and for a stale listing that lacks the topic.
func TestPassSourceListedWithErrorKeepsState(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	h.createWithProgress(t, "orders", 2, 8)
	h.mustPass(t)
	ps := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 1})
	for _, code := range []int16{kerr.LeaderNotAvailable.Code, 0} {
		stop := listingFault(t, src, h.srcAdm, "orders", code)
		h.mustPass(t)
		stop()
		if got := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 1}); got != ps {
			t.Fatalf("partition 1 = %+v after a faulty source listing, want the same copy going on", got)
		}
		if st := h.topicStates()["orders"]; st != StateMirroring {
			t.Fatalf("state = %q, want mirroring", st)
		}
	}
}

// readsConfigs is a filter that needs configs and keeps every topic.
type readsConfigs struct{ seen atomic.Pointer[[]string] }

func (*readsConfigs) ReadsConfigs() bool { return true }
func (f *readsConfigs) FilterTopics(_ context.Context, req filters.TopicRequest) ([]string, error) {
	names := make([]string, 0, len(req.Topics))
	for _, t := range req.Topics {
		names = append(names, t.Name)
	}
	f.seen.Store(&names)
	return names, nil
}

// TestPassConfigErrorKeepsTopicState: a topic whose configs cannot be
// described does not fail the pass for a filter that reads configs: it
// keeps its last state (mirrored stays mirrored, new stays out) and the
// others go on.
func TestPassConfigErrorKeepsTopicState(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	f := &readsConfigs{}
	h := newPassHarnessFor(t, src, dst, Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		Filters: []filters.TopicFilter{f},
		Logger:  kfaketest.Logger(),
	})
	h.createWithProgress(t, "kept", 1, 3)
	h.mustPass(t)
	h.createWithProgress(t, "fresh", 1, 0)
	h.createWithProgress(t, "other", 1, 0)
	bad := map[string]bool{"kept": true, "fresh": true}
	var fail atomic.Bool
	fail.Store(true)
	src.ControlKey(int16(kmsg.DescribeConfigs), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		if !fail.Load() {
			return nil, nil, false
		}
		req := kr.(*kmsg.DescribeConfigsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, r := range req.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			if bad[r.ResourceName] {
				rr.ErrorCode = kerr.RequestTimedOut.Code
			}
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil, true
	})
	h.mustPass(t)
	states := h.topicStates()
	if states["kept"] != StateMirroring || states["other"] != StateMirroring {
		t.Fatalf("states = %v, want kept and other mirrored", states)
	}
	if _, ok := states["fresh"]; ok {
		t.Fatalf("fresh was selected without its configs: %v", states)
	}
	if seen := *f.seen.Load(); slices.Contains(seen, "kept") || slices.Contains(seen, "fresh") {
		t.Fatalf("the filter judged topics without configs: %v", seen)
	}
	fail.Store(false)
	h.mustPass(t)
	if st := h.topicStates()["fresh"]; st != StateMirroring {
		t.Fatalf("fresh = %q once its configs are readable, want mirroring", st)
	}
}

// produceN produces n records with values "<prefix>-<i>" to partition 0.
func produceN(t *testing.T, c *kfake.Cluster, topic, prefix string, n int) {
	t.Helper()
	cl := kfaketest.Client(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestReselectedTopicResumesFromLivePosition: a topic that leaves the
// selection (a reload) and comes back continues from where its copy
// stopped, not from the position loaded at start: the target holds every
// record exactly once.
func TestReselectedTopicResumesFromLivePosition(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	ctx, cancel := context.WithCancel(context.Background())
	copied := make(chan struct{})
	h.createWithProgress(t, "orders", 1, 0)
	h.store(data.TopicPartition{Topic: "orders", Partition: 0}, data.Position{Next: -1}) // nothing stored: from the start
	produceN(t, src, "orders", "a", 100)
	h.mustPass(t)
	go func() {
		defer close(copied)
		h.cp.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-copied })
	waitAcked := func(want int64) {
		t.Helper()
		kfaketest.WaitFor(t, func() bool {
			ps := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 0})
			if ps == nil {
				return false
			}
			acked, _, _ := ps.Status()
			return acked == want
		}, fmt.Sprintf("orders/0 acked at %d", want))
	}
	waitAcked(100)

	all := h.m.selection()
	h.m.Reconfigure(Selection{Filters: []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll("nothing")}}})
	h.mustPass(t)
	if ps := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 0}); ps != nil {
		t.Fatal("orders is still copied after it left the selection")
	}
	produceN(t, src, "orders", "b", 50)
	h.m.Reconfigure(*all)
	h.mustPass(t)
	waitAcked(150)

	got := kfaketest.ConsumeFrom(t, dst.ListenAddrs(), "src.orders", 0, 0)
	if len(got) != 150 {
		t.Fatalf("target holds %d records, want 150 (each source record once)", len(got))
	}
	seen := map[string]bool{}
	for _, v := range got {
		if seen[v] {
			t.Fatalf("record %q copied twice", v)
		}
		seen[v] = true
	}
}

// TestShutdownBoundedWhenTargetRefuses: with the target refusing every
// write and the producer's buffer full, a shutdown ends within
// ShutdownTimeout (plus the last progress write's bound) and says how many
// records it abandoned.
func TestShutdownBoundedWhenTargetRefuses(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	ctx := context.Background()
	adm := newPassHarness(t, src, dst).srcAdm
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	// 4 MiB of records against a 1 MiB buffer.
	big := make([]byte, 16<<10)
	var recs []*kgo.Record
	for range 256 {
		recs = append(recs, &kgo.Record{Topic: "orders", Value: big})
	}
	prod := kfaketest.Client(t, src, kgo.ProducerBatchMaxBytes(1<<20))
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	dst.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		// Every write is refused, kmirror's own records too.
		refused.Add(1)
		return kfaketest.RefuseProduce(kr.(*kmsg.ProduceRequest), kerr.NotEnoughReplicas.Code), nil, true
	})
	m, err := New(Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		SourceOpts:      []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)},
		TargetOpts:      []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)},
		Filters:         []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll("orders")}},
		ShutdownTimeout: 2 * time.Second,
		Logger:          kfaketest.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	m.producerBufferBytes = 1 << 20
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	kfaketest.WaitFor(t, func() bool { return refused.Load() > 3 }, "the target to refuse writes")
	kfaketest.WaitFor(t, func() bool { return m.copierInFlight() > 0 }, "records in flight")
	begin := time.Now()
	stop()
	select {
	case err := <-done:
		took := time.Since(begin)
		if took > 2*time.Second+finalProgressTimeout+3*time.Second {
			t.Errorf("shutdown took %v with a 2s shutdown_timeout", took)
		}
		if err == nil || !strings.Contains(err.Error(), "not acknowledged") || !strings.Contains(err.Error(), "copied again") {
			t.Fatalf("Run = %v, want an error naming the abandoned records", err)
		}
		t.Logf("shutdown took %v: %v", took.Round(time.Millisecond), err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of the shutdown: it hangs on a target refusing writes")
	}
}

// poisonSetup creates orders on the source with 20 small records, one of
// 50 KB and 20 small ones again, and src.orders on the target refusing
// batches over 10 KB; it starts the copier and returns the harness.
func poisonSetup(t *testing.T, deadLetter string) (*passHarness, *kfake.Cluster) {
	t.Helper()
	src, dst := kfaketest.Clusters(t)
	cfg := passHarnessConfig()
	cfg.DeadLetterTopic = deadLetter
	h := newPassHarnessFor(t, src, dst, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	h.createWithProgress(t, "orders", 1, 0)
	h.store(data.TopicPartition{Topic: "orders", Partition: 0}, data.Position{Next: -1})
	producePoison(t, h, src, deadLetter)
	h.mustPass(t)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		h.cp.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-copied })
	return h, dst
}

// producePoison creates the target topic src.orders with a 10 KB record
// limit (and deadLetter, if not empty) and writes r-0 to r-40 to the
// source topic orders, each with header h=x, r-20 too large for the
// target. It returns the values the target must hold: all but r-20.
func producePoison(t *testing.T, h *passHarness, src *kfake.Cluster, deadLetter string) (want []string) {
	t.Helper()
	ctx := context.Background()
	if _, err := h.dstAdm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": kadmStr("10000")}, "src.orders"); err != nil {
		t.Fatal(err)
	}
	if deadLetter != "" {
		if _, err := h.dstAdm.CreateTopic(ctx, 1, 1, nil, deadLetter); err != nil {
			t.Fatal(err)
		}
	}
	cl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range 41 {
		v := fmt.Appendf(nil, "r-%d", i)
		if i == 20 {
			big := make([]byte, 50<<10)
			rand.Read(big) // incompressible: too large whatever the codec
			v = append(v, big...)
		} else {
			want = append(want, string(v))
		}
		recs = append(recs, &kgo.Record{Topic: "orders", Value: v, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return want
}

func (h *passHarness) acked(tp data.TopicPartition) (int64, error) {
	ps := h.cp.Partition(tp)
	if ps == nil {
		return -1, nil
	}
	acked, _, err := ps.Status()
	return acked, err
}

// TestPoisonRecordDeadLettered: a record the target refuses for good
// (MESSAGE_TOO_LARGE) is found in its refused batch, written to the
// dead-letter topic with headers naming its origin, and the partition moves
// on: every other record is on the target once, in order.
func TestPoisonRecordDeadLettered(t *testing.T) {
	t.Parallel()
	h, dst := poisonSetup(t, "dlq")
	tp := data.TopicPartition{Topic: "orders", Partition: 0}
	kfaketest.WaitFor(t, func() bool { a, _ := h.acked(tp); return a == 41 }, "orders/0 acked past the poison record")
	got := kfaketest.ConsumeFrom(t, dst.ListenAddrs(), "src.orders", 0, 0)
	if len(got) != 40 {
		t.Fatalf("target holds %d records, want the 40 accepted ones", len(got))
	}
	for off := range int64(40) {
		want := int64(off)
		if off >= 20 {
			want++
		}
		if v := got[off]; v != fmt.Sprintf("r-%d", want) {
			t.Fatalf("target offset %d = %q, want r-%d", off, v, want)
		}
	}
	recs := consumeRecords(t, dst.ListenAddrs(), "dlq")
	if len(recs) != 1 {
		t.Fatalf("dead-letter topic holds %d records, want 1", len(recs))
	}
	hs := map[string]string{}
	for _, hd := range recs[0].Headers {
		hs[hd.Key] = string(hd.Value)
	}
	if hs[data.HeaderSourceTopic] != "orders" || hs[data.HeaderSourcePartition] != "0" || hs[data.HeaderSourceOffset] != "20" ||
		!strings.Contains(hs[data.HeaderError], "MESSAGE_TOO_LARGE") || hs[data.HeaderTruncated] != "true" || hs["h"] != "x" {
		t.Fatalf("dead-letter headers = %v", hs)
	}
	// The index skips the poison: a group committed at 20 resumes at the
	// record after it.
	ps := h.cp.Partition(tp)
	ps.Mu.Lock()
	to, err := ps.Index.Translate(20)
	ps.Mu.Unlock()
	if err != nil || to != 20 {
		t.Fatalf("translate(20) = %d, %v; want 20 (r-21 on the target)", to, err)
	}
}

// TestPoisonRecordStopsPartition: without a dead-letter topic, the partition
// stops at the refused record, failed with the reason, and goes on once the
// target accepts it (its limit raised).
func TestPoisonRecordStopsPartition(t *testing.T) {
	t.Parallel()
	h, dst := poisonSetup(t, "")
	tp := data.TopicPartition{Topic: "orders", Partition: 0}
	var reason error
	kfaketest.WaitFor(t, func() bool {
		a, err := h.acked(tp)
		reason = err
		return a == 20 && err != nil && strings.Contains(err.Error(), "offset 20")
	}, "orders/0 stopped at the poison record with the reason")
	if !errors.Is(reason, kerr.MessageTooLarge) {
		t.Fatalf("reason = %v, want MESSAGE_TOO_LARGE", reason)
	}
	var failed string
	for _, ts := range h.m.Status().Topics {
		if ts.SourceTopic == "orders" && ts.State == StateFailed {
			failed = ts.Error
		}
	}
	if !strings.Contains(failed, "offset 20") {
		t.Fatalf("status error = %q, want the partition failed with the record's offset", failed)
	}
	alterOn(t, h.dst, "src.orders", map[string]string{"max.message.bytes": "1048576"})
	kfaketest.WaitFor(t, func() bool { a, err := h.acked(tp); return a == 41 && err == nil }, "orders/0 to go on once the target accepts the record")
	if got := kfaketest.ConsumeFrom(t, dst.ListenAddrs(), "src.orders", 0, 0); len(got) != 41 {
		t.Fatalf("target holds %d records, want 41", len(got))
	}
}

// consumeRecords reads every committed record of a one-partition topic
// (read_committed; transaction markers are read past, not returned).
func consumeRecords(t *testing.T, addrs []string, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	var out []*kgo.Record
	for next := int64(0); next < end.Offset && ctx.Err() == nil; {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			next = max(next, r.Offset+1)
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	return out
}

// TestDeletedTopicStateFreed: a source topic deleted (confirmed by a second
// look) leaves nothing behind: no parked state, no position or index in
// memory, and its stored progress is deleted. A topic that only left the
// selection keeps its parked state.
func TestDeletedTopicStateFreed(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	h.createWithProgress(t, "gone", 2, 5)
	h.createWithProgress(t, "kept", 1, 5)
	h.mustPass(t)
	w := h.m.newProgressWriter(h.dst, h.cp)
	for _, tp := range []data.TopicPartition{{Topic: "gone", Partition: 0}, {Topic: "gone", Partition: 1}, {Topic: "kept", Partition: 0}} {
		ps := h.cp.Partition(tp)
		ps.Mu.Lock()
		ps.Acked = 9 // as if records were copied since
		ps.Index.Add(5, 0)
		ps.Mu.Unlock()
	}
	ctx := context.Background()
	if err := w.WriteSync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srcAdm.DeleteTopic(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	h.m.Reconfigure(Selection{Filters: []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll("gone")}}})
	kfaketest.WaitFor(t, func() bool {
		h.mustPass(t)
		return len(h.m.Status().Topics) == 0
	}, "both topics to leave the mirror")
	gone0, _ := h.cp.ParkedState(data.TopicPartition{Topic: "gone", Partition: 0})
	kept, _ := h.cp.ParkedState(data.TopicPartition{Topic: "kept", Partition: 0})
	if gone0 != nil || kept == nil {
		t.Fatalf("parked: gone/0 %v (want false), kept/0 %v (want true)", gone0, kept)
	}
	h.m.mu.Lock()
	for tp := range h.m.indexes {
		if tp.Topic == "gone" {
			t.Errorf("index of %v still in memory", tp)
		}
	}
	h.m.mu.Unlock()
	if err := h.dst.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ld, err := data.LoadProgress(ctx, nil, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, h.dstAdm, h.m.progressTopic)
	if err != nil {
		t.Fatal(err)
	}
	for tp := range ld.Positions {
		if tp.Topic == "gone" {
			t.Errorf("stored progress of %v not deleted", tp)
		}
	}
	for tp := range ld.Indexes {
		if tp.Topic == "gone" {
			t.Errorf("stored index of %v not deleted", tp)
		}
	}
	if pos := ld.Positions[data.TopicPartition{Topic: "kept", Partition: 0}]; pos.Next != 9 {
		t.Errorf("stored progress of kept/0 = %+v, want 9", pos)
	}
}

// TestPassJustCreatedTopicNotGone: a target topic this worker created a
// moment ago that the target's metadata does not show yet (a broker
// learns of new topics after the controller made them: tens of seconds
// with thousands of partitions) is not gone: its copy goes on from where
// it was, not from the start (which copied records twice). Once it was
// listed, or after targetPropagation, absence is deletion again.
func TestPassJustCreatedTopicNotGone(t *testing.T) {
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	h.createWithProgress(t, "orders", 1, 25)
	h.mustPass(t) // creates src.orders and resumes at 25
	ps := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 0})
	if ps == nil || ps.Acked != 25 {
		t.Fatalf("partition 0 = %+v, want resumed at 25", ps)
	}
	creates := countCreates(dst)
	stop := notYetKnownFault(t, dst, "src.orders")
	h.mustPass(t)
	if got := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 0}); got != ps || ps.Acked != 25 {
		t.Fatalf("a topic not yet in the metadata was taken as deleted: partition 0 = %+v", got)
	}
	if n := creates("src.orders"); n != 0 {
		t.Fatalf("src.orders created again %d times", n)
	}
	stop()
	h.mustPass(t)
	if got := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 0}); got != ps || ps.Acked != 25 {
		t.Fatalf("after the metadata caught up: partition 0 = %+v, want the same copy at 25", got)
	}
	// Listed once: missing again, it is gone (TestPassSecondLookBeforeDeletion).
	stop = notYetKnownFault(t, dst, "src.orders")
	h.mustPass(t)
	stop()
	if got := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 0}); got == ps {
		t.Fatal("a listed topic missing from the metadata was kept as not known yet")
	}

	// Never listed past targetPropagation: gone.
	h2 := newPassHarness(t, src, dst)
	h2.createWithProgress(t, "items", 1, 7)
	h2.mustPass(t)
	ps = h2.cp.Partition(data.TopicPartition{Topic: "items", Partition: 0})
	old := targetPropagation
	targetPropagation = 0
	t.Cleanup(func() { targetPropagation = old })
	stop = notYetKnownFault(t, dst, "src.items")
	h2.mustPass(t)
	stop()
	if got := h2.cp.Partition(data.TopicPartition{Topic: "items", Partition: 0}); got == ps {
		t.Fatal("a topic missing past targetPropagation was kept")
	}
}

// notYetKnownFault makes c's metadata not know topic (as a broker that
// has not caught up with its controller): listings lack it and requests
// naming it alone answer UNKNOWN_TOPIC_OR_PARTITION for it.
func notYetKnownFault(t *testing.T, c *kfake.Cluster, topic string) (stop func()) {
	t.Helper()
	return metadataFromSnapshot(t, c, func(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) bool {
		switch {
		case req.Topics == nil:
			resp.Topics = slices.DeleteFunc(resp.Topics, func(rt kmsg.MetadataResponseTopic) bool { return rt.Topic != nil && *rt.Topic == topic })
		case len(req.Topics) == 1 && req.Topics[0].Topic != nil && *req.Topics[0].Topic == topic:
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic = kmsg.StringPtr(topic)
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = []kmsg.MetadataResponseTopic{rt}
		default:
			return false
		}
		return true
	})
}

// metadataFromSnapshot answers c's Metadata requests from a snapshot of
// its metadata taken now, each answer a fresh copy that edit may change,
// until stop is called. A request for which edit returns false passes
// through to the cluster untouched.
func metadataFromSnapshot(t *testing.T, c *kfake.Cluster, edit func(*kmsg.MetadataRequest, *kmsg.MetadataResponse) bool) (stop func()) {
	t.Helper()
	cl := kfaketest.Client(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	raw := snap.AppendTo(nil)
	var stopped atomic.Bool
	c.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		if stopped.Load() {
			return nil, nil, false
		}
		c.KeepControl()
		req := kr.(*kmsg.MetadataRequest)
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = snap.Version
		if err := resp.ReadFrom(raw); err != nil {
			return nil, err, true
		}
		if !edit(req, resp) {
			return nil, nil, false
		}
		resp.Version = req.Version
		return resp, nil, true
	})
	return func() { stopped.Store(true) }
}
