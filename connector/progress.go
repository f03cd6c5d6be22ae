package connector

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Progress records live in a compacted topic on the target cluster (the
// source is only ever read). One record per source partition:
//
//	key:   {"topic":"orders","partition":0}
//	value: {"next_offset":1234,"topic_id":"base64 source topic ID"}
//
// next_offset is the first source offset not yet on the target; a restart
// resumes reading there. topic_id (absent when the source broker has no
// topic IDs) ties the position to one incarnation of the source topic: a
// topic deleted and recreated under the same name gets a new ID, and a
// position from the old one must not skip the new one's first records. Compaction keeps the latest record per key. A key
// with a null value (tombstone) means "no progress" and is ignored.
type progressKey struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

type progressValue struct {
	NextOffset int64  `json:"next_offset"`
	TopicID    string `json:"topic_id,omitempty"`
}

// position is a stored progress value.
type position struct {
	next    int64
	topicID string
}

func encodeProgress(tp topicPartition, pos position) (key, value []byte) {
	// Marshalling these two small structs cannot fail.
	key, _ = json.Marshal(progressKey{Topic: tp.topic, Partition: tp.partition})
	value, _ = json.Marshal(progressValue{NextOffset: pos.next, TopicID: pos.topicID})
	return key, value
}

func decodeProgress(key, value []byte) (topicPartition, position, error) {
	var k progressKey
	if err := json.Unmarshal(key, &k); err != nil {
		return topicPartition{}, position{}, fmt.Errorf("progress key %q: %w", key, err)
	}
	var v progressValue
	if err := json.Unmarshal(value, &v); err != nil {
		return topicPartition{}, position{}, fmt.Errorf("progress value %q for %s/%d: %w", value, k.Topic, k.Partition, err)
	}
	return topicPartition{k.Topic, k.Partition}, position{next: v.NextOffset, topicID: v.TopicID}, nil
}

// progressTopicConfigs make the progress topic keep the latest record per
// partition forever.
var progressTopicConfigs = map[string]*string{
	"cleanup.policy": kadm.StringPtr("compact"),
}

// ensureProgressTopic creates the progress topic on the target if it is
// missing (one partition: it is small and read once at start).
func ensureProgressTopic(ctx context.Context, adm *kadm.Client, topic string, rf int16) error {
	resp, err := adm.CreateTopic(ctx, 1, rf, progressTopicConfigs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !isTopicExists(err) {
		return fmt.Errorf("create progress topic %s on the target: %w", topic, err)
	}
	return nil
}

// loadProgress reads the progress topic to its end and returns the next
// source offset per partition. It is bounded by ctx.
func loadProgress(ctx context.Context, targetOpts []kgo.Opt, adm *kadm.Client, topic string) (map[topicPartition]position, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	out := make(map[topicPartition]position)
	want := make(map[int32]int64)
	start := make(map[int32]kgo.Offset)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			start[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return out, nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), targetOpts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		// Progress is written non-transactionally; read everything.
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
	)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for len(want) > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read progress topic %s: %w (%d partitions not read to the end)", topic, ctx.Err(), len(want))
		}
		var firstErr error
		fetches.EachError(func(_ string, p int32, err error) {
			if firstErr == nil {
				firstErr = fmt.Errorf("read progress topic %s partition %d: %w", topic, p, err)
			}
		})
		if firstErr != nil {
			return nil, firstErr
		}
		var decodeErr error
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
			if r.Value == nil || decodeErr != nil {
				return
			}
			tp, pos, err := decodeProgress(r.Key, r.Value)
			if err != nil {
				decodeErr = err
				return
			}
			out[tp] = pos
		})
		if decodeErr != nil {
			// A record we cannot read would make us restart that
			// partition from the beginning (duplicates) or worse;
			// stop and say which.
			return nil, decodeErr
		}
	}
	return out, nil
}

// progressWriter persists acked positions that moved since the last write.
type progressWriter struct {
	topic string
	dst   *kgo.Client
	c     *copier
}

// writeAsync produces one progress record for every partition whose acked
// position moved. Promises mark what was persisted.
func (w *progressWriter) writeAsync(ctx context.Context) {
	for _, ps := range w.c.snapshot() {
		ps.mu.Lock()
		acked, persisted := ps.acked, ps.persisted
		ps.mu.Unlock()
		if acked < 0 || acked == persisted {
			continue
		}
		k, v := encodeProgress(ps.tp, position{next: acked, topicID: ps.topicID})
		w.dst.Produce(ctx, &kgo.Record{Topic: w.topic, Key: k, Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				return // written again on the next tick
			}
			ps.mu.Lock()
			if acked > ps.persisted {
				ps.persisted = acked
			}
			ps.mu.Unlock()
		})
	}
}

// writeSync writes every moved position and waits for the target to
// acknowledge them; used on shutdown.
func (w *progressWriter) writeSync(ctx context.Context) error {
	w.writeAsync(ctx)
	if err := w.dst.Flush(ctx); err != nil {
		return fmt.Errorf("flush progress to %s: %w", w.topic, err)
	}
	return nil
}

// progressTick is how often the writer checks, bounded below so a tiny
// configured interval cannot spin.
func progressTick(d time.Duration) time.Duration { return max(d, 10*time.Millisecond) }
