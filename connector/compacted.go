package connector

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kmirror keeps its state (progress, topic metadata) in compacted topics on
// the target cluster: compaction keeps the latest record per key, and a
// plain consumer can read them. This file holds what every such topic
// shares.

// ensureCompactedTopic creates a one-partition compacted topic if it is
// missing. One partition: these topics are small and read whole at start.
func ensureCompactedTopic(ctx context.Context, adm *kadm.Client, topic string, rf int16) error {
	return ensureTopic(ctx, adm, topic, rf, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
}

// ensureTopic creates a one-partition topic of kmirror's own with configs
// if it is missing.
func ensureTopic(ctx context.Context, adm *kadm.Client, topic string, rf int16, configs map[string]*string) error {
	resp, err := adm.CreateTopic(ctx, 1, rf, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !isTopicExists(err) {
		return fmt.Errorf("create internal topic %s: %w", topic, err)
	}
	return nil
}

// readCompacted reads topic from its start to the end offsets it has when
// the call starts, calling fn for every record in order (value nil for a
// tombstone). It stops at the first error fn returns, and is bounded by ctx.
func readCompacted(ctx context.Context, opts []kgo.Opt, adm *kadm.Client, topic string, fn func(key, value []byte) error) error {
	// Committed records only (cluster mode writes progress in
	// transactions): read up to the last stable offset.
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	want := make(map[int32]int64)
	start := make(map[int32]kgo.Offset)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			start[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		// Slots write progress and index in transactions: records of
		// an aborted (or still open) one do not count. Markers are
		// returned so that a log ending in one is read to its end.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for len(want) > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("read %s: %w (%d partitions not read to the end)", topic, ctx.Err(), len(want))
		}
		var firstErr error
		fetches.EachError(func(_ string, p int32, err error) {
			if firstErr == nil {
				firstErr = fmt.Errorf("read %s partition %d: %w", topic, p, err)
			}
		})
		if firstErr != nil {
			return firstErr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			if firstErr == nil {
				if err := fn(r.Key, r.Value); err != nil {
					firstErr = fmt.Errorf("%s offset %d: %w", topic, r.Offset, err)
				}
			}
		})
		if firstErr != nil {
			return firstErr
		}
	}
	return nil
}
