package connector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/filters"
)

// pass is one control-plane round: discover, select, create, assign. It
// reports whether it created the source consumer (the copier can start).
func (m *Mirror) pass(ctx context.Context, c *clients, cp *copier) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, max(m.cfg.RefreshInterval, 30*time.Second))
	defer cancel()
	m.metrics.incPasses()
	started, err := m.doPass(ctx, c, cp)
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
	if err == nil && !m.dryRun() {
		m.publishTopics()
	}
	return started, err
}

// dryRun reports whether this pass only plans (kmirror plan).
func (m *Mirror) dryRun() bool { return m.plan != nil }

func (m *Mirror) doPass(ctx context.Context, c *clients, cp *copier) (bool, error) {
	// 1. Discover, with the metadata upstream mirrors left on the source.
	srcTopics, err := c.srcAdm.ListTopics(ctx)
	if err != nil {
		return false, fmt.Errorf("list source topics: %w", err)
	}
	var metaTopics []string
	for name := range srcTopics {
		if metadataTopicRE.MatchString(name) {
			metaTopics = append(metaTopics, name)
		}
	}
	var upstream map[string]map[string]string
	if len(metaTopics) > 0 {
		if upstream, err = upstreamMetadata(ctx, m.cfg.SourceOpts, c.srcAdm, metaTopics); err != nil {
			m.log.Warn("cannot read the source cluster's topic metadata; labels from upstream mirrors are not refreshed", "err", err)
		}
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
		candidates = append(candidates, filters.Topic{Name: td.Topic, Partitions: n, Labels: m.labelsFor(td.Topic, upstream[td.Topic])})
	}
	m.mu.Unlock()

	// 2. Select. A filter error keeps the previous selection.
	selected, err := selectTopics(ctx, m.cfg.Name, m.selection().Filters, m.cfg.Policy, m.cfg.TargetAlias, candidates, func(ctx context.Context, ts []filters.Topic) error {
		return fillConfigs(ctx, c.srcAdm, ts)
	})
	if err != nil {
		m.metrics.incFilterErrors()
		return false, err
	}

	// 3. Compare with the target.
	dstTopics, err := c.dstAdm.ListTopics(ctx)
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
	for _, t := range selected {
		selectedSet[t.Name] = true
	}
	var unassign []topicPartition
	var removed []*topicState
	for name, ts := range m.topics {
		if !selectedSet[name] {
			m.log.Info("topic no longer mirrored (deleted at the source or no longer selected)", "topic", name, "target_topic", ts.target)
			for p := range ts.assigned {
				unassign = append(unassign, topicPartition{name, p})
			}
			removed = append(removed, ts)
			delete(m.topics, name)
		}
	}
	var creates []topicSpec
	grows := make(map[string]int32)
	for _, t := range selected {
		ts := m.topics[t.Name]
		if ts == nil {
			ts = &topicState{source: t.Name, target: m.cfg.Policy.FormatRemoteTopic(m.cfg.SourceAlias, t.Name), state: StatePending}
			if md, ok := m.metaPersisted[ts.target]; ok {
				ts.restoreFromMetadata(md)
			}
			m.topics[t.Name] = ts
			m.log.Info("topic selected for mirroring", "topic", t.Name, "target_topic", ts.target, "partitions", t.Partitions)
		}
		if up, ok := upstream[t.Name]; ok {
			ts.upstream = up
		}
		have, exists := targetPartitions[ts.target]
		ts.exists = exists
		if ts.fatal != nil && !exists && !m.dryRun() {
			// The operator deleted the target topic of a failed
			// topic: mirror the source topic again from its start.
			m.log.Info("target topic of a failed topic was deleted; mirroring the source topic from its start", "topic", t.Name, "target_topic", ts.target)
			*ts = topicState{source: ts.source, target: ts.target, state: StatePending, upstream: ts.upstream}
			m.forgetProgress(t.Name)
		}
		if ts.fatal == nil {
			if err := m.checkIdentity(ts, t, ids[t.Name], exists); err != nil {
				ts.fatal = err
				ts.state = StateFailed
				for p := range ts.assigned {
					unassign = append(unassign, topicPartition{t.Name, p})
				}
				ts.assigned = 0
				m.forgetProgress(t.Name)
				m.log.Error("topic failed: copying stopped; other topics go on", "topic", t.Name, "target_topic", ts.target, "err", err)
			}
		}
		if ts.fatal != nil {
			continue
		}
		if id := ids[t.Name]; id != "" {
			ts.id = id
		}
		ts.partitions = t.Partitions
		switch {
		case !exists:
			if ts.assigned > 0 {
				// The target topic vanished under us: whatever was
				// copied went with it. Start again from the source's
				// start once it is recreated.
				m.log.Warn("target topic disappeared; recreating it and copying the source topic from its start", "topic", t.Name, "target_topic", ts.target)
				for p := range ts.assigned {
					unassign = append(unassign, topicPartition{t.Name, p})
				}
				ts.assigned = 0
				m.forgetProgress(t.Name)
			}
			creates = append(creates, topicSpec{source: t.Name, name: ts.target, partitions: t.Partitions})
		case have < t.Partitions:
			grows[ts.target] = t.Partitions
		}
	}
	m.mu.Unlock()
	if !m.dryRun() {
		kept := cp.unassign(unassign)
		m.mu.Lock()
		maps.Copy(m.indexes, kept)
		m.mu.Unlock()
	}

	// 4. Create missing topics (one batched request) and grow partitions.
	var passErrs []error
	if len(creates) > 0 {
		if err := m.createMissing(ctx, c, creates, targetPartitions); err != nil {
			passErrs = append(passErrs, err)
		}
	}
	if len(grows) > 0 {
		if err := m.grow(ctx, c, grows, targetPartitions); err != nil {
			passErrs = append(passErrs, err)
		}
	}
	if m.dryRun() {
		return false, errors.Join(passErrs...)
	}

	// 5. Assign every partition that exists on both sides.
	var assigns []assignment
	m.mu.Lock()
	for _, t := range selected {
		ts := m.topics[t.Name]
		have, ok := targetPartitions[ts.target]
		if !ok || ts.fatal != nil {
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
			// Resuming keeps the stored index; starting over replaces
			// it, deleting the stored chunks of the old one.
			ix := m.indexes[tp]
			delete(m.indexes, tp)
			if next < 0 && ix != nil {
				fresh := newPartitionIndex()
				for k := ix.first; k <= ix.first+int64(len(ix.runs)-1)/indexChunkRuns; k++ {
					fresh.dropped = append(fresh.dropped, k)
				}
				fresh.dropped = append(fresh.dropped, ix.dropped...)
				ix = fresh
			}
			assigns = append(assigns, assignment{tp: tp, target: ts.target, topicID: ts.id, next: next, index: ix})
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

	// 6. Record what changed, and refresh source ends for lag.
	m.writeMetadata(c.dst, removed)
	m.refreshEnds(ctx, c.srcAdm, cp)
	return started, errors.Join(passErrs...)
}

// fillConfigs sets the effective configs of each topic (every value the
// topic has, its own or a default) in one DescribeConfigs request. A topic
// whose configs cannot be read fails the pass: a filter judging it without
// them could drop it.
func fillConfigs(ctx context.Context, adm *kadm.Client, ts []filters.Topic) error {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	props, errs := describeConfigs(ctx, adm, names)
	for i := range ts {
		if err := errs[ts[i].Name]; err != nil {
			return fmt.Errorf("topic %s: %w", ts[i].Name, err)
		}
		cfg := make(map[string]string, len(props[ts[i].Name]))
		for _, p := range props[ts[i].Name] {
			if !p.Sensitive {
				cfg[p.Name] = p.Value
			}
		}
		ts[i].Configs = cfg
	}
	return nil
}

// checkIdentity returns an error when the source topic is no longer the one
// being mirrored: recreated under the same name (a new topic ID, noticed
// live or against the ID stored in the metadata) or shrunk (Kafka cannot
// remove partitions, so fewer means a new topic even without IDs). The
// target holds the old topic's records; appending the new topic's would mix
// two topics in one. The caller holds m.mu.
func (m *Mirror) checkIdentity(ts *topicState, t filters.Topic, id string, targetExists bool) error {
	switch {
	case id != "" && ts.id != "" && id != ts.id:
		m.metrics.incRecreations()
		return fmt.Errorf("source topic %s was deleted and recreated (topic ID %s, now %s); target topic %s holds the old topic's records: delete it on the target to mirror the new topic from its start", t.Name, ts.id, id, ts.target)
	case id != "" && ts.id == "" && ts.persistedID != "" && ts.persistedID != id && targetExists:
		m.metrics.incRecreations()
		return fmt.Errorf("source topic %s was deleted and recreated while it was not mirrored (topic ID %s in the metadata, now %s); target topic %s holds the old topic's records: delete it on the target to mirror the new topic from its start", t.Name, ts.persistedID, id, ts.target)
	case t.Partitions < ts.partitions:
		return fmt.Errorf("source topic %s shrank from %d to %d partitions, so it was recreated; target topic %s holds the old topic's records: delete it on the target to mirror the new topic from its start", t.Name, ts.partitions, t.Partitions, ts.target)
	}
	return nil
}

// forgetProgress drops the stored positions of a topic's partitions. The
// caller holds m.mu.
func (m *Mirror) forgetProgress(topic string) {
	for tp := range m.progress {
		if tp.topic == topic {
			delete(m.progress, tp)
		}
	}
}

// labelsFor returns the labels a source topic gets: inherited from
// upstream, then this mirror's config. The caller holds m.mu.
func (m *Mirror) labelsFor(topic string, upstream map[string]string) map[string]string {
	out := make(map[string]string)
	for k, v := range upstream {
		if !strings.HasPrefix(k, metaPrefix) {
			out[k] = v
		}
	}
	for _, l := range m.selection().Labels {
		if l.Match.MatchString(topic) {
			maps.Copy(out, l.Set) // this mirror's labels win
		}
	}
	return out
}

// createMissing creates the target topics in one request, with the source
// topics' configs that pass the config filters.
func (m *Mirror) createMissing(ctx context.Context, c *clients, creates []topicSpec, targetPartitions map[string]int32) error {
	names := make([]string, 0, len(creates))
	for _, s := range creates {
		names = append(names, s.source)
	}
	props, errs := describeConfigs(ctx, c.srcAdm, names)
	for i := range creates {
		s := &creates[i]
		if err := errs[s.source]; err != nil {
			m.log.Warn("creating target topic without the source topic's configs", "topic", s.source, "err", err)
			continue
		}
		desired, err := m.desiredConfigs(ctx, s.source, props[s.source])
		if err != nil {
			m.log.Warn("config filter failed; creating target topic without the source topic's configs", "topic", s.source, "err", err)
			continue
		}
		s.configs = desired
	}
	results, err := createTopics(ctx, c.dst, creates, m.cfg.ReplicationFactor, m.dryRun())
	if err != nil {
		return err
	}
	now := time.Now()
	for _, s := range creates {
		err := results[s.name]
		if m.dryRun() {
			m.plan.addCreate(s, err)
			continue
		}
		if err != nil {
			m.metrics.incCreateErrors()
			m.setTopicError(s.source, fmt.Errorf("create target topic %s: %w", s.name, err))
			continue
		}
		targetPartitions[s.name] = s.partitions
		m.mu.Lock()
		if ts := m.topics[s.source]; ts != nil {
			ts.exists = true
			ts.createdAt = now
			ts.syncedConfigs = sortedKeys(s.configs)
		}
		m.mu.Unlock()
		m.log.Info("created target topic", "target_topic", s.name, "partitions", s.partitions, "configs", s.configs)
	}
	return nil
}

// grow raises target partition counts in one request.
func (m *Mirror) grow(ctx context.Context, c *clients, grows map[string]int32, targetPartitions map[string]int32) error {
	results, err := growPartitions(ctx, c.dst, grows, m.dryRun())
	if err != nil {
		return err
	}
	grown := make(map[string]int32)
	for topic, n := range grows {
		err := results[topic]
		if m.dryRun() {
			m.plan.addGrow(topic, targetPartitions[topic], n, err)
			continue
		}
		if err != nil {
			m.metrics.incCreateErrors()
			m.setTopicError(m.sourceName(topic), fmt.Errorf("grow target topic %s to %d partitions: %w", topic, n, err))
			continue
		}
		targetPartitions[topic] = n
		grown[topic] = n
		m.log.Info("grew target topic partitions", "target_topic", topic, "partitions", n)
	}
	awaitProducerPartitions(ctx, c.dst, grown)
	return nil
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

// sourceName maps a target topic back to its source topic.
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
	// The index of records the source has deleted (retention) can go:
	// no group can commit those offsets any more.
	if starts, err := srcAdm.ListStartOffsets(ctx, names...); err == nil {
		starts.Each(func(o kadm.ListedOffset) {
			if o.Err != nil {
				return
			}
			if ps := cp.partition(topicPartition{o.Topic, o.Partition}); ps != nil {
				ps.mu.Lock()
				ps.index.prune(o.Offset)
				ps.mu.Unlock()
			}
		})
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
