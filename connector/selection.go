package connector

import (
	"context"
	"fmt"

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
// candidates) just before the first filter that reads them.
func selectTopics(ctx context.Context, mirror string, fs []filters.TopicFilter, pol policy.ReplicationPolicy, targetAlias string, candidates []filters.Topic, fillConfigs func(context.Context, []filters.Topic) error) ([]filters.Topic, error) {
	selected := candidates
	filled := false
	for i, f := range fs {
		if cr, ok := f.(filters.ConfigReader); ok && cr.ReadsConfigs() && !filled && fillConfigs != nil && len(selected) > 0 {
			if err := fillConfigs(ctx, selected); err != nil {
				return nil, fmt.Errorf("topic filter %d needs configs: %w", i, err)
			}
			filled = true
		}
		names, err := f.FilterTopics(ctx, filters.TopicRequest{Mirror: mirror, Topics: selected})
		if err != nil {
			return nil, fmt.Errorf("topic filter %d: %w", i, err)
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
	final := make([]filters.Topic, 0, len(selected))
	for _, t := range selected {
		if policy.IsInternalTopic(t.Name) || policy.IsCycle(pol, targetAlias, t.Name) {
			continue
		}
		final = append(final, t)
	}
	return final, nil
}
