package connector

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// clusterWorker is one in-process kmirror worker of a mirror in cluster
// mode.
type clusterWorker struct {
	m    *Mirror
	stop context.CancelFunc
	done chan error
}

// startClusterWorker runs a worker of mirror m over src and dst; tune
// changes its config (a target behind a fault proxy, say).
func startClusterWorker(t *testing.T, src, dst *kfake.Cluster, slots int32, tune ...func(*Config)) *clusterWorker {
	t.Helper()
	cfg := Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		SourceOpts:       []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)},
		TargetOpts:       []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)},
		Filters:          []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll("orders")}},
		RefreshInterval:  200 * time.Millisecond,
		ShutdownTimeout:  10 * time.Second,
		Cluster:          &ClusterConfig{ExactlyOnce: true, Slots: slots, SessionTimeout: 6 * time.Second, CommitInterval: 50 * time.Millisecond},
		Logger:           kfaketest.Logger(),
		ProgressInterval: 100 * time.Millisecond,
	}
	for _, fn := range tune {
		fn(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	w := &clusterWorker{m: m, stop: stop, done: make(chan error, 1)}
	go func() { w.done <- m.Run(ctx) }()
	t.Cleanup(func() { w.shutdown(t) })
	return w
}

func (w *clusterWorker) shutdown(t *testing.T) {
	t.Helper()
	if w.stop == nil {
		return
	}
	w.stop()
	w.stop = nil
	select {
	case err := <-w.done:
		if err != nil {
			t.Errorf("worker stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("worker did not stop within 30s")
	}
}

func (w *clusterWorker) owned() []int32 {
	if w.m.slots == nil {
		return nil
	}
	w.m.slots.mu.Lock()
	defer w.m.slots.mu.Unlock()
	var out []int32
	for s := range w.m.slots.owned {
		out = append(out, s)
	}
	return out
}

// TestClusterWorkersShareAndHandOver: two workers share a mirror's slots;
// together they copy every record exactly once (read_committed). When one
// stops, the other takes its slots over and goes on from the committed
// progress: still exactly once. Without exactly_once too, where nothing
// fails: a second worker takes half the slots instead of copying
// everything again, and a stopped one hands its slots over with its
// progress persisted.
func TestClusterWorkersShareAndHandOver(t *testing.T) {
	t.Parallel()
	for _, eos := range []bool{true, false} {
		t.Run(fmt.Sprintf("exactly_once=%v", eos), func(t *testing.T) {
			t.Parallel()
			testWorkersShareAndHandOver(t, eos)
		})
	}
}

func testWorkersShareAndHandOver(t *testing.T, eos bool) {
	mode := func(c *Config) { c.Cluster.ExactlyOnce = eos }
	src, dst := kfaketest.Clusters(t)
	ctx := context.Background()
	srcCl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if _, err := kadm.NewClient(srcCl).CreateTopic(ctx, 8, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produce := func(prefix string, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			for p := range int32(8) {
				recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d", prefix, p, i)})
			}
		}
		if err := srcCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	want := func(parts ...struct {
		s string
		n int
	}) func(p int32) []string {
		return func(p int32) []string {
			var out []string
			for _, pr := range parts {
				for i := range pr.n {
					out = append(out, fmt.Sprintf("%s-%d-%d", pr.s, p, i))
				}
			}
			return out
		}
	}
	type part = struct {
		s string
		n int
	}
	exactly := func(desc string, w func(p int32) []string) {
		t.Helper()
		for p := range int32(8) {
			exp := w(p)
			kfaketest.WaitFor(t, func() bool { return len(kfaketest.ReadCommitted(t, dst, "src.orders", p)) >= len(exp) }, fmt.Sprintf("%s: partition %d copied", desc, p))
			got := kfaketest.ReadCommitted(t, dst, "src.orders", p)
			if fmt.Sprint(got) != fmt.Sprint(exp) {
				t.Fatalf("%s: partition %d holds %d records, want exactly the %d source records in order", desc, p, len(got), len(exp))
			}
		}
	}

	produce("a", 100)
	w1 := startClusterWorker(t, src, dst, 4, mode)
	w2 := startClusterWorker(t, src, dst, 4, mode)
	kfaketest.WaitFor(t, func() bool { return len(w1.owned()) > 0 && len(w2.owned()) > 0 && len(w1.owned())+len(w2.owned()) == 4 }, "the two workers to share the 4 slots")
	exactly("two workers", want(part{"a", 100}))
	// Each worker's status lists the whole group: two workers, every
	// slot once, one control plane.
	kfaketest.WaitFor(t, func() bool {
		st := w1.m.Status().Cluster
		if st == nil || len(st.Workers) != 2 {
			return false
		}
		seen, control := map[int32]bool{}, 0
		for _, wk := range st.Workers {
			for _, s := range wk.Slots {
				seen[s] = true
			}
			if wk.ControlPlane {
				control++
			}
		}
		return len(seen) == 4 && control == 1
	}, "the status to list both workers and their slots")

	produce("b", 50)
	w1.shutdown(t)
	kfaketest.WaitFor(t, func() bool { return len(w2.owned()) == 4 }, "the remaining worker to own every slot")
	produce("c", 50)
	exactly("after the hand-over", want(part{"a", 100}, part{"b", 50}, part{"c", 50}))
}

// TestClusterPlan: kmirror plan of a cluster-mode mirror plans what the
// control plane would do, though the planning process owns no slot.
func TestClusterPlan(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	if _, err := kadm.NewClient(kfaketest.Client(t, src)).CreateTopic(context.Background(), 3, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		SourceOpts: []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)},
		TargetOpts: []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)},
		Filters:    []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll("orders")}},
		Cluster:    &ClusterConfig{ExactlyOnce: true, Slots: 4, SessionTimeout: 6 * time.Second, CommitInterval: 50 * time.Millisecond},
		Logger:     kfaketest.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	plan, err := m.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Create) != 1 || plan.Create[0].TargetTopic != "src.orders" || plan.Create[0].Partitions != 3 {
		t.Fatalf("plan creates %+v, want src.orders with 3 partitions", plan.Create)
	}
}

// TestClusterStatusShowsUnownedAndUnsettled: the status and the metrics
// show at once the slots the group's description gives no owner, and a
// worker whose group does not settle says so (status, readiness, metric,
// a warning) instead of waiting silently.
func TestClusterStatusShowsUnownedAndUnsettled(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	if _, err := kadm.NewClient(kfaketest.Client(t, src)).CreateTopic(context.Background(), 4, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	logs := &kfaketest.LockedBuffer{}
	w := startClusterWorker(t, src, dst, 4, func(c *Config) {
		c.Metrics = metrics
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.Cluster.RebalanceTimeout = 2 * time.Second
	})
	kfaketest.WaitFor(t, func() bool { return len(w.owned()) == 4 && w.m.Status().Ready }, "the worker to own every slot and be ready")
	unowned := metrics.slotsUnowned.WithLabelValues("m")
	rebalancing := metrics.rebalanceSecs.WithLabelValues("m")
	kfaketest.WaitFor(t, func() bool { st := w.m.Status().Cluster; return len(st.Workers) == 1 && st.Rebalance == nil }, "the group described")
	if st := w.m.Status().Cluster; len(st.Unowned) != 0 || testutil.ToFloat64(unowned) != 0 || testutil.ToFloat64(rebalancing) != 0 {
		t.Fatalf("settled group: unowned %v, metric %v, rebalance %v s", st.Unowned, testutil.ToFloat64(unowned), testutil.ToFloat64(rebalancing))
	}

	// The coordinator describes a stable group in which the worker is
	// assigned slots 0 and 1 only: 2 and 3 have no owner.
	memberID := w.m.Status().Cluster.Member
	dst.ControlKey(int16(kmsg.DescribeGroups), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		req := kreq.(*kmsg.DescribeGroupsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range req.Groups {
			dg := kmsg.NewDescribeGroupsResponseGroup()
			dg.Group, dg.State, dg.ProtocolType, dg.Protocol = g, "Stable", "consumer", "cooperative-sticky"
			a := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: "kmirror.m.slots.internal", Partitions: []int32{0, 1}}}}
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID, dm.ClientID, dm.ClientHost, dm.MemberAssignment = memberID, "kmirror", "/127.0.0.1", a.AppendTo(nil)
			dg.Members = append(dg.Members, dm)
			resp.Groups = append(resp.Groups, dg)
		}
		return resp, nil, true
	})
	kfaketest.WaitFor(t, func() bool { return fmt.Sprint(w.m.Status().Cluster.Unowned) == "[2 3]" }, "the status to show slots 2 and 3 without an owner")
	kfaketest.WaitFor(t, func() bool { return testutil.ToFloat64(unowned) == 2 }, "kmirror_cluster_slots_unowned to be 2")
	dst.DropControl()

	// The coordinator refuses the worker's JoinGroup; another member
	// joining makes the group rebalance, which the worker never completes.
	refusing := true
	var mu sync.Mutex
	dst.ControlKey(int16(kmsg.JoinGroup), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		req := kreq.(*kmsg.JoinGroupRequest)
		mu.Lock()
		defer mu.Unlock()
		if !refusing || req.MemberID != memberID {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp, nil, true
	})
	other := kfaketest.Client(t, dst, kgo.ConsumerGroup("kmirror.m"), kgo.ConsumeTopics("kmirror.m.slots.internal"),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.SessionTimeout(6*time.Second))
	go other.PollFetches(t.Context()) // joins the group
	kfaketest.WaitFor(t, func() bool {
		r := w.m.Status().Cluster.Rebalance
		return r != nil && r.NotSettling && strings.HasPrefix(r.WaitingFor, "JoinGroup") && !w.m.Status().Ready
	}, "the status to show a rebalance that does not settle, and the worker not ready")
	kfaketest.WaitFor(t, func() bool { return testutil.ToFloat64(rebalancing) > 8 }, "kmirror_cluster_rebalance_seconds past the session + rebalance timeout")
	kfaketest.WaitFor(t, func() bool { return strings.Contains(logs.String(), "the slots group does not settle") }, "a warning")
	if n := logs.Count("the slots group does not settle"); n != 1 {
		t.Errorf("%d warnings within a minute, want 1 (rate-limited)", n)
	}
	for _, want := range []string{"waiting_for=\"JoinGroup", "since=", "last_error="} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the warning lacks %s:\n%s", want, logs.String())
		}
	}

	mu.Lock()
	refusing = false
	mu.Unlock()
	kfaketest.WaitFor(t, func() bool { return w.m.Status().Cluster.Rebalance == nil && w.m.Status().Ready }, "the worker to settle and be ready again")
	kfaketest.WaitFor(t, func() bool { return testutil.ToFloat64(rebalancing) == 0 }, "kmirror_cluster_rebalance_seconds back to 0")
}

// TestSharedSlotReleaseBoundedWhileTargetRefuses: without exactly_once, a
// worker whose slots are revoked while the target refuses its records
// (NOT_ENOUGH_REPLICAS, retried for ever) gives them up within its
// shutdown timeout rather than holding the rebalance, and the new owner
// copies what was not acknowledged: nothing is missing once the target
// takes records again.
func TestSharedSlotReleaseBoundedWhileTargetRefuses(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	ctx := context.Background()
	if _, err := kadm.NewClient(kfaketest.Client(t, src)).CreateTopic(ctx, 4, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	const shutdown = 2 * time.Second
	alo := func(c *Config) { c.ShutdownTimeout, c.Cluster.ExactlyOnce = shutdown, false }
	produceOrders(t, src, 4, 50, "a")
	w1 := startClusterWorker(t, src, dst, 4, alo)
	adm := kadm.NewClient(kfaketest.Client(t, dst))
	kfaketest.WaitFor(t, func() bool { return targetRecords(adm, "src.orders") == 200 }, "the first 200 records copied")

	refuse := dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "src.orders", Err: kerr.NotEnoughReplicas, Count: -1})
	produceOrders(t, src, 4, 50, "b")
	kfaketest.WaitFor(t, func() bool { return refuse.Hits() > 0 }, "the target to refuse the next records")
	begin := time.Now()
	w2 := startClusterWorker(t, src, dst, 4, alo)
	kfaketest.WaitFor(t, func() bool { return len(w2.owned()) > 0 && len(w1.owned())+len(w2.owned()) == 4 }, "the second worker to take its slots while the target refuses")
	// The revoke waited at most the shutdown timeout (plus the rebalance
	// and the progress write's own bound), not for ever.
	if took := time.Since(begin); took > shutdown+finalProgressTimeout+15*time.Second {
		t.Fatalf("the slots moved after %v", took)
	}
	refuse.Remove()
	for p := range int32(4) {
		kfaketest.WaitFor(t, func() bool {
			got := kfaketest.ConsumeFrom(t, dst.ListenAddrs(), "src.orders", p, 0)
			seen := map[string]bool{}
			for _, v := range got {
				seen[v] = true
			}
			for _, tag := range []string{"a", "b"} {
				for i := range 50 {
					if !seen[fmt.Sprintf("%s-%d-%d", tag, p, i)] {
						return false
					}
				}
			}
			return true
		}, fmt.Sprintf("every record of partition %d on the target", p))
	}
}

// TestSlotsFencedTogether: a worker taking slots over fences them all at
// once rather than one after the other (16 fences in a row took a second
// on a busy broker before the first record moved). Each InitProducerID is
// held a while here; more than one is in flight at a time.
func TestSlotsFencedTogether(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	var inFlight, most atomic.Int32
	dst.ControlKey(int16(kmsg.InitProducerID), func(r kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		if r.(*kmsg.InitProducerIDRequest).TransactionalID == nil {
			return nil, nil, false
		}
		n := inFlight.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		dst.SleepControl(func() { time.Sleep(300 * time.Millisecond) })
		inFlight.Add(-1)
		return nil, nil, false
	})
	w := startClusterWorker(t, src, dst, 4)
	kfaketest.WaitFor(t, func() bool { return len(w.owned()) == 4 }, "the worker owns its 4 slots")
	if got := most.Load(); got < 2 {
		t.Fatalf("at most %d fence in flight at a time: the slots were fenced one after the other", got)
	}
}
