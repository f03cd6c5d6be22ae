package connector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/kfaketest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/filters"
)

// sourceRecords reads a topic partition read_committed from start to end
// and returns offset -> value.
func sourceRecords(t *testing.T, addrs []string, topic string, partition int32) map[int64]string {
	t.Helper()
	return kfaketest.ConsumeFrom(t, addrs, topic, partition, 0)
}

// TestFailoverExact: a consumer group commits at arbitrary points on the
// source (mid-batch, inside and right after aborted transactions, on
// transaction markers); after the sync, the same group on the target
// resumes with exactly the records after its last source commit.
func TestFailoverExact(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	ctx := context.Background()
	srcCl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer srcCl.Close()
	srcAdm := kadm.NewClient(srcCl)
	if _, err := srcAdm.CreateTopic(ctx, 3, 1, nil, "plain"); err != nil {
		t.Fatal(err)
	}
	if _, err := srcAdm.CreateTopic(ctx, 1, 1, nil, "txn"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 600 {
		recs = append(recs, &kgo.Record{Topic: "plain", Partition: int32(i % 3), Value: fmt.Appendf(nil, "plain-%d", i)})
	}
	if err := srcCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produceTxn(t, src, "txn", []string{"c1", "c2", "c3"}, true)
	produceTxn(t, src, "txn", []string{"a1", "a2", "a3"}, false)
	produceTxn(t, src, "txn", []string{"c4", "c5"}, true)
	if err := srcCl.ProduceSync(ctx, &kgo.Record{Topic: "txn", Value: []byte("p1")}, &kgo.Record{Topic: "txn", Value: []byte("p2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// txn offsets: c1..c3 = 0..2, marker 3, a1..a3 = 4..6, marker 7,
	// c4 c5 = 8 9, marker 10, p1 p2 = 11 12.
	commits := map[string]kadm.Offsets{}
	add := func(group, topic string, p int32, at int64) {
		os := commits[group]
		if os == nil {
			os = kadm.Offsets{}
		}
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
		commits[group] = os
	}
	add("g-mid", "plain", 0, 77)
	add("g-mid", "plain", 1, 1)
	add("g-mid", "plain", 2, 200) // the end: nothing left to read
	add("g-marker", "txn", 0, 3)  // on a commit marker
	add("g-aborted", "txn", 0, 5) // inside the aborted transaction
	add("g-after", "txn", 0, 10)  // on the last marker
	add("g-start", "txn", 0, 0)
	add("g-end", "txn", 0, 13) // the end, records after the markers
	for g, os := range commits {
		if _, err := srcAdm.CommitOffsets(ctx, g, os); err != nil {
			t.Fatal(err)
		}
	}

	m, err := New(Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		SourceOpts:        []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)},
		TargetOpts:        []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)},
		Filters:           []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll(".*")}},
		GroupFilters:      []filters.GroupFilter{filters.Regex{Include: filters.MustCompileAll(".*")}},
		RefreshInterval:   200 * time.Millisecond,
		ProgressInterval:  100 * time.Millisecond,
		GroupSyncInterval: 100 * time.Millisecond,
		Logger:            kfaketest.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(runCtx) }()
	defer func() { stop(); <-done }()

	dstCl, err := kgo.NewClient(kgo.SeedBrokers(dst.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer dstCl.Close()
	dstAdm := kadm.NewClient(dstCl)
	kfaketest.WaitFor(t, func() bool {
		for g := range commits {
			synced := false
			for _, gs := range m.Groups() {
				if gs.Group == g && gs.State == GroupSynced && len(gs.Partitions) == len(commits[g]["plain"])+len(commits[g]["txn"]) {
					synced = true
				}
			}
			if !synced {
				return false
			}
		}
		return true
	}, "every group to be synced")

	// kmirror translate computes the same offsets from the stored index,
	// without the worker's memory.
	cfg := m.cfg
	offline, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool {
		st, err := offline.Translate(ctx, "g-aborted", TranslateOptions{})
		return err == nil && len(st.Partitions) == 1 && st.Partitions[0].TargetOffset == 3 && !st.Partitions[0].Behind
	}, "translate to read the persisted index (c4 is at target offset 3)")
	// Groups at the end of their partitions are synced there too, not
	// behind: everything before their offsets is copied, and the stored
	// positions say so (kmirror translate answered behind for good for a
	// group at the end of a partition with a transaction before its last
	// records: TestKafkaMM2Takeover).
	for _, g := range []string{"g-end", "g-mid"} {
		var last string
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, err := offline.Translate(ctx, g, TranslateOptions{})
			if err == nil && st.State == GroupSynced {
				break
			}
			last = fmt.Sprintf("%s %+v (err %v)", st.State, st.Partitions, err)
			if time.Now().After(deadline) {
				t.Fatalf("kmirror translate %s from the stored positions: %s after 10s, want synced", g, last)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if _, err := srcAdm.CommitOffsets(ctx, "g-apply", kadm.OffsetsFromRecords(kgo.Record{Topic: "txn", Partition: 0, Offset: 8})); err != nil {
		t.Fatal(err)
	}
	applier, _ := New(cfg)
	if _, err := applier.Translate(ctx, "g-apply", TranslateOptions{Apply: true}); err != nil {
		t.Fatal(err)
	}
	if got, err := dstAdm.FetchOffsets(ctx, "g-apply"); err != nil {
		t.Fatal(err)
	} else if o, ok := got.Lookup("src.txn", 0); !ok || o.At != 4 { // after c4: c5
		t.Fatalf("applied offset = %+v, want 4", o)
	}

	for g, os := range commits {
		fetched, err := dstAdm.FetchOffsets(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		os.Each(func(o kadm.Offset) {
			target := "src." + o.Topic
			got, ok := fetched.Lookup(target, o.Partition)
			if !ok {
				t.Fatalf("group %s has no offset for %s/%d on the target", g, target, o.Partition)
			}
			want := valuesFrom(sourceRecords(t, src.ListenAddrs(), o.Topic, o.Partition), o.At)
			gotVals := valuesFrom(kfaketest.ConsumeFrom(t, dst.ListenAddrs(), target, o.Partition, got.At), got.At)
			if !reflect.DeepEqual(gotVals, want) {
				t.Errorf("group %s %s/%d: committed %d at the source, %d at the target: target reads %v, source had %v after the commit",
					g, o.Topic, o.Partition, o.At, got.At, gotVals, want)
			}
		})
	}
}

// valuesFrom returns the values at offsets >= from, in offset order.
func valuesFrom(recs map[int64]string, from int64) []string {
	out := []string{}
	for o := from; o <= kfaketest.LastOffset(recs); o++ {
		if v, ok := recs[o]; ok {
			out = append(out, v)
		}
	}
	return out
}

func produceTxn(t *testing.T, c *kfake.Cluster, topic string, values []string, commit bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("tx-"+topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

// TestTranslateApplyNeverRewinds: `kmirror translate --apply` refuses to
// move a target partition backwards (a *RewindError naming the partition
// with its current and new offsets, nothing committed) unless AllowRewind;
// it refuses when the target group's current offsets cannot be read (an
// error, not "nothing there"); and it never applies a partition that
// cannot be translated exactly.
func TestTranslateApplyNeverRewinds(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srcCl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	srcAdm := kadm.NewClient(srcCl)
	dstAdm := kadm.NewClient(kfaketest.Client(t, dst))
	if _, err := srcAdm.CreateTopic(ctx, 2, 1, nil, "ledger"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: "ledger", Partition: 0, Value: []byte{byte(i)}})
	}
	if err := srcCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		SourceOpts:       []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)},
		TargetOpts:       []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)},
		Filters:          []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll(".*")}},
		RefreshInterval:  200 * time.Millisecond,
		ProgressInterval: 100 * time.Millisecond,
		Logger:           kfaketest.Logger(),
	}
	worker, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = worker.Run(runCtx) }()
	// Partition 1 has no record: nothing of it is ever copied, so an
	// offset committed there has no target offset.
	kfaketest.CommitOffsets(t, srcAdm, "payroll", "ledger", map[int32]int64{0: 40, 1: 3})
	translate := func(opts TranslateOptions) (GroupStatus, error) {
		t.Helper()
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return m.Translate(ctx, "payroll", opts)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := translate(TranslateOptions{})
		if err == nil && len(st.Partitions) > 0 && st.Partitions[0].TargetOffset == 40 {
			if len(st.Partitions) != 2 || !st.Partitions[1].Untranslatable || st.Partitions[1].Reason == "" || st.State != GroupPartial {
				t.Errorf("translate: %+v, want partition 1 untranslatable with a reason and the group partial", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("translate never printed ledger/0 at 40 within 60s: %+v, %v", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	<-done

	// The target group is ahead: consumers moved on there.
	kfaketest.CommitOffsets(t, dstAdm, "payroll", "src.ledger", map[int32]int64{0: 70})
	target := func() map[int32]int64 {
		t.Helper()
		resp, err := dstAdm.FetchOffsets(ctx, "payroll")
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		resp.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.At >= 0 {
				out[o.Partition] = o.At
			}
		})
		return out
	}
	_, err = translate(TranslateOptions{Apply: true})
	var rw *RewindError
	if !errors.As(err, &rw) || len(rw.Partitions) != 1 || rw.Partitions[0] != (Rewind{Topic: "src.ledger", Partition: 0, Current: 70, New: 40}) {
		t.Fatalf("apply over a target group that is ahead: err %v, want a RewindError for src.ledger/0 from 70 to 40", err)
	}
	if !strings.Contains(err.Error(), "src.ledger/0 from 70 to 40") {
		t.Errorf("the error %q does not name the partition with its current and new offsets", err)
	}
	if got := target(); !maps.Equal(got, map[int32]int64{0: 70}) {
		t.Errorf("after a refused apply the target group is at %v, want it untouched at 0:70", got)
	}

	// Unreadable current offsets: refused, even with AllowRewind.
	fault := dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetFetch}, Group: "payroll", Count: -1})
	_, err = translate(TranslateOptions{Apply: true, AllowRewind: true})
	fault.Remove()
	if err == nil || !strings.Contains(err.Error(), "read the current offsets of group payroll on the target") {
		t.Errorf("apply while the target's offsets cannot be read: err %v, want a refusal naming them", err)
	}
	if got := target(); !maps.Equal(got, map[int32]int64{0: 70}) {
		t.Errorf("after an apply refused for unreadable offsets the target group is at %v, want 0:70", got)
	}

	if _, err := translate(TranslateOptions{Apply: true, AllowRewind: true}); err != nil {
		t.Fatalf("apply with AllowRewind: %v", err)
	}
	if got := target(); !maps.Equal(got, map[int32]int64{0: 40}) {
		t.Errorf("after an apply with AllowRewind the target group is at %v, want 0:40 and nothing for the untranslatable partition 1", got)
	}
}
