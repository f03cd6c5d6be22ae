package connector

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/fence"
	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestFenceStopsRunningWorkers: once the mirror is fenced, every worker
// stops copying within a few fence checks, persists its progress and
// leaves the mirror's group; records produced after that are not copied,
// and the status says the mirror is fenced. Both modes.
func TestFenceStopsRunningWorkers(t *testing.T) {
	t.Parallel()
	for _, eos := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly_once=%v", eos), func(t *testing.T) {
			t.Parallel()
			src, dst := kfaketest.Clusters(t)
			ctx := context.Background()
			srcCl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			dstCl := kfaketest.Client(t, dst)
			dstAdm := kadm.NewClient(dstCl)
			if _, err := kadm.NewClient(srcCl).CreateTopic(ctx, 4, 1, nil, "orders"); err != nil {
				t.Fatal(err)
			}
			produce := func(prefix string) {
				t.Helper()
				var recs []*kgo.Record
				for p := range int32(4) {
					for i := range 20 {
						recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
					}
				}
				if err := srcCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			mode := func(c *Config) { c.Cluster.ExactlyOnce = eos }
			produce("a")
			w1 := startClusterWorker(t, src, dst, 4, mode)
			w2 := startClusterWorker(t, src, dst, 4, mode)
			copied := func() int {
				n := 0
				for p := range int32(4) {
					n += len(kfaketest.ReadCommitted(t, dst, "src.orders", p))
				}
				return n
			}
			kfaketest.WaitFor(t, func() bool { return copied() == 80 }, "the first 80 records copied")

			if err := fence.Write(ctx, dstAdm, dstCl, "m", -1, fence.State{Fenced: true, By: "test", Reason: "failover"}); err != nil {
				t.Fatal(err)
			}
			kfaketest.WaitFor(t, func() bool {
				g, err := dstAdm.DescribeGroups(ctx, policy.InternalTopicPrefix+"m")
				return err == nil && len(g[policy.InternalTopicPrefix+"m"].Members) == 0
			}, "both workers to leave the mirror's group")
			for _, w := range []*clusterWorker{w1, w2} {
				if st := w.m.Status(); st.Fenced == "" || st.Ready {
					t.Fatalf("a fenced worker's status: fenced %q, ready %v; want fenced and not ready", st.Fenced, st.Ready)
				}
			}
			produce("b")
			time.Sleep(3 * fence.CheckEvery)
			if n := copied(); n != 80 {
				t.Fatalf("%d records on the target after the fence; want the 80 copied before it", n)
			}
			// Progress was persisted on the way out: a position
			// per partition at the end of what was copied.
			ld, err := data.LoadProgress(ctx, nil, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, dstAdm, policy.InternalTopic("m", "progress"))
			if err != nil {
				t.Fatal(err)
			}
			for p := range int32(4) {
				tp := data.TopicPartition{Topic: "orders", Partition: p}
				if pos := ld.Positions[tp]; pos.Next != 20 || pos.SourceEnd != 20 {
					t.Fatalf("partition %d: persisted position %+v; want next 20 with source end 20", p, pos)
				}
			}
		})
	}
}

// TestFencedMirrorWaitsAtStart: a worker of a fenced mirror copies nothing
// and joins no group; once the fence is lifted it starts copying without
// a restart.
func TestFencedMirrorWaitsAtStart(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	ctx := context.Background()
	srcCl := kfaketest.Client(t, src)
	dstCl := kfaketest.Client(t, dst)
	dstAdm := kadm.NewClient(dstCl)
	if _, err := kadm.NewClient(srcCl).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := srcCl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := fence.Write(ctx, dstAdm, dstCl, "m", -1, fence.State{Fenced: true, By: "test", Reason: "failover"}); err != nil {
		t.Fatal(err)
	}
	w := startClusterWorker(t, src, dst, 2)
	kfaketest.WaitFor(t, func() bool { return w.m.Status().Fenced != "" }, "the worker to report the fence")
	time.Sleep(2 * fence.CheckEvery)
	if topics, err := dstAdm.ListTopics(ctx, "src.orders"); err != nil || topics.Has("src.orders") {
		t.Fatalf("a fenced mirror created its target topic (%v)", err)
	}
	if err := fence.Write(ctx, dstAdm, dstCl, "m", -1, fence.State{Fenced: false, By: "test", Reason: "failback"}); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool { return len(kfaketest.ReadCommitted(t, dst, "src.orders", 0)) == 1 }, "the record copied once the fence is lifted")
	if st := w.m.Status(); st.Fenced != "" {
		t.Fatalf("status still fenced: %q", st.Fenced)
	}
}
