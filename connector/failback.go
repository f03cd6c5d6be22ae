package connector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/fence"
	"github.com/kmirror/kmirror/connector/groups"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/connector/state"
)

// A failback prepares this mirror to copy back, after a failover of
// mirror Former (its source this mirror's target, its target this
// mirror's source, the same topic names), only what applications wrote to
// the former target since: per partition, this mirror's copy starts at the
// first record of its source that is not Former's copy (known from
// Former's offset index, stored on this mirror's source), appended after
// the end of this mirror's target. The records this mirror's target holds
// that never reached Former's target (its divergent tail: the data the
// failover lost) are reported, stored with the fence record, and stay
// where they are, below where any translated group resumes. Then the fence
// is lifted: `kmirror run` copies.

// FailbackReport is what a failback prepared.
type FailbackReport struct {
	Mirror    string `json:"mirror"`
	ReverseOf string `json:"reverse_of"`
	// Partitions are, per partition, where the copy back starts and
	// the divergent tail.
	Partitions []FailbackPartition `json:"partitions"`
	// Divergent is the total of the divergent tails (offsets).
	Divergent int64 `json:"divergent_total"`
	// Fence is the fence record written at the end.
	Fence string `json:"fence,omitempty"`
	Error string `json:"error,omitempty"`
}

// FailbackPartition is one partition of a failback.
type FailbackPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Start is this mirror's first source offset to copy: the first
	// record of the former target that is not a copy.
	Start int64 `json:"start"`
	// TargetEnd is this mirror's target's end at the failback: where
	// the first record copied back lands.
	TargetEnd int64 `json:"target_end"`
	// DivergentFrom..TargetEnd (DivergentCount offsets) are the target
	// records the former mirror never copied.
	DivergentFrom  int64 `json:"divergent_from"`
	DivergentCount int64 `json:"divergent_count"`
}

// Failback prepares the mirror to copy back for the mirror named former
// (see above). It refuses unless former is fenced and this mirror keeps
// topic names (the identity policy).
func (m *Mirror) Failback(ctx context.Context, former string) (FailbackReport, error) {
	rep := FailbackReport{Mirror: m.cfg.Name, ReverseOf: former}
	err := m.failback(ctx, former, &rep)
	if err != nil {
		rep.Error = err.Error()
	}
	return rep, err
}

func (m *Mirror) failback(ctx context.Context, former string, rep *FailbackReport) error {
	if former == "" || former == m.cfg.Name {
		return fmt.Errorf("failback of mirror %s: name the mirror it copies back for (--reverse-of), not itself", m.cfg.Name)
	}
	if _, ok := m.cfg.Policy.(policy.Identity); !ok {
		return fmt.Errorf("failback of mirror %s: its replication policy must keep topic names (identity): the former target's topics are its source, the former source's its target", m.cfg.Name)
	}
	c, err := m.newClients()
	if err != nil {
		return err
	}
	defer c.close()
	defer m.cancelProduce()

	// Step 1: the former mirror must be fenced, else the two would
	// copy each other's records in a loop.
	fst, _, err := fence.Read(ctx, m.log, m.cfg.SourceOpts, c.srcAdm, former)
	if err != nil {
		return fmt.Errorf("read mirror %s's fence on this mirror's source: %w", former, m.srcErr(err))
	}
	if !fst.Fenced {
		return fmt.Errorf("mirror %s is not fenced on this mirror's source (%s): run kmirror failover (or cutover) for it first; nothing changed", former, fst)
	}
	// Step 2: this mirror copies nothing while it is prepared.
	if err := m.fenceMirror(ctx, c, "kmirror failback", "preparing the copy back for "+former); err != nil {
		return err
	}
	if err := m.awaitWorkersGone(ctx, c); err != nil {
		return err
	}
	// Step 3: where the former mirror's copy ends, on this mirror's
	// source; where this mirror's target ends now.
	formerProgress := policy.InternalTopic(former, "progress")
	fld, err := data.LoadProgress(ctx, m.log, m.cfg.SourceOpts, c.srcAdm, formerProgress)
	if err != nil {
		return fmt.Errorf("read mirror %s's progress %s on this mirror's source: %w", former, formerProgress, m.srcErr(err))
	}
	if len(fld.Positions) == 0 {
		return fmt.Errorf("mirror %s's progress %s on this mirror's source holds no position: nothing to fail back from; nothing changed but the fence", former, formerProgress)
	}
	topics := make(map[string]bool)
	for tp := range fld.Positions {
		topics[tp.Topic] = true
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	ends, err := c.dstAdm.ListEndOffsets(ctx, names...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("list the end offsets of this mirror's target: %w", m.dstErr(err))
	}
	for tp, pos := range fld.Positions {
		end, ok := ends.Lookup(tp.Topic, tp.Partition)
		if !ok {
			return fmt.Errorf("this mirror's target has no partition %s/%d, which mirror %s copied", tp.Topic, tp.Partition, former)
		}
		start, err := firstNotCopied(fld.Indexes[tp], pos.Next)
		if err != nil {
			return fmt.Errorf("%s/%d: %w", tp.Topic, tp.Partition, err)
		}
		fp := FailbackPartition{Topic: tp.Topic, Partition: tp.Partition, Start: start, TargetEnd: end.Offset, DivergentFrom: pos.Next}
		if end.Offset > pos.Next {
			fp.DivergentCount = end.Offset - pos.Next
		}
		rep.Divergent += fp.DivergentCount
		rep.Partitions = append(rep.Partitions, fp)
	}
	sort.Slice(rep.Partitions, func(i, j int) bool {
		a, b := rep.Partitions[i], rep.Partitions[j]
		return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
	})
	// Copies the former mirror's index does not name are copies all the
	// same (failbackmatch.go).
	srcEnds, err := c.srcAdm.ListCommittedOffsets(ctx, names...)
	if err == nil {
		err = srcEnds.Error()
	}
	if err != nil {
		return fmt.Errorf("list the end offsets of this mirror's source: %w", m.srcErr(err))
	}
	dstEnds, err := c.dstAdm.ListCommittedOffsets(ctx, names...)
	if err == nil {
		err = dstEnds.Error()
	}
	if err != nil {
		return fmt.Errorf("list the end offsets of this mirror's target: %w", m.dstErr(err))
	}
	if err := m.matchUnindexedCopies(ctx, rep.Partitions, srcEnds, dstEnds); err != nil {
		return err
	}
	rep.Divergent = 0
	for _, p := range rep.Partitions {
		rep.Divergent += p.DivergentCount
	}
	// Step 4: this mirror's positions: each partition starts at the
	// first record that is not a copy, with its floor there; an index
	// of an earlier copy back is dropped.
	if err := m.writeFailbackPositions(ctx, c, rep.Partitions); err != nil {
		return err
	}
	// Step 5: lift the fence, naming the former mirror and the
	// divergent tails.
	host, _ := os.Hostname()
	st := fence.State{Fenced: false, By: "kmirror failback on " + host, Reason: "copying back for " + former, ReverseOf: former}
	for _, p := range rep.Partitions {
		if p.DivergentCount > 0 {
			st.Divergent = append(st.Divergent, fence.Divergent{Topic: p.Topic, Partition: p.Partition, From: p.DivergentFrom, To: p.TargetEnd})
		}
	}
	if err := fence.Write(ctx, c.dstAdm, c.dst, m.cfg.Name, m.cfg.ReplicationFactor, st); err != nil {
		return fmt.Errorf("lift the fence of mirror %s: %w", m.cfg.Name, m.dstErr(err))
	}
	rep.Fence = st.String()
	return nil
}

// firstNotCopied is the target offset of the first record after a copy
// whose next source offset is next: where the copy back starts. A
// partition the former mirror copied nothing of starts at its floor, or at
// 0 (everything there is the applications').
func firstNotCopied(ix *index.Partition, next int64) (int64, error) {
	if ix == nil {
		return 0, nil
	}
	to, _, err := groups.TranslateOffset(ix, next, next)
	switch {
	case err == nil:
		return to, nil
	case errors.Is(err, index.ErrPastIndex):
		return 0, nil // nothing copied, no floor
	default:
		return 0, fmt.Errorf("cannot tell where mirror's copy ends: %w", err)
	}
}

// writeFailbackPositions writes this mirror's positions for a failback
// and waits for the target to acknowledge them.
func (m *Mirror) writeFailbackPositions(ctx context.Context, c *clients, parts []FailbackPartition) error {
	n, err := state.EnsureCompacted(ctx, c.dstAdm, m.progressTopic, m.cfg.StatePartitions, m.cfg.ReplicationFactor)
	if err != nil {
		return fmt.Errorf("progress topic %s: %w", m.progressTopic, m.dstErr(err))
	}
	old, err := data.LoadProgress(ctx, m.log, m.cfg.TargetOpts, c.dstAdm, m.progressTopic)
	if err != nil {
		return fmt.Errorf("read %s: %w", m.progressTopic, m.dstErr(err))
	}
	var recs []*kgo.Record
	for _, p := range parts {
		tp := data.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		part := state.PartitionFor(n, tp.Topic, tp.Partition)
		if ix := old.Indexes[tp]; ix != nil {
			for _, k := range ix.StoredChunks() {
				recs = append(recs, &kgo.Record{Topic: m.progressTopic, Partition: part, Key: data.IndexChunkKey(tp, k)})
			}
		}
		k, v := data.EncodeProgress(tp, data.Position{Next: p.Start, Floor: &index.Run{Src: p.Start, Dst: p.TargetEnd}})
		recs = append(recs, &kgo.Record{Topic: m.progressTopic, Partition: part, Key: k, Value: m.sealer.Seal(v)})
	}
	if err := c.dst.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("write the positions to %s: %w", m.progressTopic, m.dstErr(err))
	}
	return nil
}
