package connector

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicSpec is a target topic to create.
type topicSpec struct {
	source     string // the source topic's name
	name       string // the target topic's name
	partitions int32
	configs    map[string]string
}

// createTopics creates every spec in ONE CreateTopics request (KIP-4: the
// request is not transactional; each topic succeeds or fails on its own).
// It returns the error per topic, TOPIC_ALREADY_EXISTS included: a topic
// the caller thought missing exists, which only a fresh listing explains.
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
		results[t.Topic] = brokerErr(t.ErrorCode, t.ErrorMessage)
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
		results[t.Topic] = brokerErr(t.ErrorCode, t.ErrorMessage)
	}
	for topic := range counts {
		if _, ok := results[topic]; !ok {
			results[topic] = fmt.Errorf("the target did not answer for topic %s", topic)
		}
	}
	return results, nil
}

// brokerErr turns a per-resource error code and message from a broker's
// response into an error (nil for success) that keeps kerr's sentinel for
// errors.Is and adds the broker's explanation.
func brokerErr(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err != nil && msg != nil && *msg != "" {
		err = fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

func isTopicExists(err error) bool { return errors.Is(err, kerr.TopicAlreadyExists) }
