package connector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/fence"
	"github.com/kmirror/kmirror/connector/groups"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/loglimit"
	"github.com/kmirror/kmirror/connector/state"
	"github.com/kmirror/kmirror/connector/uncached"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/connector/throttle"
	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
)

// State is where a selected topic stands.
type State string

const (
	// StatePending: selected, not yet created or assigned on the target.
	StatePending State = "pending"
	// StateMirroring: every source partition is being copied.
	StateMirroring State = "mirroring"
	// StateFailed: the target refused to create or grow the topic, or
	// refuses its records (retried on every pass), or the source topic
	// was recreated or shrank (stopped until the operator deletes the
	// target topic). Other topics go on either way.
	StateFailed State = "failed"
)

// Status is a snapshot of one mirror for /api/v1/status.
type Status struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Target string `json:"target"`
	// Ready is true once every selected topic exists on the target and is
	// being copied, and the last control pass succeeded.
	Ready         bool      `json:"ready"`
	LastPassAt    time.Time `json:"last_pass_at,omitzero"` // absent before the first pass
	LastPassError string    `json:"last_pass_error"`
	// Lag is the topics' lag summed; null while any topic's is unknown
	// (LagUnknownSince, the earliest of theirs).
	Lag             *int64        `json:"lag"`
	LagUnknownSince time.Time     `json:"lag_unknown_since,omitzero"`
	Topics          []TopicStatus `json:"topics"`
	// TopicsTotal and NextAfter are set by GET /api/v1/status: the topics
	// matching its filters, and (when ?limit cut the list) the ?after of
	// the next page.
	TopicsTotal int    `json:"topics_total"`
	NextAfter   string `json:"next_after,omitempty"`
	// StateCounts, also set by GET /api/v1/status, counts the topics
	// matching its ?topic in each state, whatever its ?state: the status
	// page's filter buttons.
	StateCounts map[State]int `json:"state_counts,omitempty"`
	// Cluster is this worker's part of the mirror: its slots and group.
	Cluster *ClusterStatus `json:"cluster,omitempty"`
	// Fenced is set while the mirror is fenced (kmirror failover or
	// cutover): this worker copies nothing. It says when, by what and
	// why.
	Fenced string `json:"fenced,omitempty"`
	// RateLimit is the mirror's rate limits on this worker, when it has
	// any (mirrors[].rate_limit, topic_rate_limits).
	RateLimit *RateLimitStatus `json:"rate_limit,omitempty"`
}

// ClusterStatus is a worker's membership in a mirror's cluster.
type ClusterStatus struct {
	// Member is this worker's member ID in the group kmirror.<mirror>.
	Member string `json:"member"`
	// Slots is the mirror's slot count; Owned the slots this worker
	// copies.
	Slots int32   `json:"slots"`
	Owned []int32 `json:"owned"`
	// ControlPlane is true while this worker runs the control plane.
	ControlPlane bool `json:"control_plane"`
	// SlotLag is the lag (records) of each slot this worker owns; null
	// for a slot with a partition whose lag is unknown.
	SlotLag map[int32]*int64 `json:"slot_lag"`
	// Workers is the whole group as last described by its coordinator
	// (refreshed every pass); WorkersError says why the last description
	// failed (the list is then the previous one).
	Workers      []WorkerStatus `json:"workers"`
	WorkersError string         `json:"workers_error,omitempty"`
	// Unowned are the slots no worker is assigned in that description:
	// their partitions are not copied.
	Unowned []int32 `json:"unowned"`
	// Rebalance is set while this worker is in a rebalance of the group.
	Rebalance *RebalanceStatus `json:"rebalance,omitempty"`
}

// RebalanceStatus is a rebalance of the group a worker is in.
type RebalanceStatus struct {
	Since      time.Time `json:"since"`
	WaitingFor string    `json:"waiting_for"`
	// Error is the last error that broke the worker's group session
	// since the rebalance began.
	Error string `json:"error,omitempty"`
	// NotSettling is true once the rebalance lasted longer than the
	// session timeout plus the rebalance timeout: the worker is then not
	// ready.
	NotSettling bool `json:"not_settling"`
}

// WorkerStatus is one worker of a mirror.
type WorkerStatus struct {
	Member       string  `json:"member"`
	ClientID     string  `json:"client_id"`
	Host         string  `json:"host"`
	Slots        []int32 `json:"slots"`
	ControlPlane bool    `json:"control_plane"`
}

// TopicStatus is one selected topic.
type TopicStatus struct {
	SourceTopic string `json:"source_topic"`
	TargetTopic string `json:"target_topic"`
	Partitions  int32  `json:"partitions"`
	State       State  `json:"state"`
	// Lag is the records committed at the source and not yet acknowledged
	// by the target (transaction markers count as records). It is null
	// while the source's end of a partition could not be read since
	// LagUnknownSince (the source down or frozen, a listing or fetch
	// refused): unknown, not the figure last known.
	Lag             *int64    `json:"lag"`
	LagUnknownSince time.Time `json:"lag_unknown_since,omitzero"`
	// LagSeconds is how far behind the copy is in time: for the partition
	// furthest behind, now minus the timestamp of the last record it
	// copied; 0 when nothing is behind (or nothing was copied yet).
	LagSeconds float64 `json:"lag_seconds"`
	// Copied is the records the target acknowledged since this worker
	// started: two readings give the throughput.
	Copied int64  `json:"copied"`
	Error  string `json:"error"`
	// SourceGaps are the latest source gap of each partition that had
	// one since the worker started (sourcegap.go).
	SourceGaps []SourceGapStatus `json:"source_gaps,omitempty"`
	// Divergent are the divergent tails of the target topic, by
	// partition, of a mirror copying back after a failover: the
	// records the former target never got (divergent.go).
	Divergent []DivergentStatus `json:"divergent,omitempty"`
	// RateLimit is the topic's own limit (topic_rate_limits), bytes per
	// second on this worker; Throttled: it holds the topic back now.
	RateLimit int64 `json:"rate_limit,omitempty"`
	Throttled bool  `json:"throttled,omitempty"`
}

// topicState is the control plane's view of one selected topic. Fields are
// guarded by Mirror.mu.
type topicState struct {
	source, target string
	id             string // the source topic's ID ("" when the broker has none)
	persistedID    string // the source topic ID in the stored metadata
	exists         bool   // the target topic existed at the last pass
	targetID       string // the target topic's ID when last listed ("" unknown)
	partitions     int32  // at the source
	assigned       int32  // partitions [0, assigned) are being copied
	state          State
	err            error // why state is failed, for a retried failure
	// fatal is a failure no retry can fix (the source topic was recreated
	// or shrank): copying stops until the target topic is deleted.
	fatal error

	createdAt time.Time
	// listed: the target topic was in a listing since this worker created
	// it. Until it is (for targetPropagation), its absence from one means
	// the target's metadata has not caught up, not that it was deleted.
	listed         bool
	configSyncedAt time.Time
	syncedConfigs  []string          // config keys kmirror set on the target topic, sorted
	upstream       map[string]string // metadata inherited from an upstream mirror
}

func (ts *topicState) currentState() State {
	if ts.fatal != nil {
		return StateFailed
	}
	return ts.state
}

func (ts *topicState) currentErr() error {
	if ts.fatal != nil {
		return ts.fatal
	}
	return ts.err
}

// Mirror copies one source cluster's selected topics to a target cluster.
type Mirror struct {
	cfg           Config
	log           *slog.Logger
	metrics       *mirrorMetrics
	progressTopic string
	metadataTopic string
	// stateParts is each state topic's partition count, known once
	// start created or found the topics (see package state).
	stateParts map[string]int32
	sealer     data.Sealer // wraps offset records (progress, index, checkpoints)
	logEvery   *loglimit.Limiter
	// logOnce: conditions only the operator ends (untrusted metadata).
	logOnce *loglimit.Limiter
	// The failures of each periodic job, logged with backoff.
	startFailures, passFailures, groupFailures, configFailures, aclFailures *failureLog
	// producerBufferBytes bounds the target producer's buffer
	// (data.ProducerMaxBufferedBytes; tests lower it).
	producerBufferBytes int

	// produceCtx outlives Run's context: records in flight must still be
	// flushed after a shutdown starts. It is cancelled only if the flush
	// times out.
	produceCtx    context.Context
	cancelProduce context.CancelFunc

	// sel is what the mirror selects with; Reconfigure swaps it.
	sel atomic.Pointer[Selection]
	// throttle holds this worker's fetches to the mirror's rate limits
	// (applyRateLimits), shared by its copiers.
	throttle *throttle.Throttle
	// rateTopics are the topics the last pass selected, with their
	// labels: what a reload resolves topic rate limits against at once.
	rateTopics []filters.Topic

	// groupSync is the groups plane (package groups, wired in
	// groupsync.go), with its own state and lock.
	groupSync *groups.Syncer

	mu            sync.Mutex
	topics        map[string]*topicState                   // by source topic
	indexes       map[data.TopicPartition]*index.Partition // loaded at start, handed to the copier
	metaPersisted map[string]map[string]string             // by target topic, as last acknowledged
	lastPassAt    time.Time
	lastPassErr   error
	fenced        *fence.State // the fence, while it stops this worker
	// reverseOf is the mirror this one copies back for (the fence
	// record's ReverseOf, set by kmirror failback), or "", and divergent
	// the divergent tails failback found on this mirror's target
	// (setReverse).
	reverseOf string
	divergent []fence.Divergent
	endsAt    time.Time // the last refreshEnds (endsDue)
	started   bool      // the startup sequence (internal topics, loads) finished
	copier    dataPlane
	// controlWithoutGroup makes this mirror run the control plane without
	// owning slot 0: the unit tests' harness, which drives passes over a
	// copier of its own and never joins the group.
	controlWithoutGroup bool
	// slots is the data plane: the copiers of the slots this worker owns.
	slots *slotPlane
	// plan collects what a dry-run pass would do; nil outside Plan.
	plan *Plan
	// adopt is the adoption of MM2's positions (mm2.go); nil unless
	// mm2.adopt.
	adopt *adoption
	// What was last handed to the notifier.
	publishedTopics     []listeners.Topic
	publishedGroups     []listeners.Group
	publishedOnce       bool
	publishedGroupsOnce bool
	// Source gaps (sourcegap.go): the policy, which a reload changes,
	// and the latest gap of each partition.
	gapPolicy data.GapPolicyVar
	gaps      gapLog
}

// New checks cfg and returns a Mirror; it connects to nothing until Run.
func New(cfg Config) (*Mirror, error) {
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	produceCtx, cancel := context.WithCancel(context.Background())
	m := &Mirror{
		cfg:                 cfg,
		log:                 cfg.Logger.With("mirror", cfg.Name),
		metrics:             cfg.Metrics.forMirror(cfg.Name),
		progressTopic:       policy.InternalTopic(cfg.Name, "progress"),
		metadataTopic:       metadataTopicName(cfg.Name),
		sealer:              data.NewSealer(cfg.OffsetCodec),
		logEvery:            loglimit.New(time.Minute),
		logOnce:             loglimit.Once(),
		startFailures:       newFailureLog(),
		passFailures:        newFailureLog(),
		groupFailures:       newFailureLog(),
		configFailures:      newFailureLog(),
		aclFailures:         newFailureLog(),
		producerBufferBytes: data.ProducerMaxBufferedBytes,
		produceCtx:          produceCtx,
		cancelProduce:       cancel,
		topics:              make(map[string]*topicState),
		indexes:             make(map[data.TopicPartition]*index.Partition),
		metaPersisted:       make(map[string]map[string]string),
		throttle:            throttle.New(),
	}
	if err := m.SetOnSourceGap(cfg.OnSourceGap); err != nil {
		return nil, err
	}
	m.sel.Store(&Selection{Filters: cfg.Filters, ConfigFilters: cfg.ConfigFilters, GroupFilters: cfg.GroupFilters, Labels: cfg.Labels, TrustedUpstreams: cfg.TrustedUpstreams, RateLimits: cfg.RateLimits})
	if m.cfg.Cluster == nil {
		m.cfg.Cluster = DefaultClusterConfig()
	}
	m.slots = newSlotPlane(m)
	if cfg.MM2 != nil && cfg.MM2.Adopt {
		m.adopt = &adoption{decided: make(map[data.TopicPartition]*index.Run)}
	}
	m.groupSync = m.newGroupSyncer()
	return m, nil
}

func (m *Mirror) selection() *Selection { return m.sel.Load() }

// srcErr and dstErr explain an error of a request to the source or the
// target: the cluster's alias, its brokers and what to check.
func (m *Mirror) srcErr(err error) error { return m.cfg.SourceExplainer.Explain(err) }
func (m *Mirror) dstErr(err error) error { return m.cfg.TargetExplainer.Explain(err) }

// Reconfigure replaces what the mirror selects with and how it labels; the
// next pass uses it (a config reload). A selection that leaves a topic out
// stops mirroring it, exactly as if its source topic were deleted.
func (m *Mirror) Reconfigure(s Selection) {
	m.sel.Store(&s)
	m.applyRateLimits()
	m.log.Info("selection reconfigured", "topic_filters", len(s.Filters), "config_filters", len(s.ConfigFilters), "group_filters", len(s.GroupFilters), "labels", len(s.Labels), "trusted_upstreams", s.TrustedUpstreams)
}

func metadataTopicName(mirror string) string { return policy.InternalTopic(mirror, "metadata") }

// Name is the mirror's name.
func (m *Mirror) Name() string { return m.cfg.Name }

// ProgressTopic is the name of the target topic holding this mirror's
// progress.
func (m *Mirror) ProgressTopic() string { return m.progressTopic }

// MetadataTopic is the name of the target topic holding this mirror's topic
// metadata.
func (m *Mirror) MetadataTopic() string { return m.metadataTopic }

// clients are the connections of one Run or Plan: dst is the target's producer
// (metadata, progress, the record path's records), srcAdminCl and
// dstAdminCl serve the control plane's admin requests only.
//
// The admin clients are of their own so that what franz-go caches for
// them can be dropped after each pass (forgetMetadata): it keeps every
// topic a sharded request (ListOffsets) resolved until a later request
// prunes it (see package uncached). Purging a producer's topics would drop its
// partitions' buffers, hence the separate dstAdminCl.
type clients struct {
	srcAdminCl, dstAdminCl, dst *kgo.Client
	srcAdm, dstAdm              *kadm.Client
	// The topics the pass's listings named: what forgetMetadata purges.
	srcListed, dstListed []string
}

func (c *clients) close() {
	c.srcAdminCl.Close()
	c.dstAdminCl.Close()
	c.dst.Close()
}

// listSource and listTarget list every topic of a cluster, uncached
// (listTopics), and keep the names for forgetMetadata.
func (c *clients) listSource(ctx context.Context) (kadm.TopicDetails, error) {
	tds, err := uncached.ListTopics(ctx, c.srcAdminCl)
	c.srcListed = tds.Names()
	return tds, err
}

func (c *clients) listTarget(ctx context.Context) (kadm.TopicDetails, error) {
	tds, err := uncached.ListTopics(ctx, c.dstAdminCl)
	c.dstListed = tds.Names()
	return tds, err
}

// forgetMetadata drops what the admin clients cached during a pass, of
// the topics its listings named.
func (c *clients) forgetMetadata() {
	c.srcAdminCl.PurgeTopicsFromClient(c.srcListed...)
	c.dstAdminCl.PurgeTopicsFromClient(c.dstListed...)
}

// metadataMinAge bounds how often a client may refresh its metadata.
// Metadata is what discovery reads; franz-go's default, 5s, would hide new
// topics for longer than a short refresh interval, and would hold a
// produce retry on NOT_LEADER_FOR_PARTITION (a topic just created, a
// leader moving) for up to 5s: with exactly_once, with the slot's
// transaction and its poll loop waiting in the commit's flush.
func (m *Mirror) metadataMinAge() kgo.Opt {
	return kgo.MetadataMinAge(min(time.Second, m.cfg.RefreshInterval/2))
}

func (m *Mirror) newClients() (*clients, error) {
	metaAge := m.metadataMinAge()
	srcAdminCl, err := kgo.NewClient(append(append([]kgo.Opt(nil), m.cfg.SourceOpts...), metaAge)...)
	if err != nil {
		return nil, fmt.Errorf("mirror %s: source client: %w", m.cfg.Name, err)
	}
	dstAdminCl, err := kgo.NewClient(append(append([]kgo.Opt(nil), m.cfg.TargetOpts...), metaAge)...)
	if err != nil {
		srcAdminCl.Close()
		return nil, fmt.Errorf("mirror %s: target client: %w", m.cfg.Name, err)
	}
	dstOpts := append(m.producerOpts(), metaAge)
	dst, err := kgo.NewClient(dstOpts...)
	if err != nil {
		srcAdminCl.Close()
		dstAdminCl.Close()
		return nil, fmt.Errorf("mirror %s: target client: %w", m.cfg.Name, err)
	}
	return &clients{srcAdminCl: srcAdminCl, dstAdminCl: dstAdminCl, dst: dst, srcAdm: kadm.NewClient(srcAdminCl), dstAdm: kadm.NewClient(dstAdminCl)}, nil
}

// producerOpts are the options of every producer writing to the target
// (the shared one, and each slot's): the target's
// connection, manual partitioning and the producer tuning.
func (m *Mirror) producerOpts() []kgo.Opt {
	opts := append(append([]kgo.Opt(nil), m.cfg.TargetOpts...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// Produce to a topic just created on the target while its
		// metadata propagates rather than failing the records.
		kgo.UnknownTopicRetries(20),
		kgo.MaxBufferedBytes(m.producerBufferBytes),
	)
	if m.cfg.Linger > 0 {
		opts = append(opts, kgo.ProducerLinger(m.cfg.Linger))
	}
	if m.cfg.BatchMaxBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(m.cfg.BatchMaxBytes))
	}
	if len(m.cfg.Compression) > 0 {
		// A copy per client: franz-go's NewClient sorts out the codecs
		// in place, and fences of transactional IDs (cluster.go) make
		// clients concurrently.
		opts = append(opts, kgo.ProducerBatchCompression(slices.Clone(m.cfg.Compression)...))
	}
	return append(opts, kgo.WithHooks(recordBatchHook{m}))
}

// recordBatchHook counts the record path's batches of mirrored records
// (kmirror_batches_total{path="records"}); kmirror's own topics are not
// counted.
type recordBatchHook struct{ m *Mirror }

func (h recordBatchHook) OnProduceBatchWritten(_ kgo.BrokerMetadata, topic string, _ int32, _ kgo.ProduceBatchMetrics) {
	if !policy.IsInternalTopic(topic) && topic != h.m.cfg.DeadLetterTopic {
		h.m.metrics.data().BatchWritten(false)
	}
}

// dstProduce produces a record of kmirror's own (metadata, checkpoints,
// tombstones) with the mirror's produce context. It never blocks: with the
// producer's buffer full of records the target does not take, the promise
// fails at once with kgo.ErrMaxBuffered and the write is retried later,
// rather than holding up the control pass, the group sync or a shutdown.
func (m *Mirror) dstProduce(dst *kgo.Client, r *kgo.Record, promise func(*kgo.Record, error)) {
	if promise == nil {
		promise = func(*kgo.Record, error) {}
	}
	dst.TryProduce(m.produceCtx, r, promise)
}

// Run mirrors until ctx is cancelled, then stops fetching, flushes the
// producer, persists progress and returns nil. It returns an error when it
// cannot build its clients, or when records were still unacknowledged at
// the end of ShutdownTimeout (abandoned: copied again after a restart);
// failures while running (a cluster down, a topic the target refuses) are
// logged, counted and retried.
func (m *Mirror) Run(ctx context.Context) error {
	c, err := m.newClients()
	if err != nil {
		return err
	}
	defer c.close()
	defer m.cancelProduce()
	defer m.cfg.Metrics.watch(m.cfg.Name, m.partitionStates)()
	defer m.cfg.Metrics.watchThrottle(m.cfg.Name, m.throttle)()

	if err := m.start(ctx, c); err != nil {
		return nil // ctx was cancelled during startup: nothing to flush
	}
	// A fenced mirror copies nothing: it waits here, not a member of its
	// group, until the fence is lifted (kmirror failback).
	watcher := fence.NewWatcher(m.log, m.cfg.TargetOpts, m.cfg.Name)
	if err := m.awaitUnfenced(ctx, c, watcher); err != nil {
		return nil // ctx was cancelled: nothing copied, nothing to flush
	}
	// runCtx ends the copying at a shutdown or when the mirror is
	// fenced while it runs.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	fencedWhileRunning := make(chan struct{})

	// The data plane: one copier for the slots this worker owns
	// (cluster.go).
	// Every worker is a member of the mirror's group, a single one a
	// group of one.
	if err := m.slots.join(runCtx); err != nil {
		if runCtx.Err() != nil {
			return nil
		}
		return fmt.Errorf("mirror %s: join the mirror's group: %w", m.cfg.Name, m.dstErr(err))
	}
	cp := m.slots
	m.mu.Lock()
	m.copier = cp
	m.mu.Unlock()

	copyCtx, stopCopy := context.WithCancel(runCtx)
	defer stopCopy()

	var bg sync.WaitGroup
	bg.Go(func() {
		if m.watchFence(copyCtx, c, watcher) {
			close(fencedWhileRunning)
			stopRun()
		}
	})
	// Metrics on a ticker of their own: the writer can block on a full
	// producer buffer, and that is when the lag matters most.
	bg.Go(func() {
		every(copyCtx, data.ProgressTick(m.cfg.ProgressInterval), func() {
			m.enforceIndexBudget()
			m.updateMetrics()
		})
	})
	if m.cfg.ConfigSyncInterval > 0 {
		bg.Go(func() {
			every(copyCtx, m.cfg.ConfigSyncInterval, func() {
				if !m.ownsControl() {
					return
				}
				switch err := m.syncConfigs(copyCtx, c); {
				case err == nil:
					m.configFailures.succeeded(m.log, "topic config sync succeeded again")
				case copyCtx.Err() == nil:
					m.configFailures.failed(m.log, "topic config sync failed; retrying on the next interval", err)
				}
			})
		})
	}
	// The group sync translates the selected groups; it commits them to
	// the target when sync.group_offsets is enabled, and MM2 checkpoints
	// are written from its translations (even when it does not commit).
	var mm2cp *mm2Checkpointer
	if mc := m.cfg.MM2; mc != nil && mc.Checkpoints {
		mm2cp = newMM2Checkpointer(mc.SourceAlias)
	}
	if groupsEvery := m.groupSyncEvery(); groupsEvery > 0 {
		bg.Go(func() {
			every(copyCtx, groupsEvery, func() {
				if !m.ownsControl() {
					return
				}
				view := m.translationView(copyCtx, c, cp)
				err := m.syncGroups(copyCtx, c, view)
				if view.err != nil {
					err = errors.Join(view.err, err)
				}
				if err == nil && mm2cp != nil {
					mm2cp.emit(copyCtx, m, c)
				}
				switch {
				case err == nil:
					m.groupFailures.succeeded(m.log, "group offset sync succeeded again")
				case copyCtx.Err() == nil:
					m.groupFailures.failed(m.log, "group offset sync failed; retrying on the next interval", err)
				}
			})
		})
	}
	if mc := m.cfg.MM2; mc != nil && mc.Heartbeats {
		bg.Go(func() { m.heartbeats(copyCtx, c) })
	}
	if m.cfg.ACLSyncInterval > 0 {
		bg.Go(func() {
			every(copyCtx, m.cfg.ACLSyncInterval, func() {
				if !m.ownsControl() {
					return
				}
				switch err := m.syncACLs(copyCtx, c); {
				case err == nil:
					m.aclFailures.succeeded(m.log, "ACL sync succeeded again")
				case copyCtx.Err() == nil:
					m.aclFailures.failed(m.log, "ACL sync failed; retrying on the next interval", err)
				}
			})
		})
	}

	refresh := time.NewTimer(0)
	defer refresh.Stop()
loop:
	for {
		select {
		case <-runCtx.Done():
			break loop
		case <-refresh.C:
		}
		_, err := m.pass(runCtx, c, cp)
		switch {
		case err == nil:
			m.passFailures.succeeded(m.log, "control pass succeeded again")
		case runCtx.Err() == nil:
			m.passFailed(err)
		}
		refresh.Reset(m.cfg.RefreshInterval)
	}

	stopCopy()
	bg.Wait()
	sctx, cancel := context.WithTimeout(context.Background(), m.cfg.ShutdownTimeout)
	defer cancel()
	err = m.slots.shutdown(sctx)
	if ferr := c.dst.Flush(sctx); ferr != nil {
		m.log.Warn("metadata or checkpoints still in flight at shutdown; written again by the next control plane", "err", ferr)
	}
	m.updateMetrics()
	if err != nil {
		return fmt.Errorf("mirror %s: %w", m.cfg.Name, err)
	}
	m.log.Info("stopped; every slot's progress persisted and the slots released")
	select {
	case <-fencedWhileRunning:
		// The workers of a fenced mirror stay out of its group: this
		// one waits, copying nothing, for the process to stop. Lifting
		// the fence (kmirror failback) takes a restart of the workers
		// that were fenced while running.
		m.log.Warn("mirror fenced: copying stopped, progress persisted; restart kmirror once the fence is lifted to copy again", "fence", m.fenceState())
		<-ctx.Done()
	default:
	}
	return nil
}

// awaitUnfenced returns once the mirror's fence is known to be lifted (or
// never set), or with ctx's error. Not knowing is waiting: a worker that
// cannot read the fence from the target could not copy there either.
func (m *Mirror) awaitUnfenced(ctx context.Context, c *clients, w *fence.Watcher) error {
	logged := false
	for {
		st, err := w.Check(ctx, c.dstAdm)
		if err == nil {
			m.setReverse(st)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			m.logEvery.Warn(m.log, "fence-read", "cannot read the mirror's fence on the target; not copying until it can be read", "topic", fence.Topic(m.cfg.Name), "err", m.dstErr(err))
		case err == nil && !st.Fenced:
			if logged {
				m.log.Info("the mirror's fence was lifted: copying")
			}
			m.setFenced(nil)
			return nil
		case err == nil && !logged:
			m.log.Warn("mirror fenced: copying nothing until the fence is lifted (kmirror failback)", "fence", st.String())
			logged = true
			m.setFenced(&st)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(fence.CheckEvery):
		}
	}
}

// watchFence looks at the fence every fence.CheckEvery until ctx ends; it
// returns true when the mirror was fenced. A fence that cannot be read is
// logged and looked at again: a worker cut off from the target copies
// nothing anyway.
func (m *Mirror) watchFence(ctx context.Context, c *clients, w *fence.Watcher) bool {
	t := time.NewTicker(fence.CheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		st, err := w.Check(ctx, c.dstAdm)
		if err != nil {
			if ctx.Err() == nil {
				m.logEvery.Warn(m.log, "fence-read", "cannot read the mirror's fence on the target; looking again", "topic", fence.Topic(m.cfg.Name), "err", m.dstErr(err))
			}
			continue
		}
		if st.Fenced {
			m.setFenced(&st)
			m.log.Warn("mirror fenced: stopping the copy and persisting progress", "fence", st.String())
			return true
		}
	}
}

// readFence reads the mirror's fence for a command that runs no worker
// (translate, failover, cutover), and keeps what it says of the mirror's
// reverse.
func (m *Mirror) readFence(ctx context.Context, c *clients) (fence.State, error) {
	st, _, err := fence.Read(ctx, m.log, m.cfg.TargetOpts, c.dstAdm, m.cfg.Name)
	if err != nil {
		return st, m.dstErr(err)
	}
	m.setReverse(st)
	return st, nil
}

func (m *Mirror) setFenced(st *fence.State) {
	m.mu.Lock()
	m.fenced = st
	m.mu.Unlock()
}

func (m *Mirror) fenceState() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fenced == nil {
		return "not fenced"
	}
	return m.fenced.String()
}

// groupSyncEvery is the group sync's interval (0: no sync).
func (m *Mirror) groupSyncEvery() time.Duration { return m.cfg.GroupSyncInterval }

// translateOnly reports whether the group sync only translates and
// checkpoints (sync.group_offsets disabled): it commits nothing.
func (m *Mirror) translateOnly() bool { return m.cfg.GroupCheckpointOnly }

// passFailed logs a failed control pass, saying what the mirror goes on
// with.
func (m *Mirror) passFailed(err error) {
	m.mu.Lock()
	n := len(m.topics)
	m.mu.Unlock()
	if n == 0 {
		m.passFailures.failed(m.log, "control pass failed; nothing selected yet; retrying on the next pass", err)
		return
	}
	m.passFailures.failed(m.log, "control pass failed; keeping the previous selection", err, "topics", n)
}

// ownsControl reports whether this worker runs the control plane's writes:
// the owner of slot 0 does (kmirror plan, which writes nothing, plans
// them).
func (m *Mirror) ownsControl() bool {
	return m.dryRun() || m.controlWithoutGroup || m.slots.ownsControl()
}

// drain lets a stopped copier's records in flight settle and persists its
// progress, within ctx (the shutdown timeout; plus a short bound for the
// last progress write). Records the target has not acknowledged by then
// are abandoned: progress never moved past them, so the next owner copies
// them again. It returns an error naming how many were abandoned.
func (m *Mirror) drain(ctx context.Context, dst *kgo.Client, cp *data.Copier, writer *data.ProgressWriter, cancelProduce func(), log *slog.Logger) error {
	// Flush can return nil after the deadline too, when franz-go failed
	// the records the cancelled context covered before it looked: the
	// count of records produced and not acknowledged decides.
	var abandonedErr error
	err := errors.Join(dst.Flush(ctx), cp.FlushPassthrough(ctx))
	if err != nil {
		cancelProduce()
	}
	if abandoned := cp.InFlight(); abandoned > 0 {
		cancelProduce()
		abandonedErr = fmt.Errorf("%d records not acknowledged by the target within shutdown_timeout (%v); they will be copied again", abandoned, m.cfg.ShutdownTimeout)
		log.Error("shutdown_timeout reached with records in flight: abandoning them; progress does not include them, so they are copied again",
			"records", abandoned, "shutdown_timeout", m.cfg.ShutdownTimeout, "err", err)
	}
	// The last progress write gets a bound of its own: after a timed-out
	// flush, the acknowledged positions are still worth persisting.
	progressCtx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		progressCtx, cancel = context.WithTimeout(context.Background(), finalProgressTimeout)
		defer cancel()
	}
	if err := writer.WriteSync(progressCtx); err != nil {
		log.Error("could not persist the last progress; records since the previous write will be copied again", "err", err)
	}
	return abandonedErr
}

// finalProgressTimeout bounds the progress write of a shutdown whose flush
// timed out.
const finalProgressTimeout = 2 * time.Second

// internalWriteFailed counts and logs (at most once a minute per kind) a
// write of kmirror's own records that the target did not acknowledge.
func (m *Mirror) internalWriteFailed(kind string, tp data.TopicPartition, err error) {
	m.metrics.data().IncInternalWriteErrors(kind)
	m.logEvery.Warn(m.log, "write:"+kind, "the target did not acknowledge a write to "+m.progressTopic+"; retrying", "kind", kind, "topic", tp.Topic, "partition", tp.Partition, "err", err)
}

// every calls fn every interval until ctx ends; fn runs on this goroutine,
// so a slow fn delays the next call rather than overlapping it.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// start creates the internal topics and loads the progress and metadata,
// retrying with backoff while the target is unreachable. It fails only
// when ctx ends.
func (m *Mirror) start(ctx context.Context, c *clients) error {
	backoff := time.Second
	begun := time.Now()
	for {
		err := func() error {
			// Creating the topics is a few requests: bounded as a
			// whole. Loading the state is as long as the state is
			// large: state.Read bounds it by a stall instead.
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			parts := make(map[string]int32, 3)
			for _, topic := range []string{m.progressTopic, m.metadataTopic, m.groupSync.CheckpointTopic()} {
				n, err := state.EnsureCompacted(cctx, c.dstAdm, topic, m.cfg.StatePartitions, m.cfg.ReplicationFactor)
				if err != nil {
					return err
				}
				parts[topic] = n
			}
			if err := fence.Ensure(cctx, c.dstAdm, m.cfg.Name, m.cfg.ReplicationFactor); err != nil {
				return err
			}
			if dl := m.cfg.DeadLetterTopic; dl != "" {
				if err := state.EnsureTopic(cctx, c.dstAdm, dl, 1, m.cfg.ReplicationFactor, nil); err != nil {
					return fmt.Errorf("dead-letter topic: %w", err)
				}
			}
			m.mu.Lock()
			m.stateParts = parts
			m.mu.Unlock()
			return m.load(ctx, c.dstAdm)
		}()
		if err == nil {
			m.startFailures.succeeded(m.log, "started after failing")
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err() // a shutdown, not a failure
		}
		err = m.dstErr(err)
		notYet := state.NotListedYet(err) && time.Since(begun) < notListedGrace
		// The source is not needed to start; a source that is down
		// too is named now rather than once the target is back.
		if serr := m.pingSource(ctx, c); serr != nil && ctx.Err() == nil {
			err, notYet = errors.Join(err, serr), false
		}
		m.mu.Lock()
		m.lastPassErr = fmt.Errorf("starting: %w", err)
		m.mu.Unlock()
		if notYet {
			m.log.Info("the target does not list kmirror's internal topics yet; retrying", "err", err, "retry_in", backoff)
		} else {
			m.startFailures.failed(m.log, "cannot start: will retry", err, "retry_in", backoff)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// notListedGrace is how long after the start began an internal topic the
// target does not list is taken for its metadata catching up with the
// topic kmirror just created (state.NotListedYet), retried at INFO; past
// it, the topic missing is a failure like any other.
const notListedGrace = time.Minute

// pingSource checks that the source answers, bounded like a control pass.
func (m *Mirror) pingSource(ctx context.Context, c *clients) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.srcAdminCl.Ping(ctx); err != nil {
		return fmt.Errorf("reach the source: %w", m.srcErr(err))
	}
	return nil
}

// load reads the progress and metadata topics.
func (m *Mirror) load(ctx context.Context, dstAdm *kadm.Client) error {
	// Each slot takes its own progress when taken over, from the
	// worker's progress log: read to its end now, before the worker
	// joins, so that a takeover reads only what was written since and
	// the slots a joining worker is given do not wait for the whole
	// topic.
	none := func(data.TopicPartition) bool { return false }
	ld, err := m.slots.progress.Current(ctx, dstAdm, none)
	if err != nil {
		return err
	}
	md, err := loadMetadata(ctx, m.log, m.cfg.TargetOpts, dstAdm, m.metadataTopic)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.indexes = ld.Indexes
	m.metaPersisted = md
	m.started = true
	m.lastPassErr = nil
	m.mu.Unlock()
	m.log.Info("progress and topic metadata loaded", "progress_topic", m.progressTopic, "partitions", len(ld.Positions), "metadata_topic", m.metadataTopic, "topics", len(md))
	return nil
}

// copierInFlight counts the records produced and not yet acknowledged (0
// before the copier exists).
func (m *Mirror) copierInFlight() int {
	m.mu.Lock()
	cp := m.copier
	m.mu.Unlock()
	if cp == nil {
		return 0
	}
	return cp.InFlight()
}

// Status returns a snapshot for the HTTP API.
func (m *Mirror) Status() Status {
	m.mu.Lock()
	cp := m.copier
	st := Status{
		Name:       m.cfg.Name,
		Source:     m.cfg.SourceAlias,
		Target:     m.cfg.TargetAlias,
		LastPassAt: m.lastPassAt,
		Topics:     make([]TopicStatus, 0, len(m.topics)),
	}
	if m.lastPassErr != nil {
		st.LastPassError = m.lastPassErr.Error()
	}
	if m.fenced != nil {
		st.Fenced = m.fenced.String()
	}
	ready := m.started && !m.lastPassAt.IsZero() && m.lastPassErr == nil && m.fenced == nil
	// By source name: the topics are sorted as names, not as the
	// statuses (a few hundred bytes each, thousands of them).
	for _, name := range slices.Sorted(maps.Keys(m.topics)) {
		ts := m.topics[name]
		t := TopicStatus{SourceTopic: ts.source, TargetTopic: ts.target, Partitions: ts.partitions, State: ts.currentState()}
		if err := ts.currentErr(); err != nil {
			t.Error = err.Error()
		}
		t.SourceGaps, _ = m.sourceGaps(ts.source)
		t.Divergent = m.divergentOf(ts.target)
		st.Topics = append(st.Topics, t)
	}
	m.mu.Unlock()

	now := time.Now()
	var mirrorLag lagSum
	for i := range st.Topics {
		t := &st.Topics[i]
		var topicLag lagSum
		if cp != nil {
			for p := range t.Partitions {
				ps := cp.Partition(data.TopicPartition{Topic: t.SourceTopic, Partition: p})
				if ps == nil {
					continue
				}
				_, _, failed := ps.Status()
				behind, unknownSince := ps.Lag()
				topicLag.add(behind, unknownSince)
				copied, last := ps.CopyStats()
				t.Copied += copied
				if behind > 0 && !last.IsZero() {
					t.LagSeconds = max(t.LagSeconds, now.Sub(last).Seconds())
				}
				var gap *data.GapError
				switch {
				case failed == nil || t.State == StateFailed:
				case errors.As(failed, &gap):
					t.State, t.Error = StateFailed, fmt.Sprintf("partition %d: %v", p, failed)
				default:
					t.State, t.Error = StateFailed, fmt.Sprintf("partition %d: target refused records: %v", p, failed)
				}
			}
		}
		t.Lag, t.LagUnknownSince = topicLag.known(), topicLag.unknownSince
		mirrorLag.addSum(topicLag)
		if t.State != StateMirroring {
			ready = false
		}
	}
	st.Lag, st.LagUnknownSince = mirrorLag.known(), mirrorLag.unknownSince
	st.RateLimit = m.rateLimitStatus(st.Topics, now)
	st.Cluster = m.slots.status()
	if !m.controlWithoutGroup && (st.Cluster.Member == "" || (st.Cluster.Rebalance != nil && st.Cluster.Rebalance.NotSettling)) {
		ready = false // not in the group yet, or its group does not settle
	}
	st.Ready = ready
	return st
}

// lagSum adds up partitions' lag: unknown if any partition's is, since
// the earliest of theirs.
type lagSum struct {
	records      int64
	unknownSince time.Time
}

func (s *lagSum) add(records int64, unknownSince time.Time) {
	s.records += records
	if !unknownSince.IsZero() && (s.unknownSince.IsZero() || unknownSince.Before(s.unknownSince)) {
		s.unknownSince = unknownSince
	}
}

func (s *lagSum) addSum(o lagSum) { s.add(o.records, o.unknownSince) }

// known is the sum, nil while it is unknown (JSON null).
func (s lagSum) known() *int64 {
	if !s.unknownSince.IsZero() {
		return nil
	}
	return &s.records
}

// partitionStates are the partitions the mirror copies here (none before
// its data plane starts).
func (m *Mirror) partitionStates() []*data.PartitionState {
	m.mu.Lock()
	cp := m.copier
	m.mu.Unlock()
	if cp == nil {
		return nil
	}
	return cp.Snapshot()
}

// updateMetrics publishes the lag; called every progress tick and at
// shutdown.
func (m *Mirror) updateMetrics() {
	if m.metrics == nil {
		return
	}
	var total int64
	failed, unknown := 0, 0
	for _, ps := range m.partitionStates() {
		if _, _, err := ps.Status(); err != nil {
			failed++
		}
		l, unknownSince := ps.Lag()
		total += l
		if !unknownSince.IsZero() {
			unknown++
		}
	}
	if unknown == 0 {
		// While any partition's lag is unknown, the gauge keeps the
		// last sum that was known rather than a smaller one that is
		// not: kmirror_lag_unknown_partitions says so.
		m.metrics.lag.Set(float64(total))
	}
	m.metrics.lagUnknown.Set(float64(unknown))
	m.metrics.setFailedPartitions(failed)
}

func (m *Mirror) updateTopicMetrics() {
	if m.metrics == nil {
		return
	}
	counts := map[State]int{}
	m.mu.Lock()
	for _, ts := range m.topics {
		counts[ts.currentState()]++
	}
	m.mu.Unlock()
	m.metrics.pending.Set(float64(counts[StatePending]))
	m.metrics.mirroring.Set(float64(counts[StateMirroring]))
	m.metrics.failed.Set(float64(counts[StateFailed]))
}

// statePartitions is the partition count of one of the mirror's state
// topics: 1 before start found it (nothing writes state before that).
func (m *Mirror) statePartitions(topic string) int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := m.stateParts[topic]; n > 0 {
		return n
	}
	return 1
}
