package connector

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicSpec is a target topic to create.
type topicSpec struct {
	name       string
	partitions int32
	configs    map[string]string
}

// excludedConfigs are never copied from a source topic: MirrorMaker 2's
// DefaultConfigPropertyFilter list. Throttles and ISR minimums describe the
// source cluster's hardware and policy, and the timestamp settings would
// make the target rewrite or reject the timestamps copied from the source.
var excludedConfigs = map[string]bool{
	"follower.replication.throttled.replicas": true,
	"leader.replication.throttled.replicas":   true,
	"message.timestamp.difference.max.ms":     true,
	"message.timestamp.type":                  true,
	"unclean.leader.election.enable":          true,
	"min.insync.replicas":                     true,
}

// sourceConfigs returns, per topic, the configs set on the source topic
// itself (not broker or default values) that the target copy should get.
// A topic whose configs cannot be read is created without them and named
// in the returned error; its creation is not held back.
func sourceConfigs(ctx context.Context, adm *kadm.Client, topics []string) (map[string]map[string]string, error) {
	out := make(map[string]map[string]string, len(topics))
	if len(topics) == 0 {
		return out, nil
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil && len(rcs) == 0 {
		return out, fmt.Errorf("describe source topic configs: %w", err)
	}
	var errs []error
	for _, rc := range rcs {
		if rc.Err != nil {
			errs = append(errs, fmt.Errorf("describe configs of source topic %s: %w", rc.Name, rc.Err))
			continue
		}
		m := make(map[string]string)
		for _, c := range rc.Configs {
			if c.Source != kmsg.ConfigSourceDynamicTopicConfig || c.Sensitive || c.Value == nil || excludedConfigs[c.Key] {
				continue
			}
			m[c.Key] = *c.Value
		}
		out[rc.Name] = m
	}
	return out, errors.Join(errs...)
}

// createTopics creates every spec in ONE CreateTopics request (KIP-4: the
// request is not transactional; each topic succeeds or fails on its own).
// It returns the error per topic; TOPIC_ALREADY_EXISTS counts as success.
// validateOnly asks the controller to check without creating.
func createTopics(ctx context.Context, cl *kgo.Client, specs []topicSpec, rf int16, validateOnly bool) (map[string]error, error) {
	results := make(map[string]error, len(specs))
	if len(specs) == 0 {
		return results, nil
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	req.ValidateOnly = validateOnly
	for _, s := range specs {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = s.name
		t.NumPartitions = s.partitions
		t.ReplicationFactor = rf
		keys := make([]string, 0, len(s.configs))
		for k := range s.configs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name = k
			c.Value = kmsg.StringPtr(s.configs[k])
			t.Configs = append(t.Configs, c)
		}
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("create %d topics on the target: %w", len(specs), err)
	}
	for _, t := range resp.Topics {
		err := kerr.ErrorForCode(t.ErrorCode)
		if errors.Is(err, kerr.TopicAlreadyExists) {
			err = nil
		}
		if err != nil && t.ErrorMessage != nil && *t.ErrorMessage != "" {
			err = fmt.Errorf("%w: %s", err, *t.ErrorMessage)
		}
		results[t.Topic] = err
	}
	for _, s := range specs {
		if _, ok := results[s.name]; !ok {
			results[s.name] = fmt.Errorf("the target did not answer for topic %s", s.name)
		}
	}
	return results, nil
}

// growPartitions raises target partition counts in one CreatePartitions
// request and returns the error per topic.
func growPartitions(ctx context.Context, cl *kgo.Client, counts map[string]int32, validateOnly bool) (map[string]error, error) {
	results := make(map[string]error, len(counts))
	if len(counts) == 0 {
		return results, nil
	}
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 30_000
	req.ValidateOnly = validateOnly
	for topic, n := range counts {
		t := kmsg.NewCreatePartitionsRequestTopic()
		t.Topic = topic
		t.Count = n
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("grow partitions of %d topics on the target: %w", len(counts), err)
	}
	for _, t := range resp.Topics {
		err := kerr.ErrorForCode(t.ErrorCode)
		if err != nil && t.ErrorMessage != nil && *t.ErrorMessage != "" {
			err = fmt.Errorf("%w: %s", err, *t.ErrorMessage)
		}
		results[t.Topic] = err
	}
	for topic := range counts {
		if _, ok := results[topic]; !ok {
			results[topic] = fmt.Errorf("the target did not answer for topic %s", topic)
		}
	}
	return results, nil
}

func isTopicExists(err error) bool { return errors.Is(err, kerr.TopicAlreadyExists) }
