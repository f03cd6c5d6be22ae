package connector

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/verify"
)

// A worker of the former mirror that stopped without persisting its last
// progress (killed, at least once) leaves copies on the former target that
// its offset index does not name. A failback that took them for the
// applications' records would copy them back (twice on the former source)
// and count their originals as divergent. So before it starts the copy
// back, a failback reads on from where the index ends on both sides: the
// former target's records from the copy back's start, the former source's
// from the former mirror's position, one by one while they are the same
// record (verify.Same); those are copies, and the copy back starts after
// them. With exactly once there are none: a copy the index does not name
// was never committed.

// matchWindow is how many records of each side are read at a time.
const matchWindow = 1000

// matchUnindexedCopies moves each partition's Start and DivergentFrom past
// the former mirror's unindexed copies. srcEnds and dstEnds are the last
// stable offsets of this mirror's source (the former target) and target:
// a read never waits on an open transaction.
func (m *Mirror) matchUnindexedCopies(ctx context.Context, parts []FailbackPartition, srcEnds, dstEnds kadm.ListedOffsets) error {
	var src, dst *kgo.Client
	defer func() {
		if src != nil {
			src.Close()
			dst.Close()
		}
	}()
	for i := range parts {
		p := &parts[i]
		end, ok := srcEnds.Lookup(p.Topic, p.Partition)
		dstEnd, dok := dstEnds.Lookup(p.Topic, p.Partition)
		if !ok || !dok || end.Offset <= p.Start || min(p.TargetEnd, dstEnd.Offset) <= p.DivergentFrom {
			continue // nothing after the copy on one side or the other
		}
		if src == nil {
			var err error
			if src, err = kgo.NewClient(append(append([]kgo.Opt(nil), m.cfg.SourceOpts...), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...); err != nil {
				return err
			}
			if dst, err = kgo.NewClient(append(append([]kgo.Opt(nil), m.cfg.TargetOpts...), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...); err != nil {
				src.Close()
				return err
			}
		}
		srcAt, dstAt := p.Start, p.DivergentFrom
		dstTo := min(p.TargetEnd, dstEnd.Offset)
		for srcAt < end.Offset && dstAt < dstTo {
			copies, err := readRange(ctx, src, p.Topic, p.Partition, srcAt, end.Offset)
			if err != nil {
				return fmt.Errorf("read %s/%d on this mirror's source: %w", p.Topic, p.Partition, m.srcErr(err))
			}
			originals, err := readRange(ctx, dst, p.Topic, p.Partition, dstAt, dstTo)
			if err != nil {
				return fmt.Errorf("read %s/%d on this mirror's target: %w", p.Topic, p.Partition, m.dstErr(err))
			}
			n := 0
			for n < len(copies) && n < len(originals) && verify.Same(originals[n], copies[n]) {
				n++
			}
			if n > 0 {
				srcAt, dstAt = copies[n-1].Offset+1, originals[n-1].Offset+1
			}
			if n < matchWindow || n < len(copies) || n < len(originals) {
				break // a record that is not a copy, or the end of a side
			}
		}
		if srcAt != p.Start {
			m.log.Warn("failback: the former target holds copies its offset index does not name (a worker stopped before persisting its progress); the copy back starts after them",
				"topic", p.Topic, "partition", p.Partition, "copies", dstAt-p.DivergentFrom, "from", p.Start, "to", srcAt)
			p.Start, p.DivergentFrom = srcAt, dstAt
			p.DivergentCount = max(0, p.TargetEnd-dstAt)
		}
	}
	return nil
}

// readRange reads up to matchWindow committed records of a partition from
// offset from, below offset to, a last stable offset: the client keeps
// control records, so that the read moves past transaction markers (and
// the aborted records a read_committed fetch drops) to to; they are not
// returned. Bounded by ctx.
func readRange(ctx context.Context, cl *kgo.Client, topic string, p int32, from, to int64) ([]*kgo.Record, error) {
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}})
	defer cl.RemoveConsumePartitions(map[string][]int32{topic: {p}})
	var out []*kgo.Record
	for next := from; len(out) < matchWindow && next < to; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, ferr
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if fp.Topic != topic || fp.Partition != p {
				return
			}
			for _, r := range fp.Records {
				if r.Offset < next || r.Offset >= to || len(out) == matchWindow {
					continue
				}
				next = r.Offset + 1
				if !r.Attrs.IsControl() {
					out = append(out, r)
				}
			}
		})
	}
	return out, nil
}
