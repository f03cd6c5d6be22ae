package connector

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/state"
	"github.com/kmirror/kmirror/internal/kfaketest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/filters"
)

// startOrdersMirror runs a mirror of "orders" from src to dst, its config
// adjusted by adjust, until the returned stop is called: stop cancels Run
// and fails the test if Run fails or does not return within 30s.
func startOrdersMirror(t *testing.T, src, dst *kfake.Cluster, adjust func(*Config)) (stop func()) {
	t.Helper()
	_, stop = runOrdersMirror(t, src, dst, adjust)
	return stop
}

// runOrdersMirror is startOrdersMirror, returning the running mirror too.
func runOrdersMirror(t testing.TB, src, dst *kfake.Cluster, adjust func(*Config)) (*Mirror, func()) {
	t.Helper()
	cfg := Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		SourceOpts:       []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)},
		TargetOpts:       []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)},
		Filters:          []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll("orders")}},
		RefreshInterval:  100 * time.Millisecond,
		ProgressInterval: 50 * time.Millisecond,
		Logger:           kfaketest.Logger(),
	}
	adjust(&cfg)
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	return m, func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30s of the stop")
		}
	}
}

// runMirrorUntil runs a mirror of "orders" from src to dst until the
// target holds want records, then stops it (a clean shutdown: flushed,
// progress persisted).
func runMirrorUntil(t *testing.T, src, dst *kfake.Cluster, statePartitions int32, want int64) {
	t.Helper()
	stop := startOrdersMirror(t, src, dst, func(c *Config) { c.StatePartitions = statePartitions })
	adm := kadm.NewClient(kfaketest.Client(t, dst))
	kfaketest.WaitFor(t, func() bool { return targetRecords(adm, "src.orders") >= want }, fmt.Sprintf("%d records on the target", want))
	stop()
	if t.Failed() {
		t.FailNow()
	}
}

// targetRecords counts topic's records (end minus start offsets: no
// transactions here); -1 while it cannot be listed.
func targetRecords(adm *kadm.Client, topic string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		return -1
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

func produceOrders(t *testing.T, src *kfake.Cluster, partitions int32, per int, tag string) {
	t.Helper()
	cl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for p := range partitions {
		for i := range per {
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d", tag, p, i)})
		}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestStateTopicsSpreadAndResume: the state topics kmirror creates have
// StatePartitions partitions, the progress of different source partitions
// lands in different ones, and a restart reads them all and resumes
// exactly (nothing copied twice). State topics that already exist with
// one partition (an earlier version's) keep it and work as before.
func TestStateTopicsSpreadAndResume(t *testing.T) {
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("existing_single_partition=%v", existing), func(t *testing.T) {
			src, dst := kfaketest.Clusters(t)
			ctx := context.Background()
			srcAdm := kadm.NewClient(kfaketest.Client(t, src))
			dstAdm := kadm.NewClient(kfaketest.Client(t, dst))
			if _, err := srcAdm.CreateTopic(ctx, 6, 1, nil, "orders"); err != nil {
				t.Fatal(err)
			}
			want := int32(4)
			if existing {
				for _, topic := range []string{"kmirror.m.progress.internal", "kmirror.m.metadata.internal", "kmirror.m.checkpoints.internal"} {
					if _, err := state.EnsureCompacted(ctx, dstAdm, topic, 1, -1); err != nil {
						t.Fatal(err)
					}
				}
				want = 1
			}
			produceOrders(t, src, 6, 100, "a")
			runMirrorUntil(t, src, dst, 4, 600)

			progress := "kmirror.m.progress.internal"
			for _, topic := range []string{progress, "kmirror.m.metadata.internal", "kmirror.m.checkpoints.internal"} {
				if n, err := state.Partitions(ctx, dstAdm, topic); err != nil || n != want {
					t.Fatalf("%s has %d partitions (%v), want %d", topic, n, err, want)
				}
			}
			ends, err := dstAdm.ListEndOffsets(ctx, progress)
			if err != nil {
				t.Fatal(err)
			}
			used := 0
			ends.Each(func(o kadm.ListedOffset) {
				if o.Offset > 0 {
					used++
				}
			})
			if !existing && used < 2 {
				t.Fatalf("the progress of 6 source partitions went to %d of 4 partitions", used)
			}
			ld, err := data.LoadProgress(ctx, nil, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, dstAdm, progress)
			if err != nil {
				t.Fatal(err)
			}
			for p := range int32(6) {
				if got := ld.Positions[data.TopicPartition{Topic: "orders", Partition: p}].Next; got != 100 {
					t.Errorf("stored position of orders/%d = %d, want 100", p, got)
				}
			}

			produceOrders(t, src, 6, 50, "b")
			runMirrorUntil(t, src, dst, 4, 900)
			if n := targetRecords(dstAdm, "src.orders"); n != 900 {
				t.Fatalf("target holds %d records after the restart, want 900 (the source's): the restart copied again", n)
			}
		})
	}
}

// TestFirstStartWaitsForListing: a target that does not list the internal
// topics kmirror just created (a KRaft broker's metadata catching up with
// its controller) delays the first start, logged at INFO: no ERROR, no
// "started after failing".
func TestFirstStartWaitsForListing(t *testing.T) {
	// Not parallel: it shortens state.ListWait.
	defer func(w time.Duration) { state.ListWait = w }(state.ListWait)
	state.ListWait = 200 * time.Millisecond
	src, dst := kfaketest.Clusters(t)
	kfaketest.CreateTopic(t, src, "orders", 1)
	// The metadata topic is not listed for a second after it is
	// first asked about.
	const hidden = "kmirror.m.metadata.internal"
	var firstAsked atomic.Int64
	dst.ControlKey(int16(kmsg.Metadata), func(r kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		req := r.(*kmsg.MetadataRequest)
		if len(req.Topics) != 1 || req.Topics[0].Topic == nil || *req.Topics[0].Topic != hidden {
			return nil, nil, false
		}
		firstAsked.CompareAndSwap(0, time.Now().UnixNano())
		if time.Since(time.Unix(0, firstAsked.Load())) > time.Second {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		st := kmsg.NewMetadataResponseTopic()
		st.Topic, st.ErrorCode = kmsg.StringPtr(hidden), kerr.UnknownTopicOrPartition.Code
		resp.Topics = append(resp.Topics, st)
		return resp, nil, true
	})
	logs := &kfaketest.LockedBuffer{}
	m, stop := runOrdersMirror(t, src, dst, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	defer stop()
	kfaketest.WaitFor(t, func() bool { return m.Status().Ready }, "the mirror to start and be ready")
	if firstAsked.Load() == 0 {
		t.Fatal("the metadata topic was never listed: the test hid nothing")
	}
	if logs.Count("does not list kmirror's internal topics yet") == 0 || logs.Count("level=ERROR") > 0 || logs.Count("started after failing") > 0 {
		t.Fatalf("log:\n%s\nwant the wait at INFO, no ERROR, no \"started after failing\"", logs)
	}
}

// TestStateLoadBoundedByStallNotTotal: reading the state has no budget for
// the whole read, only for a stall: a read much longer than state.Stall
// succeeds while records keep arriving, and one that gets nothing for
// state.Stall fails, saying so.
func TestStateLoadBoundedByStallNotTotal(t *testing.T) {
	old := state.Stall
	state.Stall = time.Second
	t.Cleanup(func() { state.Stall = old })
	_, dst := kfaketest.Clusters(t)
	ctx := context.Background()
	cl := kfaketest.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	const topic = "kmirror.m.progress.internal"
	if _, err := state.EnsureCompacted(ctx, adm, topic, 2, -1); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for p := range int32(2) {
		for i := range 6 {
			k, v := data.EncodeProgress(data.TopicPartition{Topic: fmt.Sprintf("t%d", i), Partition: p}, data.Position{Next: int64(i)})
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: k, Value: v})
		}
	}
	for _, r := range recs { // a batch each: one per fetch below
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	var delay time.Duration
	dst.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		d := delay
		dst.SleepControl(func() { time.Sleep(d) })
		return nil, nil, false
	})
	// One record per fetch, each answered after 200ms: about 12 fetches,
	// over two seconds in all, with no gap of a second.
	small := []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...), kgo.FetchMaxBytes(1), kgo.FetchMaxPartitionBytes(1)}
	delay = 200 * time.Millisecond
	begin := time.Now()
	ld, err := data.LoadProgress(ctx, nil, small, adm, topic)
	took := time.Since(begin)
	if err != nil {
		t.Fatalf("a slow but steady read failed after %v: %v", took, err)
	}
	if len(ld.Positions) != 12 || took < 2*state.Stall {
		t.Fatalf("read %d positions in %v; want 12, in more than %v (to show the read is not bounded as a whole)", len(ld.Positions), took, 2*state.Stall)
	}

	delay = 3 * state.Stall
	_, err = data.LoadProgress(ctx, nil, small, adm, topic)
	if err == nil || !strings.Contains(err.Error(), "no record for") {
		t.Fatalf("a read that stalls: %v, want an error saying no record arrived", err)
	}
}

// TestStatusThroughputAndTimeLag: a topic's status counts the records its
// partitions copied (two readings give the throughput) and says how far
// behind in time the copy is: now minus the timestamp of the last record
// copied by the partition furthest behind, 0 for a partition that is not
// behind.
func TestStatusThroughputAndTimeLag(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	h.createWithProgress(t, "orders", 2, 0)
	h.mustPass(t)
	old := time.Now().Add(-30 * time.Second)
	for p, ts := range []time.Time{old, time.Now()} {
		ps := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: int32(p)})
		ps.Mu.Lock()
		ps.Acked = 0
		ps.Produced(0, 1, 2)
		ps.Mu.Unlock()
		for range 3 {
			ps.Promise(&kgo.Record{Timestamp: ts}, nil)
		}
		ps.Mu.Lock()
		ps.End = 3 + int64(p)*2 // partition 0 caught up, partition 1 two behind
		ps.Mu.Unlock()
	}
	var got TopicStatus
	for _, ts := range h.m.Status().Topics {
		if ts.SourceTopic == "orders" {
			got = ts
		}
	}
	// Partition 1 is the one behind, and its last record is fresh:
	// partition 0's old timestamp must not count, it is caught up.
	if got.Copied != 6 || got.Lag == nil || *got.Lag != 2 || got.LagSeconds > 10 {
		t.Fatalf("status of orders: copied %d (want 6), lag %v (want 2), lag seconds %.1f (want under 10: partition 0 is caught up)", got.Copied, got.Lag, got.LagSeconds)
	}
	ps0 := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 0})
	ps0.Mu.Lock()
	ps0.End = 5 // now partition 0 is behind too, its last copy 30s old
	ps0.Mu.Unlock()
	for _, ts := range h.m.Status().Topics {
		if ts.SourceTopic == "orders" && (ts.LagSeconds < 29 || ts.LagSeconds > 60) {
			t.Fatalf("lag seconds %.1f, want about 30", ts.LagSeconds)
		}
	}
}

// TestPassCreatesWithinTheControllersLimit: a KRaft controller refuses a
// CreateTopics request worth more than its batch of metadata records
// (POLICY_VIOLATION "Unable to perform excessively large batch
// operation"), which 2,000 topics of 5 partitions in one request hit. The
// pass splits its creations into requests under maxRecordsPerRequest
// (lowered here, with a target that enforces the same limit), and every
// topic is created in one pass.
func TestPassCreatesWithinTheControllersLimit(t *testing.T) {
	old := maxRecordsPerRequest
	maxRecordsPerRequest = 50
	t.Cleanup(func() { maxRecordsPerRequest = old })
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	ctx := context.Background()
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("t%02d", i))
	}
	if _, err := h.srcAdm.CreateTopics(ctx, 5, 1, nil, names...); err != nil {
		t.Fatal(err)
	}
	var requests, refused atomic.Int32
	dst.ControlKey(int16(kmsg.CreateTopics), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		req := kr.(*kmsg.CreateTopicsRequest)
		records := 0
		for _, t := range req.Topics {
			records += 1 + int(t.NumPartitions) + len(t.Configs)
		}
		if len(req.Topics) == 0 || strings.HasPrefix(req.Topics[0].Topic, "kmirror.") {
			return nil, nil, false
		}
		requests.Add(1)
		if records <= 50 {
			return nil, nil, false
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic = t.Topic
			rt.ErrorCode = kerr.PolicyViolation.Code
			rt.ErrorMessage = kmsg.StringPtr("Unable to perform excessively large batch operation.")
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	got := targetPartitions(t, h.dst)
	for _, n := range names {
		if got["src."+n] != 5 {
			t.Errorf("src.%s has %d partitions after one pass, want 5", n, got["src."+n])
		}
	}
	// 20 topics of 6 records each, at most 50 a request: 3 requests.
	if requests.Load() != 3 || refused.Load() != 0 {
		t.Fatalf("%d CreateTopics requests, %d refused as too large; want 3, none refused", requests.Load(), refused.Load())
	}
}
