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
type statusQuery struct {
	mirror, topic, after string
	states               map[connector.State]bool
	limit                int // 0: every topic
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
	return sq, nil
}

// positiveInt parses a query parameter that must be a positive integer.
func positiveInt(name, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s must be a positive integer, got %q", name, v)
	}
	return n, nil
}

// apply keeps the mirrors and topics asked for. Each kept mirror's topics
// are sorted by source name; TopicsTotal counts those that match before
// the page is cut, and NextAfter, set when the page is cut, is where the
// next one starts.
func (sq statusQuery) apply(sts []connector.Status) []connector.Status {
	out := make([]connector.Status, 0, len(sts))
	for _, st := range sts {
		if sq.mirror != "" && st.Name != sq.mirror {
			continue
		}
		topics := make([]connector.TopicStatus, 0, len(st.Topics))
		for _, t := range st.Topics {
			if sq.matches(t) {
				topics = append(topics, t)
			}
		}
		slices.SortFunc(topics, func(a, b connector.TopicStatus) int { return strings.Compare(a.SourceTopic, b.SourceTopic) })
		st.TopicsTotal = len(topics)
		if sq.after != "" {
			i, _ := slices.BinarySearchFunc(topics, sq.after, func(t connector.TopicStatus, after string) int {
				if t.SourceTopic <= after {
					return -1
				}
				return 1
			})
			topics = topics[i:]
		}
		if sq.limit > 0 && len(topics) > sq.limit {
			topics = topics[:sq.limit]
			st.NextAfter = topics[len(topics)-1].SourceTopic
		}
		st.Topics = topics
		out = append(out, st)
	}
	return out
}

func (sq statusQuery) matches(t connector.TopicStatus) bool {
	if sq.states != nil && !sq.states[t.State] {
		return false
	}
	return sq.topic == "" || strings.Contains(t.SourceTopic, sq.topic) || strings.Contains(t.TargetTopic, sq.topic)
}
