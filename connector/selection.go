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
func selectTopics(ctx context.Context, fs []filters.TopicFilter, pol policy.ReplicationPolicy, targetAlias string, candidates []filters.Topic) ([]filters.Topic, error) {
	selected := candidates
	for i, f := range fs {
		out, err := f.FilterTopics(ctx, selected)
		if err != nil {
			return nil, fmt.Errorf("topic filter %d: %w", i, err)
		}
		selected = out
	}
	known := make(map[string]bool, len(candidates))
	for _, c := range candidates {
		known[c.Name] = true
	}
	final := make([]filters.Topic, 0, len(selected))
	seen := make(map[string]bool, len(selected))
	for _, t := range selected {
		if !known[t.Name] || seen[t.Name] || policy.IsInternalTopic(t.Name) || policy.IsCycle(pol, targetAlias, t.Name) {
			continue
		}
		seen[t.Name] = true
		final = append(final, t)
	}
	return final, nil
}
