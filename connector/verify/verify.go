// Package verify compares a mirror's copy with its source, record by
// record, through the offset index kmirror keeps on the target: what
// `kmirror verify` prints.
//
// For each source partition with a stored position, the range both sides
// hold is the source records from the latest of the source's log start,
// the index's oldest mapped offset (or the floor of a position adopted
// from MirrorMaker 2) and the --since start, up to the position (the next
// source offset to copy). Each source record in it is looked up in the
// index and compared with the target record at the offset the index names:
// key, value (null is not empty), headers (order, keys, values, null
// values) and timestamp with its type. Target records in the covered
// target range that no indexed source record maps to are extra, except
// kmirror's own at-least-once duplicates (see gaps.go).
//
// Both sides are read read_committed, control records skipped, by one
// direct consumer per side, a bounded number of partitions at a time, and
// compared as they arrive; a partition's queue on a side that runs ahead
// is paused, so memory stays bounded. An error reading a partition, or a
// timeout, is reported as that partition's error, never as missing
// records.
package verify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/policy"
)

// Config is what Verify needs of its mirror.
type Config struct {
	Mirror        string
	SourceAlias   string
	Policy        policy.ReplicationPolicy
	SourceOpts    []kgo.Opt
	TargetOpts    []kgo.Opt
	ProgressTopic string
	Log           *slog.Logger
	// SrcErr and DstErr explain an error of a request to a cluster (nil:
	// as it is).
	SrcErr, DstErr func(error) error
}

// Options are what `kmirror verify` asks of Verify.
type Options struct {
	// Topic, when set, restricts the comparison to the source topic of
	// that name (or the one whose target topic has that name).
	Topic string
	// Since, when positive, starts each partition at its first source
	// record with a timestamp at or after now minus Since.
	Since time.Duration
	// Samples is how many differences each partition lists (5 when 0).
	Samples int
	// Parallel is how many partitions are read at once (32 when 0).
	Parallel int
}

// Clients are the admin clients Verify asks for metadata and offsets.
type Clients struct {
	SrcAdm, DstAdm *kadm.Client
}

// Counts are the outcome of a comparison.
type Counts struct {
	// Matched: target record equal to its source record.
	Matched int64 `json:"matched"`
	// Different: the target record at the indexed offset differs.
	Different int64 `json:"different"`
	// Missing: the index names a target offset holding no record, or a
	// source record in the range has no index entry.
	Missing int64 `json:"missing"`
	// Extra: target records in the covered range that no indexed source
	// record maps to and that are no copy of a neighbouring record.
	Extra int64 `json:"extra"`
	// Duplicate: unindexed target records equal to a copy that follows
	// them (kmirror's at-least-once re-deliveries), not a difference.
	Duplicate int64 `json:"duplicate"`
}

func (c *Counts) add(o Counts) {
	c.Matched += o.Matched
	c.Different += o.Different
	c.Missing += o.Missing
	c.Extra += o.Extra
	c.Duplicate += o.Duplicate
}

// Differs reports whether c has a difference (duplicates are none).
func (c Counts) Differs() bool { return c.Different+c.Missing+c.Extra > 0 }

// Difference is one record that does not match.
type Difference struct {
	// Kind is different, missing or extra.
	Kind string `json:"kind"`
	// SourceOffset and TargetOffset are -1 where there is none.
	SourceOffset int64 `json:"source_offset"`
	TargetOffset int64 `json:"target_offset"`
	// Fields are the fields that differ (key, value, headers, timestamp,
	// timestamp_type), for kind different.
	Fields []string `json:"fields,omitempty"`
	Reason string   `json:"reason,omitempty"`
}

// Partition is one source partition's comparison.
type Partition struct {
	SourceTopic string `json:"source_topic"`
	TargetTopic string `json:"target_topic"`
	Partition   int32  `json:"partition"`
	// The source offsets compared, [SourceFrom, SourceTo), and the target
	// offsets the index maps them to, [TargetFrom, TargetTo) (equal when
	// none is mapped).
	SourceFrom int64 `json:"source_from"`
	SourceTo   int64 `json:"source_to"`
	TargetFrom int64 `json:"target_from"`
	TargetTo   int64 `json:"target_to"`
	Counts
	// Differences are the first few differences (Options.Samples).
	Differences []Difference `json:"differences,omitempty"`
	// Error says why the partition could not be compared (completely):
	// never counted as missing records.
	Error string `json:"error,omitempty"`
}

// Report is the comparison of every partition, sorted by topic and
// partition, and the totals.
type Report struct {
	Mirror     string      `json:"mirror"`
	Partitions []Partition `json:"partitions"`
	Total      Counts      `json:"total"`
	Errors     int         `json:"errors"`
	// Records is how many records were read, both sides together.
	Records int64 `json:"records_read"`
}

// Clean reports whether every partition was compared and matched.
func (r Report) Clean() bool { return r.Errors == 0 && !r.Total.Differs() }

// Verify compares the mirror's copy with its source (see the package
// comment). It returns an error when nothing can be compared (the progress
// topic cannot be read, no partition is copied); a partition that cannot
// be compared is an Error in its Partition.
func Verify(ctx context.Context, cfg Config, c Clients, opts Options) (Report, error) {
	if cfg.Policy == nil {
		cfg.Policy = policy.Default{}
	}
	if cfg.SrcErr == nil {
		cfg.SrcErr = func(err error) error { return err }
	}
	if cfg.DstErr == nil {
		cfg.DstErr = func(err error) error { return err }
	}
	if opts.Samples <= 0 {
		opts.Samples = 5
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 32
	}
	rep := Report{Mirror: cfg.Mirror}
	ld, err := data.LoadProgress(ctx, cfg.Log, cfg.TargetOpts, c.DstAdm, cfg.ProgressTopic)
	if err != nil {
		return rep, fmt.Errorf("read %s on the target: %w", cfg.ProgressTopic, cfg.DstErr(err))
	}
	parts := make([]*part, 0, len(ld.Positions))
	srcTopics, dstTopics := map[string]bool{}, map[string]bool{}
	for tp, pos := range ld.Positions {
		target := cfg.Policy.FormatRemoteTopic(cfg.SourceAlias, tp.Topic)
		if opts.Topic != "" && opts.Topic != tp.Topic && opts.Topic != target {
			continue
		}
		ix := ld.Indexes[tp]
		if ix == nil {
			ix = index.New()
		}
		p := &part{out: Partition{SourceTopic: tp.Topic, TargetTopic: target, Partition: tp.Partition}, pos: pos, ix: ix, samples: opts.Samples}
		parts = append(parts, p)
		srcTopics[tp.Topic], dstTopics[target] = true, true
	}
	if len(parts) == 0 {
		if opts.Topic != "" {
			return rep, fmt.Errorf("mirror %s has copied nothing of topic %s (no stored position)", cfg.Mirror, opts.Topic)
		}
		return rep, fmt.Errorf("mirror %s has copied nothing yet (no stored position in %s)", cfg.Mirror, cfg.ProgressTopic)
	}
	slices.SortFunc(parts, func(a, b *part) int {
		return cmp.Or(strings.Compare(a.out.SourceTopic, b.out.SourceTopic), cmp.Compare(a.out.Partition, b.out.Partition))
	})
	if err := plan(ctx, cfg, c, opts, parts, keys(srcTopics), keys(dstTopics)); err != nil {
		return rep, err
	}
	rd, err := newReaders(cfg, parts)
	if err != nil {
		return rep, err
	}
	rd.run(ctx, opts.Parallel)
	for _, p := range parts {
		rep.Partitions = append(rep.Partitions, p.out)
		rep.Total.add(p.out.Counts)
		if p.out.Error != "" {
			rep.Errors++
		}
	}
	rep.Records = rd.records.Load()
	return rep, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// offsetsOf are the offsets of one cluster's partitions: log start, last
// stable offset (the end of what read_committed reads), and per topic
// whether it exists and its ID.
type offsetsOf struct {
	start, end kadm.ListedOffsets
	topics     kadm.TopicDetails
}

func listOffsets(ctx context.Context, adm *kadm.Client, explain func(error) error, side string, topics []string) (offsetsOf, error) {
	var o offsetsOf
	var err error
	if o.topics, err = adm.ListTopics(ctx, topics...); err != nil {
		return o, fmt.Errorf("list topics on the %s: %w", side, explain(err))
	}
	// Only topics that exist: asking for others fails the whole listing
	// in some clients' sharding.
	var exist []string
	for _, t := range topics {
		if td, ok := o.topics[t]; ok && td.Err == nil {
			exist = append(exist, t)
		}
	}
	if len(exist) == 0 {
		return o, nil
	}
	if o.start, err = adm.ListStartOffsets(ctx, exist...); err != nil {
		return o, fmt.Errorf("list log start offsets on the %s: %w", side, explain(err))
	}
	if o.end, err = adm.ListCommittedOffsets(ctx, exist...); err != nil {
		return o, fmt.Errorf("list last stable offsets on the %s: %w", side, explain(err))
	}
	return o, nil
}

// topicErr is why a topic's partitions cannot be read on a side ("" when
// they can), and whether the topic is absent (an answer, not an error).
func (o offsetsOf) topicErr(topic string) (absent bool, err error) {
	td, ok := o.topics[topic]
	switch {
	case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
		return true, nil
	case td.Err != nil:
		return false, td.Err
	}
	return false, nil
}

func (o offsetsOf) lookup(l kadm.ListedOffsets, topic string, p int32) (int64, error) {
	lo, ok := l.Lookup(topic, p)
	if !ok {
		return 0, fmt.Errorf("no offset listed for partition %d", p)
	}
	return lo.Offset, lo.Err
}

// plan sets each partition's ranges from the offsets of both sides.
func plan(ctx context.Context, cfg Config, c Clients, opts Options, parts []*part, srcTopics, dstTopics []string) error {
	src, err := listOffsets(ctx, c.SrcAdm, cfg.SrcErr, "source", srcTopics)
	if err != nil {
		return err
	}
	dst, err := listOffsets(ctx, c.DstAdm, cfg.DstErr, "target", dstTopics)
	if err != nil {
		return err
	}
	var since kadm.ListedOffsets
	if opts.Since > 0 && len(src.start) > 0 {
		var exist []string
		for _, t := range srcTopics {
			if absent, err := src.topicErr(t); !absent && err == nil {
				exist = append(exist, t)
			}
		}
		if since, err = c.SrcAdm.ListOffsetsAfterMilli(ctx, time.Now().Add(-opts.Since).UnixMilli(), exist...); err != nil {
			return fmt.Errorf("list the source offsets of --since %s: %w", opts.Since, cfg.SrcErr(err))
		}
	}
	for _, p := range parts {
		p.plan(src, dst, since)
	}
	return nil
}
