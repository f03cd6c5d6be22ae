package groups

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/internal/english"
)

// TranslateOptions are what `kmirror translate` asks of Translate.
type TranslateOptions struct {
	// Apply commits the translated offsets to the target group, refused
	// while it has active members there.
	Apply bool
	// AllowRewind lets Apply move a target partition backwards (below
	// the group's offset committed there); without it such an apply is
	// refused with a *RewindError and nothing is committed.
	AllowRewind bool
	// Check runs what Apply would refuse on (active members on the
	// target, a partition moved backwards, offsets that cannot be read
	// there) and commits nothing: a gate's dry run.
	Check bool
	// SourceTimeout bounds the attempt to read the group's offsets at
	// the source (0: ctx alone); when it fails, the group's checkpoints
	// on the target are translated instead.
	SourceTimeout time.Duration
	// FromCheckpoints translates the checkpoints without asking the
	// source at all (a source that is back but must not be trusted).
	FromCheckpoints bool
}

// RewindError is an apply refused because it would move the target group
// backwards.
type RewindError struct {
	Group      string
	Partitions []Rewind
}

// Rewind is one target partition an apply would move backwards.
type Rewind struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   int64  `json:"current_offset"`
	New       int64  `json:"new_offset"`
}

func (e *RewindError) Error() string {
	parts := make([]string, 0, len(e.Partitions))
	for _, r := range e.Partitions {
		parts = append(parts, fmt.Sprintf("%s/%d from %d to %d", r.Topic, r.Partition, r.Current, r.New))
	}
	return fmt.Sprintf("applying would move group %s backwards on the target (%s); nothing applied", e.Group, strings.Join(parts, ", "))
}

// Stored is what a translation without a running worker reads on the
// target, once for any number of groups: the offset indexes and
// positions, and the checkpoints.
type Stored struct {
	Progress data.Loaded
	// Checkpoints by group; CheckpointsErr says why they could not be
	// read (then only the source's offsets translate).
	Checkpoints    map[string][]Checkpoint
	CheckpointsErr error
}

// LoadStored reads the mirror's offset indexes, positions and checkpoints
// on the target. It fails when the progress cannot be read: nothing
// translates without the index.
func (s *Syncer) LoadStored(ctx context.Context, c Clients) (*Stored, error) {
	ld, err := data.LoadProgress(ctx, s.cfg.Log, s.cfg.TargetOpts, c.DstAdm, s.cfg.ProgressTopic)
	if err != nil {
		return nil, fmt.Errorf("read %s on the target: %w", s.cfg.ProgressTopic, s.mirror.DstErr(err))
	}
	st := &Stored{Progress: ld}
	st.Checkpoints, st.CheckpointsErr = s.ReadCheckpoints(ctx, c)
	return st, nil
}

// Translate computes, without a running worker, the target offsets of a
// source group from the stored offset index: what `kmirror translate`
// prints for a failover (see TranslateStored).
func (s *Syncer) Translate(ctx context.Context, c Clients, group string, opts TranslateOptions) (Status, error) {
	stored, err := s.LoadStored(ctx, c)
	if err != nil {
		return Status{Mirror: s.cfg.Mirror, Group: group, State: StateSynced, LastSyncAt: time.Now()}, err
	}
	return s.TranslateStored(ctx, c, stored, group, opts)
}

// TranslateStored translates a source group through stored. Its offsets
// come from the source; when the source cannot be reached (within
// opts.SourceTimeout), or with opts.FromCheckpoints, from the group's
// checkpoints on the target, and the status says so and how old they
// are. Partitions that cannot be translated exactly are listed as
// untranslatable and never applied. With opts.Apply it commits the others
// to the target group, refusing while the group has active members there,
// when its current offsets there cannot be read, and when it would move a
// partition backwards (unless opts.AllowRewind).
func (s *Syncer) TranslateStored(ctx context.Context, c Clients, stored *Stored, group string, opts TranslateOptions) (Status, error) {
	st := Status{Mirror: s.cfg.Mirror, Group: group, State: StateSynced, LastSyncAt: time.Now()}
	ld := stored.Progress
	fetched, err := s.groupSourceOffsets(ctx, c, stored, group, opts, &st)
	if err != nil {
		return st, err
	}
	// A topic is mirrored when any partition of it has a stored position
	// or index; a partition of it without one has nothing copied yet.
	mirrored := make(map[string]bool)
	for tp := range ld.Positions {
		mirrored[tp.Topic] = true
	}
	for tp := range ld.Indexes {
		mirrored[tp.Topic] = true
	}
	commit := make(kadm.Offsets)
	fetched.Each(func(o kadm.OffsetResponse) {
		if !mirrored[o.Topic] {
			return
		}
		tp := data.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		ix, pos := ld.Indexes[tp], ld.Positions[tp]
		target := s.cfg.Policy.FormatRemoteTopic(s.cfg.SourceAlias, o.Topic)
		gp := Partition{SourceTopic: o.Topic, TargetTopic: target, Partition: o.Partition, SourceOffset: o.At, TargetOffset: -1}
		if pos.SourceEnd > pos.Next {
			gp.NotCopied = pos.SourceEnd - pos.Next
		}
		if o.Err != nil {
			gp.Untranslatable, gp.Reason = true, fmt.Sprintf("the source answered with an error for this partition: %v", o.Err)
			st.Partitions = append(st.Partitions, gp)
			return
		}
		if o.At < 0 {
			return // nothing committed
		}
		if ix == nil {
			ix = index.New()
		}
		to, behind, err := TranslateOffset(ix, pos.Next, o.At)
		gp.setTranslation(ix, to, behind, err)
		if errors.Is(err, index.ErrBelowAdopted) {
			floor, _ := ix.Floor()
			switch former := s.mirror.ReverseOf(); {
			case former != "":
				s.translateFromReverse(ctx, c, &gp, tp, floor, former)
			case s.mm2 != nil:
				s.translateFromMM2(ctx, c, &gp, tp, floor, indexFloors(ld.Indexes))
			}
		}
		st.Partitions = append(st.Partitions, gp)
		if !gp.Untranslatable {
			commit.Add(kadm.Offset{Topic: target, Partition: o.Partition, At: gp.TargetOffset, LeaderEpoch: -1})
		}
	})
	st.settle()
	if len(st.Partitions) == 0 {
		return st, fmt.Errorf("group %s has no committed offsets on topics mirrored by %s", group, s.cfg.Mirror)
	}
	if !opts.Apply && !opts.Check {
		return st, nil
	}
	if len(commit) == 0 {
		return st, fmt.Errorf("no partition of group %s can be translated exactly: nothing to apply", group)
	}
	members := activeMembers(ctx, c.DstAdm, []string{group})
	if err := members.unknown[group]; err != nil {
		return st, fmt.Errorf("cannot tell whether group %s has active members on the target: %w; nothing applied", group, err)
	}
	if ms := members.members[group]; len(ms) > 0 {
		return st, fmt.Errorf("group %s has %s on the target (%s): stop them before applying", group, english.Count(len(ms), "active member"), strings.Join(ms, ", "))
	}
	if err := refuseRewind(ctx, c.DstAdm, group, commit, opts.AllowRewind); err != nil {
		return st, err
	}
	if !opts.Apply {
		return st, nil
	}
	resp, err := c.DstAdm.CommitOffsets(ctx, group, commit)
	if err == nil {
		err = resp.Error()
	}
	if isActiveGroupErr(err) {
		return st, fmt.Errorf("group %s has active members on the target (a member joined while applying: %v): stop them before applying", group, err)
	}
	if err != nil {
		return st, fmt.Errorf("commit group %s on the target: %w", group, err)
	}
	return st, nil
}

// Where a translation's source offsets came from (Status.OffsetsFrom).
const (
	FromSource      = "source"
	FromCheckpoints = "checkpoints"
)

// groupSourceOffsets returns the group's committed source offsets: read
// at the source, or, when it cannot be reached (or opts say so), the
// group's checkpoints. It records in st where they came from.
func (s *Syncer) groupSourceOffsets(ctx context.Context, c Clients, stored *Stored, group string, opts TranslateOptions, st *Status) (kadm.OffsetResponses, error) {
	var srcErr error
	if !opts.FromCheckpoints {
		sctx, cancel := ctx, context.CancelFunc(func() {})
		if opts.SourceTimeout > 0 {
			sctx, cancel = context.WithTimeout(ctx, opts.SourceTimeout)
		}
		fetched, err := c.SrcAdm.FetchOffsets(sctx, group)
		cancel()
		switch {
		case err == nil:
			st.OffsetsFrom = FromSource
			return fetched, nil
		case errors.Is(err, kerr.GroupIDNotFound):
			return nil, fmt.Errorf("group %s does not exist on the source", group)
		}
		srcErr = fmt.Errorf("fetch offsets of group %s on the source: %w", group, s.mirror.SrcErr(err))
	}
	cps, ok := stored.Checkpoints[group]
	switch {
	case stored.CheckpointsErr != nil && srcErr != nil:
		return nil, fmt.Errorf("%w; and its checkpoints on the target cannot be read: %v", srcErr, stored.CheckpointsErr)
	case stored.CheckpointsErr != nil:
		return nil, stored.CheckpointsErr
	case !ok && srcErr != nil:
		return nil, fmt.Errorf("%w; and the target holds no checkpoint of it (was it selected by mirrors[].groups?)", srcErr)
	case !ok:
		return nil, fmt.Errorf("the target holds no checkpoint of group %s (was it selected by mirrors[].groups?)", group)
	}
	fetched, at := checkpointOffsets(cps)
	st.OffsetsFrom, st.CheckpointAt = FromCheckpoints, at
	if srcErr != nil {
		st.SourceError = srcErr.Error()
	}
	return fetched, nil
}

// refuseRewind reads group's current offsets on the target and returns a
// *RewindError when commit would move a partition backwards (unless
// allow), or an error when those offsets cannot be read: not knowing is no
// permission to rewind.
func refuseRewind(ctx context.Context, adm *kadm.Client, group string, commit kadm.Offsets, allow bool) error {
	current, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil // no group on the target: nothing to move backwards
	}
	if err != nil {
		return fmt.Errorf("read the current offsets of group %s on the target: %w; nothing applied", group, err)
	}
	var unreadable []string
	rewinds := &RewindError{Group: group}
	commit.Each(func(o kadm.Offset) {
		cur, ok := current.Lookup(o.Topic, o.Partition)
		switch {
		case !ok || (cur.Err == nil && cur.At < 0):
		case cur.Err != nil:
			unreadable = append(unreadable, fmt.Sprintf("%s/%d: %v", o.Topic, o.Partition, cur.Err))
		case o.At < cur.At:
			rewinds.Partitions = append(rewinds.Partitions, Rewind{Topic: o.Topic, Partition: o.Partition, Current: cur.At, New: o.At})
		}
	})
	if len(unreadable) > 0 {
		sort.Strings(unreadable)
		return fmt.Errorf("read the current offsets of group %s on the target: %s; nothing applied", group, strings.Join(unreadable, "; "))
	}
	if len(rewinds.Partitions) > 0 && !allow {
		sort.Slice(rewinds.Partitions, func(i, j int) bool {
			a, b := rewinds.Partitions[i], rewinds.Partitions[j]
			return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
		})
		return rewinds
	}
	return nil
}
