package workload

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// EndOffsets returns the end offset of every partition of the topics that
// exist (topics not created yet are left out: kadm would retry an unknown
// topic's metadata for seconds, blurring a timing). It asks for 2,000
// topics at a time, so that tens of thousands of partitions stay within a
// request's limits; each round is bounded by 10 s.
func EndOffsets(ctx context.Context, adm *kadm.Client, topics ...string) (map[string]map[int32]int64, error) {
	return listOffsets(ctx, adm, (*kadm.Client).ListEndOffsets, topics)
}

// StableOffsets is EndOffsets for the last stable offsets (read_committed):
// what a topic written in transactions has committed, markers included.
func StableOffsets(ctx context.Context, adm *kadm.Client, topics ...string) (map[string]map[int32]int64, error) {
	return listOffsets(ctx, adm, (*kadm.Client).ListCommittedOffsets, topics)
}

type offsetLister func(*kadm.Client, context.Context, ...string) (kadm.ListedOffsets, error)

func listOffsets(ctx context.Context, adm *kadm.Client, list offsetLister, topics []string) (map[string]map[int32]int64, error) {
	out := map[string]map[int32]int64{}
	for chunk := range slices.Chunk(topics, 2000) {
		if err := endOffsets(ctx, adm, list, chunk, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func endOffsets(ctx context.Context, adm *kadm.Client, list offsetLister, topics []string, out map[string]map[int32]int64) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return err
	}
	var exist []string
	for _, t := range md.Topics.Sorted() {
		if t.Err == nil && len(t.Partitions) > 0 {
			exist = append(exist, t.Topic)
		}
	}
	if len(exist) == 0 {
		return nil
	}
	ends, err := list(adm, ctx, exist...)
	if err != nil && len(ends) == 0 {
		return err
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			return
		}
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.Offset
	})
	return nil
}
