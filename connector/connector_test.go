package connector

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/state"
	"github.com/kmirror/kmirror/internal/kfaketest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/filters"
)

type failingFilter struct{ err error }

func (f failingFilter) FilterTopics(context.Context, filters.TopicRequest) ([]string, error) {
	return nil, f.err
}

type inventingFilter struct{}

func (inventingFilter) FilterTopics(_ context.Context, req filters.TopicRequest) ([]string, error) {
	out := []string{"never-seen"}
	for _, t := range req.Topics {
		out = append(out, t.Name)
	}
	return out, nil
}

func names(ts []filters.Topic) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func TestSelectTopics(t *testing.T) {
	t.Parallel()
	candidates := []filters.Topic{
		{Name: "orders"}, {Name: "payments"}, {Name: "__consumer_offsets"}, {Name: ".hidden"},
		{Name: "app.internal"}, {Name: "app-internal"}, {Name: "west.orders"}, {Name: "east.west.x"},
		{Name: "east.orders"}, {Name: policy.InternalTopic("m", "progress")},
	}
	all := filters.Regex{Include: filters.MustCompileAll(".*")}
	tests := map[string]struct {
		fs      []filters.TopicFilter
		want    []string
		wantErr bool
	}{
		"final rules apply whatever the filter says": {
			fs:   []filters.TopicFilter{all},
			want: []string{"orders", "payments", "east.orders"},
		},
		"no filters still applies final rules": {
			want: []string{"orders", "payments", "east.orders"},
		},
		"filters chain": {
			fs: []filters.TopicFilter{all, filters.Regex{
				Include: filters.MustCompileAll(".*orders"),
				Exclude: filters.MustCompileAll("east\\..*"),
			}},
			want: []string{"orders"},
		},
		"a filter cannot add topics": {
			fs:   []filters.TopicFilter{inventingFilter{}},
			want: []string{"orders", "payments", "east.orders"},
		},
		"a filter error is an error, not an empty set": {
			fs:      []filters.TopicFilter{all, failingFilter{errors.New("catalog down")}},
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, _, err := selectTopics(context.Background(), "m", tc.fs, policy.Default{}, "west", candidates, nil)
			if tc.wantErr {
				if err == nil || got != nil {
					t.Fatalf("want error and nil selection, got %v, %v", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(names(got), tc.want) {
				t.Fatalf("got %v, want %v", names(got), tc.want)
			}
		})
	}
}

func TestProgressCodec(t *testing.T) {
	t.Parallel()
	tp := data.TopicPartition{Topic: "orders.eu", Partition: 7}
	k, v := data.EncodeProgress(tp, data.Position{Next: 12345, TopicID: "AAEC"})
	if string(k) != `{"topic":"orders.eu","partition":7}` || string(v) != `{"next_offset":12345,"topic_id":"AAEC"}` {
		t.Fatalf("encoded %s = %s", k, v)
	}
	gotTP, pos, err := data.DecodeProgress(k, v)
	if err != nil || gotTP != tp || pos != (data.Position{Next: 12345, TopicID: "AAEC"}) {
		t.Fatalf("decoded %v %v %v", gotTP, pos, err)
	}
	// A value without a topic ID (a broker without IDs) reads back too.
	if _, pos, err := data.DecodeProgress(k, []byte(`{"next_offset":3}`)); err != nil || pos != (data.Position{Next: 3}) {
		t.Fatalf("decoded %v %v", pos, err)
	}
	if _, _, err := data.DecodeProgress([]byte("garbage"), v); err == nil {
		t.Fatal("want an error for a bad key")
	}
	if _, _, err := data.DecodeProgress(k, []byte("{")); err == nil {
		t.Fatal("want an error for a bad value")
	}
}

// passHarness runs control passes of one mirror against two kfake clusters
// without starting the copier's poll loop.
type passHarness struct {
	m              *Mirror
	c              *clients
	srcAdm, dstAdm *kadm.Client
	dst            *kgo.Client
	cp             *data.Copier
	// plane is the data plane the passes drive: cp, resuming partitions
	// from stored (as a slot resumes them from what it loaded).
	plane *loadedPlane
}

// loadedPlane is a copier that resumes each partition it is assigned from
// stored progress, as a slot does (loaded.resume): the unit tests' data
// plane.
type loadedPlane struct {
	*data.Copier
	mu     sync.Mutex
	stored data.Loaded
	// copied are partitions a test makes copied without the copier
	// (TestTranslationViewReadsOnlyWhenNeeded).
	copied map[data.TopicPartition]*data.PartitionState
}

func (p *loadedPlane) Partition(tp data.TopicPartition) *data.PartitionState {
	p.mu.Lock()
	ps := p.copied[tp]
	p.mu.Unlock()
	if ps != nil || p.Copier == nil {
		return ps
	}
	return p.Copier.Partition(tp)
}

func (p *loadedPlane) Snapshot() []*data.PartitionState {
	p.mu.Lock()
	out := slices.Collect(maps.Values(p.copied))
	p.mu.Unlock()
	return append(out, p.Copier.Snapshot()...)
}

func (p *loadedPlane) Assign(as []data.Assignment, srcOpts []kgo.Opt) (bool, error) {
	p.mu.Lock()
	for i := range as {
		as[i] = p.stored.Resume(as[i])
	}
	p.mu.Unlock()
	return p.Copier.Assign(as, srcOpts)
}

// store makes tp resume from pos when it is next assigned; a negative
// next drops what was stored for it.
func (h *passHarness) store(tp data.TopicPartition, pos data.Position) {
	h.plane.mu.Lock()
	defer h.plane.mu.Unlock()
	if pos.Next < 0 {
		delete(h.plane.stored.Positions, tp)
		return
	}
	h.plane.stored.Positions[tp] = pos
}

func newPassHarness(t *testing.T, src, dst *kfake.Cluster) *passHarness {
	t.Helper()
	return newPassHarnessFor(t, src, dst, passHarnessConfig())
}

// passHarnessConfig is the config of newPassHarness's mirror.
func passHarnessConfig() Config {
	return Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		Filters: []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll(".*")}},
		ConfigFilters: []filters.ConfigPropertyFilter{filters.Regex{
			Include: filters.MustCompileAll(".*"),
			Exclude: filters.MustCompileAll(`message\.timestamp\..*`, `min\.insync\.replicas`),
		}},
		Logger: kfaketest.Logger(),
	}
}

// newPassHarnessFor builds a harness for cfg, pointing its clients at src
// and dst, with opts (e.g. SASL) added to every client.
func newPassHarnessFor(t *testing.T, src, dst *kfake.Cluster, cfg Config, opts ...kgo.Opt) *passHarness {
	t.Helper()
	cfg.SourceOpts = append([]kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)}, opts...)
	cfg.TargetOpts = append([]kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, opts...)
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dstCl := kfaketest.Client(t, dst, append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	srcCl := kfaketest.Client(t, src, opts...)
	// The mirror's admin clients are its own, as in newClients: a pass
	// purges what they cached.
	srcAdminCl, dstAdminCl := kfaketest.Client(t, src, opts...), kfaketest.Client(t, dst, opts...)
	h := &passHarness{
		m:      m,
		c:      &clients{srcAdminCl: srcAdminCl, dstAdminCl: dstAdminCl, dst: dstCl, srcAdm: kadm.NewClient(srcAdminCl), dstAdm: kadm.NewClient(dstAdminCl)},
		srcAdm: kadm.NewClient(srcCl),
		dstAdm: kadm.NewClient(dstCl),
		dst:    dstCl,
	}
	for _, topic := range []string{m.progressTopic, m.metadataTopic} {
		if _, err := state.EnsureCompacted(context.Background(), h.dstAdm, topic, 1, -1); err != nil {
			t.Fatal(err)
		}
	}
	h.cp = data.NewCopier(m.log, nil, dstCl, context.Background(), m.gapOpts(data.CopierOpts{DeadLetter: cfg.DeadLetterTopic}))
	t.Cleanup(h.cp.Close)
	h.plane = &loadedPlane{Copier: h.cp, copied: map[data.TopicPartition]*data.PartitionState{}, stored: data.Loaded{Positions: map[data.TopicPartition]data.Position{}, Indexes: map[data.TopicPartition]*index.Partition{}}}
	m.copier = h.plane
	m.controlWithoutGroup = true
	m.started = true
	return h
}

func (h *passHarness) pass(t *testing.T) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := h.m.pass(ctx, h.c, h.plane)
	return err
}

func (h *passHarness) topicStates() map[string]State {
	out := map[string]State{}
	for _, ts := range h.m.Status().Topics {
		out[ts.SourceTopic] = ts.State
	}
	return out
}

// targetPartitions asks the cluster directly: kadm's listing may answer
// from the client's metadata cache.
func targetPartitions(t *testing.T, cl *kgo.Client) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, td := range resp.Topics {
		if td.Topic != nil && td.ErrorCode == 0 {
			out[*td.Topic] = len(td.Partitions)
		}
	}
	return out
}

// TestPassCreatesTopicsInOneRequestAndRetriesFailures checks KIP-4
// semantics: every missing topic goes in one CreateTopics request, a topic
// the target refuses does not hold back the others, and it is retried on
// the next pass.
func TestPassCreatesTopicsInOneRequestAndRetriesFailures(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	ctx := context.Background()
	srcAdm := h.srcAdm
	for _, topic := range []string{"alpha", "beta", "blocked"} {
		if _, err := srcAdm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srcAdm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy":         kadm.StringPtr("compact"),
		"message.timestamp.type": kadm.StringPtr("LogAppendTime"), // MM2 never copies it
	}, "compacted"); err != nil {
		t.Fatal(err)
	}
	// Kafka refuses a topic whose name differs from an existing one only
	// by '.' versus '_': src.blocked collides with src_blocked.
	if _, err := h.dstAdm.CreateTopic(ctx, 1, 1, nil, "src_blocked"); err != nil {
		t.Fatal(err)
	}

	var createRequests atomic.Int32
	var topicsInRequest atomic.Int32
	dst.ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		if r := req.(*kmsg.CreateTopicsRequest); len(r.Topics) > 0 {
			createRequests.Add(1)
			topicsInRequest.Store(int32(len(r.Topics)))
		}
		return nil, nil, false
	})

	err := h.pass(t)
	if err != nil {
		t.Fatalf("a refused topic must not fail the pass: %v", err)
	}
	if n := createRequests.Load(); n != 1 || topicsInRequest.Load() != 4 {
		t.Fatalf("CreateTopics requests = %d with %d topics, want 1 with 4", n, topicsInRequest.Load())
	}
	got := targetPartitions(t, h.dst)
	if got["src.alpha"] != 3 || got["src.beta"] != 3 || got["src.compacted"] != 1 {
		t.Fatalf("target topics = %v, want src.alpha and src.beta with 3 partitions", got)
	}
	if _, ok := got["src.blocked"]; ok {
		t.Fatal("src.blocked must not exist while src_blocked does")
	}
	states := h.topicStates()
	if states["alpha"] != StateMirroring || states["beta"] != StateMirroring || states["blocked"] != StateFailed {
		t.Fatalf("states = %v", states)
	}
	st := h.m.Status()
	if st.Ready {
		t.Fatal("a mirror with a failed topic must not be ready")
	}
	for _, ts := range st.Topics {
		if ts.SourceTopic == "blocked" && ts.Error == "" {
			t.Fatal("the failed topic's status must carry its error")
		}
	}

	// The source configs travel, minus MM2's exclusions.
	rcs, err := h.dstAdm.DescribeTopicConfigs(ctx, "src.compacted")
	if err != nil {
		t.Fatal(err)
	}
	cfgs := map[string]kmsg.ConfigSource{}
	vals := map[string]string{}
	for _, c := range rcs[0].Configs {
		cfgs[c.Key] = c.Source
		if c.Value != nil {
			vals[c.Key] = *c.Value
		}
	}
	if vals["cleanup.policy"] != "compact" || cfgs["cleanup.policy"] != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("cleanup.policy on target = %q (%v), want compact set on the topic", vals["cleanup.policy"], cfgs["cleanup.policy"])
	}
	if cfgs["message.timestamp.type"] == kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatal("message.timestamp.type must not be copied")
	}

	// Once the collision is gone, the next pass creates the topic; the
	// ones already there are not asked for again.
	if _, err := h.dstAdm.DeleteTopic(ctx, "src_blocked"); err != nil {
		t.Fatal(err)
	}
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	if n := topicsInRequest.Load(); createRequests.Load() != 2 || n != 1 {
		t.Fatalf("second pass: %d requests, last with %d topics; want 2 and 1", createRequests.Load(), n)
	}
	if got := targetPartitions(t, h.dst); got["src.blocked"] != 3 {
		t.Fatalf("src.blocked not created on retry: %v", got)
	}
	if states := h.topicStates(); states["blocked"] != StateMirroring {
		t.Fatalf("states after retry = %v", states)
	}
	if !h.m.Status().Ready {
		t.Fatalf("mirror not ready after every topic was created: %+v", h.m.Status())
	}
}

func TestPassGrowsPartitionsAndAssignsThem(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	ctx := context.Background()
	if _, err := h.srcAdm.CreateTopic(ctx, 2, 1, nil, "grow"); err != nil {
		t.Fatal(err)
	}
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srcAdm.UpdatePartitions(ctx, 5, "grow"); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool {
		if err := h.pass(t); err != nil {
			t.Fatal(err)
		}
		return targetPartitions(t, h.dst)["src.grow"] == 5
	}, "5 target partitions")
	var assigned []int
	for _, ps := range h.cp.Snapshot() {
		assigned = append(assigned, int(ps.TP.Partition))
	}
	sort.Ints(assigned)
	if !reflect.DeepEqual(assigned, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("assigned partitions = %v", assigned)
	}
}

func TestPassDropsDeletedTopics(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	ctx := context.Background()
	if _, err := h.srcAdm.CreateTopic(ctx, 2, 1, nil, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	if len(h.cp.Snapshot()) != 2 {
		t.Fatalf("want 2 partitions assigned, got %d", len(h.cp.Snapshot()))
	}
	if _, err := h.srcAdm.DeleteTopic(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool {
		if err := h.pass(t); err != nil {
			t.Fatal(err)
		}
		return len(h.cp.Snapshot()) == 0
	}, "the partitions of the deleted source topic to be unassigned")
	if len(h.m.Status().Topics) != 0 {
		t.Fatalf("status still lists %v", h.m.Status().Topics)
	}
}

func TestLoadProgressKeepsLatestPerPartition(t *testing.T) {
	t.Parallel()
	_, dst := kfaketest.Clusters(t)
	cl := kfaketest.Client(t, dst)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	topic := policy.InternalTopic("m", "progress")
	if _, err := state.EnsureCompacted(ctx, adm, topic, 1, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := state.EnsureCompacted(ctx, adm, topic, 1, -1); err != nil {
		t.Fatalf("an existing progress topic must be fine: %v", err)
	}
	empty, err := data.LoadProgress(ctx, nil, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, adm, topic)
	if err != nil || len(empty.Positions) != 0 {
		t.Fatalf("empty topic: %v, %v", empty, err)
	}
	var recs []*kgo.Record
	for _, p := range []struct {
		tp   data.TopicPartition
		next int64
	}{{data.TopicPartition{Topic: "a", Partition: 0}, 5}, {data.TopicPartition{Topic: "a", Partition: 1}, 7}, {data.TopicPartition{Topic: "a", Partition: 0}, 9}} {
		k, v := data.EncodeProgress(p.tp, data.Position{Next: p.next})
		recs = append(recs, &kgo.Record{Topic: topic, Key: k, Value: v})
	}
	k, _ := data.EncodeProgress(data.TopicPartition{Topic: "b", Partition: 0}, data.Position{})
	recs = append(recs, &kgo.Record{Topic: topic, Key: k}) // a tombstone
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got, err := data.LoadProgress(ctx, nil, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[data.TopicPartition]data.Position{{Topic: "a", Partition: 0}: {Next: 9}, {Topic: "a", Partition: 1}: {Next: 7}}
	if !reflect.DeepEqual(got.Positions, want) {
		t.Fatalf("got %v, want %v", got.Positions, want)
	}
}

// TestPassRecreatedTopicFails: a topic deleted and recreated under the
// same name has a new topic ID. Its target holds the old topic's records,
// so the topic fails (copying stops, other topics go on) until the operator
// deletes the target topic; then the new topic is mirrored from its start.
func TestPassRecreatedTopicFails(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	ctx := context.Background()
	for _, topic := range []string{"re", "other"} {
		if _, err := h.srcAdm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	// Stored progress of this incarnation: positions resume.
	tds, err := h.srcAdm.ListTopics(ctx, "re")
	if err != nil {
		t.Fatal(err)
	}
	oldID := tds["re"].ID.String()
	h.store(data.TopicPartition{Topic: "re", Partition: 0}, data.Position{Next: 50, TopicID: oldID})
	h.store(data.TopicPartition{Topic: "re", Partition: 1}, data.Position{Next: 60, TopicID: oldID})
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	if ps := h.cp.Partition(data.TopicPartition{Topic: "re", Partition: 0}); ps == nil || ps.Acked != 50 || ps.TopicID != oldID {
		t.Fatalf("partition 0 = %+v, want resumed at 50 with id %s", ps, oldID)
	}

	if _, err := h.srcAdm.DeleteTopic(ctx, "re"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srcAdm.CreateTopic(ctx, 2, 1, nil, "re"); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool {
		if err := h.pass(t); err != nil {
			t.Fatal(err)
		}
		return h.topicStates()["re"] == StateFailed
	}, "the recreated topic to fail")
	if ps := h.cp.Partition(data.TopicPartition{Topic: "re", Partition: 0}); ps != nil {
		t.Fatalf("a failed topic must not be copied, but partition 0 is assigned: %+v", ps)
	}
	if h.topicStates()["other"] != StateMirroring {
		t.Fatalf("other topics must go on: %v", h.topicStates())
	}
	var reason string
	for _, ts := range h.m.Status().Topics {
		if ts.SourceTopic == "re" {
			reason = ts.Error
		}
	}
	if !strings.Contains(reason, "deleted and recreated") || !strings.Contains(reason, "delete it on the target") {
		t.Fatalf("status error = %q, want it to say what happened and what to do", reason)
	}
	if h.m.Status().Ready {
		t.Fatal("a mirror with a failed topic is not ready")
	}

	// The operator deletes the target topic: the new topic is mirrored
	// from its start.
	if _, err := h.dstAdm.DeleteTopic(ctx, "src.re"); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool {
		if err := h.pass(t); err != nil {
			t.Fatal(err)
		}
		ps := h.cp.Partition(data.TopicPartition{Topic: "re", Partition: 0})
		return ps != nil && ps.Acked == -1 && ps.TopicID != oldID && h.topicStates()["re"] == StateMirroring
	}, "the recreated topic to be mirrored from its start")
}

func TestPassShrunkTopicFails(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	ctx := context.Background()
	if _, err := h.srcAdm.CreateTopic(ctx, 3, 1, nil, "shrink"); err != nil {
		t.Fatal(err)
	}
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	// Pretend the last pass saw more partitions than there are now.
	h.m.mu.Lock()
	h.m.topics["shrink"].partitions = 5
	h.m.mu.Unlock()
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	if st := h.topicStates()["shrink"]; st != StateFailed {
		t.Fatalf("state = %s, want failed", st)
	}
}

// TestEndsDue: the source's offsets are listed every pass up to
// endsPartitionsPerPass partitions, and less often beyond, so that the
// listing's cost per second stays bounded (at 100,000 partitions it was
// most of an idle worker's CPU).
func TestEndsDue(t *testing.T) {
	for _, tc := range []struct {
		partitions int32
		due        []bool // at passes 0, 1, 2, ... 10 s apart
	}{
		{5_000, []bool{true, true, true}},
		{20_000, []bool{true, false, true, false, true}},
		{100_000, []bool{true, false, false, false, false, false, false, false, false, false, true, false}},
	} {
		m := &Mirror{cfg: Config{RefreshInterval: 10 * time.Second}, topics: map[string]*topicState{"t": {partitions: tc.partitions}}}
		t0 := time.Now()
		for i, want := range tc.due {
			if got := m.endsDue(t0.Add(time.Duration(i) * 10 * time.Second)); got != want {
				t.Fatalf("%d partitions, pass %d: due = %v, want %v", tc.partitions, i, got, want)
			}
		}
	}
}

// slotCopier is the copier of the slot that copies tp on m's worker, nil
// before the slot is taken over.
func slotCopier(m *Mirror, tp data.TopicPartition) *data.Copier {
	if w := m.slots.worker(tp); w != nil {
		return w.cp
	}
	return nil
}
