// Package filters decides which topics and groups a mirror copies. It is the
// contract filter plugins implement, so it depends on the standard library
// only: plugin authors import it without pulling in franz-go or Prometheus.
//
// A filter is a set operation over a batch of candidates (after Pulsar's
// PIP-452): it sees every candidate with its properties at once, once per
// discovery pass, and returns the subset to keep. That lets an
// implementation push the selection down to its own index (a catalog, a
// database) instead of being asked about one name at a time.
//
// Whatever a filter returns, the worker still applies its final rules
// afterwards (no internal topics, no cycles); a filter cannot override them.
package filters

import (
	"context"
	"regexp"
)

// Topic is a candidate topic on the source cluster.
type Topic struct {
	// Name is the topic's name on the source cluster.
	Name string
	// Partitions is the source partition count.
	Partitions int32
	// Configs holds the topic's configs set on the topic itself (not
	// broker defaults), when known.
	Configs map[string]string
	// Labels holds the topic's kmirror metadata, when known.
	Labels map[string]string
}

// TopicRequest is one batch of candidate topics, asked once per pass.
type TopicRequest struct {
	// Mirror is the name of the mirror asking.
	Mirror string
	// Properties are the mirror's context for this filter, from the
	// config (mirrors[].filters[].properties). A filter can use them to
	// push the selection down to its own index.
	Properties map[string]string
	// Topics are the candidates.
	Topics []Topic
}

// TopicFilter selects the topics to mirror.
//
// An error means "no answer", never "nothing": the caller aborts the pass and
// keeps its last good selection, so a failing filter can never look like
// every topic was deleted.
type TopicFilter interface {
	// FilterTopics returns the names of the candidates to mirror. Names
	// that are not candidates are ignored; order does not matter.
	FilterTopics(ctx context.Context, req TopicRequest) ([]string, error)
}

// ConfigReader is implemented by topic filters that read Topic.Configs.
// Reading every candidate's configs costs a DescribeConfigs request per
// pass, so the caller fills Configs in (with each topic's effective
// values) only before the first filter that says it reads them. A filter
// that does not implement ConfigReader gets topics without configs.
type ConfigReader interface {
	ReadsConfigs() bool
}

// Group is a candidate consumer group on the source cluster.
type Group struct {
	// Name is the group ID.
	Name string
	// Topics are the source topics the group has committed offsets on.
	Topics []string
}

// GroupRequest is one batch of candidate groups, asked once per pass.
type GroupRequest struct {
	// Mirror is the name of the mirror asking.
	Mirror string
	// Properties are the mirror's context for this filter, from the config.
	Properties map[string]string
	// Groups are the candidates.
	Groups []Group
}

// GroupFilter selects the consumer groups whose offsets are translated.
// Errors mean "no answer", as for TopicFilter.
type GroupFilter interface {
	// FilterGroups returns the names of the candidates to translate.
	FilterGroups(ctx context.Context, req GroupRequest) ([]string, error)
}

// Regex is the built-in include/exclude filter: a name is kept when it
// matches at least one include pattern and no exclude pattern (exclude wins).
// Patterns match whole names; compile them anchored (^(?:p)$).
type Regex struct {
	Include []*regexp.Regexp
	Exclude []*regexp.Regexp
}

var (
	_ TopicFilter = Regex{}
	_ GroupFilter = Regex{}
)

// Match reports whether name passes the filter.
func (r Regex) Match(name string) bool {
	for _, re := range r.Exclude {
		if re.MatchString(name) {
			return false
		}
	}
	for _, re := range r.Include {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// FilterTopics implements TopicFilter.
func (r Regex) FilterTopics(_ context.Context, req TopicRequest) ([]string, error) {
	out := make([]string, 0, len(req.Topics))
	for _, t := range req.Topics {
		if r.Match(t.Name) {
			out = append(out, t.Name)
		}
	}
	return out, nil
}

// FilterGroups implements GroupFilter.
func (r Regex) FilterGroups(_ context.Context, req GroupRequest) ([]string, error) {
	out := make([]string, 0, len(req.Groups))
	for _, g := range req.Groups {
		if r.Match(g.Name) {
			out = append(out, g.Name)
		}
	}
	return out, nil
}

// MustCompileAll compiles patterns anchored to whole names. It panics on a bad
// pattern and is meant for patterns already validated (by the config package)
// or literals in tests.
func MustCompileAll(patterns ...string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, 0, len(patterns))
	for _, p := range patterns {
		out = append(out, regexp.MustCompile(`^(?:`+p+`)$`))
	}
	return out
}

// ConfigProperty is one config of a source topic.
type ConfigProperty struct {
	// Name is the config key, e.g. "retention.ms".
	Name string
	// Value is the config's value on the source topic.
	Value string
	// Default is true when the source leaves the key at its default
	// (broker or Kafka default); such values are never copied, so the
	// target keeps its own default.
	Default bool
	// Sensitive configs have no readable value and are never copied.
	Sensitive bool
}

// ConfigRequest is the set of configs of one source topic, asked when the
// topic is created on the target and on every config sync.
type ConfigRequest struct {
	Mirror string
	// Topic is the source topic's name.
	Topic string
	// Properties are the mirror's context for this filter, from the config.
	Properties map[string]string
	// Configs are the candidates.
	Configs []ConfigProperty
}

// ConfigPropertyFilter selects the topic configs copied to the target
// (MirrorMaker 2's ConfigPropertyFilter). An error aborts that topic's sync
// for this pass; nothing is changed on the target.
type ConfigPropertyFilter interface {
	// FilterConfigs returns the names of the configs to copy.
	FilterConfigs(ctx context.Context, req ConfigRequest) ([]string, error)
}

var _ ConfigPropertyFilter = Regex{}

// FilterConfigs implements ConfigPropertyFilter over config names.
func (r Regex) FilterConfigs(_ context.Context, req ConfigRequest) ([]string, error) {
	out := make([]string, 0, len(req.Configs))
	for _, c := range req.Configs {
		if r.Match(c.Name) {
			out = append(out, c.Name)
		}
	}
	return out, nil
}
