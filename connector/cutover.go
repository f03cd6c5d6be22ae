package connector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/groups"
)

// A cutover is a planned move of a mirror's applications to its target
// (a migration, or the switch back after a failback), behind a gate: it
// waits until the copy has everything the source has and the source takes
// no more records, checks the copy record by record, checks that every
// group translates exactly, and only then fences the mirror and commits
// the groups on the target. Anything short of that changes nothing.

// CutoverOptions are what `kmirror cutover` asks.
type CutoverOptions struct {
	// Quiet is how long the source's end offsets must stay where the
	// copy is before the gate opens: producers stopped. Default 5s.
	Quiet time.Duration
	// VerifySince limits the check of the copy to records this recent
	// (0: everything the index covers).
	VerifySince time.Duration
	// AllowRewind lets a group's commit move a target partition
	// backwards.
	AllowRewind bool
	// Reason is written with the fence.
	Reason string
}

// CutoverReport is what a cutover found and did.
type CutoverReport struct {
	Mirror string `json:"mirror"`
	// Lagging are the partitions not caught up (or whose source still
	// took records) when the gate gave up.
	Lagging []PartitionLag `json:"lagging,omitempty"`
	// Verify is the check of the copy.
	Verify *VerifyReport `json:"verify,omitempty"`
	// Groups are the groups, translated and (once fenced) committed.
	Groups []FailoverGroup `json:"groups"`
	// Fence is the fence set at the end; empty when the cutover stopped
	// before it.
	Fence string `json:"fence,omitempty"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// PartitionLag is one partition the gate waits for.
type PartitionLag struct {
	SourceTopic string `json:"source_topic"`
	Partition   int32  `json:"partition"`
	// CopiedTo is the stored position; SourceEnd the source's end.
	CopiedTo  int64 `json:"copied_to"`
	SourceEnd int64 `json:"source_end"`
	// Moving: the source's end moved during the quiet period: a
	// producer still writes.
	Moving bool `json:"moving,omitempty"`
}

// Cutover runs the gate, the checks, the fence and the last group sync.
func (m *Mirror) Cutover(ctx context.Context, opts CutoverOptions) (CutoverReport, error) {
	rep := CutoverReport{Mirror: m.cfg.Name}
	err := m.cutover(ctx, opts, &rep)
	if err != nil {
		rep.Error = err.Error()
	}
	return rep, err
}

func (m *Mirror) cutover(ctx context.Context, opts CutoverOptions, rep *CutoverReport) error {
	if opts.Quiet <= 0 {
		opts.Quiet = 5 * time.Second
	}
	c, err := m.newClients()
	if err != nil {
		return err
	}
	defer c.close()
	defer m.cancelProduce()
	if _, err := m.readFence(ctx, c); err != nil {
		return err
	}

	// Step 1: the gate: caught up, and the source quiet.
	if rep.Lagging, err = m.awaitCaughtUp(ctx, c, opts.Quiet); err != nil {
		return err
	}
	// Step 2: the copy, record by record.
	vrep, err := m.verifyWith(ctx, c, VerifyOptions{Since: opts.VerifySince})
	rep.Verify = &vrep
	if err != nil {
		return fmt.Errorf("check the copy: %w; nothing changed", err)
	}
	if !vrep.Clean() {
		return fmt.Errorf("the copy differs from the source (%d different, %d missing, %d extra, %d partitions not compared); nothing changed", vrep.Total.Different, vrep.Total.Missing, vrep.Total.Extra, vrep.Errors)
	}
	// Step 3: every group translates exactly and could be committed (a
	// dry run: no consumer active on the target, none moved backwards).
	stored, err := m.groupSync.LoadStored(ctx, c.groups())
	if err != nil {
		return err
	}
	names, err := checkpointedGroups(stored)
	if err != nil {
		return err
	}
	dry := m.translateGroups(ctx, c, stored, names, groups.TranslateOptions{Check: true, AllowRewind: opts.AllowRewind})
	for _, g := range dry {
		if !g.Exact {
			rep.Groups = dry
			return fmt.Errorf("group %s does not translate exactly (%s); nothing changed", g.Group, orNone(g.ApplyErr, "untranslatable partitions"))
		}
	}
	// Step 4: fence, and wait for the workers' last progress.
	if err := m.fenceMirror(ctx, c, "kmirror cutover", orNone(opts.Reason, "cutover")); err != nil {
		return err
	}
	st, err := m.readFence(ctx, c)
	if err != nil {
		return err
	}
	rep.Fence = st.String()
	if err := m.awaitWorkersGone(ctx, c); err != nil {
		return err
	}
	// Step 5: the last group sync, from the final positions.
	if stored, err = m.groupSync.LoadStored(ctx, c.groups()); err != nil {
		return err
	}
	rep.Groups = m.translateGroups(ctx, c, stored, names, groups.TranslateOptions{Apply: true, AllowRewind: opts.AllowRewind})
	rep.OK = true
	for _, g := range rep.Groups {
		rep.OK = rep.OK && g.Exact
	}
	if !rep.OK {
		return errors.New("the mirror is fenced, but not every group was committed exactly (see the groups); run kmirror failover --mirror " + m.cfg.Name + " to commit them again")
	}
	return nil
}

// awaitCaughtUp waits until every stored partition's position is at the
// source's end and the source's ends stayed put for quiet. On timeout it
// returns the partitions that kept it waiting.
func (m *Mirror) awaitCaughtUp(ctx context.Context, c *clients, quiet time.Duration) ([]PartitionLag, error) {
	var prev map[data.TopicPartition]int64
	var since time.Time
	var lagging, seen []PartitionLag
	// timedOut is the answer once the time is up: what the last look
	// saw. A request cut short by the deadline is not the reason (under
	// load a listing may take the last seconds), the lag is.
	timedOut := func() ([]PartitionLag, error) {
		return seen, fmt.Errorf("not caught up within the timeout: %d partitions behind or still taking records (a producer still writes to the source?); nothing changed", len(seen))
	}
	for {
		lagging = lagging[:0]
		ld, err := data.LoadProgress(ctx, m.log, m.cfg.TargetOpts, c.dstAdm, m.progressTopic)
		if err != nil {
			if ctx.Err() != nil && prev != nil {
				return timedOut()
			}
			return nil, fmt.Errorf("read %s: %w", m.progressTopic, m.dstErr(err))
		}
		topics := make(map[string]bool)
		for tp := range ld.Positions {
			topics[tp.Topic] = true
		}
		names := make([]string, 0, len(topics))
		for t := range topics {
			names = append(names, t)
		}
		ends, err := c.srcAdm.ListEndOffsets(ctx, names...)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			if ctx.Err() != nil && prev != nil {
				return timedOut()
			}
			return nil, fmt.Errorf("list the source's end offsets: %w", m.srcErr(err))
		}
		now := make(map[data.TopicPartition]int64, len(ld.Positions))
		moved := false
		for tp, pos := range ld.Positions {
			e, ok := ends.Lookup(tp.Topic, tp.Partition)
			if !ok {
				return nil, fmt.Errorf("the source has no end offset for %s/%d", tp.Topic, tp.Partition)
			}
			now[tp] = e.Offset
			moving := prev != nil && prev[tp] != e.Offset
			moved = moved || moving
			if pos.Next < e.Offset || moving {
				lagging = append(lagging, PartitionLag{SourceTopic: tp.Topic, Partition: tp.Partition, CopiedTo: pos.Next, SourceEnd: e.Offset, Moving: moving})
			}
		}
		sort.Slice(lagging, func(i, j int) bool {
			a, b := lagging[i], lagging[j]
			return a.SourceTopic < b.SourceTopic || (a.SourceTopic == b.SourceTopic && a.Partition < b.Partition)
		})
		seen = slices.Clone(lagging)
		switch {
		case len(ld.Positions) == 0:
			return nil, fmt.Errorf("mirror %s has copied nothing yet (%s holds no position); nothing changed", m.cfg.Name, m.progressTopic)
		case len(lagging) > 0 || moved || prev == nil:
			prev, since = now, time.Now()
		case time.Since(since) >= quiet:
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return timedOut()
		case <-time.After(min(quiet/4, time.Second)):
		}
	}
}

// checkpointedGroups are the groups with checkpoints on the target,
// sorted.
func checkpointedGroups(stored *groups.Stored) ([]string, error) {
	if stored.CheckpointsErr != nil {
		return nil, stored.CheckpointsErr
	}
	names := make([]string, 0, len(stored.Checkpoints))
	for g := range stored.Checkpoints {
		names = append(names, g)
	}
	sort.Strings(names)
	return names, nil
}

// translateGroups translates (and with tr.Apply commits) each group.
func (m *Mirror) translateGroups(ctx context.Context, c *clients, stored *groups.Stored, names []string, tr groups.TranslateOptions) []FailoverGroup {
	out := make([]FailoverGroup, 0, len(names))
	for _, g := range names {
		gst, err := m.groupSync.TranslateStored(ctx, c.groups(), stored, g, tr)
		fg := FailoverGroup{Status: gst, Applied: err == nil && tr.Apply}
		fg.Exact = err == nil && !untranslatable(gst)
		if err != nil {
			fg.ApplyErr = err.Error()
		}
		out = append(out, fg)
	}
	return out
}

func untranslatable(st groups.Status) bool {
	for _, p := range st.Partitions {
		if p.Untranslatable {
			return true
		}
	}
	return false
}

// orNone is s, or def when s is empty.
func orNone(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
