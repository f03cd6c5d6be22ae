package connector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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

// createTopics creates every spec in as few CreateTopics requests as the
// controller takes (maxRecordsPerRequest; KIP-4: a request is not
// transactional, each topic succeeds or fails on its own).
// It returns the error per topic, TOPIC_ALREADY_EXISTS included: a topic
// the caller thought missing exists, which only a fresh listing explains.
// validateOnly asks the controller to check without creating.
func createTopics(ctx context.Context, cl *kgo.Client, specs []topicSpec, rf int16, validateOnly bool) (map[string]error, error) {
	results := make(map[string]error, len(specs))
	if len(specs) == 0 {
		return results, nil
	}
	for _, chunk := range chunkByCost(specs, func(s topicSpec) int { return 1 + int(s.partitions) + len(s.configs) }, maxRecordsPerRequest) {
		rs, err := createTopicsOnce(ctx, cl, chunk, rf, validateOnly)
		for _, s := range chunk {
			if err != nil {
				rs[s.name] = err // this request failed: its topics are retried on the next pass
			}
			results[s.name] = rs[s.name]
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return results, nil
}

// maxRecordsPerRequest bounds what one CreateTopics or CreatePartitions
// request asks of a KRaft controller. It applies a request as one batch of
// metadata records (a topic, each of its partitions, each config) and
// refuses a batch over 10,000 records with POLICY_VIOLATION "Unable to
// perform excessively large batch operation": 2,000 topics of 5 partitions
// in one request never get created. Half that leaves room for what the
// controller adds. A var for tests.
var maxRecordsPerRequest = 5000

// chunkByCost splits items, in order, into runs whose costs add up to at
// most limit; an item that costs more than limit alone is a run of its own
// (the broker answers for it).
func chunkByCost[T any](items []T, cost func(T) int, limit int) [][]T {
	var out [][]T
	start, sum := 0, 0
	for i, it := range items {
		c := cost(it)
		if i > start && sum+c > limit {
			out = append(out, items[start:i])
			start, sum = i, 0
		}
		sum += c
	}
	if start < len(items) {
		out = append(out, items[start:])
	}
	return out
}

// createTopicsOnce creates specs in one CreateTopics request; the error is
// the request's (per-topic errors are in the map).
func createTopicsOnce(ctx context.Context, cl *kgo.Client, specs []topicSpec, rf int16, validateOnly bool) (map[string]error, error) {
	results := make(map[string]error, len(specs))
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
		return results, fmt.Errorf("create %d topics on the target: %w", len(specs), err)
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

// growPartitions raises target partition counts in as few CreatePartitions
// requests as the controller takes and returns the error per topic.
func growPartitions(ctx context.Context, cl *kgo.Client, counts map[string]int32, validateOnly bool) (map[string]error, error) {
	results := make(map[string]error, len(counts))
	if len(counts) == 0 {
		return results, nil
	}
	topics := slices.Sorted(maps.Keys(counts))
	// The new total counts as the cost: an upper bound of the partitions
	// a request adds.
	for _, chunk := range chunkByCost(topics, func(t string) int { return int(counts[t]) }, maxRecordsPerRequest) {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 30_000
		req.ValidateOnly = validateOnly
		for _, topic := range chunk {
			t := kmsg.NewCreatePartitionsRequestTopic()
			t.Topic = topic
			t.Count = counts[topic]
			req.Topics = append(req.Topics, t)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			for _, topic := range chunk {
				results[topic] = fmt.Errorf("grow partitions of %d topics on the target: %w", len(chunk), err)
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		for _, t := range resp.Topics {
			results[t.Topic] = brokerErr(t.ErrorCode, t.ErrorMessage)
		}
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
