package connector

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/fence"
	"github.com/kmirror/kmirror/connector/state"
	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestFailoverWithSourceGone: the group sync checkpoints a group though
// committing is off; the worker stops having seen 7 records on one
// partition it could not copy; the source dies. kmirror failover fences
// the mirror, translates the group from its checkpoints on
// the target (the source does not answer), commits it there, and reports
// the recovery point: the 7 records the target lacks, on that partition
// only. A second failover, with everything done, changes nothing and
// succeeds again.
func TestFailoverWithSourceGone(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	ctx := context.Background()
	srcCl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	srcAdm := kadm.NewClient(srcCl)
	dstCl := kfaketest.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	dstAdm := kadm.NewClient(dstCl)
	if _, err := srcAdm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produce := func(p int32, n int) {
		t.Helper()
		var recs []*kgo.Record
		for range n {
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: []byte("x")})
		}
		if err := srcCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 30)
	produce(1, 30)
	kfaketest.CommitOffsets(t, srcAdm, "billing", "orders", map[int32]int64{0: 10, 1: 20})

	cfg := Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		SourceOpts:          []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)},
		TargetOpts:          []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)},
		Filters:             []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll("orders")}},
		GroupFilters:        []filters.GroupFilter{filters.Regex{Include: filters.MustCompileAll(".*")}},
		RefreshInterval:     200 * time.Millisecond,
		ProgressInterval:    100 * time.Millisecond,
		GroupSyncInterval:   100 * time.Millisecond,
		GroupCheckpointOnly: true, // import-mm2's default: nothing committed by the sync
		ShutdownTimeout:     2 * time.Second,
		Logger:              kfaketest.Logger(),
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	defer func() { stop(); <-done }()
	kfaketest.WaitFor(t, func() bool {
		tds, err := dstAdm.ListTopics(ctx, "src.orders")
		return err == nil && tds.Has("src.orders")
	}, "the target topic created")
	kfaketest.WaitFor(t, func() bool {
		ends := kfaketest.EndOffsets(t, dst, "src.orders")
		return ends[0] == 30 && ends[1] == 30
	}, "both partitions copied")
	kfaketest.WaitFor(t, func() bool {
		for _, g := range m.Groups() {
			if g.Group == "billing" && g.State == GroupSynced && len(g.Partitions) == 2 {
				return true
			}
		}
		return false
	}, "the group translated (and checkpointed)")
	if got, err := dstAdm.FetchOffsets(ctx, "billing"); err == nil && len(got) > 0 {
		t.Fatalf("the group sync committed %v with sync.group_offsets disabled", got)
	}

	// The worker stops; it had seen the source's end at 37 on partition
	// 1 and copied to 30 (a target that refused that partition's copies:
	// WriteAsync then writes the position again for the new end, see
	// TestProgressWritesSourceEnd), which its last position says.
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
	produce(1, 7)
	tp1 := data.TopicPartition{Topic: "orders", Partition: 1}
	k, v := data.EncodeProgress(tp1, data.Position{Next: 30, SourceEnd: 37})
	if err := dstCl.ProduceSync(ctx, &kgo.Record{Topic: m.progressTopic, Partition: state.PartitionFor(m.statePartitions(m.progressTopic), "orders", 1), Key: k, Value: m.sealer.Seal(v)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	src.Close()

	offline, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rep, err := offline.Failover(fctx, FailoverOptions{SourceTimeout: time.Second, Reason: "test"})
	if err != nil {
		t.Fatalf("failover: %v\n%+v", err, rep)
	}
	if rep.SourceReachable || rep.SourceError == "" {
		t.Fatalf("source reachable %v (%q); want unreachable with the reason", rep.SourceReachable, rep.SourceError)
	}
	if !strings.Contains(rep.Fence, "fenced") {
		t.Fatalf("report's fence %q", rep.Fence)
	}
	want := map[int32]int64{0: 0, 1: 7}
	if rep.NotCopied != 7 || len(rep.RecoveryPoint) != 2 {
		t.Fatalf("recovery point %+v (total %d); want 7 records not copied, on partition 1", rep.RecoveryPoint, rep.NotCopied)
	}
	for _, p := range rep.RecoveryPoint {
		if p.NotCopied != want[p.Partition] || p.CopiedTo != 30 {
			t.Fatalf("partition %d: %+v; want copied to 30, %d not copied", p.Partition, p, want[p.Partition])
		}
	}
	if len(rep.Groups) != 1 || !rep.Groups[0].Applied || !rep.Groups[0].Exact || rep.Groups[0].OffsetsFrom != FromCheckpoints || rep.Groups[0].CheckpointAt.IsZero() {
		t.Fatalf("groups %+v; want billing applied exactly from its checkpoints", rep.Groups)
	}
	got, err := dstAdm.FetchOffsets(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	for p, at := range map[int32]int64{0: 10, 1: 20} {
		if o, ok := got.Lookup("src.orders", p); !ok || o.At != at {
			t.Fatalf("billing on the target at src.orders/%d: %+v; want %d", p, o, at)
		}
	}
	// kmirror translate says the same with the source gone: from the
	// checkpoints, with their age and each partition's records not
	// copied.
	tst, err := offline.Translate(fctx, "billing", TranslateOptions{SourceTimeout: time.Second})
	if err != nil || tst.OffsetsFrom != FromCheckpoints || tst.SourceError == "" || tst.CheckpointAt.IsZero() || len(tst.Partitions) != 2 {
		t.Fatalf("translate with the source gone: %v %+v", err, tst)
	}
	for _, p := range tst.Partitions {
		if p.NotCopied != want[p.Partition] {
			t.Fatalf("translate: partition %d not copied %d, want %d", p.Partition, p.NotCopied, want[p.Partition])
		}
	}
	// Running it again is safe and finds everything done.
	rep2, err := offline.Failover(fctx, FailoverOptions{SourceTimeout: time.Second})
	if err != nil || !rep2.OK {
		t.Fatalf("second failover: %v %+v", err, rep2)
	}
	st, _, err := fence.Read(ctx, nil, cfg.TargetOpts, dstAdm, "m")
	if err != nil || !st.Fenced {
		t.Fatalf("fence after failover: %+v %v", st, err)
	}
}

// TestAwaitWorkersGoneUnknownGroup: a target that answers DescribeGroups
// with GROUP_ID_NOT_FOUND (Kafka 4 does for a group it does not hold: a
// mirror none of whose workers ever ran, such as a reverse mirror before
// its first kmirror failback) has no worker to wait for; any other error
// is waited on until the context ends.
func TestAwaitWorkersGoneUnknownGroup(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	m, err := New(Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		SourceOpts: []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)},
		TargetOpts: []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)},
		Logger:     kfaketest.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.newClients()
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	var code atomic.Int32
	code.Store(int32(kerr.GroupIDNotFound.Code))
	dst.ControlKey(int16(kmsg.DescribeGroups), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		req := kreq.(*kmsg.DescribeGroupsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range req.Groups {
			dg := kmsg.NewDescribeGroupsResponseGroup()
			dg.Group, dg.ErrorCode = g, int16(code.Load())
			resp.Groups = append(resp.Groups, dg)
		}
		return resp, nil, true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.awaitWorkersGone(ctx, c); err != nil {
		t.Fatalf("GROUP_ID_NOT_FOUND: %v, want no worker to wait for", err)
	}
	code.Store(int32(kerr.CoordinatorNotAvailable.Code))
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.awaitWorkersGone(ctx, c); err == nil || !strings.Contains(err.Error(), "did not stop in time") {
		t.Fatalf("COORDINATOR_NOT_AVAILABLE: %v, want a wait that times out", err)
	}
}
