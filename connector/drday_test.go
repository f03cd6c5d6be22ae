package connector

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/fence"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestDisasterRecoveryDay is the whole day on kfake, mirror by mirror:
// fwd copies A to B (identity names); A takes 5 records fwd never copies;
// failover moves the group to B; applications write to B and consume
// there; failback prepares back (B to A), which copies exactly B's new
// records after A's end, reports A's 5 as the divergent tail and
// translates the group back (one partition through fwd's index backwards,
// the other through back's own); a cutover of back, then a failback of
// fwd, returns to the first direction, fwd copying only what A took since.
func TestDisasterRecoveryDay(t *testing.T) {
	t.Parallel()
	a, b := kfaketest.Clusters(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	manual := kgo.RecordPartitioner(kgo.ManualPartitioner())
	aCl, bCl := kfaketest.Client(t, a, manual), kfaketest.Client(t, b, manual)
	aAdm, bAdm := kadm.NewClient(aCl), kadm.NewClient(bCl)
	if _, err := aAdm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produce := func(cl *kgo.Client, p int32, prefix string, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d", prefix, p, i)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	values := func(c *kfake.Cluster, p int32) []string { return kfaketest.ReadCommitted(t, c, "orders", p) }
	mirror := drMirror
	run := func(cfg Config) (stop func()) {
		_, stop = runMirror(t, ctx, cfg)
		return stop
	}
	committed := func(adm *kadm.Client, want map[int32]int64) func() bool {
		return func() bool {
			got, err := adm.FetchOffsets(ctx, "billing")
			if err != nil {
				return false
			}
			for p, at := range want {
				if o, ok := got.Lookup("orders", p); !ok || o.At != at {
					return false
				}
			}
			return true
		}
	}
	seq := func(prefix string, p int32, from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("%s-%d-%d", prefix, p, i))
		}
		return out
	}

	// A normal day: fwd copies A to B, billing read 10 of each on A.
	fwd, back := mirror("fwd", a, b), mirror("back", b, a)
	produce(aCl, 0, "a", 20)
	produce(aCl, 1, "a", 20)
	kfaketest.CommitOffsets(t, aAdm, "billing", "orders", map[int32]int64{0: 10, 1: 10})
	stopFwd := run(fwd)
	kfaketest.WaitFor(t, func() bool { return len(values(b, 0)) == 20 && len(values(b, 1)) == 20 }, "fwd to copy A")
	kfaketest.WaitFor(t, committed(bAdm, map[int32]int64{0: 10, 1: 10}), "billing synced to B")
	// The disaster: fwd stops copying; A takes 5 records it never copies
	// on partition 0; on partition 1, 3 that fwd copied and was killed
	// before it indexed them (at least once: the copies are on B, its
	// progress does not name them).
	stopFwd()
	produce(aCl, 0, "lost", 5)
	produce(aCl, 1, "dup", 3)
	for _, r := range readFrom(t, a, "orders", 1, 20, 3) {
		c := &kgo.Record{Topic: "orders", Partition: 1, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}
		if err := bCl.ProduceSync(ctx, c).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// 1. Failover.
	fm, err := New(fwd)
	if err != nil {
		t.Fatal(err)
	}
	frep, err := fm.Failover(ctx, FailoverOptions{FromCheckpoints: true})
	if err != nil || !frep.OK {
		t.Fatalf("failover: %v %+v", err, frep)
	}
	// Applications on B: 7 new records per partition; billing reads
	// on to 23 on partition 0 (3 of the new ones), 15 on partition 1
	// (inside fwd's copy).
	produce(bCl, 0, "b", 7)
	produce(bCl, 1, "b", 7)
	kfaketest.CommitOffsets(t, bAdm, "billing", "orders", map[int32]int64{0: 23, 1: 15})

	// 2. Failback: back is prepared; it refuses while fwd is not fenced
	// (checked first on a mirror whose former is not fenced).
	bm, err := New(back)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bm.Failback(ctx, "nosuch"); err == nil {
		t.Fatal("a failback for a mirror that was never fenced succeeded")
	}
	brep, err := bm.Failback(ctx, "fwd")
	if err != nil {
		t.Fatalf("failback: %v %+v", err, brep)
	}
	want := []FailbackPartition{
		{Topic: "orders", Partition: 0, Start: 20, TargetEnd: 25, DivergentFrom: 20, DivergentCount: 5},
		{Topic: "orders", Partition: 1, Start: 23, TargetEnd: 23, DivergentFrom: 23},
	}
	if brep.Divergent != 5 || !slices.Equal(brep.Partitions, want) {
		t.Fatalf("failback report %+v; want %+v, 5 divergent", brep.Partitions, want)
	}
	stopBack := run(back)
	// A: its own records (with the 5 lost ones, in place), then exactly
	// B's new ones, once.
	wantA := map[int32][]string{
		0: slices.Concat(seq("a", 0, 0, 20), seq("lost", 0, 0, 5), seq("b", 0, 0, 7)),
		1: slices.Concat(seq("a", 1, 0, 20), seq("dup", 1, 0, 3), seq("b", 1, 0, 7)),
	}
	for p, w := range wantA {
		kfaketest.WaitFor(t, func() bool { return len(values(a, p)) >= len(w) }, fmt.Sprintf("back to copy partition %d", p))
		if got := values(a, p); !slices.Equal(got, w) {
			t.Fatalf("A partition %d after the copy back:\n got %v\nwant %v", p, got, w)
		}
	}
	// billing on A: 23 on B is the 4th new record (A 25+3=28); 15 on B
	// is inside fwd's copy: A 15.
	kfaketest.WaitFor(t, committed(aAdm, map[int32]int64{0: 28, 1: 15}), "billing translated back to A")

	// 3. The switch back: producers on B stopped; cutover of back. A
	// consumer that committed on A ahead of the translation makes the
	// gate refuse, changing nothing (the commit would move it back).
	kfaketest.CommitOffsets(t, aAdm, "billing", "orders", map[int32]int64{0: 30, 1: 15})
	crep, err := bm.Cutover(ctx, CutoverOptions{Quiet: 500 * time.Millisecond})
	if err == nil || crep.Fence != "" {
		t.Fatalf("cutover with a group ahead on the target: %v, fence %q; want a refusal before the fence", err, crep.Fence)
	}
	if st, _, err := fence.Read(ctx, nil, back.TargetOpts, aAdm, "back"); err != nil || st.Fenced {
		t.Fatalf("back fenced by a refused cutover: %+v %v", st, err)
	}
	crep, err = bm.Cutover(ctx, CutoverOptions{Quiet: 500 * time.Millisecond, AllowRewind: true})
	if err != nil || !crep.OK {
		t.Fatalf("cutover: %v %+v", err, crep)
	}
	stopBack()
	// fwd is prepared again, from A's end (everything there up to now
	// is on B or was reported).
	fm2, err := New(fwd)
	if err != nil {
		t.Fatal(err)
	}
	frep2, err := fm2.Failback(ctx, "back")
	if err != nil || frep2.Divergent != 0 {
		t.Fatalf("failback of fwd: %v %+v", err, frep2)
	}
	produce(aCl, 0, "c", 4)
	run(fwd)
	wantB := slices.Concat(seq("a", 0, 0, 20), seq("b", 0, 0, 7), seq("c", 0, 0, 4))
	kfaketest.WaitFor(t, func() bool { return len(values(b, 0)) >= len(wantB) }, "fwd to copy A's new records")
	if got := values(b, 0); !slices.Equal(got, wantB) {
		t.Fatalf("B partition 0 after the switch back:\n got %v\nwant %v", got, wantB)
	}
	st, _, err := fence.Read(ctx, nil, fwd.TargetOpts, bAdm, "fwd")
	if err != nil || st.Fenced || st.ReverseOf != "back" {
		t.Fatalf("fwd's fence after the switch back: %+v %v", st, err)
	}
}

// readFrom reads n records of a partition from offset from.
func readFrom(t *testing.T, c *kfake.Cluster, topic string, p int32, from int64, n int) []*kgo.Record {
	t.Helper()
	cl := kfaketest.Client(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s/%d", len(out), n, topic, p)
		}
		out = append(out, fs.Records()...)
	}
	return out[:n]
}
