package connector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/filters"
)

// State is where a selected topic stands.
type State string

const (
	// StatePending: selected, not yet created or assigned on the target.
	StatePending State = "pending"
	// StateMirroring: every source partition is being copied.
	StateMirroring State = "mirroring"
	// StateFailed: the target refused to create or grow the topic, or
	// refuses its records; retried on every pass, other topics go on.
	StateFailed State = "failed"
)

// Status is a snapshot of one mirror for /api/v1/status.
type Status struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Target string `json:"target"`
	// Ready is true once every selected topic exists on the target and is
	// being copied, and the last control pass succeeded.
	Ready         bool          `json:"ready"`
	LastPassAt    time.Time     `json:"last_pass_at"`
	LastPassError string        `json:"last_pass_error"`
	Lag           int64         `json:"lag"`
	Topics        []TopicStatus `json:"topics"`
}

// TopicStatus is one selected topic.
type TopicStatus struct {
	SourceTopic string `json:"source_topic"`
	TargetTopic string `json:"target_topic"`
	Partitions  int32  `json:"partitions"`
	State       State  `json:"state"`
	// Lag is the records committed at the source and not yet acknowledged
	// by the target (transaction markers count as records).
	Lag   int64  `json:"lag"`
	Error string `json:"error"`
}

// topicState is the control plane's view of one selected topic.
type topicState struct {
	source, target string
	id             string // the source topic's ID ("" when the broker has none)
	partitions     int32  // at the source
	assigned       int32  // partitions [0, assigned) are being copied
	state          State
	err            error
}

// Mirror copies one source cluster's selected topics to a target cluster.
type Mirror struct {
	cfg           Config
	log           *slog.Logger
	metrics       *mirrorMetrics
	progressTopic string

	mu          sync.Mutex
	topics      map[string]*topicState // by source topic
	progress    map[topicPartition]position
	lastPassAt  time.Time
	lastPassErr error
	started     bool // the startup sequence (progress topic, load) finished
	copier      *copier
}

// New checks cfg and returns a Mirror; it connects to nothing until Run.
func New(cfg Config) (*Mirror, error) {
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	return &Mirror{
		cfg:           cfg,
		log:           cfg.Logger.With("mirror", cfg.Name),
		metrics:       cfg.Metrics.forMirror(cfg.Name),
		progressTopic: policy.InternalTopic(cfg.Name, "progress"),
		topics:        make(map[string]*topicState),
	}, nil
}

// ProgressTopic is the name of the target topic holding this mirror's
// progress.
func (m *Mirror) ProgressTopic() string { return m.progressTopic }

// Run mirrors until ctx is cancelled, then stops fetching, flushes the
// producer, persists progress and returns nil. It returns an error only
// when it cannot build its clients; failures while running (a cluster down,
// a topic the target refuses) are logged, counted and retried.
func (m *Mirror) Run(ctx context.Context) error {
	// Metadata is what discovery reads; franz-go caches it for 5s by
	// default, which would hide new topics for longer than a short
	// refresh interval.
	metaAge := kgo.MetadataMinAge(min(time.Second, m.cfg.RefreshInterval/2))
	srcAdminCl, err := kgo.NewClient(append(append([]kgo.Opt(nil), m.cfg.SourceOpts...), metaAge)...)
	if err != nil {
		return fmt.Errorf("mirror %s: source client: %w", m.cfg.Name, err)
	}
	defer srcAdminCl.Close()
	dstOpts := append(append([]kgo.Opt(nil), m.cfg.TargetOpts...), metaAge,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// Produce to a topic just created on the target while its
		// metadata propagates rather than failing the records.
		kgo.UnknownTopicRetries(20),
	)
	if m.cfg.Linger > 0 {
		dstOpts = append(dstOpts, kgo.ProducerLinger(m.cfg.Linger))
	}
	if m.cfg.BatchMaxBytes > 0 {
		dstOpts = append(dstOpts, kgo.ProducerBatchMaxBytes(m.cfg.BatchMaxBytes))
	}
	if len(m.cfg.Compression) > 0 {
		dstOpts = append(dstOpts, kgo.ProducerBatchCompression(m.cfg.Compression...))
	}
	dst, err := kgo.NewClient(dstOpts...)
	if err != nil {
		return fmt.Errorf("mirror %s: target client: %w", m.cfg.Name, err)
	}
	defer dst.Close()
	srcAdm, dstAdm := kadm.NewClient(srcAdminCl), kadm.NewClient(dst)

	if err := m.start(ctx, dstAdm); err != nil {
		return nil // ctx was cancelled during startup: nothing to flush
	}

	// produceCtx outlives ctx: in-flight records must still be flushed
	// after a shutdown starts. It is cancelled only if the flush times out.
	produceCtx, cancelProduce := context.WithCancel(context.Background())
	defer cancelProduce()
	cp := newCopier(m.log, m.metrics, dst, produceCtx)
	defer cp.close()
	m.mu.Lock()
	m.copier = cp
	m.mu.Unlock()

	copyCtx, stopCopy := context.WithCancel(ctx)
	defer stopCopy()
	copyDone := make(chan struct{})
	copyStarted := false

	writer := &progressWriter{topic: m.progressTopic, dst: dst, c: cp}
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		t := time.NewTicker(progressTick(m.cfg.ProgressInterval))
		defer t.Stop()
		for {
			select {
			case <-copyCtx.Done():
				return
			case <-t.C:
				writer.writeAsync(produceCtx)
				m.updateLagMetric()
			}
		}
	}()

	refresh := time.NewTimer(0)
	defer refresh.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-refresh.C:
		}
		started, err := m.pass(ctx, srcAdm, dst, dstAdm, cp)
		if started && !copyStarted {
			copyStarted = true
			go func() {
				defer close(copyDone)
				cp.run(copyCtx)
			}()
		}
		if err != nil && ctx.Err() == nil {
			m.log.Error("control pass failed; keeping the previous selection", "err", err)
		}
		refresh.Reset(m.cfg.RefreshInterval)
	}

	// Shutdown: stop fetching, let in-flight records settle, persist.
	stopCopy()
	if copyStarted {
		<-copyDone
	}
	<-progressDone
	flushCtx, cancelFlush := context.WithTimeout(context.Background(), m.cfg.ShutdownTimeout)
	defer cancelFlush()
	if err := dst.Flush(flushCtx); err != nil {
		m.log.Error("records still in flight at shutdown; they will be copied again after a restart", "err", err)
		cancelProduce()
	}
	if err := writer.writeSync(flushCtx); err != nil {
		m.log.Error("could not persist the last progress; records since the previous write will be copied again", "err", err)
	} else {
		m.log.Info("stopped; progress persisted", "progress_topic", m.progressTopic)
	}
	return nil
}

// start creates the progress topic and loads the progress, retrying with
// backoff while the target is unreachable. It fails only when ctx ends.
func (m *Mirror) start(ctx context.Context, dstAdm *kadm.Client) error {
	backoff := time.Second
	for {
		err := func() error {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := ensureCompactedTopic(ctx, dstAdm, m.progressTopic, m.cfg.ReplicationFactor); err != nil {
				return err
			}
			return m.loadProgress(ctx, dstAdm)
		}()
		if err == nil {
			return nil
		}
		m.mu.Lock()
		m.lastPassErr = fmt.Errorf("starting: %w", err)
		m.mu.Unlock()
		m.log.Error("cannot start: will retry", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (m *Mirror) loadProgress(ctx context.Context, dstAdm *kadm.Client) error {
	p, err := loadProgress(ctx, m.cfg.TargetOpts, dstAdm, m.progressTopic)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.progress = p
	m.started = true
	m.lastPassErr = nil
	m.mu.Unlock()
	m.log.Info("progress loaded", "progress_topic", m.progressTopic, "partitions", len(p))
	return nil
}

// pass is one control-plane round: discover, select, create, assign. It
// reports whether it created the source consumer (the copier can start).
func (m *Mirror) pass(ctx context.Context, srcAdm *kadm.Client, dst *kgo.Client, dstAdm *kadm.Client, cp *copier) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, max(m.cfg.RefreshInterval, 30*time.Second))
	defer cancel()
	m.metrics.incPasses()
	started, err := m.doPass(ctx, srcAdm, dst, dstAdm, cp)
	m.mu.Lock()
	m.lastPassAt = time.Now()
	m.lastPassErr = err
	m.mu.Unlock()
	if err != nil {
		m.metrics.incPassErrors()
	} else {
		m.metrics.passSucceeded()
	}
	m.updateTopicMetrics()
	return started, err
}

func (m *Mirror) doPass(ctx context.Context, srcAdm *kadm.Client, dst *kgo.Client, dstAdm *kadm.Client, cp *copier) (bool, error) {
	// 1. Discover.
	srcTopics, err := srcAdm.ListTopics(ctx)
	if err != nil {
		return false, fmt.Errorf("list source topics: %w", err)
	}
	candidates := make([]filters.Topic, 0, len(srcTopics))
	ids := make(map[string]string, len(srcTopics))
	m.mu.Lock()
	for _, td := range srcTopics.Sorted() {
		n := int32(len(td.Partitions))
		if td.Err == nil && td.ID != (kadm.TopicID{}) {
			ids[td.Topic] = td.ID.String()
		}
		if td.Err != nil || n == 0 {
			// Listed with an error: a topic being created, deleted or
			// moved (e.g. leaders changing while partitions are added).
			// A topic already mirrored keeps its last known shape
			// rather than being dropped and picked up again.
			ts := m.topics[td.Topic]
			if ts == nil {
				continue
			}
			n = ts.partitions
		}
		candidates = append(candidates, filters.Topic{Name: td.Topic, Partitions: n})
	}
	m.mu.Unlock()

	// 2. Select. A filter error keeps the previous selection.
	selected, err := selectTopics(ctx, m.cfg.Name, m.cfg.Filters, m.cfg.Policy, m.cfg.TargetAlias, candidates)
	if err != nil {
		return false, err
	}

	// 3. Compare with the target.
	dstTopics, err := dstAdm.ListTopics(ctx)
	if err != nil {
		return false, fmt.Errorf("list target topics: %w", err)
	}
	targetPartitions := make(map[string]int32, len(dstTopics))
	for _, td := range dstTopics {
		if td.Err == nil {
			targetPartitions[td.Topic] = int32(len(td.Partitions))
		}
	}

	m.mu.Lock()
	selectedSet := make(map[string]bool, len(selected))
	var removed []topicPartition
	for _, t := range selected {
		selectedSet[t.Name] = true
	}
	for name, ts := range m.topics {
		if !selectedSet[name] {
			m.log.Info("topic no longer mirrored (deleted at the source or no longer selected)", "topic", name, "target_topic", ts.target)
			for p := range ts.assigned {
				removed = append(removed, topicPartition{name, p})
			}
			delete(m.topics, name)
		}
	}
	var creates []topicSpec
	grows := make(map[string]int32)
	for _, t := range selected {
		ts := m.topics[t.Name]
		if ts == nil {
			ts = &topicState{source: t.Name, target: m.cfg.Policy.FormatRemoteTopic(m.cfg.SourceAlias, t.Name), state: StatePending}
			m.topics[t.Name] = ts
			m.log.Info("topic selected for mirroring", "topic", t.Name, "target_topic", ts.target, "partitions", t.Partitions)
		}
		if id := ids[t.Name]; id != "" {
			if ts.id != "" && ts.id != id {
				// Deleted and recreated under the same name: the new
				// topic's offsets start again, so the stored
				// positions no longer mean anything. Copy the new
				// topic from its start.
				m.log.Warn("source topic was deleted and recreated; mirroring the new topic from its start",
					"topic", t.Name, "target_topic", ts.target, "old_id", ts.id, "new_id", id)
				m.metrics.incRecreations()
				for p := range ts.assigned {
					tp := topicPartition{t.Name, p}
					removed = append(removed, tp)
					delete(m.progress, tp)
				}
				ts.assigned = 0
			}
			ts.id = id
		}
		if t.Partitions < ts.partitions && ts.assigned > t.Partitions {
			m.log.Warn("source topic has fewer partitions than before", "topic", t.Name, "before", ts.partitions, "now", t.Partitions)
		}
		ts.partitions = t.Partitions
		have, exists := targetPartitions[ts.target]
		switch {
		case !exists:
			creates = append(creates, topicSpec{name: ts.target, partitions: t.Partitions})
		case have < t.Partitions:
			grows[ts.target] = t.Partitions
		}
	}
	m.mu.Unlock()
	cp.unassign(removed)

	// 4. Create missing topics (one batched request) and grow partitions.
	var passErrs []error
	if len(creates) > 0 {
		names := make([]string, 0, len(creates))
		for _, c := range creates {
			names = append(names, m.sourceName(c.name))
		}
		cfgs, err := sourceConfigs(ctx, srcAdm, names)
		if err != nil {
			m.log.Warn("creating target topics without some source configs", "err", err)
		}
		for i := range creates {
			creates[i].configs = cfgs[names[i]]
		}
		results, err := createTopics(ctx, dst, creates, m.cfg.ReplicationFactor, false)
		if err != nil {
			passErrs = append(passErrs, err)
		}
		for _, c := range creates {
			if err := results[c.name]; err == nil && results != nil {
				targetPartitions[c.name] = c.partitions
				m.log.Info("created target topic", "target_topic", c.name, "partitions", c.partitions, "configs", c.configs)
			} else if results != nil {
				m.metrics.incCreateErrors()
				m.setTopicError(m.sourceName(c.name), fmt.Errorf("create target topic %s: %w", c.name, err))
			}
		}
	}
	if len(grows) > 0 {
		results, err := growPartitions(ctx, dst, grows, false)
		if err != nil {
			passErrs = append(passErrs, err)
		}
		grown := make(map[string]int32)
		for topic, n := range grows {
			if err := results[topic]; err == nil && results != nil {
				targetPartitions[topic] = n
				grown[topic] = n
				m.log.Info("grew target topic partitions", "target_topic", topic, "partitions", n)
			} else if results != nil {
				m.metrics.incCreateErrors()
				m.setTopicError(m.sourceName(topic), fmt.Errorf("grow target topic %s to %d partitions: %w", topic, n, err))
			}
		}
		awaitProducerPartitions(ctx, dst, grown)
	}

	// 5. Assign every partition that exists on both sides.
	var assigns []assignment
	m.mu.Lock()
	for _, t := range selected {
		ts := m.topics[t.Name]
		have, ok := targetPartitions[ts.target]
		if !ok {
			continue
		}
		upTo := min(have, ts.partitions)
		for p := ts.assigned; p < upTo; p++ {
			tp := topicPartition{t.Name, p}
			next := int64(-1)
			if pos, ok := m.progress[tp]; ok {
				if pos.topicID != "" && ts.id != "" && pos.topicID != ts.id {
					m.log.Warn("stored progress belongs to an earlier topic of the same name; copying from the start",
						"topic", t.Name, "partition", p, "stored_id", pos.topicID, "current_id", ts.id)
				} else {
					next = pos.next
				}
			}
			assigns = append(assigns, assignment{tp: tp, target: ts.target, topicID: ts.id, next: next})
		}
		if upTo > ts.assigned {
			ts.assigned = upTo
		}
		if ts.assigned == ts.partitions {
			ts.state, ts.err = StateMirroring, nil
		}
	}
	m.mu.Unlock()
	started, err := cp.assign(assigns, m.cfg.SourceOpts)
	if err != nil {
		return false, fmt.Errorf("source consumer: %w", err)
	}

	// 6. Refresh source ends for lag (best effort).
	m.refreshEnds(ctx, srcAdm, cp)
	return started, errors.Join(passErrs...)
}

// awaitProducerPartitions makes the producer learn grown partition counts
// before records go to the new partitions. franz-go's producer keeps the
// partition count it last saw, and with manual partitioning it fails a
// record for a partition beyond that count at once, without refreshing.
// The wait is bounded; a partition still unknown after it is retried by the
// copier's rewind like any refused record.
func awaitProducerPartitions(ctx context.Context, dst *kgo.Client, grown map[string]int32) {
	if len(grown) == 0 {
		return
	}
	dst.ForceMetadataRefresh()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		known := true
		for topic, n := range grown {
			if first, _, _ := dst.PartitionLeader(topic, 0); first < 0 {
				continue // never produced to: its first produce loads fresh metadata
			}
			if leader, _, err := dst.PartitionLeader(topic, n-1); err != nil || leader < 0 {
				known = false
				break
			}
		}
		if known {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sourceName maps a target topic of this pass back to its source topic.
func (m *Mirror) sourceName(target string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, ts := range m.topics {
		if ts.target == target {
			return name
		}
	}
	return target
}

func (m *Mirror) setTopicError(source string, err error) {
	m.log.Error("topic failed; retrying on the next pass", "topic", source, "err", err)
	m.mu.Lock()
	defer m.mu.Unlock()
	if ts := m.topics[source]; ts != nil {
		ts.state, ts.err = StateFailed, err
	}
}

func (m *Mirror) refreshEnds(ctx context.Context, srcAdm *kadm.Client, cp *copier) {
	m.mu.Lock()
	names := make([]string, 0, len(m.topics))
	for name := range m.topics {
		names = append(names, name)
	}
	m.mu.Unlock()
	if len(names) == 0 {
		return
	}
	ends, err := srcAdm.ListCommittedOffsets(ctx, names...)
	if err != nil {
		return
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			return
		}
		if ps := cp.partition(topicPartition{o.Topic, o.Partition}); ps != nil {
			ps.mu.Lock()
			ps.end = max(ps.end, o.Offset)
			ps.mu.Unlock()
		}
	})
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
	ready := m.started && !m.lastPassAt.IsZero() && m.lastPassErr == nil
	for _, ts := range m.topics {
		t := TopicStatus{SourceTopic: ts.source, TargetTopic: ts.target, Partitions: ts.partitions, State: ts.state}
		if ts.err != nil {
			t.Error = ts.err.Error()
		}
		st.Topics = append(st.Topics, t)
	}
	m.mu.Unlock()

	for i := range st.Topics {
		t := &st.Topics[i]
		if cp != nil {
			for p := range t.Partitions {
				ps := cp.partition(topicPartition{t.SourceTopic, p})
				if ps == nil {
					continue
				}
				acked, end, failed := ps.status()
				t.Lag += lag(acked, end)
				if failed != nil && t.State != StateFailed {
					t.State, t.Error = StateFailed, fmt.Sprintf("partition %d: target refused records: %v", p, failed)
				}
			}
		}
		st.Lag += t.Lag
		if t.State != StateMirroring {
			ready = false
		}
	}
	sort.Slice(st.Topics, func(i, j int) bool { return st.Topics[i].SourceTopic < st.Topics[j].SourceTopic })
	st.Ready = ready
	return st
}

func lag(acked, end int64) int64 {
	if end < 0 {
		return 0
	}
	if acked < 0 {
		return end
	}
	return max(0, end-acked)
}

func (m *Mirror) updateLagMetric() {
	if m.metrics == nil {
		return
	}
	m.mu.Lock()
	cp := m.copier
	m.mu.Unlock()
	if cp == nil {
		return
	}
	var total int64
	for _, ps := range cp.snapshot() {
		acked, end, _ := ps.status()
		total += lag(acked, end)
	}
	m.metrics.lag.Set(float64(total))
}

func (m *Mirror) updateTopicMetrics() {
	if m.metrics == nil {
		return
	}
	counts := map[State]int{}
	m.mu.Lock()
	for _, ts := range m.topics {
		counts[ts.state]++
	}
	m.mu.Unlock()
	m.metrics.pending.Set(float64(counts[StatePending]))
	m.metrics.mirroring.Set(float64(counts[StateMirroring]))
	m.metrics.failed.Set(float64(counts[StateFailed]))
}
