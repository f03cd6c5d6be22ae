package app

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/internal/english"
	"github.com/kmirror/kmirror/internal/httpapi"
	"github.com/kmirror/kmirror/listeners"
)

// maxChanges bounds the in-memory history of the replicated set that the
// status page shows (GET /api/v1/changes): the oldest entries go first.
const maxChanges = 500

// changeLog is the recent changes to every mirror's replicated set, in
// memory only: a restart starts it afresh.
type changeLog struct {
	mu      sync.Mutex
	entries []httpapi.Change // oldest first, at most max
	max     int
	now     func() time.Time
}

func newChangeLog(max int) *changeLog { return &changeLog{max: max, now: time.Now} }

func (l *changeLog) add(cs ...httpapi.Change) {
	if len(cs) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for i := range cs {
		cs[i].Time = now
	}
	l.entries = append(l.entries, cs...)
	if over := len(l.entries) - l.max; over > 0 {
		// A fresh slice, so the dropped entries do not pin the old
		// backing array forever.
		l.entries = slices.Clone(l.entries[over:])
	}
}

// Changes implements httpapi.ChangeSource: newest first.
func (l *changeLog) Changes() []httpapi.Change {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.entries)
	slices.Reverse(out)
	return out
}

// recordingNotifier hands a mirror's topic and group sets on to the
// listeners' dispatcher, unchanged, and records what changed between two
// sets in the change log: the same events the listeners get, diffed the
// same way (listeners.DiffTopics, DiffGroups). Like the dispatcher it
// never blocks: a diff of the two sets under a mutex.
type recordingNotifier struct {
	next   connector.Notifier
	log    *changeLog
	mirror string

	mu                     sync.Mutex
	topics                 []listeners.Topic
	groups                 []listeners.Group
	haveTopics, haveGroups bool
}

var _ connector.Notifier = (*recordingNotifier)(nil)

func (n *recordingNotifier) SetTopics(topics []listeners.Topic) {
	n.next.SetTopics(topics)
	n.mu.Lock()
	prev, first := n.topics, !n.haveTopics
	n.topics, n.haveTopics = slices.Clone(topics), true
	n.mu.Unlock()
	if first {
		n.log.add(httpapi.Change{Mirror: n.mirror, Kind: httpapi.ChangeInitial, Detail: english.Count(len(topics), "topic") + " selected at start"})
		return
	}
	added, removed, changed := listeners.DiffTopics(prev, topics)
	var cs []httpapi.Change
	for _, t := range added {
		cs = append(cs, httpapi.Change{Mirror: n.mirror, Kind: httpapi.ChangeTopicAdded, Name: t.Upstream, Target: t.Downstream,
			Detail: english.Count(int(t.Partitions), "partition") + ", " + t.State})
	}
	for _, t := range removed {
		cs = append(cs, httpapi.Change{Mirror: n.mirror, Kind: httpapi.ChangeTopicRemoved, Name: t.Upstream, Target: t.Downstream})
	}
	before := make(map[string]listeners.Topic, len(prev))
	for _, t := range prev {
		before[t.Upstream] = t
	}
	for _, t := range changed {
		cs = append(cs, httpapi.Change{Mirror: n.mirror, Kind: httpapi.ChangeTopicChanged, Name: t.Upstream, Target: t.Downstream,
			Detail: topicDiff(before[t.Upstream], t)})
	}
	n.log.add(cs...)
}

func (n *recordingNotifier) SetGroups(groups []listeners.Group) {
	n.next.SetGroups(groups)
	n.mu.Lock()
	prev, first := n.groups, !n.haveGroups
	n.groups, n.haveGroups = slices.Clone(groups), true
	n.mu.Unlock()
	if first {
		n.log.add(httpapi.Change{Mirror: n.mirror, Kind: httpapi.ChangeInitial, Detail: english.Count(len(groups), "group") + " translated at start"})
		return
	}
	added, removed := listeners.DiffGroups(prev, groups)
	var cs []httpapi.Change
	for _, g := range added {
		cs = append(cs, httpapi.Change{Mirror: n.mirror, Kind: httpapi.ChangeGroupAdded, Name: g.Name, Detail: "topics " + strings.Join(g.Topics, ", ")})
	}
	for _, g := range removed {
		cs = append(cs, httpapi.Change{Mirror: n.mirror, Kind: httpapi.ChangeGroupRemoved, Name: g.Name})
	}
	n.log.add(cs...)
}

// topicDiff says what changed between two versions of a topic.
func topicDiff(old, cur listeners.Topic) string {
	var parts []string
	if old.State != cur.State {
		parts = append(parts, "state "+old.State+" → "+cur.State)
	}
	if old.Partitions != cur.Partitions {
		parts = append(parts, fmt.Sprintf("partitions %d → %d", old.Partitions, cur.Partitions))
	}
	if old.Downstream != cur.Downstream {
		parts = append(parts, "target "+old.Downstream+" → "+cur.Downstream)
	}
	if !maps.Equal(old.Metadata, cur.Metadata) {
		var keys []string
		for _, k := range slices.Sorted(maps.Keys(cur.Metadata)) {
			if v, ok := old.Metadata[k]; !ok || v != cur.Metadata[k] {
				keys = append(keys, k+"="+cur.Metadata[k])
			}
		}
		for _, k := range slices.Sorted(maps.Keys(old.Metadata)) {
			if _, ok := cur.Metadata[k]; !ok {
				keys = append(keys, k+" removed")
			}
		}
		parts = append(parts, "metadata "+strings.Join(keys, ", "))
	}
	return strings.Join(parts, "; ")
}
