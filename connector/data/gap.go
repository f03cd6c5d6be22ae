package data

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Source gaps: records the source deleted (retention, DeleteRecords)
// before they were copied. A fetch at a position below the partition's log
// start answers OFFSET_OUT_OF_RANGE, on either path: the record path's
// consumer never resets on its own (NoResetOffset), and the batch path's
// fetcher hands the partition over (accept). The poll loop then lists the
// log start (resolveGaps) and applies the mirror's policy: skip (go on at
// the log start) or fail (the partition stops, its position left before
// the gap). Either way the gap is handed to CopierOpts.OnGap: never silent.

// GapPolicy is what a partition does at a source gap
// (mirrors[].on_source_gap).
type GapPolicy int32

const (
	GapSkip GapPolicy = iota // go on at the log start (MirrorMaker 2's behaviour)
	GapFail                  // stop, failed, until the operator acts
)

// ParseGapPolicy reads an on_source_gap value ("" is skip).
func ParseGapPolicy(s string) (GapPolicy, error) {
	switch s {
	case "", "skip":
		return GapSkip, nil
	case "fail":
		return GapFail, nil
	}
	return GapSkip, fmt.Errorf("unknown on_source_gap %q (want skip or fail)", s)
}

func (p GapPolicy) String() string {
	if p == GapFail {
		return "fail"
	}
	return "skip"
}

// GapPolicyVar holds a mirror's policy; a reload changes it while the
// copiers run. A nil *GapPolicyVar is skip.
type GapPolicyVar struct{ v atomic.Int32 }

func (g *GapPolicyVar) Load() GapPolicy {
	if g == nil {
		return GapSkip
	}
	return GapPolicy(g.v.Load())
}

func (g *GapPolicyVar) Store(p GapPolicy) { g.v.Store(int32(p)) }

// SourceGap is a range of a source partition's offsets deleted before they
// were copied: From is the next offset kmirror wanted, To the log start it
// found (exclusive). On a compacted or transactional topic not every
// offset was a record: Records is the offset range.
type SourceGap struct {
	TP       TopicPartition
	From, To int64
	// Failed: the partition stopped before the gap (on_source_gap:
	// fail); else it goes on at To.
	Failed bool
}

// Records is the count of offsets lost, To - From.
func (g SourceGap) Records() int64 { return g.To - g.From }

// GapError is the failure of a partition stopped before a source gap.
type GapError struct{ From, To int64 }

func (e *GapError) Error() string {
	return fmt.Sprintf("source gap: offsets %d..%d (%d) deleted at the source before they were copied; stopped before them (on_source_gap: fail): set on_source_gap: skip and reload, or restart with it, to go on from the log start",
		e.From, e.To, e.To-e.From)
}

// gapWaitRetry is how long a partition whose log start could not be listed
// waits before it is listed again.
const gapWaitRetry = time.Second

// gapState is the copier's partitions out of range: pending ones wait for
// resolveGaps; held ones stopped before a gap (fail), to be looked at again
// when the policy becomes skip.
type gapState struct {
	mu      sync.Mutex
	pending map[TopicPartition]int64 // the position that was out of range
	held    map[TopicPartition]int64
	retryAt time.Time
	policy  *GapPolicyVar
	onGap   func(SourceGap)
}

// outOfRange notes that tp's fetch at from answered OFFSET_OUT_OF_RANGE:
// the poll loop resolves it (resolveGaps).
func (c *Copier) outOfRange(tp TopicPartition, from int64) {
	g := &c.gaps
	g.mu.Lock()
	if g.pending == nil {
		g.pending = make(map[TopicPartition]int64)
	}
	g.pending[tp] = from
	g.mu.Unlock()
	c.wakePoll()
}

// nextWanted is the record path's position: past the last record produced,
// or the acknowledged position with nothing in flight. ps.Mu is held.
func (ps *PartitionState) nextWanted() int64 {
	if ps.head < len(ps.inflight) {
		return ps.inflight[len(ps.inflight)-1] + 1
	}
	return ps.Acked
}

// heldGap is the gap ps stopped before (nil: none). ps.Mu is held.
func (ps *PartitionState) heldGap() *GapError {
	if ps.t == nil {
		return nil
	}
	return ps.t.gap
}

// resolveGaps, on the poll loop, lists the log start of the partitions
// whose fetch was out of range and applies the policy to each. A held
// partition is looked at again once the policy is skip (a reload).
func (c *Copier) resolveGaps(ctx context.Context) {
	g := &c.gaps
	g.mu.Lock()
	if len(g.held) > 0 && g.policy.Load() == GapSkip {
		if g.pending == nil {
			g.pending = make(map[TopicPartition]int64)
		}
		for tp, from := range g.held {
			g.pending[tp] = from
		}
		clear(g.held)
	}
	if len(g.pending) == 0 || time.Now().Before(g.retryAt) {
		g.mu.Unlock()
		return
	}
	pending := g.pending
	g.pending = nil
	g.mu.Unlock()

	cl := c.source()
	if cl == nil && c.pt != nil {
		cl = c.pt.src
	}
	if cl == nil {
		return
	}
	// The record path's partitions stop fetching meanwhile (without a
	// reset, franz-go answers every fetch of them with the error).
	pause := make(map[string][]int32)
	topics := make(map[string]bool)
	for tp := range pending {
		topics[tp.Topic] = true
		if ps := c.Partition(tp); ps != nil && !ps.onBatchPath() {
			pause[tp.Topic] = append(pause[tp.Topic], tp.Partition)
		}
	}
	if src := c.source(); src != nil && len(pause) > 0 {
		src.PauseFetchPartitions(pause)
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	starts, err := kadm.NewClient(cl).ListStartOffsets(lctx, names...)
	cancel()
	if err == nil {
		err = starts.Error()
	}
	if err != nil && len(starts) == 0 {
		c.logEvery.Warn(c.log, "gap-list", "could not list the log start of source partitions out of range; retrying", "partitions", len(pending), "err", err)
		c.requeueGaps(pending)
		return
	}
	var retry map[TopicPartition]int64
	rewind := make(map[string]map[int32]kgo.EpochOffset)
	resume := make(map[string][]int32)
	for tp, from := range pending {
		ps := c.Partition(tp)
		if ps == nil {
			continue // unassigned since
		}
		lo, ok := starts.Lookup(tp.Topic, tp.Partition)
		if !ok || lo.Err != nil {
			if retry == nil {
				retry = make(map[TopicPartition]int64)
			}
			retry[tp] = from
			continue
		}
		to := lo.Offset
		policy := g.policy.Load()
		ps.Mu.Lock()
		batch := ps.passthrough
		switch {
		case from < 0 || to <= from:
			// Not below the log start (nothing read yet, or a
			// position past the end: the log was truncated): from
			// the log start, as it always was.
			c.log.Warn("source offset out of range, not below the log start; copying from the partition's log start", "topic", tp.Topic, "partition", tp.Partition, "offset", from, "log_start", to)
		case policy == GapFail:
			ps.trouble().gap = &GapError{From: from, To: to}
			ps.Mu.Unlock()
			g.mu.Lock()
			if g.held == nil {
				g.held = make(map[TopicPartition]int64)
			}
			g.held[tp] = from
			g.mu.Unlock()
			if batch {
				c.pt.pause(tp)
			}
			c.log.Error("source gap: records deleted at the source before they were copied; the partition stops before them (on_source_gap: fail)",
				"topic", tp.Topic, "partition", tp.Partition, "from_offset", from, "to_offset", to, "records", to-from)
			g.report(SourceGap{TP: tp, From: from, To: to, Failed: true})
			continue
		default:
			c.log.Warn("source gap: records deleted at the source before they were copied; copying from the partition's log start (on_source_gap: skip)",
				"topic", tp.Topic, "partition", tp.Partition, "from_offset", from, "to_offset", to, "records", to-from)
			if ps.head == len(ps.inflight) && ps.Acked < to {
				// Nothing in flight: the position moves past the
				// gap now, so that the lag and the progress say
				// the skip even before the next record.
				ps.Acked = to
				ps.changed()
			}
		}
		if ps.t != nil {
			ps.t.gap = nil
			ps.dropTroubleIfOver()
		}
		ps.Mu.Unlock()
		if from >= 0 && to > from {
			g.report(SourceGap{TP: tp, From: from, To: to})
		}
		if batch {
			c.pt.rewind(tp, to)
			continue
		}
		if rewind[tp.Topic] == nil {
			rewind[tp.Topic] = make(map[int32]kgo.EpochOffset)
		}
		rewind[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: to}
		resume[tp.Topic] = append(resume[tp.Topic], tp.Partition)
	}
	if src := c.source(); src != nil && len(rewind) > 0 {
		src.SetOffsets(rewind)
		src.ResumeFetchPartitions(resume)
	}
	if len(retry) > 0 {
		c.logEvery.Warn(c.log, "gap-list", "could not list the log start of source partitions out of range; retrying", "partitions", len(retry), "err", err)
		c.requeueGaps(retry)
	}
}

// requeueGaps puts partitions back to be resolved after gapWaitRetry.
func (c *Copier) requeueGaps(ps map[TopicPartition]int64) {
	g := &c.gaps
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending == nil {
		g.pending = make(map[TopicPartition]int64)
	}
	for tp, from := range ps {
		if _, ok := g.pending[tp]; !ok {
			g.pending[tp] = from
		}
	}
	g.retryAt = time.Now().Add(gapWaitRetry)
}

func (g *gapState) report(gap SourceGap) {
	if g.onGap != nil {
		g.onGap(gap)
	}
}

// forgetGap drops what the copier holds of tp's gap (it is unassigned).
func (c *Copier) forgetGap(tp TopicPartition) {
	g := &c.gaps
	g.mu.Lock()
	delete(g.pending, tp)
	delete(g.held, tp)
	g.mu.Unlock()
}

// isOutOfRange reports a fetch error that says the position is out of the
// partition's range.
func isOutOfRange(err error) bool { return errors.Is(err, kerr.OffsetOutOfRange) }

// onBatchPath is OnBatchPath taking ps.Mu.
func (ps *PartitionState) onBatchPath() bool {
	ps.Mu.Lock()
	defer ps.Mu.Unlock()
	return ps.passthrough
}
