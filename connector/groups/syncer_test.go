package groups

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/offsets"
	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/connector/state"
	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/listeners"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// harness drives a Syncer one pass at a time against two kfake clusters.
// The copied partitions of source topic "orders" (target "src.orders")
// are set up by hand in the data plane, with their offset index and acked
// position, so a test decides exactly what can be translated, and nothing
// runs in the background: a sync's outcome is read after Sync returned.
type harness struct {
	src, dst *kfake.Cluster
	// srcAdm and dstAdm are the test's own admin clients; c are the
	// Syncer's.
	srcAdm, dstAdm *kadm.Client
	c              Clients
	s              *Syncer
	mirror         *testMirror
	plane          *testPlane
	metrics        *Metrics
	logs           *kfaketest.LockedBuffer
}

const (
	hTopic  = "orders"
	hTarget = "src.orders"
	hGroup  = "billing"
	// hShift is what the hand-made offset indexes add to a source offset:
	// translated offsets never equal the source offsets by accident.
	hShift = 1000
)

// testMirror is the rest of the mirror as the Syncer sees it: "orders"
// mirrored to "src.orders", every group selected.
type testMirror struct {
	mu        sync.Mutex
	published []listeners.Group
}

func (*testMirror) Mirrored() map[string]string { return map[string]string{hTopic: hTarget} }

func (*testMirror) GroupFilters() []filters.GroupFilter {
	return []filters.GroupFilter{filters.Regex{Include: filters.MustCompileAll(".*")}}
}

func (m *testMirror) PublishGroups(set []listeners.Group) {
	m.mu.Lock()
	m.published = set
	m.mu.Unlock()
}

func (*testMirror) StatePartitions(string) int32 { return 1 }

func (*testMirror) Produce(dst *kgo.Client, r *kgo.Record, promise func(*kgo.Record, error)) {
	dst.TryProduce(context.Background(), r, promise)
}

func (*testMirror) SrcErr(err error) error { return err }
func (*testMirror) DstErr(err error) error { return err }
func (*testMirror) ReverseOf() string      { return "" }

// testPlane is the data plane: the partitions a test made copied.
type testPlane struct {
	mu     sync.Mutex
	copied map[data.TopicPartition]*data.PartitionState
}

func (p *testPlane) Partition(tp data.TopicPartition) *data.PartitionState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.copied[tp]
}

func (p *testPlane) Snapshot() []*data.PartitionState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Values(p.copied))
}

// testMetrics are metrics registered nowhere, for a test to read.
func testMetrics() *Metrics {
	counter := func(name string) prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: name}) }
	return &Metrics{
		GroupOffsets:    counter("group_offsets"),
		GroupSyncErrors: counter("group_sync_errors"),
		FilterErrors:    counter("filter_errors"),
		Untranslatable:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "untranslatable"}),
		AdminErrors:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "admin_errors"}, []string{"request"}),
		InternalWrites:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "internal_writes"}, []string{"kind"}),
	}
}

func newHarness(t *testing.T, partitions int32) *harness {
	t.Helper()
	src, dst := kfaketest.Clusters(t)
	return newHarnessOn(t, src, dst, partitions, nil)
}

// newHarnessOn builds a harness on src and dst whose Syncer has the
// config tune changes (when not nil), with "orders" of partitions
// partitions on the source and "src.orders" on the target.
func newHarnessOn(t *testing.T, src, dst *kfake.Cluster, partitions int32, tune func(*Config)) *harness {
	t.Helper()
	logs := &kfaketest.LockedBuffer{}
	cfg := Config{
		Mirror: "m", SourceAlias: "src", Policy: policy.Default{},
		SourceOpts:    []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)},
		TargetOpts:    []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)},
		ProgressTopic: policy.InternalTopic("m", "progress"),
		Sealer:        data.NewSealer(offsets.DefaultCodec),
		Log:           slog.New(slog.NewTextHandler(logs, nil)),
		Metrics:       testMetrics(),
	}
	if tune != nil {
		tune(&cfg)
	}
	dstCl := kfaketest.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	h := &harness{
		src: src, dst: dst,
		srcAdm:  kadm.NewClient(kfaketest.Client(t, src)),
		dstAdm:  kadm.NewClient(dstCl),
		c:       Clients{SrcAdm: kadm.NewClient(kfaketest.Client(t, src)), DstAdm: kadm.NewClient(kfaketest.Client(t, dst)), Dst: dstCl},
		mirror:  &testMirror{},
		plane:   &testPlane{copied: make(map[data.TopicPartition]*data.PartitionState)},
		metrics: cfg.Metrics,
		logs:    logs,
	}
	h.s = New(cfg, h.mirror)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range []string{cfg.ProgressTopic, h.s.CheckpointTopic()} {
		if _, err := state.EnsureCompacted(ctx, h.dstAdm, topic, 1, -1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.srcAdm.CreateTopic(ctx, partitions, 1, nil, hTopic); err != nil {
		t.Fatal(err)
	}
	if _, err := h.dstAdm.CreateTopic(ctx, partitions, 1, nil, hTarget); err != nil {
		t.Fatal(err)
	}
	return h
}

// copied makes partition p of "orders" copied with index ix up to acked.
func (h *harness) copied(p int32, ix *index.Partition, acked int64) {
	tp := data.TopicPartition{Topic: hTopic, Partition: p}
	h.plane.mu.Lock()
	h.plane.copied[tp] = &data.PartitionState{TP: tp, Target: hTarget, Index: ix, Acked: acked, Persisted: acked, End: -1}
	h.plane.mu.Unlock()
}

// copiedShifted makes partition p copied up to acked, source offset s at
// target offset s+hShift.
func (h *harness) copiedShifted(p int32, acked int64) {
	h.copied(p, index.Assemble([]index.Chunk{{K: 0, Runs: []index.Run{{Src: 0, Dst: hShift, N: acked}}}}), acked)
}

// targetOffsets returns the target group's committed offsets on
// "src.orders" (empty when the group does not exist).
func (h *harness) targetOffsets(t *testing.T, group string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[int32]int64{}
	resp, err := h.dstAdm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == hTarget && o.Err == nil && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out
}

func (h *harness) sync(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.s.Sync(ctx, h.c, h.plane); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

func (h *harness) status(t *testing.T, group string) Status {
	t.Helper()
	for _, g := range h.s.Groups() {
		if g.Group == group {
			return g
		}
	}
	t.Fatalf("group %s not in %+v", group, h.s.Groups())
	return Status{}
}

func (h *harness) adminErrors(req string) float64 {
	return testutil.ToFloat64(h.metrics.AdminErrors.WithLabelValues(req))
}

func (h *harness) checkpointWriteErrors() float64 {
	return testutil.ToFloat64(h.metrics.InternalWrites.WithLabelValues(WriteCheckpoint))
}

// TestGroupSyncNoCommitWhenTargetOffsetsUnreadable: while the target
// answers the group's OffsetFetch with an error, the sync commits nothing
// to it (the never-rewind guard cannot run: here the target group is
// ahead and would be moved backwards), shows the group "error" with the
// reason, counts every failure and logs it once, not once per sync. When
// the fault ends the group moves forward again, never backwards.
func TestGroupSyncNoCommitWhenTargetOffsetsUnreadable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 2)
	h.copiedShifted(0, 100)
	h.copiedShifted(1, 100)
	kfaketest.CommitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 50, 1: 60})
	// Consumers moved on on the target: partition 0 is ahead there.
	kfaketest.CommitOffsets(t, h.dstAdm, hGroup, hTarget, map[int32]int64{0: hShift + 70})

	fault := h.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetFetch}, Group: hGroup, Count: -1})
	const syncs = 3
	for range syncs {
		h.sync(t)
	}
	if fault.Hits() < syncs {
		t.Fatalf("the fault answered %d OffsetFetch requests, want at least %d", fault.Hits(), syncs)
	}
	fault.Remove()
	if got, want := h.targetOffsets(t, hGroup), map[int32]int64{0: hShift + 70}; !maps.Equal(got, want) {
		t.Errorf("after syncs whose target offset fetch failed, the target group is at %v, want it untouched at %v", got, want)
	}
	st := h.status(t, hGroup)
	if st.State != StateError || !strings.Contains(st.Error, "cannot read the group's offsets on the target") {
		t.Errorf("status %+v, want state error naming the unreadable target offsets", st)
	}
	if n := h.adminErrors(AdminFetchOffsets); n != syncs {
		t.Errorf("kmirror_admin_errors_total{request=fetch_offsets} = %v, want %d", n, syncs)
	}
	if n := h.logs.Count("cannot read the group's offsets on the target"); n != 1 {
		t.Errorf("the failure was logged %d times over %d syncs, want once (rate-limited):\n%s", n, syncs, h.logs)
	}

	h.sync(t)
	if got, want := h.targetOffsets(t, hGroup), map[int32]int64{0: hShift + 70, 1: hShift + 60}; !maps.Equal(got, want) {
		t.Errorf("after the fault ended the target group is at %v, want %v (partition 0 never moved backwards)", got, want)
	}
	if st := h.status(t, hGroup); st.State != StateSynced || st.Error != "" {
		t.Errorf("after the fault ended: status %+v, want synced", st)
	}
	if h.logs.Count("group sync problems cleared") != 1 {
		t.Errorf("the recovery was not logged:\n%s", h.logs)
	}
	kfaketest.CommitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 80})
	h.sync(t)
	if got, want := h.targetOffsets(t, hGroup), map[int32]int64{0: hShift + 80, 1: hShift + 60}; !maps.Equal(got, want) {
		t.Errorf("after the source group moved on the target group is at %v, want %v", got, want)
	}
}

// TestGroupSyncPartitionTargetOffsetUnreadable: a partition the target
// answers with an error in the group's OffsetFetch is not committed; the
// others are.
func TestGroupSyncPartitionTargetOffsetUnreadable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 2)
	h.copiedShifted(0, 100)
	h.copiedShifted(1, 100)
	kfaketest.CommitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 50, 1: 60})
	kfaketest.CommitOffsets(t, h.dstAdm, hGroup, hTarget, map[int32]int64{0: hShift + 40})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listed, err := h.dstAdm.ListTopics(ctx, hTarget)
	if err != nil {
		t.Fatal(err)
	}
	id := listed[hTarget].ID

	// kmirror fetches all of a group's offsets (no topics named);
	// partition 1 of those answers an error.
	var faulting atomic.Bool
	faulting.Store(true)
	h.dst.ControlKey(int16(kmsg.OffsetFetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		h.dst.KeepControl()
		req := kreq.(*kmsg.OffsetFetchRequest)
		if !faulting.Load() || len(req.Groups) != 1 || req.Groups[0].Group != hGroup || req.Groups[0].Topics != nil {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group = hGroup
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic, rt.TopicID = hTarget, id
		p0 := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		p0.Partition, p0.Offset = 0, hShift+40
		p1 := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		p1.Partition, p1.Offset, p1.ErrorCode = 1, -1, kerr.UnknownServerError.Code
		rt.Partitions = append(rt.Partitions, p0, p1)
		rg.Topics = append(rg.Topics, rt)
		resp.Groups = append(resp.Groups, rg)
		return resp, nil, true
	})
	h.sync(t)
	faulting.Store(false)
	if got, want := h.targetOffsets(t, hGroup), map[int32]int64{0: hShift + 50}; !maps.Equal(got, want) {
		t.Errorf("target group at %v, want %v: partition 0 committed, partition 1 (its current offset unreadable) not", got, want)
	}
	st := h.status(t, hGroup)
	if st.State != StateError || !strings.Contains(st.Error, hTarget+"/1") {
		t.Errorf("status %+v, want state error naming %s/1", st, hTarget)
	}
	if n := h.adminErrors(AdminFetchOffsets); n != 1 {
		t.Errorf("kmirror_admin_errors_total{request=fetch_offsets} = %v, want 1", n)
	}
}

// TestGroupSyncNoCommitWhenDescribeFails: a group whose describe on the
// target fails (classic DescribeGroups or KIP-848 ConsumerGroupDescribe)
// might have members there: it is not committed, and is "error". A group
// the target does not know (GROUP_ID_NOT_FOUND from both) has no members
// and is committed once the fault ends.
func TestGroupSyncNoCommitWhenDescribeFails(t *testing.T) {
	t.Parallel()
	for _, key := range []kmsg.Key{kmsg.DescribeGroups, kmsg.ConsumerGroupDescribe} {
		t.Run(key.Name(), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, 2)
			h.copiedShifted(0, 100)
			h.copiedShifted(1, 100)
			kfaketest.CommitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 50, 1: 60})
			fault := h.dst.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Group: hGroup, Count: -1})
			h.sync(t)
			fault.Remove()
			if got := h.targetOffsets(t, hGroup); len(got) > 0 {
				t.Errorf("the describe failed, yet the target group was committed: %v", got)
			}
			st := h.status(t, hGroup)
			if st.State != StateError || !strings.Contains(st.Error, "cannot tell whether the group has members") {
				t.Errorf("status %+v, want state error about members", st)
			}
			if n := h.adminErrors(AdminDescribeGroups); n != 1 {
				t.Errorf("kmirror_admin_errors_total{request=describe_groups} = %v, want 1", n)
			}
			h.sync(t)
			if got, want := h.targetOffsets(t, hGroup), map[int32]int64{0: hShift + 50, 1: hShift + 60}; !maps.Equal(got, want) {
				t.Errorf("after the fault the target group is at %v, want %v", got, want)
			}
			if st := h.status(t, hGroup); st.State != StateSynced {
				t.Errorf("after the fault: status %+v, want synced", st)
			}
		})
	}
}

// TestGroupSyncUntranslatablePartitions: a committed offset older than the
// offset index keeps, and one on a partition nothing of which was copied,
// are reported per partition with the reason, never committed nor
// checkpointed, counted in kmirror_group_untranslatable_partitions, and the
// group is "partial", not "synced"; its other partitions are committed.
func TestGroupSyncUntranslatablePartitions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3)
	// Partition 0: the index's first chunk was pruned, it starts at 100.
	h.copied(0, index.Assemble([]index.Chunk{{K: 1, Runs: []index.Run{{Src: 100, Dst: hShift + 100, N: 100}}}}), 200)
	h.copiedShifted(1, 100)
	h.copied(2, index.New(), 0) // nothing copied
	kfaketest.CommitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 20, 1: 60, 2: 5})
	h.sync(t)

	if got, want := h.targetOffsets(t, hGroup), map[int32]int64{1: hShift + 60}; !maps.Equal(got, want) {
		t.Errorf("target group at %v, want %v: only the translatable partition", got, want)
	}
	st := h.status(t, hGroup)
	if st.State != StatePartial {
		t.Errorf("state %q, want %q", st.State, StatePartial)
	}
	want := map[int32]string{0: "older than the offset index", 2: "nothing of this partition is copied yet"}
	if len(st.Partitions) != 3 {
		t.Fatalf("partitions %+v, want all 3", st.Partitions)
	}
	for _, p := range st.Partitions {
		reason, bad := want[p.Partition]
		if p.Untranslatable != bad || !strings.Contains(p.Reason, reason) || (bad && p.TargetOffset != -1) {
			t.Errorf("partition %+v: want untranslatable=%v with a reason containing %q", p, bad, reason)
		}
	}
	if n := testutil.ToFloat64(h.metrics.Untranslatable); n != 2 {
		t.Errorf("kmirror_group_untranslatable_partitions = %v, want 2", n)
	}
	h.s.mu.Lock()
	gs := h.s.groups[hGroup]
	var checkpointed []int32
	for tp := range gs.checkpointing {
		checkpointed = append(checkpointed, tp.Partition)
	}
	for tp := range gs.checkpointed {
		checkpointed = append(checkpointed, tp.Partition)
	}
	h.s.mu.Unlock()
	if len(checkpointed) != 1 || checkpointed[0] != 1 {
		t.Errorf("checkpoints written for partitions %v, want only 1", checkpointed)
	}
	b, _ := json.Marshal(st.Partitions[0])
	if !strings.Contains(string(b), `"untranslatable":true`) || !strings.Contains(string(b), `"reason":`) {
		t.Errorf("JSON of an untranslatable partition: %s", b)
	}

	// Once it can be translated, the group is synced and the gauge 0.
	h.copiedShifted(0, 200)
	h.copiedShifted(2, 10)
	h.sync(t)
	if st := h.status(t, hGroup); st.State != StateSynced {
		t.Errorf("status %+v, want synced once every partition translates", st)
	}
	if n := testutil.ToFloat64(h.metrics.Untranslatable); n != 0 {
		t.Errorf("kmirror_group_untranslatable_partitions = %v, want 0", n)
	}
}

// TestGroupSyncCheckpointWriteRetried: a checkpoint the target refuses is
// not counted as written: it is counted in
// kmirror_internal_write_errors_total{kind=checkpoint}, logged once while
// the failure lasts, written again by the next sync, and lands once the
// target accepts it.
func TestGroupSyncCheckpointWriteRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	h.copiedShifted(0, 100)
	kfaketest.CommitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 50})
	fault := h.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: h.s.checkpointTopic, Err: kerr.InvalidRecord, Count: -1})
	for i := range 3 {
		h.sync(t)
		kfaketest.WaitFor(t, func() bool { return h.checkpointWriteErrors() >= float64(i+1) }, "the checkpoint write to fail")
	}
	h.s.mu.Lock()
	gs := h.s.groups[hGroup]
	written, pending := len(gs.checkpointed), len(gs.checkpointing)
	h.s.mu.Unlock()
	if written != 0 || pending != 0 {
		t.Errorf("after refused writes: %d checkpoints counted as written, %d pending; want 0 and 0", written, pending)
	}
	h.sync(t) // reports the third failure
	if n := h.logs.Count("could not write checkpoints"); n != 1 {
		t.Errorf("the failing checkpoint write was logged %d times, want once (rate-limited):\n%s", n, h.logs)
	}
	fault.Remove()
	// The write that sync started may have been refused before the fault
	// was removed (it is sent after the producer's linger, while this
	// goroutine may be descheduled): the next syncs, as the mirror's sync
	// ticker would run them, write it again until it lands.
	want := checkpointValue{SourceOffset: 50, TargetTopic: hTarget, TargetOffset: hShift + 50}
	kfaketest.WaitFor(t, func() bool {
		h.sync(t)
		h.s.mu.Lock()
		defer h.s.mu.Unlock()
		return h.s.groups[hGroup].checkpointed[data.TopicPartition{Topic: hTopic, Partition: 0}] == want
	}, "the checkpoint to be acknowledged")
	got := readCheckpoints(t, h)
	key := `{"group":"billing","topic":"orders","partition":0}`
	stamped := got[key]
	if at := time.UnixMilli(stamped.At); time.Since(at) > time.Minute || time.Since(at) < 0 {
		t.Errorf("checkpoint written at %v; want about now", at)
	}
	stamped.At = 0
	if stamped != want {
		t.Errorf("checkpoint topic holds %v, want %s = %+v", got, key, want)
	}
}

// readCheckpoints reads the checkpoint topic to its end.
func readCheckpoints(t *testing.T, h *harness) map[string]checkpointValue {
	t.Helper()
	cl := kfaketest.Client(t, h.dst, kgo.ConsumeTopics(h.s.checkpointTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := h.dstAdm.ListEndOffsets(ctx, h.s.checkpointTopic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(h.s.checkpointTopic, 0)
	out := map[string]checkpointValue{}
	for read := int64(0); read < end.Offset; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d checkpoint records within 30s", read, end.Offset)
		}
		fs.EachRecord(func(r *kgo.Record) {
			read = r.Offset + 1
			payload, _, err := offsets.Decode(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			var v checkpointValue
			if err := json.Unmarshal(payload, &v); err != nil {
				t.Fatal(err)
			}
			out[string(r.Key)] = v
		})
	}
	return out
}

// TestGroupSyncSourceFetchErrorKeepsGroup: a group whose committed offsets
// the source cannot answer this time is unknown, not gone: it stays in the
// set handed to listeners and in /api/v1/groups with its last status, and
// nothing of it is committed. A group first seen while its fetch fails is
// not listed until it can be read. Both are counted.
func TestGroupSyncSourceFetchErrorKeepsGroup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	h.copiedShifted(0, 100)
	kfaketest.CommitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 50})
	h.sync(t)
	before := h.status(t, hGroup)
	if before.State != StateSynced {
		t.Fatalf("status %+v, want synced", before)
	}
	published := func() []string {
		h.mirror.mu.Lock()
		defer h.mirror.mu.Unlock()
		var out []string
		for _, g := range h.mirror.published {
			out = append(out, g.Name)
		}
		return out
	}

	kfaketest.CommitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 80})
	kfaketest.CommitOffsets(t, h.srcAdm, "newcomer", hTopic, map[int32]int64{0: 30})
	fault := h.src.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetFetch}, Count: -1})
	h.sync(t)
	fault.Remove()
	after := h.status(t, hGroup)
	if after.State != before.State || !after.LastSyncAt.Equal(before.LastSyncAt) || after.Partitions[0].SourceOffset != 50 {
		t.Errorf("after a failed fetch at the source the group shows %+v, want its last status %+v", after, before)
	}
	if got := published(); len(got) != 1 || got[0] != hGroup {
		t.Errorf("groups handed to listeners: %v, want [%s] (kept although its fetch failed)", got, hGroup)
	}
	for _, g := range h.s.Groups() {
		if g.Group == "newcomer" {
			t.Errorf("a group whose first fetch failed is listed: %+v", g)
		}
	}
	if got, want := h.targetOffsets(t, hGroup), map[int32]int64{0: hShift + 50}; !maps.Equal(got, want) {
		t.Errorf("target group at %v, want %v (nothing committed while the source offsets are unknown)", got, want)
	}
	if n := h.adminErrors(AdminFetchOffsets); n != 2 {
		t.Errorf("kmirror_admin_errors_total{request=fetch_offsets} = %v, want 2 (one per group)", n)
	}
	if h.logs.Count("cannot read the group's offsets at the source") != 2 {
		t.Errorf("want one log line for the known group and one for the newcomer:\n%s", h.logs)
	}

	h.sync(t)
	if got, want := h.targetOffsets(t, hGroup), map[int32]int64{0: hShift + 80}; !maps.Equal(got, want) {
		t.Errorf("after the fault the target group is at %v, want %v", got, want)
	}
	if got := published(); len(got) != 2 {
		t.Errorf("groups handed to listeners after the fault: %v, want both", got)
	}
}

// TestGroupSyncPartialListingKeepsGroups: when one coordinator of the
// source does not answer ListGroups, the groups it holds are missing from
// the listing but not gone: a known one keeps its status and stays in the
// set, and the groups the other coordinators listed are synced.
func TestGroupSyncPartialListingKeepsGroups(t *testing.T) {
	t.Parallel()
	src, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	dst, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dst.Close)
	h := newHarnessOn(t, src, dst, 1, nil)
	h.copiedShifted(0, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Two groups with different coordinators.
	coordinator := map[string]int32{}
	var groups []string
	for i := 0; len(groups) < 2 && i < 100; i++ {
		g := fmt.Sprintf("g%d", i)
		kfaketest.CommitOffsets(t, h.srcAdm, g, hTopic, map[int32]int64{0: 50})
		described, err := h.srcAdm.DescribeGroups(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		node := described[g].Coordinator.NodeID
		if len(groups) == 0 || coordinator[groups[0]] != node {
			coordinator[g] = node
			groups = append(groups, g)
		}
	}
	if len(groups) < 2 {
		t.Fatal("no two groups with different coordinators among 100")
	}
	lost, listed := groups[0], groups[1]
	h.sync(t)
	before := h.status(t, lost)

	kfaketest.CommitOffsets(t, h.srcAdm, lost, hTopic, map[int32]int64{0: 70})
	kfaketest.CommitOffsets(t, h.srcAdm, listed, hTopic, map[int32]int64{0: 70})
	fault := h.src.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListGroups}, Nodes: []int32{coordinator[lost]}, TopLevel: true, Count: -1})
	h.sync(t)
	fault.Remove()
	if fault.Hits() == 0 {
		t.Fatal("the ListGroups fault answered nothing")
	}
	if after := h.status(t, lost); !after.LastSyncAt.Equal(before.LastSyncAt) || after.Partitions[0].SourceOffset != 50 {
		t.Errorf("group %s, on the coordinator that did not answer the listing: %+v, want its last status %+v", lost, after, before)
	}
	if got := h.targetOffsets(t, lost); got[0] != hShift+50 {
		t.Errorf("group %s on the target: %v, want it left at %d", lost, got, hShift+50)
	}
	if got := h.targetOffsets(t, listed); got[0] != hShift+70 {
		t.Errorf("group %s, listed: target at %v, want %d", listed, got, hShift+70)
	}
	if n := h.adminErrors(AdminDescribeGroups); n != 1 {
		t.Errorf("kmirror_admin_errors_total{request=describe_groups} = %v, want 1 (the listing)", n)
	}
}
