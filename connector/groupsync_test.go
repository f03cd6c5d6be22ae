package connector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/state"
	"github.com/kmirror/kmirror/internal/kfaketest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/connector/offsets"
	"github.com/kmirror/kmirror/filters"
)

// groupHarness drives syncGroups one pass at a time against two kfake
// clusters. The copied partitions of source topic "orders" (target
// "src.orders") are set up by hand in the copier, with their offset index
// and acked position, so a test decides exactly what can be translated,
// and nothing runs in the background: a sync's outcome is read after
// syncGroups returned.
type groupHarness struct {
	*passHarness
	src, dst *kfake.Cluster
	metrics  *Metrics
	logs     *lockedBuffer
}

// lockedBuffer is a log sink safe for the promise goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// count returns the number of log lines containing s.
func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const (
	hTopic  = "orders"
	hTarget = "src.orders"
	hGroup  = "billing"
	// hShift is what the hand-made offset indexes add to a source offset:
	// translated offsets never equal the source offsets by accident.
	hShift = 1000
)

func newGroupHarness(t *testing.T, partitions int32) *groupHarness {
	t.Helper()
	src, dst := kfaketest.Clusters(t)
	return newGroupHarnessOn(t, src, dst, partitions)
}

func newGroupHarnessOn(t *testing.T, src, dst *kfake.Cluster, partitions int32) *groupHarness {
	t.Helper()
	metrics := NewMetrics(prometheus.NewRegistry())
	logs := &lockedBuffer{}
	ph := newPassHarnessFor(t, src, dst, Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		Filters:      []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll(".*")}},
		GroupFilters: []filters.GroupFilter{filters.Regex{Include: filters.MustCompileAll(".*")}},
		Metrics:      metrics,
		Logger:       slog.New(slog.NewTextHandler(logs, nil)),
	})
	h := &groupHarness{passHarness: ph, src: src, dst: dst, metrics: metrics, logs: logs}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := state.EnsureCompacted(ctx, h.dstAdm, h.m.checkpointTopic, 1, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srcAdm.CreateTopic(ctx, partitions, 1, nil, hTopic); err != nil {
		t.Fatal(err)
	}
	if _, err := h.dstAdm.CreateTopic(ctx, partitions, 1, nil, hTarget); err != nil {
		t.Fatal(err)
	}
	h.m.mu.Lock()
	h.m.topics[hTopic] = &topicState{source: hTopic, target: hTarget, partitions: partitions, assigned: partitions, state: StateMirroring, exists: true}
	h.m.mu.Unlock()
	return h
}

// copied makes partition p of "orders" copied with index ix up to acked.
func (h *groupHarness) copied(p int32, ix *index.Partition, acked int64) {
	tp := data.TopicPartition{Topic: hTopic, Partition: p}
	h.plane.mu.Lock()
	h.plane.copied[tp] = &data.PartitionState{TP: tp, Target: hTarget, Index: ix, Acked: acked, Persisted: acked, End: -1}
	h.plane.mu.Unlock()
}

// copiedShifted makes partition p copied up to acked, source offset s at
// target offset s+hShift.
func (h *groupHarness) copiedShifted(p int32, acked int64) {
	h.copied(p, index.Assemble([]index.Chunk{{K: 0, Runs: []index.Run{{Src: 0, Dst: hShift, N: acked}}}}), acked)
}

func commitOffsets(t *testing.T, adm *kadm.Client, group, topic string, offs map[int32]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	os := kadm.Offsets{}
	for p, o := range offs {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit %v to group %s: %v", offs, group, err)
	}
}

// targetOffsets returns the target group's committed offsets on
// "src.orders" (empty when the group does not exist).
func (h *groupHarness) targetOffsets(t *testing.T, group string) map[int32]int64 {
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

func (h *groupHarness) sync(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.m.syncGroups(ctx, h.c, h.plane); err != nil {
		t.Fatalf("syncGroups: %v", err)
	}
}

func (h *groupHarness) status(t *testing.T, group string) GroupStatus {
	t.Helper()
	for _, g := range h.m.Groups() {
		if g.Group == group {
			return g
		}
	}
	t.Fatalf("group %s not in %+v", group, h.m.Groups())
	return GroupStatus{}
}

func (h *groupHarness) adminErrors(req string) float64 {
	return testutil.ToFloat64(h.metrics.adminErrors.WithLabelValues("m", req))
}

func (h *groupHarness) checkpointWriteErrors() float64 {
	return testutil.ToFloat64(h.metrics.internalWrites.WithLabelValues("m", writeCheckpoint))
}

// TestGroupSyncNoCommitWhenTargetOffsetsUnreadable: while the target
// answers the group's OffsetFetch with an error, the sync commits nothing
// to it (the never-rewind guard cannot run: here the target group is
// ahead and would be moved backwards), shows the group "error" with the
// reason, counts every failure and logs it once, not once per sync. When
// the fault ends the group moves forward again, never backwards.
func TestGroupSyncNoCommitWhenTargetOffsetsUnreadable(t *testing.T) {
	t.Parallel()
	h := newGroupHarness(t, 2)
	h.copiedShifted(0, 100)
	h.copiedShifted(1, 100)
	commitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 50, 1: 60})
	// Consumers moved on on the target: partition 0 is ahead there.
	commitOffsets(t, h.dstAdm, hGroup, hTarget, map[int32]int64{0: hShift + 70})

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
	if st.State != GroupError || !strings.Contains(st.Error, "cannot read the group's offsets on the target") {
		t.Errorf("status %+v, want state error naming the unreadable target offsets", st)
	}
	if n := h.adminErrors(adminFetchOffsets); n != syncs {
		t.Errorf("kmirror_admin_errors_total{request=fetch_offsets} = %v, want %d", n, syncs)
	}
	if n := h.logs.count("cannot read the group's offsets on the target"); n != 1 {
		t.Errorf("the failure was logged %d times over %d syncs, want once (rate-limited):\n%s", n, syncs, h.logs)
	}

	h.sync(t)
	if got, want := h.targetOffsets(t, hGroup), map[int32]int64{0: hShift + 70, 1: hShift + 60}; !maps.Equal(got, want) {
		t.Errorf("after the fault ended the target group is at %v, want %v (partition 0 never moved backwards)", got, want)
	}
	if st := h.status(t, hGroup); st.State != GroupSynced || st.Error != "" {
		t.Errorf("after the fault ended: status %+v, want synced", st)
	}
	if h.logs.count("group sync problems cleared") != 1 {
		t.Errorf("the recovery was not logged:\n%s", h.logs)
	}
	commitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 80})
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
	h := newGroupHarness(t, 2)
	h.copiedShifted(0, 100)
	h.copiedShifted(1, 100)
	commitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 50, 1: 60})
	commitOffsets(t, h.dstAdm, hGroup, hTarget, map[int32]int64{0: hShift + 40})
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
	if st.State != GroupError || !strings.Contains(st.Error, hTarget+"/1") {
		t.Errorf("status %+v, want state error naming %s/1", st, hTarget)
	}
	if n := h.adminErrors(adminFetchOffsets); n != 1 {
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
			h := newGroupHarness(t, 2)
			h.copiedShifted(0, 100)
			h.copiedShifted(1, 100)
			commitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 50, 1: 60})
			fault := h.dst.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Group: hGroup, Count: -1})
			h.sync(t)
			fault.Remove()
			if got := h.targetOffsets(t, hGroup); len(got) > 0 {
				t.Errorf("the describe failed, yet the target group was committed: %v", got)
			}
			st := h.status(t, hGroup)
			if st.State != GroupError || !strings.Contains(st.Error, "cannot tell whether the group has members") {
				t.Errorf("status %+v, want state error about members", st)
			}
			if n := h.adminErrors(adminDescribeGroups); n != 1 {
				t.Errorf("kmirror_admin_errors_total{request=describe_groups} = %v, want 1", n)
			}
			h.sync(t)
			if got, want := h.targetOffsets(t, hGroup), map[int32]int64{0: hShift + 50, 1: hShift + 60}; !maps.Equal(got, want) {
				t.Errorf("after the fault the target group is at %v, want %v", got, want)
			}
			if st := h.status(t, hGroup); st.State != GroupSynced {
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
	h := newGroupHarness(t, 3)
	// Partition 0: the index's first chunk was pruned, it starts at 100.
	h.copied(0, index.Assemble([]index.Chunk{{K: 1, Runs: []index.Run{{Src: 100, Dst: hShift + 100, N: 100}}}}), 200)
	h.copiedShifted(1, 100)
	h.copied(2, index.New(), 0) // nothing copied
	commitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 20, 1: 60, 2: 5})
	h.sync(t)

	if got, want := h.targetOffsets(t, hGroup), map[int32]int64{1: hShift + 60}; !maps.Equal(got, want) {
		t.Errorf("target group at %v, want %v: only the translatable partition", got, want)
	}
	st := h.status(t, hGroup)
	if st.State != GroupPartial {
		t.Errorf("state %q, want %q", st.State, GroupPartial)
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
	if n := testutil.ToFloat64(h.metrics.untranslatable.WithLabelValues("m")); n != 2 {
		t.Errorf("kmirror_group_untranslatable_partitions = %v, want 2", n)
	}
	h.m.mu.Lock()
	gs := h.m.groups[hGroup]
	var checkpointed []int32
	for tp := range gs.checkpointing {
		checkpointed = append(checkpointed, tp.Partition)
	}
	for tp := range gs.checkpointed {
		checkpointed = append(checkpointed, tp.Partition)
	}
	h.m.mu.Unlock()
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
	if st := h.status(t, hGroup); st.State != GroupSynced {
		t.Errorf("status %+v, want synced once every partition translates", st)
	}
	if n := testutil.ToFloat64(h.metrics.untranslatable.WithLabelValues("m")); n != 0 {
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
	h := newGroupHarness(t, 1)
	h.copiedShifted(0, 100)
	commitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 50})
	fault := h.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: h.m.checkpointTopic, Err: kerr.InvalidRecord, Count: -1})
	for i := range 3 {
		h.sync(t)
		kfaketest.WaitFor(t, func() bool { return h.checkpointWriteErrors() >= float64(i+1) }, "the checkpoint write to fail")
	}
	h.m.mu.Lock()
	gs := h.m.groups[hGroup]
	written, pending := len(gs.checkpointed), len(gs.checkpointing)
	h.m.mu.Unlock()
	if written != 0 || pending != 0 {
		t.Errorf("after refused writes: %d checkpoints counted as written, %d pending; want 0 and 0", written, pending)
	}
	h.sync(t) // reports the third failure
	if n := h.logs.count("could not write checkpoints"); n != 1 {
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
		h.m.mu.Lock()
		defer h.m.mu.Unlock()
		return h.m.groups[hGroup].checkpointed[data.TopicPartition{Topic: hTopic, Partition: 0}] == want
	}, "the checkpoint to be acknowledged")
	got := readCheckpoints(t, h)
	key := `{"group":"billing","topic":"orders","partition":0}`
	if got[key] != want {
		t.Errorf("checkpoint topic holds %v, want %s = %+v", got, key, want)
	}
}

// readCheckpoints reads the checkpoint topic to its end.
func readCheckpoints(t *testing.T, h *groupHarness) map[string]checkpointValue {
	t.Helper()
	cl := kfaketest.Client(t, h.dst, kgo.ConsumeTopics(h.m.checkpointTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := h.dstAdm.ListEndOffsets(ctx, h.m.checkpointTopic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(h.m.checkpointTopic, 0)
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
	commitOffsets(t, srcAdm, "payroll", "ledger", map[int32]int64{0: 40, 1: 3})
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
	commitOffsets(t, dstAdm, "payroll", "src.ledger", map[int32]int64{0: 70})
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

// TestGroupSyncSourceFetchErrorKeepsGroup: a group whose committed offsets
// the source cannot answer this time is unknown, not gone: it stays in the
// set handed to listeners and in /api/v1/groups with its last status, and
// nothing of it is committed. A group first seen while its fetch fails is
// not listed until it can be read. Both are counted.
func TestGroupSyncSourceFetchErrorKeepsGroup(t *testing.T) {
	t.Parallel()
	h := newGroupHarness(t, 1)
	h.copiedShifted(0, 100)
	commitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 50})
	h.sync(t)
	before := h.status(t, hGroup)
	if before.State != GroupSynced {
		t.Fatalf("status %+v, want synced", before)
	}
	published := func() []string {
		h.m.mu.Lock()
		defer h.m.mu.Unlock()
		var out []string
		for _, g := range h.m.publishedGroups {
			out = append(out, g.Name)
		}
		return out
	}

	commitOffsets(t, h.srcAdm, hGroup, hTopic, map[int32]int64{0: 80})
	commitOffsets(t, h.srcAdm, "newcomer", hTopic, map[int32]int64{0: 30})
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
	for _, g := range h.m.Groups() {
		if g.Group == "newcomer" {
			t.Errorf("a group whose first fetch failed is listed: %+v", g)
		}
	}
	if got, want := h.targetOffsets(t, hGroup), map[int32]int64{0: hShift + 50}; !maps.Equal(got, want) {
		t.Errorf("target group at %v, want %v (nothing committed while the source offsets are unknown)", got, want)
	}
	if n := h.adminErrors(adminFetchOffsets); n != 2 {
		t.Errorf("kmirror_admin_errors_total{request=fetch_offsets} = %v, want 2 (one per group)", n)
	}
	if h.logs.count("cannot read the group's offsets at the source") != 2 {
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
	h := newGroupHarnessOn(t, src, dst, 1)
	h.copiedShifted(0, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Two groups with different coordinators.
	coordinator := map[string]int32{}
	var groups []string
	for i := 0; len(groups) < 2 && i < 100; i++ {
		g := fmt.Sprintf("g%d", i)
		commitOffsets(t, h.srcAdm, g, hTopic, map[int32]int64{0: 50})
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

	commitOffsets(t, h.srcAdm, lost, hTopic, map[int32]int64{0: 70})
	commitOffsets(t, h.srcAdm, listed, hTopic, map[int32]int64{0: 70})
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
	if n := h.adminErrors(adminDescribeGroups); n != 1 {
		t.Errorf("kmirror_admin_errors_total{request=describe_groups} = %v, want 1 (the listing)", n)
	}
}
