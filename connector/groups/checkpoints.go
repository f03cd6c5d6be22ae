package groups

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/offsets"
	"github.com/kmirror/kmirror/connector/state"
)

// The checkpoints are what kmirror read of each group at the source, kept
// on the target: with the source gone they are the only record of where
// its consumers were. A failover translates them through the offset index
// as a sync translates the live offsets.

// Checkpoint is one stored checkpoint: a group's committed source offset
// on one source partition, as the group sync last read it.
type Checkpoint struct {
	SourceTopic  string
	Partition    int32
	SourceOffset int64
	// At is when the group sync wrote it: the last time the group's
	// offset there changed (an idle group's checkpoint is old and still
	// exact). Zero for a checkpoint written before kmirror stored it.
	At time.Time
}

// ReadCheckpoints reads the mirror's checkpoint topic on the target: every
// group's last checkpoint per source partition, by group. A record it
// cannot read stops the read and names it: a guessed checkpoint would move
// a consumer to the wrong place.
func (s *Syncer) ReadCheckpoints(ctx context.Context, c Clients) (map[string][]Checkpoint, error) {
	byGroup := make(map[string]map[data.TopicPartition]Checkpoint)
	err := state.Read(ctx, s.cfg.Log, s.cfg.TargetOpts, c.DstAdm, s.checkpointTopic, -1, func(key, value []byte) error {
		var k checkpointKey
		if err := json.Unmarshal(key, &k); err != nil {
			return fmt.Errorf("checkpoint key %q in %s: %w", key, s.checkpointTopic, err)
		}
		tp := data.TopicPartition{Topic: k.Topic, Partition: k.Partition}
		if value == nil {
			delete(byGroup[k.Group], tp)
			return nil
		}
		payload, _, err := offsets.Decode(value)
		if err != nil {
			return fmt.Errorf("checkpoint %s in %s: %w", key, s.checkpointTopic, err)
		}
		var v checkpointValue
		if err := json.Unmarshal(payload, &v); err != nil {
			return fmt.Errorf("checkpoint %s in %s: %w", key, s.checkpointTopic, err)
		}
		if byGroup[k.Group] == nil {
			byGroup[k.Group] = make(map[data.TopicPartition]Checkpoint)
		}
		cp := Checkpoint{SourceTopic: k.Topic, Partition: k.Partition, SourceOffset: v.SourceOffset}
		if v.At > 0 {
			cp.At = time.UnixMilli(v.At)
		}
		byGroup[k.Group][tp] = cp
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the checkpoints %s on the target: %w", s.checkpointTopic, s.mirror.DstErr(err))
	}
	out := make(map[string][]Checkpoint, len(byGroup))
	for g, cps := range byGroup {
		for _, cp := range cps {
			out[g] = append(out[g], cp)
		}
		sort.Slice(out[g], func(i, j int) bool {
			a, b := out[g][i], out[g][j]
			return a.SourceTopic < b.SourceTopic || (a.SourceTopic == b.SourceTopic && a.Partition < b.Partition)
		})
	}
	return out, nil
}

// checkpointOffsets are a group's checkpoints as the offsets a fetch at the
// source would have returned, with the newest checkpoint's time.
func checkpointOffsets(cps []Checkpoint) (kadm.OffsetResponses, time.Time) {
	out := make(kadm.OffsetResponses)
	var newest time.Time
	for _, cp := range cps {
		out.Add(kadm.OffsetResponse{Offset: kadm.Offset{Topic: cp.SourceTopic, Partition: cp.Partition, At: cp.SourceOffset, LeaderEpoch: -1}})
		if cp.At.After(newest) {
			newest = cp.At
		}
	}
	return out, newest
}
