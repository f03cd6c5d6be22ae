package httpapi

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/connector"
)

// statusQuery is what a GET /api/v1/status asks for. With a hundred
// thousand topics the whole document is tens of megabytes; these let an
// operator (or kmirror status) ask for the failed topics, one mirror, or a
// page at a time.
//
//	?mirror=NAME      one mirror
//	?topic=TEXT       topics whose source or target name contains TEXT
//	?state=S[,S...]   topics in these states (pending, mirroring, failed)
//	?limit=N          at most N topics per mirror, by source topic name
//	?after=NAME       topics whose source name sorts after NAME (the
//	                  previous page's next_after)
//	?offset=N         skip the first N matching topics (a page number
//	                  times the limit: what the status page uses)
//	?order=failed     failed topics first, then pending, then mirroring,
//	                  each by source name (default: by source name)
//
// Every kept mirror also gets state_counts: its topics matching ?topic in
// each state, whatever ?state says.
type statusQuery struct {
	mirror, topic, after string
	states               map[connector.State]bool
	limit                int  // 0: every topic
	offset               int  // topics skipped before the page
	failedFirst          bool // ?order=failed
}

var topicStates = []connector.State{connector.StatePending, connector.StateMirroring, connector.StateFailed}

func parseStatusQuery(q url.Values) (statusQuery, error) {
	sq := statusQuery{mirror: q.Get("mirror"), topic: q.Get("topic"), after: q.Get("after")}
	for _, v := range q["state"] {
		for s := range strings.SplitSeq(v, ",") {
			st := connector.State(strings.TrimSpace(s))
			if !slices.Contains(topicStates, st) {
				return sq, fmt.Errorf("state must be one of %v, got %q", topicStates, s)
			}
			if sq.states == nil {
				sq.states = make(map[connector.State]bool)
			}
			sq.states[st] = true
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := positiveInt("limit", l)
		if err != nil {
			return sq, err
		}
		sq.limit = n
	}
	if o := q.Get("offset"); o != "" {
		n, err := strconv.Atoi(o)
		if err != nil || n < 0 {
			return sq, fmt.Errorf("offset must be a non-negative integer, got %q", o)
		}
		sq.offset = n
	}
	switch o := q.Get("order"); o {
	case "", "name":
	case "failed":
		sq.failedFirst = true
	default:
		return sq, fmt.Errorf("order must be name or failed, got %q", o)
	}
	if sq.failedFirst && sq.after != "" {
		// after is a source name: it pages only a list sorted by name.
		return sq, fmt.Errorf("after pages topics by name; with order=failed use offset")
	}
	return sq, nil
}

// stateRank orders states for ?order=failed: what needs a look first.
var stateRank = map[connector.State]int{connector.StateFailed: 0, connector.StatePending: 1, connector.StateMirroring: 2}

// positiveInt parses a query parameter that must be a positive integer.
func positiveInt(name, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s must be a positive integer, got %q", name, v)
	}
	return n, nil
}

// apply keeps the mirrors and topics asked for. Each kept mirror's topics
// are sorted (by source name, or failed first); TopicsTotal counts those
// that match before the page is cut, StateCounts those matching the name
// in each state, and NextAfter, set when a page sorted by name is cut, is
// where the next one starts.
func (sq statusQuery) apply(sts []connector.Status) []connector.Status {
	out := make([]connector.Status, 0, len(sts))
	for _, st := range sts {
		if sq.mirror != "" && st.Name != sq.mirror {
			continue
		}
		// Pointers are sorted, and only the page is copied: a
		// TopicStatus is a few hundred bytes, and a worker has
		// thousands.
		topics := make([]*connector.TopicStatus, 0, len(st.Topics))
		st.StateCounts = make(map[connector.State]int, len(topicStates))
		for i := range st.Topics {
			t := &st.Topics[i]
			if !sq.matchesName(t) {
				continue
			}
			st.StateCounts[t.State]++
			if sq.states == nil || sq.states[t.State] {
				topics = append(topics, t)
			}
		}
		topics = sq.sorted(topics)
		st.TopicsTotal = len(topics)
		if sq.after != "" {
			i, _ := slices.BinarySearchFunc(topics, sq.after, func(t *connector.TopicStatus, after string) int {
				if t.SourceTopic <= after {
					return -1
				}
				return 1
			})
			topics = topics[i:]
		}
		topics = topics[min(sq.offset, len(topics)):]
		if sq.limit > 0 && len(topics) > sq.limit {
			topics = topics[:sq.limit]
			if !sq.failedFirst {
				st.NextAfter = topics[len(topics)-1].SourceTopic
			}
		}
		st.Topics = make([]connector.TopicStatus, len(topics))
		for i, t := range topics {
			st.Topics[i] = *t
		}
		out = append(out, st)
	}
	return out
}

// sorted orders topics by source name, failed first with ?order=failed.
// A mirror's status lists its topics by name already: then the order is
// checked and the failed-first one made by one stable pass over the
// states, not a sort (a page of a worker with 10,000 topics is asked for
// every 3 s by each open status page).
func (sq statusQuery) sorted(topics []*connector.TopicStatus) []*connector.TopicStatus {
	byName := func(a, b *connector.TopicStatus) int { return strings.Compare(a.SourceTopic, b.SourceTopic) }
	if !slices.IsSortedFunc(topics, byName) {
		slices.SortFunc(topics, byName)
	}
	if !sq.failedFirst {
		return topics
	}
	out := make([]*connector.TopicStatus, 0, len(topics))
	for _, rank := range []connector.State{connector.StateFailed, connector.StatePending, connector.StateMirroring} {
		for _, t := range topics {
			if t.State == rank {
				out = append(out, t)
			}
		}
	}
	// Any other state (none today) last, by name.
	for _, t := range topics {
		if _, ok := stateRank[t.State]; !ok {
			out = append(out, t)
		}
	}
	return out
}

func (sq statusQuery) matchesName(t *connector.TopicStatus) bool {
	return sq.topic == "" || strings.Contains(t.SourceTopic, sq.topic) || strings.Contains(t.TargetTopic, sq.topic)
}
