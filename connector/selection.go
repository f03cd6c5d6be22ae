package connector

import (
	"context"
	"fmt"
	"slices"

	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/filters"
)

// selectTopics runs the filters in order over the candidates, then the final
// rules that no filter can override: never an internal topic (Kafka's,
// other tools', kmirror's own) and never a cycle (a topic the policy says
// came from the target cluster). A filter that returns a name it was not
// given cannot add it: only candidates are ever selected.
//
// Configs are filled in (by fillConfigs, one request for the remaining
// candidates) just before the first filter that reads them. A candidate
// whose configs fillConfigs could not read is not judged by any later
// filter: it is returned in unknown (after the final rules), and the caller
// decides what it keeps.
func selectTopics(ctx context.Context, mirror string, fs []filters.TopicFilter, pol policy.ReplicationPolicy, targetAlias string, candidates []filters.Topic, fillConfigs func(context.Context, []filters.Topic) map[string]error) (selected []filters.Topic, unknown []unknownTopic, err error) {
	selected = candidates
	filled := false
	for i, f := range fs {
		if cr, ok := f.(filters.ConfigReader); ok && cr.ReadsConfigs() && !filled && fillConfigs != nil && len(selected) > 0 {
			failed := fillConfigs(ctx, selected)
			if len(failed) > 0 {
				known := make([]filters.Topic, 0, len(selected))
				for _, t := range selected {
					if err := failed[t.Name]; err != nil {
						unknown = append(unknown, unknownTopic{topic: t, err: err})
					} else {
						known = append(known, t)
					}
				}
				selected = known
			}
			filled = true
		}
		names, err := f.FilterTopics(ctx, filters.TopicRequest{Mirror: mirror, Topics: selected})
		if err != nil {
			return nil, nil, fmt.Errorf("topic filter %d: %w", i, err)
		}
		// Keep the candidates named, in candidate order; a name that
		// is not a candidate cannot add a topic.
		keep := make(map[string]bool, len(names))
		for _, n := range names {
			keep[n] = true
		}
		next := make([]filters.Topic, 0, len(names))
		for _, t := range selected {
			if keep[t.Name] {
				next = append(next, t)
			}
		}
		selected = next
	}
	allowed := func(t filters.Topic) bool {
		return !policy.IsInternalTopic(t.Name) && !policy.IsCycle(pol, targetAlias, t.Name)
	}
	final := make([]filters.Topic, 0, len(selected))
	for _, t := range selected {
		if allowed(t) {
			final = append(final, t)
		}
	}
	unknown = slices.DeleteFunc(unknown, func(u unknownTopic) bool { return !allowed(u.topic) })
	return final, unknown, nil
}

// unknownTopic is a candidate the filters could not judge.
type unknownTopic struct {
	topic filters.Topic
	err   error
}
