package groups

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/policy"
)

// A failback mirror copies back what applications wrote to the former
// target after a failover: its source is the former mirror's target, its
// target the former source, and its copy starts at the first record of its
// source that is not a copy (kmirror failback set that floor). A group
// offset below the floor is inside what the former mirror copied: it
// translates through the former mirror's offset index backwards (a target
// offset to the source record whose copy is the first at or after it), a
// stored index this mirror reads from its source, where the former mirror
// kept it.

// reverseIndexes caches the former mirror's offset indexes, read from this
// mirror's source, for reverseEvery: the former mirror is fenced, so they
// do not change; a failed read is tried again at the next translation.
type reverseIndexes struct {
	mu     sync.Mutex
	mirror string
	at     time.Time
	ld     data.Loaded
}

const reverseEvery = 10 * time.Minute

// load returns the former mirror's stored indexes.
func (r *reverseIndexes) load(ctx context.Context, s *Syncer, c Clients, mirror string) (data.Loaded, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mirror == mirror && time.Since(r.at) < reverseEvery {
		return r.ld, nil
	}
	topic := policy.InternalTopic(mirror, "progress")
	ld, err := data.LoadProgress(ctx, s.cfg.Log, s.cfg.SourceOpts, c.SrcAdm, topic)
	if err != nil {
		return data.Loaded{}, fmt.Errorf("read mirror %s's offset index %s on the source: %w", mirror, topic, s.mirror.SrcErr(err))
	}
	r.mirror, r.at, r.ld = mirror, time.Now(), ld
	return ld, nil
}

// translateFromReverse sets gp, whose source offset is below tp's floor,
// through the former mirror's index backwards.
func (s *Syncer) translateFromReverse(ctx context.Context, c Clients, gp *Partition, tp data.TopicPartition, floor index.Run, former string) {
	ld, err := s.reverse.load(ctx, s, c, former)
	if err == nil {
		var to int64
		to, err = ReverseOffset(ld.Indexes[tp], gp.SourceOffset)
		if err == nil {
			gp.TargetOffset, gp.Behind, gp.Untranslatable, gp.Reason = to, false, false, ""
			return
		}
	}
	gp.TargetOffset, gp.Untranslatable = -1, true
	gp.Reason = fmt.Sprintf("offset %d is below %d, where this mirror's copy starts, and cannot be translated through mirror %s's index backwards: %v", gp.SourceOffset, floor.Src, former, err)
}

// ReverseOffset maps x, an offset of a mirror's target, to the offset of
// the source record whose copy is the first at or after x: where a
// consumer that read the target up to x resumes on the source. ix is the
// mirror's index (source -> target); x past its last copy is an error (a
// failback's floor translates those).
func ReverseOffset(ix *index.Partition, x int64) (int64, error) {
	if ix == nil {
		return 0, fmt.Errorf("no index stored for the partition")
	}
	if ix.Evicted() > 0 {
		return 0, fmt.Errorf("part of the index is not in memory")
	}
	runs := ix.Runs()
	i := sort.Search(len(runs), func(i int) bool { return runs[i].Dst+runs[i].N > x })
	if i == len(runs) {
		return 0, fmt.Errorf("target offset %d is past the index's last copy", x)
	}
	r := runs[i]
	if x <= r.Dst {
		if i == 0 {
			if f, ok := ix.Floor(); ok && x < r.Dst {
				// Below the first indexed copy of an adopted index.
				return 0, fmt.Errorf("target offset %d is below the index's floor at %d", x, f.Dst)
			}
		}
		return r.Src, nil
	}
	return r.Src + (x - r.Dst), nil
}
