package groups

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/kmirror/kmirror/connector/index"
)

// Status is one translated group, for /api/v1/groups.
type Status struct {
	Mirror string `json:"mirror"`
	Group  string `json:"group"`
	// State is one of the State* constants: "synced", "behind",
	// "partial", "active" or "error".
	State      string      `json:"state"`
	Error      string      `json:"error,omitempty"`
	LastSyncAt time.Time   `json:"last_sync_at"`
	Partitions []Partition `json:"partitions"`
	// OffsetsFrom says, for a translation without a running worker
	// (kmirror translate, failover), where the group's source offsets
	// came from: "source", or "checkpoints" (the source could not be
	// reached: SourceError says why) stored on the target, the newest
	// written at CheckpointAt.
	OffsetsFrom  string    `json:"offsets_from,omitempty"`
	SourceError  string    `json:"source_error,omitempty"`
	CheckpointAt time.Time `json:"checkpoint_at,omitzero"`
}

// Partition is one partition of a translated group.
type Partition struct {
	SourceTopic  string `json:"source_topic"`
	TargetTopic  string `json:"target_topic"`
	Partition    int32  `json:"partition"`
	SourceOffset int64  `json:"source_offset"`
	// TargetOffset is the target offset of the first source record at or
	// after SourceOffset (or the end of the copy when Behind); -1 when
	// Untranslatable.
	TargetOffset int64 `json:"target_offset"`
	// Behind is true when records before SourceOffset are not copied yet:
	// a consumer starting at TargetOffset would see them again.
	Behind bool `json:"behind"`
	// Untranslatable is true when SourceOffset has no exact target offset
	// (it is older than what the offset index keeps, or nothing of the
	// partition is copied yet); Reason says why. Such a partition is
	// never committed to the target group.
	Untranslatable bool   `json:"untranslatable"`
	Reason         string `json:"reason,omitempty"`
	// Approximate is true when SourceOffset is older than where kmirror
	// took over from MirrorMaker 2 and TargetOffset comes from MM2's
	// offset syncs, as MM2 translates it: MM2-accurate, not exact (a
	// consumer may read again some records MM2 copied, never skip one).
	// Reason says so.
	Approximate bool `json:"approximate,omitempty"`
	// NotCopied is, for a translation without a running worker, how many
	// source records (offsets) past the copy the source held when kmirror
	// last looked at it: the partition's recovery point. Records the
	// source took after that are known to no one but the source.
	NotCopied int64 `json:"not_copied,omitempty"`
}

// States of a group.
const (
	// StateSynced: the target group has the translated offsets.
	StateSynced = "synced"
	// StateBehind: some source offset is past what was copied; the target
	// group points at the end of the copy there.
	StateBehind = "behind"
	// StatePartial: some partitions cannot be translated exactly (they
	// are listed with untranslatable and a reason, and never committed);
	// the others are committed.
	StatePartial = "partial"
	// StateActive: members consume on the target, so kmirror does not
	// write the group.
	StateActive = "active"
	// StateError: Error says what failed. A commit was refused, or what
	// kmirror must know before it writes the group could not be read
	// (whether members are active there, the group's current offsets
	// there): then nothing of the group, or nothing of the partitions
	// Error names, was committed this time.
	StateError = "error"
)

// TranslateOffset maps committed source offset s exactly, given a
// partition's index and acked position: the target offset of the first
// copied source record at or after s, or, when no such record was copied
// yet, the end of the copy (behind when records before s are still to be
// copied).
func TranslateOffset(ix *index.Partition, acked, s int64) (target int64, behind bool, err error) {
	t, err := ix.Translate(s)
	switch {
	case err == nil:
		return t, false, nil
	case !errors.Is(err, index.ErrPastIndex):
		return 0, false, err
	}
	if last, ok := ix.Last(); ok {
		return last.Dst + last.N, s > acked, nil
	}
	if floor, ok := ix.Floor(); ok && ix.Evicted() == 0 {
		// Adopted, nothing copied since: the copy ends at the floor.
		return floor.Dst, s > acked, nil
	}
	return 0, false, err
}

// setTranslation sets what TranslateOffset (or translatePartition) found
// for gp.SourceOffset through ix.
func (gp *Partition) setTranslation(ix *index.Partition, to int64, behind bool, err error) {
	if err != nil {
		gp.TargetOffset, gp.Untranslatable, gp.Reason = -1, true, untranslatableReason(ix, gp.SourceOffset, err)
		return
	}
	gp.TargetOffset, gp.Behind = to, behind
}

// settle sorts the partitions and sets State from them: partial when one
// is untranslatable, else behind when one is behind, else synced.
func (st *Status) settle() {
	sort.Slice(st.Partitions, func(i, j int) bool {
		a, b := st.Partitions[i], st.Partitions[j]
		return a.SourceTopic < b.SourceTopic || (a.SourceTopic == b.SourceTopic && a.Partition < b.Partition)
	})
	st.State = StateSynced
	for _, p := range st.Partitions {
		switch {
		case p.Untranslatable:
			st.State = StatePartial
		case p.Behind && st.State == StateSynced:
			st.State = StateBehind
		}
	}
}

// untranslatableReason says why TranslateOffset could not translate
// source offset s through ix (err is its error), for an operator.
func untranslatableReason(ix *index.Partition, s int64, err error) string {
	switch {
	case errors.Is(err, index.ErrBelowAdopted):
		return fmt.Sprintf("source offset %d is older than source offset %d, where kmirror took over from MirrorMaker 2 (mirrors[].mm2.adopt): MM2 copied the records before it, and the mirror has no mm2 block to read MM2's offset syncs from", s, floorSource(ix))
	case errors.Is(err, index.ErrBehindIndex):
		return fmt.Sprintf("source offset %d is older than the offset index, which starts at source offset %d: its target offset is no longer known", s, ix.OldestSource())
	case errors.Is(err, index.ErrPastIndex) && ix.Len() == 0:
		return fmt.Sprintf("nothing of this partition is copied yet (empty offset index): source offset %d has no target offset", s)
	}
	return fmt.Sprintf("source offset %d: %v", s, err)
}
