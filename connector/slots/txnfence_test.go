package slots_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/connector/slots"
	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestCommitInTxnKfake runs the fencing scenario on kfake. kfake takes
// TxnOffsetCommit at v6, where the topic goes by its ID only; the scenario
// checks that the commits went that way, so that the ID path is covered
// (Kafka 4.3.1 takes v5, by name).
func TestCommitInTxnKfake(t *testing.T) {
	c := newKfake(t)
	var mu sync.Mutex
	versions := map[int16]bool{}
	c.ControlKey(int16(kmsg.TxnOffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		versions[req.GetVersion()] = true
		mu.Unlock()
		return nil, nil, false // kfake answers
	})
	txnFence(t, c.ListenAddrs())
	mu.Lock()
	defer mu.Unlock()
	if !versions[6] {
		t.Errorf("TxnOffsetCommit went at versions %v on kfake, want 6 (by topic ID) among them", slices.Sorted(maps.Keys(versions)))
	}
}

// TestCommitInTxnKafka runs the same scenario against a real Apache Kafka
// broker (see TestMembershipKafka for where it skips).
func TestCommitInTxnKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JVM")
	}
	c := kafkatest.StartForTest(t, "slots")
	txnFence(t, c.Addrs())
}

// txnFence commits slots to the group inside a worker's transactions and
// checks what the coordinator makes of them: pending while the transaction
// is open (per slot), committed with it, dropped when it aborts, and
// refused from a member whose generation is gone.
func txnFence(t *testing.T, seeds []string) {
	const (
		group = "kmirror.f1"
		topic = "kmirror.f1.slots.internal"
		data  = "f1.data"
	)
	h := newHarness(t, seeds, group, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := h.adm.CreateTopic(ctx, 1, -1, nil, data); err != nil {
		t.Fatal(err)
	}
	a := h.join("a", 2)
	aID, aGen := a.m.Generation()
	if aID != a.m.ID() || aGen < 0 {
		t.Fatalf("Generation() = %q, %d; want the member ID %q and a generation", aID, aGen, a.m.ID())
	}

	pr, sent := txnProducer(t, h, seeds, "kmirror.f1.w1")
	// Two fetchers: the newest OffsetFetch (v10 on both backends, topic
	// by ID) and the oldest with RequireStable (v7, the single-group
	// shape).
	newest, newestSent := counted(t, seeds)
	v7, v7Sent := counted(t, seeds, kgo.MaxVersions(capped(kmsg.OffsetFetch, 7)))
	fetchers := []struct {
		name string
		cl   *kgo.Client
		sent *requestCounter
	}{{"OffsetFetch newest", newest, newestSent}, {"OffsetFetch v7", v7, v7Sent}}

	// A transaction commits slot 0.
	beginWithRecord(t, ctx, pr, data)
	before := sent.snapshot()
	if err := slots.CommitInTxn(ctx, pr, group, topic, aID, aGen, []int32{0}, "m1"); err != nil {
		t.Fatalf("CommitInTxn as the current member: %v", err)
	}
	if d := sent.since(before); d[kmsg.AddOffsetsToTxn] != 1 || d[kmsg.TxnOffsetCommit] != 1 {
		t.Errorf("CommitInTxn sent %d AddOffsetsToTxn and %d TxnOffsetCommit, want one each", d[kmsg.AddOffsetsToTxn], d[kmsg.TxnOffsetCommit])
	}
	for _, f := range fetchers {
		// Slot 1 is in no transaction: answered at the first question.
		n := f.sent.snapshot()
		got := awaitStable(t, 10*time.Second, f.cl, group, topic, 1)
		if len(got) != 0 {
			t.Errorf("%s: slot 1, committed by nobody: %v, want no entry", f.name, got)
		}
		if asked := f.sent.since(n)[kmsg.OffsetFetch]; asked != 1 {
			t.Errorf("%s: slot 1 not pending, but AwaitStable asked %d times", f.name, asked)
		}
		// Slot 0 is pending in the open transaction: AwaitStable waits,
		// asking again with its backoff, and names it when its context
		// ends.
		n = f.sent.snapshot()
		fctx, fcancel := context.WithTimeout(ctx, time.Second)
		got, err := slots.AwaitStable(fctx, f.cl, group, topic, []int32{1, 0})
		fcancel()
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, kerr.UnstableOffsetCommit) ||
			!strings.Contains(err.Error(), "slots [0] ") {
			t.Errorf("%s: AwaitStable of slots 0 and 1 with slot 0 pending: %v, %v; want slot 0 still unstable at the deadline", f.name, got, err)
		}
		// 20ms growing to 200ms: 5 to 9 questions in a second.
		if asked := f.sent.since(n)[kmsg.OffsetFetch]; asked < 3 || asked > 15 {
			t.Errorf("%s: AwaitStable asked %d times in 1s, want 3 to 15 (backoff 20ms to 200ms)", f.name, asked)
		}
	}
	v6, _ := counted(t, seeds, kgo.MaxVersions(capped(kmsg.OffsetFetch, 6)))
	if got, err := slots.AwaitStable(ctx, v6, group, topic, []int32{0}); err == nil || !strings.Contains(err.Error(), "RequireStable") {
		t.Errorf("AwaitStable over OffsetFetch v6 (no RequireStable) with slot 0 pending: %v, %v; want an error", got, err)
	}

	// A topic the cluster does not have: by topic ID (v10) an error, not
	// "nothing committed". By name (v7), both backends answer it as a
	// topic without offsets, which it is.
	if got, err := slots.AwaitStable(ctx, newest, group, "no.such.topic", []int32{0}); err == nil {
		t.Errorf("AwaitStable of a topic that does not exist: %v, want an error", got)
	} else {
		t.Logf("a topic that does not exist: %v", err)
	}
	if got, err := slots.AwaitStable(ctx, v7, group, "no.such.topic", []int32{0}); err != nil || len(got) != 0 {
		t.Errorf("AwaitStable over v7 of a topic that does not exist: %v, %v; want no offset", got, err)
	}

	endTxn(t, ctx, pr, kgo.TryCommit)
	for _, f := range fetchers {
		want := map[int32]slots.Committed{0: {Offset: 0, Metadata: "m1"}}
		if got := awaitStable(t, 30*time.Second, f.cl, group, topic, 0, 1); !maps.Equal(got, want) {
			t.Errorf("%s: after the commit: %v, want %v", f.name, got, want)
		}
	}

	// An aborted transaction commits nothing: slot 0 keeps m1, slot 1
	// stays without offset.
	beginWithRecord(t, ctx, pr, data)
	before = sent.snapshot()
	if err := slots.CommitInTxn(ctx, pr, group, topic, aID, aGen, []int32{1, 0, 1}, "m2"); err != nil {
		t.Fatalf("CommitInTxn of slots 0 and 1: %v", err)
	}
	if d := sent.since(before); d[kmsg.Metadata] != 0 {
		t.Errorf("the second CommitInTxn sent %d Metadata requests, want none: the topic's ID is in the producer's cache", d[kmsg.Metadata])
	}
	fctx, fcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := slots.AwaitStable(fctx, newest, group, topic, []int32{0, 1})
	fcancel()
	if err == nil || !strings.Contains(err.Error(), "slots [0 1] ") {
		t.Errorf("AwaitStable with slots 0 and 1 pending: %v; want both still unstable", err)
	}
	endTxn(t, ctx, pr, kgo.TryAbort)
	if got, want := awaitStable(t, 30*time.Second, newest, group, topic, 0, 1), map[int32]slots.Committed{0: {0, "m1"}}; !maps.Equal(got, want) {
		t.Errorf("after the abort: %v, want %v (the commit before)", got, want)
	}

	// A second member joins: the group's generation moves on, and a's
	// old one is refused.
	b := h.join("b", 2)
	h.settle("a and b", a, b)
	aID2, aGen2 := a.m.Generation()
	_, bGen := b.m.Generation()
	if aID2 != aID || aGen2 <= aGen || aGen2 != bGen {
		t.Fatalf("after b joined: a is %q gen %d (was %q gen %d), b gen %d; want a's ID kept and one newer generation for both", aID2, aGen2, aID, aGen, bGen)
	}
	t.Logf("generation %d -> %d", aGen, aGen2)
	beginWithRecord(t, ctx, pr, data)
	err = slots.CommitInTxn(ctx, pr, group, topic, aID, aGen, []int32{0}, "stale")
	if !errors.Is(err, kerr.IllegalGeneration) || !strings.Contains(err.Error(), group) {
		t.Errorf("CommitInTxn with the generation before b joined: %v; want ILLEGAL_GENERATION naming the group", err)
	}
	t.Logf("stale generation: %v", err)
	err = slots.CommitInTxn(ctx, pr, group, topic, "stranger", aGen2, []int32{0}, "stranger")
	if !errors.Is(err, kerr.UnknownMemberID) {
		t.Errorf("CommitInTxn as a member the group does not know: %v; want UNKNOWN_MEMBER_ID", err)
	}
	t.Logf("unknown member: %v", err)
	// A refused commit leaves nothing pending: slot 0 is stable at once,
	// with the last commit.
	n := newestSent.snapshot()
	if got, want := awaitStable(t, 10*time.Second, newest, group, topic, 0), map[int32]slots.Committed{0: {0, "m1"}}; !maps.Equal(got, want) {
		t.Errorf("after the refused commits: %v, want %v", got, want)
	}
	if asked := newestSent.since(n)[kmsg.OffsetFetch]; asked != 1 {
		t.Errorf("slot 0 after refused commits: AwaitStable asked %d times, want 1 (nothing pending)", asked)
	}
	// What the caller must do after a refusal: Kafka would commit the
	// transaction's records anyway.
	endTxn(t, ctx, pr, kgo.TryAbort)

	// The current generation is accepted.
	beginWithRecord(t, ctx, pr, data)
	if err := slots.CommitInTxn(ctx, pr, group, topic, aID2, aGen2, []int32{0}, "m3"); err != nil {
		t.Fatalf("CommitInTxn with the current generation: %v", err)
	}
	endTxn(t, ctx, pr, kgo.TryCommit)
	if got, want := awaitStable(t, 30*time.Second, newest, group, topic, 0, 1), map[int32]slots.Committed{0: {0, "m3"}}; !maps.Equal(got, want) {
		t.Errorf("after the commit under the current generation: %v, want %v", got, want)
	}
}

// TestCommitInTxnRefusesUnfenced: a commit Kafka would not check (no
// member ID, no generation, no slot) or could not make (no transactional
// ID) is refused before anything is sent.
func TestCommitInTxnRefusesUnfenced(t *testing.T) {
	c := newKfake(t)
	seeds := c.ListenAddrs()
	h := newHarness(t, seeds, "kmirror.f2", "kmirror.f2.slots.internal")
	kfaketest.CreateTopic(t, c, "f2.data", 1)
	// The slots topic exists: what CommitInTxn refuses is sent nowhere,
	// not refused for want of it.
	kfaketest.CreateTopic(t, c, "kmirror.f2.slots.internal", 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, sent := txnProducer(t, h, seeds, "kmirror.f2.w1")
	beginWithRecord(t, ctx, pr, "f2.data")
	plain, plainSent := counted(t, seeds)
	for _, tc := range []struct {
		name       string
		cl         *kgo.Client
		member     string
		generation int32
		slots      []int32
		want       string
	}{
		{"no member ID", pr, "", 3, []int32{0}, "refusing"},
		{"generation -1", pr, "m", -1, []int32{0}, "refusing"},
		{"neither", pr, "", -1, []int32{0}, "refusing"},
		{"no slot", pr, "m", 3, nil, "refusing to commit no slots"},
		{"not transactional", plain, "m", 3, []int32{0}, "no transactional ID"},
	} {
		err := slots.CommitInTxn(ctx, tc.cl, "kmirror.f2", "kmirror.f2.slots.internal", tc.member, tc.generation, tc.slots, "x")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "kmirror.f2") {
			t.Errorf("%s: %v, want an error with %q naming the group", tc.name, err, tc.want)
		}
	}
	for _, s := range []*requestCounter{sent, plainSent} {
		if d := s.since(nil); d[kmsg.AddOffsetsToTxn] != 0 || d[kmsg.TxnOffsetCommit] != 0 {
			t.Errorf("refused commits sent %d AddOffsetsToTxn and %d TxnOffsetCommit", d[kmsg.AddOffsetsToTxn], d[kmsg.TxnOffsetCommit])
		}
	}
	endTxn(t, ctx, pr, kgo.TryAbort)
}

// TestCommitInTxnAnswers feeds CommitInTxn answers neither backend gives
// on demand (kfake's answered by the test): a refusal of one slot of two,
// a slot left out, a refused AddOffsetsToTxn. Each must be an error.
func TestCommitInTxnAnswers(t *testing.T) {
	const group, topic, data = "kmirror.f4", "kmirror.f4.slots.internal", "f4.data"
	c := newKfake(t)
	kfaketest.CreateTopic(t, c, topic, 2)
	kfaketest.CreateTopic(t, c, data, 1)
	h := newHarness(t, c.ListenAddrs(), group, topic)
	pr, sent := txnProducer(t, h, c.ListenAddrs(), "kmirror.f4.w1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// One control function per key for the whole test (see
	// TestAwaitStableAnswers): edit, when set, makes the answer.
	var (
		mu      sync.Mutex
		addErr  *kerr.Error // AddOffsetsToTxn's answer
		txnEdit func(ps []kmsg.TxnOffsetCommitResponseTopicPartition) []kmsg.TxnOffsetCommitResponseTopicPartition
	)
	c.ControlKey(int16(kmsg.AddOffsetsToTxn), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if addErr == nil {
			return nil, nil, false
		}
		resp := kreq.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = addErr.Code
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.TxnOffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if txnEdit == nil {
			return nil, nil, false
		}
		req := kreq.(*kmsg.TxnOffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				st.Partitions = append(st.Partitions, sp)
			}
			st.Partitions = txnEdit(st.Partitions)
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	set := func(add *kerr.Error, edit func([]kmsg.TxnOffsetCommitResponseTopicPartition) []kmsg.TxnOffsetCommitResponseTopicPartition) {
		mu.Lock()
		defer mu.Unlock()
		addErr, txnEdit = add, edit
	}

	beginWithRecord(t, ctx, pr, data)
	for _, tc := range []struct {
		name     string
		add      *kerr.Error
		edit     func([]kmsg.TxnOffsetCommitResponseTopicPartition) []kmsg.TxnOffsetCommitResponseTopicPartition
		want     error
		says     string
		txnSends int // TxnOffsetCommit requests sent
	}{
		{"one slot refused", nil, func(ps []kmsg.TxnOffsetCommitResponseTopicPartition) []kmsg.TxnOffsetCommitResponseTopicPartition {
			ps[1].ErrorCode = kerr.IllegalGeneration.Code
			return ps
		}, kerr.IllegalGeneration, "slots [1]: ILLEGAL_GENERATION", 1},
		{"two errors", nil, func(ps []kmsg.TxnOffsetCommitResponseTopicPartition) []kmsg.TxnOffsetCommitResponseTopicPartition {
			ps[0].ErrorCode = kerr.UnknownMemberID.Code
			return ps[:1]
		}, kerr.UnknownMemberID, "slots [0]: UNKNOWN_MEMBER_ID: The coordinator is not aware of this member.; slots [1]: not in the response", 1},
		{"slot left out", nil, func(ps []kmsg.TxnOffsetCommitResponseTopicPartition) []kmsg.TxnOffsetCommitResponseTopicPartition {
			return ps[1:]
		}, nil, "slots [0]: not in the response", 1},
		{"AddOffsetsToTxn refused", kerr.GroupAuthorizationFailed, nil, kerr.GroupAuthorizationFailed, "AddOffsetsToTxn", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set(tc.add, tc.edit)
			defer set(nil, nil)
			before := sent.snapshot()
			err := slots.CommitInTxn(ctx, pr, group, topic, "m", 1, []int32{0, 1}, "x")
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), group) {
				t.Errorf("CommitInTxn: %v; want an error wrapping %v, with %q and the group", err, tc.want, tc.says)
			}
			if n := sent.since(before)[kmsg.TxnOffsetCommit]; n != tc.txnSends {
				t.Errorf("sent %d TxnOffsetCommit, want %d", n, tc.txnSends)
			}
		})
	}
	endTxn(t, ctx, pr, kgo.TryAbort)
}

// TestAwaitStableAnswers feeds AwaitStable answers neither backend gives
// on demand (kfake's OffsetFetch answered by the test): a group-wide
// UNSTABLE_OFFSET_COMMIT, errors at either level, a slot left out. None
// may look like "nothing committed".
func TestAwaitStableAnswers(t *testing.T) {
	const group, topic = "kmirror.f3", "kmirror.f3.slots.internal"
	c := newKfake(t)
	kfaketest.CreateTopic(t, c, topic, 2)
	adm := kadm.NewClient(kfaketest.Client(t, c))
	// The group exists, with slot 0 at 5: kfake's own answers end each case.
	kfaketest.CommitOffsets(t, adm, group, topic, map[int32]int64{0: 5})
	want := map[int32]slots.Committed{0: {Offset: 5}}

	// One control function answers every OffsetFetch for the whole test,
	// following the script of the (sub)test running: kfake skips the next
	// control function when one drops itself, so they cannot take turns.
	type script struct {
		n     int // the test answers the first n questions, kfake the rest
		edit  func(g *kmsg.OffsetFetchResponseGroup)
		asked [][]int32 // the partitions of every question
	}
	var (
		mu  sync.Mutex
		cur *script // nil: kfake answers
	)
	c.ControlKey(int16(kmsg.OffsetFetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		req := kreq.(*kmsg.OffsetFetchRequest)
		if cur == nil {
			return nil, nil, false
		}
		if req.Version < 8 || len(req.Groups) != 1 || len(req.Groups[0].Topics) != 1 {
			t.Errorf("OffsetFetch v%d with groups %+v: want v8+, one group, one topic", req.Version, req.Groups)
			return nil, nil, false
		}
		rt := req.Groups[0].Topics[0]
		cur.asked = append(cur.asked, slices.Clone(rt.Partitions))
		if len(cur.asked) > cur.n {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		g := kmsg.NewOffsetFetchResponseGroup()
		g.Group = req.Groups[0].Group
		st := kmsg.NewOffsetFetchResponseGroupTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID // at v10 the ID only
		for _, p := range rt.Partitions {
			sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			sp.Partition, sp.Offset = p, -1
			st.Partitions = append(st.Partitions, sp)
		}
		g.Topics = append(g.Topics, st)
		cur.edit(&g)
		resp.Groups = append(resp.Groups, g)
		return resp, nil, true
	})
	// answer has the test answer the next n questions of t with edit
	// applied to "no offset" for each partition asked for; it returns
	// the partitions of each question asked during t.
	answer := func(t *testing.T, n int, edit func(g *kmsg.OffsetFetchResponseGroup)) func() [][]int32 {
		s := &script{n: n, edit: edit}
		mu.Lock()
		cur = s
		mu.Unlock()
		t.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			cur = nil
		})
		return func() [][]int32 {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(s.asked)
		}
	}
	ask := func(cl *kgo.Client) (map[int32]slots.Committed, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return slots.AwaitStable(ctx, cl, group, topic, []int32{0, 1})
	}

	t.Run("group-wide unstable", func(t *testing.T) {
		// No retries in franz-go, which would otherwise retry the
		// group-wide error itself: AwaitStable must.
		cl := kfaketest.Client(t, c, kgo.RequestRetries(0))
		asked := answer(t, 2, func(g *kmsg.OffsetFetchResponseGroup) {
			g.ErrorCode = kerr.UnstableOffsetCommit.Code
			g.Topics = nil
		})
		got, err := ask(cl)
		if err != nil || !maps.Equal(got, want) {
			t.Errorf("got %v, %v; want %v once stable", got, err, want)
		}
		if a := asked(); len(a) != 3 {
			t.Errorf("asked %v, want three times (two answered unstable, then kfake's answer)", a)
		}
	})
	t.Run("one slot unstable", func(t *testing.T) {
		// Slot 1 answered at once, slot 0 unstable once: the second
		// question is for slot 0 only (kfake answers it).
		cl := kfaketest.Client(t, c)
		asked := answer(t, 1, func(g *kmsg.OffsetFetchResponseGroup) {
			for i := range g.Topics[0].Partitions {
				if p := &g.Topics[0].Partitions[i]; p.Partition == 0 {
					p.ErrorCode = kerr.UnstableOffsetCommit.Code
				} else {
					p.Offset, p.Metadata = 7, kmsg.StringPtr("seq=7")
				}
			}
		})
		got, err := ask(cl)
		if want := map[int32]slots.Committed{0: {Offset: 5}, 1: {Offset: 7, Metadata: "seq=7"}}; err != nil || !maps.Equal(got, want) {
			t.Errorf("got %v, %v; want %v", got, err, want)
		}
		if a := asked(); len(a) != 2 || !slices.Equal(a[0], []int32{0, 1}) || !slices.Equal(a[1], []int32{0}) {
			t.Errorf("asked %v, want [0 1] then only the unstable [0]", a)
		}
	})
	for _, tc := range []struct {
		name string
		edit func(g *kmsg.OffsetFetchResponseGroup)
		want error
		says string
	}{
		{"group error", func(g *kmsg.OffsetFetchResponseGroup) {
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
		}, kerr.GroupAuthorizationFailed, "slots [0 1]"},
		{"slot error", func(g *kmsg.OffsetFetchResponseGroup) {
			g.Topics[0].Partitions[1].ErrorCode = kerr.TopicAuthorizationFailed.Code
		}, kerr.TopicAuthorizationFailed, "slot 1 "},
		{"slot left out", func(g *kmsg.OffsetFetchResponseGroup) {
			g.Topics[0].Partitions = g.Topics[0].Partitions[:1]
		}, nil, "slot 1 not in the response"},
		{"group left out", func(g *kmsg.OffsetFetchResponseGroup) {
			g.Group = "another"
		}, nil, "not in the response"},
		{"topic ID unknown", func(g *kmsg.OffsetFetchResponseGroup) {
			// franz-go cannot name the topic, and says so on each
			// partition (v10, by topic ID).
			g.Topics[0].TopicID = [16]byte{1, 2, 3}
		}, kerr.UnknownTopicID, "slot 0 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := kfaketest.Client(t, c)
			answer(t, 1, tc.edit)
			got, err := ask(cl)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), group) {
				t.Errorf("got %v, %v; want an error wrapping %v, with %q and the group", got, err, tc.want, tc.says)
			}
		})
	}
	t.Run("closed client", func(t *testing.T) {
		cl := kfaketest.Client(t, c)
		cl.Close()
		if got, err := ask(cl); err == nil {
			t.Errorf("AwaitStable on a closed client: %v, want an error", got)
		}
	})
	t.Run("no slots", func(t *testing.T) {
		got, err := slots.AwaitStable(context.Background(), kfaketest.Client(t, c), group, topic, nil)
		if err != nil || len(got) != 0 {
			t.Errorf("AwaitStable of no slots: %v, %v; want nothing, at once", got, err)
		}
	})
}

// ---- helpers ----

// classicTransactions are data.ClassicTransactions(), the request versions
// of kmirror's transactional producers, built here the same way: data
// imports this package.
func classicTransactions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	v.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	v.SetMaxKeyVersion(int16(kmsg.AddPartitionsToTxn), 3)
	return v
}

// capped is kversion.Stable with key at most max.
func capped(key kmsg.Key, max int16) *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(key), max)
	return v
}

// txnProducer is a worker's transactional producer with ID id, logging to
// h's logs; the counter counts what it sent.
func txnProducer(t *testing.T, h *harness, seeds []string, id string) (*kgo.Client, *requestCounter) {
	t.Helper()
	sent := &requestCounter{}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.TransactionalID(id),
		kgo.MaxVersions(classicTransactions()),
		// The topic ID CommitInTxn needs stays cached for this long, so
		// that a slow machine does not see it refreshed.
		kgo.MetadataMinAge(time.Minute),
		kgo.WithHooks(sent),
		kgo.WithLogger(kgo.BasicLogger(h.logs, kgo.LogLevelInfo, func() string { return "producer " })),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, sent
}

// counted is a client of seeds with opts and a counter of what it sent.
func counted(t *testing.T, seeds []string, opts ...kgo.Opt) (*kgo.Client, *requestCounter) {
	t.Helper()
	sent := &requestCounter{}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.WithHooks(sent)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, sent
}

// beginWithRecord begins a transaction and produces a record in it, so
// that franz-go ends it with an EndTxn.
func beginWithRecord(t *testing.T, ctx context.Context, pr *kgo.Client, topic string) {
	t.Helper()
	if err := pr.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := pr.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func endTxn(t *testing.T, ctx context.Context, pr *kgo.Client, how kgo.TransactionEndTry) {
	t.Helper()
	if err := pr.EndTransaction(ctx, how); err != nil {
		t.Fatalf("EndTransaction(%v): %v", how, err)
	}
}

// awaitStable is AwaitStable of ss bounded by timeout, failing the test on
// an error.
func awaitStable(t *testing.T, timeout time.Duration, cl *kgo.Client, group, topic string, ss ...int32) map[int32]slots.Committed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	got, err := slots.AwaitStable(ctx, cl, group, topic, ss)
	if err != nil {
		t.Fatalf("AwaitStable of slots %v: %v", ss, err)
	}
	return got
}

// requestCounter counts the requests a client wrote, by key.
type requestCounter struct {
	mu sync.Mutex
	n  map[kmsg.Key]int
}

var _ kgo.HookBrokerWrite = (*requestCounter)(nil)

func (c *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[kmsg.Key]int{}
	}
	c.n[kmsg.Key(key)]++
}

func (c *requestCounter) snapshot() map[kmsg.Key]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// since returns how many of each were written since the snapshot before.
func (c *requestCounter) since(before map[kmsg.Key]int) map[kmsg.Key]int {
	d := c.snapshot()
	if d == nil {
		d = map[kmsg.Key]int{}
	}
	for k, n := range before {
		d[k] -= n
	}
	return d
}
