package connector

import (
	"slices"
	"strings"

	"github.com/kmirror/kmirror/listeners"
)

// publishTopics hands the current topic set, sorted by upstream name, to the notifier (the
// listeners) and counts what changed since the last publication. The
// first publication after a start is the initial state, not a change.
func (m *Mirror) publishTopics() {
	m.mu.Lock()
	topics := make([]listeners.Topic, 0, len(m.topics))
	for _, ts := range m.topics {
		gaps, held := m.sourceGaps(ts.source)
		state := ts.currentState()
		if held {
			state = StateFailed // a partition stopped before a source gap
		}
		topics = append(topics, listeners.Topic{
			Upstream:   ts.source,
			Downstream: ts.target,
			Partitions: ts.partitions,
			State:      string(state),
			Metadata:   m.metadataFor(ts),
			SourceGaps: listenerGaps(gaps),
			Divergent:  listenerDivergent(m.divergentOf(ts.target)),
		})
	}
	slices.SortFunc(topics, func(a, b listeners.Topic) int { return strings.Compare(a.Upstream, b.Upstream) })
	prev, first := m.publishedTopics, !m.publishedOnce
	m.publishedTopics, m.publishedOnce = topics, true
	m.mu.Unlock()
	if !first {
		added, removed, changed := listeners.DiffTopics(prev, topics)
		m.metrics.addSetChanges("added", len(added))
		m.metrics.addSetChanges("removed", len(removed))
		m.metrics.addSetChanges("changed", len(changed))
	}
	if m.cfg.Notifier != nil {
		m.cfg.Notifier.SetTopics(topics)
	}
}

// publishGroups hands the current translated group set to the notifier.
func (m *Mirror) publishGroups(groups []listeners.Group) {
	m.mu.Lock()
	prev, first := m.publishedGroups, !m.publishedGroupsOnce
	m.publishedGroups, m.publishedGroupsOnce = groups, true
	m.mu.Unlock()
	if !first {
		added, removed := listeners.DiffGroups(prev, groups)
		m.metrics.addSetChanges("group_added", len(added))
		m.metrics.addSetChanges("group_removed", len(removed))
	}
	if m.cfg.Notifier != nil {
		m.cfg.Notifier.SetGroups(groups)
	}
}
