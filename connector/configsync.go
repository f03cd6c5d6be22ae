package connector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/filters"
)

// describeConfigs reads topics' configs on one cluster in one request. A
// topic whose configs cannot be read gets an entry in the error map.
// describeConfigsPerRequest bounds the topics of one DescribeConfigs
// request: a broker answers every config of every topic (some forty each,
// with their sources), and 10,000 topics in one answer are megabytes
// built while the request's timeout runs. A var for tests.
var describeConfigsPerRequest = 500

func describeConfigs(ctx context.Context, adm *kadm.Client, topics []string) (map[string][]filters.ConfigProperty, map[string]error) {
	out := make(map[string][]filters.ConfigProperty, len(topics))
	errs := make(map[string]error)
	if len(topics) == 0 {
		return out, errs
	}
	var rcs kadm.ResourceConfigs
	for chunk := range slices.Chunk(topics, describeConfigsPerRequest) {
		got, err := adm.DescribeTopicConfigs(ctx, chunk...)
		if err != nil && len(got) == 0 {
			for _, t := range chunk {
				errs[t] = fmt.Errorf("describe configs: %w", err)
			}
			continue
		}
		rcs = append(rcs, got...)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			errs[rc.Name] = fmt.Errorf("describe configs: %w", rc.Err)
			continue
		}
		props := make([]filters.ConfigProperty, 0, len(rc.Configs))
		for _, c := range rc.Configs {
			p := filters.ConfigProperty{
				Name:      c.Key,
				Sensitive: c.Sensitive,
				// Only a value set on the topic itself is the topic's
				// own; anything else (broker, static, Kafka default)
				// belongs to the cluster it was read from.
				Default: c.Source != kmsg.ConfigSourceDynamicTopicConfig,
			}
			if c.Value != nil {
				p.Value = *c.Value
			}
			props = append(props, p)
		}
		out[rc.Name] = props
	}
	return out, errs
}

// desiredConfigs returns the configs the target copy of a source topic
// should have set: the source topic's own (non-default, non-sensitive)
// configs that pass every config filter.
func (m *Mirror) desiredConfigs(ctx context.Context, topic string, props []filters.ConfigProperty) (map[string]string, error) {
	cands := make([]filters.ConfigProperty, 0, len(props))
	for _, p := range props {
		if !p.Default && !p.Sensitive {
			cands = append(cands, p)
		}
	}
	for i, f := range m.selection().ConfigFilters {
		names, err := f.FilterConfigs(ctx, filters.ConfigRequest{Mirror: m.cfg.Name, Topic: topic, Configs: cands})
		if err != nil {
			return nil, fmt.Errorf("config filter %d: %w", i, err)
		}
		keep := make(map[string]bool, len(names))
		for _, n := range names {
			keep[n] = true
		}
		cands = slices.DeleteFunc(cands, func(p filters.ConfigProperty) bool { return !keep[p.Name] })
	}
	out := make(map[string]string, len(cands))
	for _, p := range cands {
		out[p.Name] = p.Value
	}
	return out, nil
}

// configDiff returns the incremental changes that bring a target topic to
// the desired configs: SET every desired key whose target value differs
// or is not set on the topic; DELETE every key kmirror set before
// (previouslySynced) that the source no longer sets, so the target falls
// back to its own default. Keys set only on the target are never touched.
func configDiff(desired map[string]string, target []filters.ConfigProperty, previouslySynced []string) (set map[string]string, del []string) {
	have := make(map[string]filters.ConfigProperty, len(target))
	for _, p := range target {
		have[p.Name] = p
	}
	set = make(map[string]string)
	for k, v := range desired {
		if p, ok := have[k]; !ok || p.Default || p.Value != v {
			set[k] = v
		}
	}
	for _, k := range previouslySynced {
		if _, still := desired[k]; still {
			continue
		}
		if p, ok := have[k]; ok && !p.Default {
			del = append(del, k)
		}
	}
	slices.Sort(del)
	return set, del
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

// configChange is one topic's pending incremental alter.
type configChange struct {
	source, target string
	set            map[string]string
	del            []string
	desired        []string // the keys kmirror manages after the change
}

// syncConfigs brings the configs of every mirroring topic's target copy in
// line with its source topic: DescribeConfigs on each cluster and
// IncrementalAlterConfigs for the changes, in requests of bounded size.
func (m *Mirror) syncConfigs(ctx context.Context, c *clients) error {
	changes, err := m.configChanges(ctx, c)
	if err != nil {
		return err
	}
	if m.dryRun() {
		for _, ch := range changes {
			if len(ch.set) > 0 || len(ch.del) > 0 {
				m.plan.addConfigChange(ch)
			}
		}
		return nil
	}
	results, reqErr := alterConfigs(ctx, c.dst, changes)
	now := time.Now()
	var errs []error
	if reqErr != nil {
		errs = append(errs, m.dstErr(reqErr))
	}
	m.mu.Lock()
	for _, ch := range changes {
		ts := m.topics[ch.source]
		if ts == nil {
			continue
		}
		err, done := results[ch.target]
		if !done && (len(ch.set) > 0 || len(ch.del) > 0) {
			continue // not sent: the request before it failed
		}
		if err != nil {
			m.metrics.incConfigSyncErrors()
			errs = append(errs, fmt.Errorf("alter configs of %s: %w", ch.target, err))
			continue
		}
		ts.syncedConfigs = ch.desired
		if len(ch.set) > 0 || len(ch.del) > 0 {
			ts.configSyncedAt = now
			m.metrics.addConfigChanges(len(ch.set) + len(ch.del))
			m.log.Info("synced topic configs", "topic", ch.source, "target_topic", ch.target, "set", ch.set, "deleted", ch.del)
		}
	}
	m.mu.Unlock()
	m.writeMetadata(c.dst, nil)
	return errors.Join(errs...)
}

// configChanges computes, for every mirroring topic, what the target copy
// needs (possibly nothing).
func (m *Mirror) configChanges(ctx context.Context, c *clients) ([]configChange, error) {
	type pair struct {
		source, target string
		synced         []string
	}
	var pairs []pair
	m.mu.Lock()
	for _, ts := range m.topics {
		// A dry run has assigned nothing; it plans for every topic
		// the target already has.
		if ts.currentState() == StateMirroring || (m.dryRun() && ts.fatal == nil && ts.exists) {
			pairs = append(pairs, pair{ts.source, ts.target, ts.syncedConfigs})
		}
	}
	m.mu.Unlock()
	if len(pairs) == 0 {
		return nil, nil
	}
	sources := make([]string, 0, len(pairs))
	targets := make([]string, 0, len(pairs))
	for _, p := range pairs {
		sources = append(sources, p.source)
		targets = append(targets, p.target)
	}
	srcProps, srcErrs := describeConfigs(ctx, c.srcAdm, sources)
	dstProps, dstErrs := describeConfigs(ctx, c.dstAdm, targets)
	var changes []configChange
	var errs []error
	for _, p := range pairs {
		if err := errors.Join(m.srcErr(srcErrs[p.source]), m.dstErr(dstErrs[p.target])); err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", p.source, err))
			continue
		}
		desired, err := m.desiredConfigs(ctx, p.source, srcProps[p.source])
		if err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", p.source, err))
			continue
		}
		set, del := configDiff(desired, dstProps[p.target], p.synced)
		changes = append(changes, configChange{source: p.source, target: p.target, set: set, del: del, desired: sortedKeys(desired)})
	}
	if len(errs) > 0 {
		m.metrics.incConfigSyncErrors()
	}
	return changes, errors.Join(errs...)
}

// alterConfigs applies the changes in IncrementalAlterConfigs requests
// of at most maxRecordsPerRequest configs each (a KRaft controller applies
// one request as one batch of metadata records and refuses an excessively
// large one, as for CreateTopics), and returns the error per target topic.
// When a request fails, it returns that error with the results of the
// requests before it.
func alterConfigs(ctx context.Context, cl *kgo.Client, changes []configChange) (map[string]error, error) {
	var pending []configChange
	for _, ch := range changes {
		if len(ch.set) > 0 || len(ch.del) > 0 {
			pending = append(pending, ch)
		}
	}
	results := make(map[string]error, len(pending))
	for _, chunk := range chunkByCost(pending, func(ch configChange) int { return len(ch.set) + len(ch.del) }, maxRecordsPerRequest) {
		if err := alterConfigsOnce(ctx, cl, chunk, results); err != nil {
			return results, err // what earlier requests applied, and why the rest was not
		}
	}
	return results, nil
}

// alterConfigsOnce applies changes in one request, adding each target
// topic's error to results.
func alterConfigsOnce(ctx context.Context, cl *kgo.Client, changes []configChange, results map[string]error) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, ch := range changes {
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceTypeTopic
		r.ResourceName = ch.target
		for _, k := range sortedKeys(ch.set) {
			cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			cfg.Name, cfg.Op, cfg.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(ch.set[k])
			r.Configs = append(r.Configs, cfg)
		}
		for _, k := range ch.del {
			cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			cfg.Name, cfg.Op = k, kmsg.IncrementalAlterConfigOpDelete
			r.Configs = append(r.Configs, cfg)
		}
		req.Resources = append(req.Resources, r)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("alter target topic configs: %w", err)
	}
	for _, r := range resp.Resources {
		results[r.ResourceName] = brokerErr(r.ErrorCode, r.ErrorMessage)
	}
	return nil
}
