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

// loadProgress reads the progress topic to its end and returns the next
// source offset per partition. It is bounded by ctx. A record it cannot
// read stops the load and names the record: guessing would restart that
// partition from the beginning (duplicates) or skip records.
func loadProgress(ctx context.Context, targetOpts []kgo.Opt, adm *kadm.Client, topic string) (map[topicPartition]position, error) {
	out := make(map[topicPartition]position)
	err := readCompacted(ctx, targetOpts, adm, topic, func(key, value []byte) error {
		if value == nil {
			return nil // a tombstone: no progress
		}
		tp, pos, err := decodeProgress(key, value)
		if err != nil {
			return err
		}
		out[tp] = pos
		return nil
	})
	return out, err
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
