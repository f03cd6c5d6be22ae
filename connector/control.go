package connector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/filters"
)

// pass is one control-plane round: discover, select, create, assign. It
// reports whether it created the source consumer (the copier can start).
func (m *Mirror) pass(ctx context.Context, c *clients, cp dataPlane) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, max(m.cfg.RefreshInterval, 30*time.Second))
	defer cancel()
	m.metrics.incPasses()
	started, err := m.doPass(ctx, c, cp)
	c.forgetMetadata()
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
	if err == nil && !m.dryRun() && m.ownsControl() {
		m.publishTopics()
	}
	return started, err
}

// dryRun reports whether this pass only plans (kmirror plan).
func (m *Mirror) dryRun() bool { return m.plan != nil }

func (m *Mirror) doPass(ctx context.Context, c *clients, cp dataPlane) (bool, error) {
	// 0. Take over the slots whose takeover failed.
	if !m.dryRun() {
		m.slots.takeOverMissing(ctx)
		m.slots.refreshMembers(ctx)
	}
	// 1. Discover, with the metadata upstream mirrors left on the source.
	disc, err := m.discover(ctx, c)
	if err != nil {
		if !m.dryRun() {
			m.sourceUnread(cp)
		}
		return false, err
	}
	if !m.dryRun() {
		// 7. Refresh the source's ends for lag, also when a later step
		// fails (the target down): the source answers.
		defer m.refreshEndsIfDue(ctx, c, cp)
	}
	// 2. Select. A filter error keeps the previous selection.
	selected, err := m.selectDiscovered(ctx, c, disc)
	if err != nil {
		m.metrics.incFilterErrors()
		return false, err
	}
	m.setRateTopics(selected)
	// 3. Compare with the target.
	tl, err := m.listTarget(ctx, c, selected)
	if err != nil {
		return false, err
	}
	// 4. Reconcile what is mirrored with what both clusters say.
	rec := m.reconcile(selected, disc, tl)
	if !m.dryRun() {
		m.applyUnassigns(c.dst, cp, rec)
	}
	// 5. Create missing topics (batched, as large as the controller takes) and grow partitions:
	// only the control plane's worker (slot 0's owner) does.
	var passErrs []error
	if !m.ownsControl() {
		rec.creates, rec.grows = nil, nil
	}
	if len(rec.creates) > 0 {
		if err := m.createMissing(ctx, c, rec.creates, tl.partitions); err != nil {
			passErrs = append(passErrs, err)
		}
	}
	if len(rec.grows) > 0 {
		if err := m.grow(ctx, c, rec.grows, tl.partitions); err != nil {
			passErrs = append(passErrs, err)
		}
	}
	if m.dryRun() {
		return false, errors.Join(passErrs...)
	}
	// 6. Assign every partition that exists on both sides; with
	// mm2.adopt, a partition without a stored position first learns
	// where MM2 stopped (an error leaves it waiting, not copied again).
	if m.adopt != nil {
		if err := m.decideAdoption(ctx, c, tl); err != nil {
			passErrs = append(passErrs, err)
		}
	}
	started, err := cp.Assign(m.assignments(selected, tl, cp), m.cfg.SourceOpts)
	if err != nil {
		return false, fmt.Errorf("source consumer: %w", err)
	}
	// 7. Record what changed (the deferred refreshEndsIfDue follows).
	if m.ownsControl() {
		m.writeMetadata(c.dst, rec.removed)
	}
	return started, errors.Join(passErrs...)
}

// discovered is what one listing of the source said.
type discovered struct {
	candidates []filters.Topic
	ids        map[string]string // source topic IDs, by topic
	// upstream is the metadata of trusted upstream mirrors, by topic; nil
	// when it could not be read.
	upstream map[string]map[string]string
	// gone are mirrored topics that a successful listing lacked, twice:
	// deleted at the source.
	gone map[string]bool
}

// discover lists the source topics. A topic listed with an error keeps its
// last known shape (if it is mirrored); a mirrored topic that the listing
// lacks is looked up again by name before it is believed deleted.
func (m *Mirror) discover(ctx context.Context, c *clients) (discovered, error) {
	d := discovered{ids: make(map[string]string), gone: make(map[string]bool)}
	srcTopics, err := c.listSource(ctx)
	if err != nil {
		return d, fmt.Errorf("list source topics: %w", m.srcErr(err))
	}
	m.mu.Lock()
	var missing []string
	for name := range m.topics {
		if _, ok := srcTopics[name]; !ok {
			missing = append(missing, name)
		}
	}
	m.mu.Unlock()
	if len(missing) > 0 {
		again, gone, err := lookAgain(ctx, c.srcAdminCl, missing)
		if err != nil {
			return d, fmt.Errorf("list source topics: %w", m.srcErr(err))
		}
		maps.Copy(srcTopics, again)
		d.gone = gone
	}
	if d.upstream, err = upstreamMetadata(ctx, m.cfg.SourceOpts, c.srcAdm, m.trustedMetadataTopics(srcTopics.Names())); err != nil {
		m.log.Warn("cannot read the source cluster's topic metadata; labels from upstream mirrors are not refreshed", "err", err)
	}
	d.candidates = make([]filters.Topic, 0, len(srcTopics))
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, td := range srcTopics.Sorted() {
		n := int32(len(td.Partitions))
		if td.Err == nil && td.ID != (kadm.TopicID{}) {
			d.ids[td.Topic] = td.ID.String()
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
		d.candidates = append(d.candidates, filters.Topic{Name: td.Topic, Partitions: n, Labels: m.labelsFor(td.Topic, d.upstream[td.Topic])})
	}
	return d, nil
}

// lookAgain asks for topics a full listing lacked, by name, in a Metadata
// request of its own (kadm's listings may answer from the client's
// metadata cache, which would repeat the first answer): a listing can miss
// a topic that exists (a broker with stale metadata answered). It returns
// the topics found (possibly with a topic-level error: unknown, not gone)
// and those the cluster says do not exist.
func lookAgain(ctx context.Context, cl *kgo.Client, names []string) (kadm.TopicDetails, map[string]bool, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, err
	}
	found := make(kadm.TopicDetails)
	gone := make(map[string]bool)
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		td := kadm.TopicDetail{Topic: *t.Topic, ID: t.TopicID, Partitions: make(kadm.PartitionDetails), Err: kerr.ErrorForCode(t.ErrorCode)}
		if errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			gone[td.Topic] = true
			continue
		}
		for _, p := range t.Partitions {
			td.Partitions[p.Partition] = kadm.PartitionDetail{Topic: td.Topic, Partition: p.Partition, Leader: p.Leader, Err: kerr.ErrorForCode(p.ErrorCode)}
		}
		found[td.Topic] = td
	}
	for _, name := range names {
		if _, ok := found[name]; !ok && !gone[name] {
			// Not in the answer at all: nothing proven either way.
			found[name] = kadm.TopicDetail{Topic: name, Err: errors.New("not in the metadata answer")}
		}
	}
	return found, gone, nil
}

// selectDiscovered runs the filters over the candidates. A topic whose
// configs could not be read (for a filter that reads them) keeps its last
// state: selected if it was mirrored, left out if it was not.
func (m *Mirror) selectDiscovered(ctx context.Context, c *clients, d discovered) ([]filters.Topic, error) {
	selected, unknown, err := selectTopics(ctx, m.cfg.Name, m.selection().Filters, m.cfg.Policy, m.cfg.TargetAlias, d.candidates, func(ctx context.Context, ts []filters.Topic) map[string]error {
		return fillConfigs(ctx, c.srcAdm, ts)
	})
	if err != nil {
		return nil, err
	}
	if len(unknown) == 0 {
		return selected, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, u := range unknown {
		m.metrics.incAdminErrors(adminDescribeConfigs)
		if m.topics[u.topic.Name] != nil {
			selected = append(selected, u.topic)
		}
		m.logEvery.Warn(m.log, "configs:"+u.topic.Name, "cannot read a source topic's configs for the filters; the topic keeps its last selection state", "topic", u.topic.Name, "mirrored", m.topics[u.topic.Name] != nil, "err", u.err)
	}
	return selected, nil
}

// targetListing is what one listing of the target said about the selected
// topics' target topics.
type targetListing struct {
	partitions map[string]int32  // listed without an error
	ids        map[string]string // their topic IDs ("" when the broker has none)
	// unknown are listed with an error (or not answered): nothing is
	// known about them this pass.
	unknown map[string]error
	// gone are believed to exist and lacking from a successful listing
	// and from a second look by name: deleted.
	gone map[string]bool
}

// listTarget lists the target topics. A target topic believed to exist that
// the listing lacks is looked up again by name before it is believed gone.
func (m *Mirror) listTarget(ctx context.Context, c *clients, selected []filters.Topic) (targetListing, error) {
	tl := targetListing{partitions: make(map[string]int32), ids: make(map[string]string), unknown: make(map[string]error), gone: make(map[string]bool)}
	dstTopics, err := c.listTarget(ctx)
	if err != nil {
		return tl, fmt.Errorf("list target topics: %w", m.dstErr(err))
	}
	var missing []string
	createdAt := make(map[string]time.Time)
	m.mu.Lock()
	for _, t := range selected {
		ts := m.topics[t.Name]
		if ts == nil {
			continue
		}
		if _, ok := dstTopics[ts.target]; !ok && (ts.exists || ts.assigned > 0 || ts.fatal != nil) {
			missing = append(missing, ts.target)
			if !ts.listed {
				createdAt[ts.target] = ts.createdAt
			}
		}
	}
	m.mu.Unlock()
	if len(missing) > 0 {
		again, gone, err := lookAgain(ctx, c.dst, missing)
		if err != nil {
			return tl, fmt.Errorf("list target topics: %w", m.dstErr(err))
		}
		maps.Copy(dstTopics, again)
		tl.gone = gone
	}
	// A broker learns of a topic some time after the controller created
	// it: seconds, or tens of seconds when thousands of partitions were
	// created at once (each a log to make before the broker's metadata
	// shows them). A topic created here that long ago and not listed
	// since is not gone but not known yet; believing it gone copied its
	// source topic again from the start (records already copied, twice).
	now := time.Now()
	for name := range tl.gone {
		if at := createdAt[name]; !at.IsZero() && now.Sub(at) < targetPropagation {
			delete(tl.gone, name)
			dstTopics[name] = kadm.TopicDetail{Topic: name, Err: fmt.Errorf("created %s ago, not in the target's metadata yet", now.Sub(at).Round(time.Second))}
		}
	}
	for _, td := range dstTopics {
		if td.Err != nil {
			tl.unknown[td.Topic] = td.Err
			continue
		}
		tl.partitions[td.Topic] = int32(len(td.Partitions))
		if td.ID != (kadm.TopicID{}) {
			tl.ids[td.Topic] = td.ID.String()
		}
	}
	return tl, nil
}

// targetPropagation is how long after creating a target topic its absence
// from the target's metadata means "not known yet" rather than "deleted".
var targetPropagation = 2 * time.Minute // a var for tests

// reconciled is what a pass changes: partitions to stop copying, topics to
// create or grow, topics that left the selection.
type reconciled struct {
	unassign []data.TopicPartition
	// restart are partitions whose copy starts over (their state is
	// dropped, and its stored index chunks deleted); forget are those of
	// source topics that are gone (their state and stored progress are
	// deleted).
	restart, forget []data.TopicPartition
	creates         []topicSpec
	grows           map[string]int32
	removed         []*topicState
}

// reconcile compares the selection with what is mirrored and with the
// target listing. The caller must not hold m.mu.
func (m *Mirror) reconcile(selected []filters.Topic, d discovered, tl targetListing) reconciled {
	rec := reconciled{grows: make(map[string]int32)}
	m.mu.Lock()
	defer m.mu.Unlock()
	selectedSet := make(map[string]bool, len(selected))
	for _, t := range selected {
		selectedSet[t.Name] = true
	}
	for name, ts := range m.topics {
		if selectedSet[name] {
			continue
		}
		tps := partitionsOf(name, ts.assigned)
		rec.unassign = append(rec.unassign, tps...)
		if d.gone[name] {
			m.log.Info("topic no longer mirrored: deleted at the source", "topic", name, "target_topic", ts.target)
			rec.forget = append(rec.forget, partitionsOf(name, ts.partitions)...)
		} else {
			m.log.Info("topic no longer mirrored: no longer selected; its position is kept", "topic", name, "target_topic", ts.target)
		}
		rec.removed = append(rec.removed, ts)
		delete(m.topics, name)
	}
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
		if d.upstream != nil {
			// A topic no trusted mirror describes (any more: a
			// reload withdrew the trust) inherits nothing, as after
			// a restart.
			ts.upstream = d.upstream[t.Name]
		}
		if err, ok := tl.unknown[ts.target]; ok {
			// Listed with an error (a leader moving, a broker
			// restarting): unknown this pass. Nothing is forgotten,
			// created or re-copied; copying goes on as it was.
			m.logEvery.Warn(m.log, "target-unknown:"+ts.target, "target topic listed with an error; keeping its state until it is listed cleanly", "topic", t.Name, "target_topic", ts.target, "err", err)
			continue
		}
		have, exists := tl.partitions[ts.target]
		gone := tl.gone[ts.target]
		if id := tl.ids[ts.target]; exists && id != "" {
			if ts.targetID != "" && id != ts.targetID {
				// Deleted and created again by someone else between
				// two passes: what was copied went with it.
				m.log.Warn("target topic was deleted and recreated (new topic ID); copying the source topic from its start", "topic", t.Name, "target_topic", ts.target, "topic_id", ts.targetID, "now", id)
				gone = true
			}
			ts.targetID = id
		}
		if gone {
			m.restartTopic(ts, &rec)
		}
		ts.exists = exists
		ts.listed = ts.listed || exists
		if ts.fatal != nil && gone && !m.dryRun() {
			// The operator deleted the target topic of a failed
			// topic: mirror the source topic again from its start.
			m.log.Info("target topic of a failed topic was deleted; mirroring the source topic from its start", "topic", t.Name, "target_topic", ts.target)
			*ts = topicState{source: ts.source, target: ts.target, state: StatePending, upstream: ts.upstream, targetID: ts.targetID, exists: exists}
		}
		if ts.fatal == nil {
			if err := m.checkIdentity(ts, t, d.ids[t.Name], exists); err != nil {
				ts.fatal = err
				ts.state = StateFailed
				rec.unassign = append(rec.unassign, partitionsOf(t.Name, ts.assigned)...)
				rec.restart = append(rec.restart, partitionsOf(t.Name, max(ts.assigned, ts.partitions))...)
				ts.assigned = 0
				m.log.Error("topic failed: copying stopped; other topics go on", "topic", t.Name, "target_topic", ts.target, "err", err)
			}
		}
		if ts.fatal != nil {
			continue
		}
		if id := d.ids[t.Name]; id != "" {
			ts.id = id
		}
		ts.partitions = t.Partitions
		switch {
		case !exists:
			rec.creates = append(rec.creates, topicSpec{source: t.Name, name: ts.target, partitions: t.Partitions})
		case have < t.Partitions:
			rec.grows[ts.target] = t.Partitions
		}
	}
	return rec
}

// restartTopic makes a topic whose target topic is gone start over from
// the source's start: whatever was copied went with the target topic. The
// caller holds m.mu.
func (m *Mirror) restartTopic(ts *topicState, rec *reconciled) {
	if ts.assigned > 0 {
		m.log.Warn("target topic is gone; recreating it and copying the source topic from its start", "topic", ts.source, "target_topic", ts.target)
	}
	rec.unassign = append(rec.unassign, partitionsOf(ts.source, ts.assigned)...)
	rec.restart = append(rec.restart, partitionsOf(ts.source, max(ts.assigned, ts.partitions))...)
	for _, tp := range partitionsOf(ts.source, max(ts.assigned, ts.partitions)) {
		m.forgetAdoption(tp)
	}
	ts.assigned = 0
	ts.targetID = ""
}

func partitionsOf(topic string, n int32) []data.TopicPartition {
	out := make([]data.TopicPartition, 0, n)
	for p := range n {
		out = append(out, data.TopicPartition{Topic: topic, Partition: p})
	}
	return out
}

// applyUnassigns stops copying what the pass took away. Partitions that
// start over keep only their stored index chunks' numbers (the assignment
// deletes them); partitions of deleted source topics are forgotten, in
// memory and in the progress topic.
func (m *Mirror) applyUnassigns(dst *kgo.Client, cp dataPlane, rec reconciled) {
	cp.Unassign(rec.unassign)
	restarted := cp.DropParked(rec.restart)
	forgotten := cp.DropParked(rec.forget)
	m.mu.Lock()
	maps.Copy(m.indexes, restarted)
	for _, tp := range rec.forget {
		if ix := m.indexes[tp]; ix != nil && forgotten[tp] == nil {
			forgotten[tp] = ix
		}
		delete(m.indexes, tp)
	}
	m.mu.Unlock()
	if m.ownsControl() {
		for _, tp := range rec.forget {
			m.deleteStoredProgress(dst, tp, forgotten[tp])
		}
	}
}

// assignments returns the partitions to start copying: every partition
// that exists on both sides and is not copied yet, from its live position
// when the copier still has it (a topic selected again), else from MM2's
// position when adopted, else from the start: the data plane resumes a
// partition from its stored progress (loaded.resume), which the control
// plane never holds. The caller must not hold m.mu.
func (m *Mirror) assignments(selected []filters.Topic, tl targetListing, cp dataPlane) []data.Assignment {
	var assigns []data.Assignment
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range selected {
		ts := m.topics[t.Name]
		have, ok := tl.partitions[ts.target]
		if !ok || ts.fatal != nil {
			continue
		}
		upTo := min(have, ts.partitions)
		var as []data.Assignment
		settled, adopting := true, false
		for p := ts.assigned; p < upTo; p++ {
			tp := data.TopicPartition{Topic: t.Name, Partition: p}
			if ps, done := cp.ParkedState(tp); ps != nil {
				if !done {
					settled = false
					break
				}
				if ps.TopicID == ts.id || ps.TopicID == "" || ts.id == "" {
					as = append(as, data.Assignment{TP: tp, Target: ts.target, TopicID: ts.id, Resume: ps})
					continue
				}
				// Parked under an earlier topic of the same name.
				m.indexes[tp] = cp.DropParked([]data.TopicPartition{tp})[tp]
			}
			next := int64(-1)
			floor, wait := m.adoptedStart(tp)
			if wait {
				// MM2's position is not known yet: the topic waits
				// (decideAdoption said why).
				adopting = true
				break
			}
			// Resuming keeps the stored index; starting over replaces
			// it, deleting the stored chunks of the old one.
			ix := m.indexes[tp]
			switch {
			case floor != nil:
				next, ix = floor.Src, index.NewAdopted(ix, floor.Src, floor.Dst)
			case next < 0 && ix != nil:
				ix = ix.Replacement()
			}
			as = append(as, data.Assignment{TP: tp, Target: ts.target, TopicID: ts.id, Next: next, Index: ix})
		}
		if !settled {
			// Records of the topic's last copy are still in flight:
			// its position is final only once they settle.
			m.log.Info("topic selected again; resuming once its records in flight settle", "topic", t.Name)
			continue
		}
		if adopting {
			continue
		}
		// The copier holds the partitions' positions and indexes from
		// now on: what was loaded for them goes (kept until here, so a
		// topic that waits keeps its loaded state for the next pass).
		for _, a := range as {
			delete(m.indexes, a.TP)
		}
		assigns = append(assigns, as...)
		if upTo > ts.assigned {
			ts.assigned = upTo
		}
		if ts.assigned == ts.partitions {
			ts.state, ts.err = StateMirroring, nil
		}
	}
	// Go maps keep their size: once all that was loaded is assigned (at
	// 100,000 partitions, tens of MB), fresh ones let it go.
	if len(m.indexes) == 0 {
		m.indexes = make(map[data.TopicPartition]*index.Partition)
	}
	return assigns
}

// fillConfigs sets the effective configs of each topic (every value the
// topic has, its own or a default) in one DescribeConfigs request, and
// returns the topics whose configs could not be read: a filter judging
// them without configs could drop them, so the caller keeps their state.
func fillConfigs(ctx context.Context, adm *kadm.Client, ts []filters.Topic) map[string]error {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	props, errs := describeConfigs(ctx, adm, names)
	failed := make(map[string]error)
	for i := range ts {
		if err := errs[ts[i].Name]; err != nil {
			failed[ts[i].Name] = err
			continue
		}
		cfg := make(map[string]string, len(props[ts[i].Name]))
		for _, p := range props[ts[i].Name] {
			if !p.Sensitive {
				cfg[p.Name] = p.Value
			}
		}
		ts[i].Configs = cfg
	}
	return failed
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

// createMissing creates the target topics in batched requests, with the source
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
		return fmt.Errorf("create target topics: %w", m.dstErr(err))
	}
	now := time.Now()
	for _, s := range creates {
		err := results[s.name]
		if m.dryRun() {
			if isTopicExists(err) {
				err = nil // created since the listing: nothing to plan
			}
			m.plan.addCreate(s, err)
			continue
		}
		if isTopicExists(err) {
			// Listed as missing, yet it exists: created since the
			// listing, or the listing was stale. Look again on the
			// next pass rather than assume anything about its
			// partitions or its content.
			m.log.Info("target topic already exists; looking at it again on the next pass", "topic", s.source, "target_topic", s.name)
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
			ts.createdAt, ts.listed = now, false
			ts.syncedConfigs = sortedKeys(s.configs)
		}
		m.mu.Unlock()
		m.log.Info("created target topic", "target_topic", s.name, "partitions", s.partitions, "configs", s.configs)
	}
	return nil
}

// grow raises target partition counts in batched requests.
func (m *Mirror) grow(ctx context.Context, c *clients, grows map[string]int32, targetPartitions map[string]int32) error {
	results, err := growPartitions(ctx, c.dst, grows, m.dryRun())
	if err != nil {
		return fmt.Errorf("grow target topics: %w", m.dstErr(err))
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

// adminFailed counts and logs (at most once a minute per request and
// topic) an admin request that failed, whole ("" topic) or for one topic.
func (m *Mirror) adminFailed(request, topic string, err error) {
	m.metrics.incAdminErrors(request)
	err = m.srcErr(err)
	if loggedElsewhere(err) {
		return
	}
	m.logEvery.Warn(m.log, "admin:"+request+":"+topic, "source request failed; the state it would update is kept as it was", "request", request, "topic", topic, "err", err)
}

// endsPartitionsPerPass is how many partitions' offsets refreshEnds lists
// every pass: with more, it runs less often, once every partitions /
// endsPartitionsPerPass refresh intervals. Listing 100,000 partitions'
// start and end offsets takes ~0.4 s of CPU, which every 10 s was most of
// an idle worker's; the fetches keep a copied partition's end current
// anyway, and what this adds (the lag of a partition not being fetched,
// pruning the index below the source's log start) can wait that long.
const endsPartitionsPerPass = 10_000

// endsDue reports whether this pass refreshes the source's offsets, and
// if so notes it.
func (m *Mirror) endsDue(now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	var partitions int
	for _, ts := range m.topics {
		partitions += int(ts.partitions)
	}
	every := time.Duration(max(1, partitions/endsPartitionsPerPass)) * m.cfg.RefreshInterval
	if !m.endsAt.IsZero() && now.Sub(m.endsAt) < every-m.cfg.RefreshInterval/2 {
		return false
	}
	m.endsAt = now
	return true
}

// endsTopicsPerRequest bounds the topics of one refreshEnds listing: kadm
// resolves (and franz-go caches) the metadata of every topic it is given
// first, and at 10,000 topics one listing held ~90 MB at once.
const endsTopicsPerRequest = 1000

// sourceUnread is a pass that could not list the source: its ends are not
// read either, and the lag is unknown rather than the figure last known,
// until the next pass that reaches the source refreshes them (due at once,
// whatever the schedule of endsDue).
func (m *Mirror) sourceUnread(cp dataPlane) {
	endsUnread(cp, nil, time.Now())
	m.mu.Lock()
	m.endsAt = time.Time{}
	m.mu.Unlock()
}

// refreshEndsIfDue refreshes the source's ends when endsDue says so. A
// pass whose time ran out leaves them for the next: its deadline is no
// news about the source.
func (m *Mirror) refreshEndsIfDue(ctx context.Context, c *clients, cp dataPlane) {
	if ctx.Err() == nil && m.endsDue(time.Now()) {
		m.refreshEnds(ctx, c, cp)
	}
}

func (m *Mirror) refreshEnds(ctx context.Context, c *clients, cp dataPlane) {
	m.mu.Lock()
	names := make([]string, 0, len(m.topics))
	for name := range m.topics {
		names = append(names, name)
	}
	m.mu.Unlock()
	for chunk := range slices.Chunk(names, endsTopicsPerRequest) {
		if ctx.Err() != nil {
			return
		}
		m.refreshEndsOf(ctx, c.srcAdm, cp, chunk)
		c.srcAdminCl.PurgeTopicsFromClient(chunk...) // what kadm resolved for them (clients)
	}
}

func (m *Mirror) refreshEndsOf(ctx context.Context, srcAdm *kadm.Client, cp dataPlane, names []string) {
	// The index of records the source has deleted (retention) can go:
	// no group can commit those offsets any more.
	starts, err := srcAdm.ListStartOffsets(ctx, names...)
	if err != nil {
		m.adminFailed(adminListStartOffsets, "", err)
	} else {
		starts.Each(func(o kadm.ListedOffset) {
			if o.Err != nil {
				m.adminFailed(adminListStartOffsets, o.Topic, o.Err)
				return
			}
			if ps := cp.Partition(data.TopicPartition{Topic: o.Topic, Partition: o.Partition}); ps != nil {
				ps.Mu.Lock()
				ps.Index.Prune(o.Offset)
				ps.Mu.Unlock()
			}
		})
	}
	ends, err := srcAdm.ListCommittedOffsets(ctx, names...)
	if err != nil {
		m.adminFailed(adminListCommittedOffsets, "", err)
		endsUnread(cp, names, time.Now())
		return
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			m.adminFailed(adminListCommittedOffsets, o.Topic, o.Err)
			if o.Partition < 0 { // the topic's listing failed, not a partition's
				endsUnread(cp, []string{o.Topic}, time.Now())
			} else if ps := cp.Partition(data.TopicPartition{Topic: o.Topic, Partition: o.Partition}); ps != nil {
				ps.Mu.Lock()
				ps.EndUnread(time.Now())
				ps.Mu.Unlock()
			}
			return
		}
		if ps := cp.Partition(data.TopicPartition{Topic: o.Topic, Partition: o.Partition}); ps != nil {
			ps.Mu.Lock()
			ps.LearnEnd(o.Offset)
			ps.Mu.Unlock()
		}
	})
}

// endsUnread marks the source's ends of the partitions copied here, of the
// topics in names (nil: all), as not read at t: their lag is unknown.
func endsUnread(cp dataPlane, names []string, t time.Time) {
	var only map[string]bool
	if names != nil {
		only = make(map[string]bool, len(names))
		for _, n := range names {
			only[n] = true
		}
	}
	for _, ps := range cp.Snapshot() {
		if only != nil && !only[ps.TP.Topic] {
			continue
		}
		ps.Mu.Lock()
		ps.EndUnread(t)
		ps.Mu.Unlock()
	}
}
