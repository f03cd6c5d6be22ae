// Package state reads and creates kmirror's state topics: compacted
// topics on the target cluster (progress, offset index chunks, topic
// metadata, checkpoints), read from the start with their transactions
// folded as a read_committed consumer would see them.
package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/connector/slots"
)

// kmirror keeps its state (progress, offset index chunks, topic metadata,
// checkpoints) in compacted topics on the target cluster: compaction keeps
// the latest record per key, and a plain consumer can read them. This file
// holds what every such topic shares.
//
// A state topic has Config.StatePartitions partitions, fixed when kmirror
// creates it; one that exists keeps its own count (topics created by
// earlier versions have one). Every key lives in one partition, chosen by
// PartitionFor from what the key is about, so compaction and "the last
// record of a key wins" hold per partition, and records about one source
// partition (its progress and its index chunks) stay in order. The
// partitions are read together at start.

// EnsureCompacted creates a compacted state topic with partitions
// partitions if it is missing (topicConfigs), and returns the
// partition count it has, once a listing shows the topic (awaitListed):
// what follows reads it.
func EnsureCompacted(ctx context.Context, adm *kadm.Client, topic string, partitions int32, rf int16) (int32, error) {
	created, err := ensureTopic(ctx, adm, topic, partitions, rf, topicConfigs())
	if err != nil {
		return 0, err
	}
	n, err := awaitListed(ctx, adm, topic)
	if err != nil && created > 0 && NotListedYet(err) {
		// Just created, and its count is in the answer: a listing that
		// still lacks it is a broker slower than ListWait to catch up,
		// which the reads that follow retry.
		return created, nil
	}
	return n, err
}

// ListWait bounds how long EnsureCompacted waits for a topic it created,
// or that the controller says exists, to be listed: a KRaft broker's
// metadata catches up with the controller's a moment later, and until then
// it answers UNKNOWN_TOPIC_OR_PARTITION for a topic that exists (which
// failed every fresh mirror's first start, logged as an ERROR). A variable
// for tests.
var ListWait = 10 * time.Second

// listPoll is how often awaitListed lists the topic again.
const listPoll = 100 * time.Millisecond

// awaitListed is Partitions, listing topic again while the broker does not
// know it, for ListWait at most.
func awaitListed(ctx context.Context, adm *kadm.Client, topic string) (int32, error) {
	deadline := time.Now().Add(ListWait)
	for {
		n, err := Partitions(ctx, adm, topic)
		if err == nil || !NotListedYet(err) || !time.Now().Before(deadline) {
			return n, err
		}
		select {
		case <-ctx.Done():
			return n, err
		case <-time.After(listPoll):
		}
	}
}

// errNotInListing is a topic missing from a listing that asked for it.
var errNotInListing = errors.New("not in the listing")

// NotListedYet reports whether err says the target does not list a topic
// (UNKNOWN_TOPIC_OR_PARTITION, or missing from a listing): for a topic
// kmirror just created, its metadata has not caught up yet.
func NotListedYet(err error) bool {
	return errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, errNotInListing)
}

// EnsureCompactedExists is EnsureCompacted for a caller that needs no
// partition count: it creates the topic when missing and does not list it
// (a listing right after another process created it may not know it yet).
func EnsureCompactedExists(ctx context.Context, adm *kadm.Client, topic string, partitions int32, rf int16) error {
	_, err := ensureTopic(ctx, adm, topic, partitions, rf, topicConfigs())
	return err
}

// segmentMs is the segment roll time of the state topics kmirror
// creates. A broker compacts only closed segments, and its default segment
// (1 GiB) takes hours to fill with progress records: the 30-minute chaos
// soak (bench/results/chaos.md) never saw its progress topic compacted,
// and every slot takeover, which reads the topic to its end, slowed from
// 0.1 s to 20 s. Rolling every few minutes bounds what is read to a few
// minutes of writes beyond the compacted state.
const segmentMs = 5 * 60 * 1000

// topicConfigs are the configs of a state topic kmirror creates: a
// topic that exists keeps its own.
func topicConfigs() map[string]*string {
	return map[string]*string{
		"cleanup.policy": kadm.StringPtr("compact"),
		"segment.ms":     kadm.StringPtr(strconv.Itoa(segmentMs)),
	}
}

// EnsureTopic creates a topic of kmirror's own with configs if it is
// missing; one that exists is left as it is.
func EnsureTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, rf int16, configs map[string]*string) error {
	_, err := ensureTopic(ctx, adm, topic, partitions, rf, configs)
	return err
}

// ensureTopic is EnsureTopic, also returning the partition count of the
// topic it created (0: it existed, or the count is not known).
func ensureTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, rf int16, configs map[string]*string) (created int32, err error) {
	resp, err := adm.CreateTopic(ctx, partitions, rf, configs, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil && resp.NumPartitions > 0:
		return resp.NumPartitions, nil
	case err == nil:
		return max(partitions, 0), nil // an old broker's answer has no count
	case errors.Is(err, kerr.TopicAlreadyExists):
		return 0, nil
	}
	return 0, fmt.Errorf("create internal topic %s: %w", topic, err)
}

// Partitions returns how many partitions topic has. A listing that
// fails or lacks the topic is an error, never a guess.
func Partitions(ctx context.Context, adm *kadm.Client, topic string) (int32, error) {
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("describe internal topic %s: %w", topic, err)
	}
	td, ok := tds[topic]
	switch {
	case !ok:
		return 0, fmt.Errorf("describe internal topic %s: %w", topic, errNotInListing)
	case td.Err != nil:
		return 0, fmt.Errorf("describe internal topic %s: %w", topic, td.Err)
	case len(td.Partitions) == 0:
		return 0, fmt.Errorf("describe internal topic %s: no partitions", topic)
	}
	return int32(len(td.Partitions)), nil
}

// TopicExists reports whether topic (what it is, for errors: "MirrorMaker
// 2's offsets topic") exists. A topic listed with an error (not
// authorized, a leader moving) is that error, not "there is no such
// topic".
func TopicExists(ctx context.Context, adm *kadm.Client, topic, what string) (bool, error) {
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return false, fmt.Errorf("describe %s %s: %w", what, topic, err)
	}
	td, ok := tds[topic]
	if ok && td.Err != nil && !errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return false, fmt.Errorf("describe %s %s: %w", what, topic, td.Err)
	}
	return ok && td.Err == nil, nil
}

// PartitionFor is the partition of a state topic with n partitions that
// holds the records about name (a source topic with its partition, a
// target topic, a group; part 0 where there is no partition).
func PartitionFor(n int32, name string, part int32) int32 {
	if n <= 1 {
		return 0
	}
	return slots.SlotOf(name, part, n)
}

// Stall bounds reading a state topic: it fails when no record
// arrives for this long, however large the state (a fixed budget for the
// whole read would fail a large one). A variable for tests.
var Stall = 30 * time.Second

// reportEvery is how often a long read of a state topic logs how far
// it got.
const reportEvery = 5 * time.Second

// Read reads topic from its start to the end offsets it has when
// the call starts, calling fn for every committed record in the log's order
// per partition (value nil for a tombstone). It stops at the first error fn
// returns, is bounded by ctx, and fails when no record arrives for
// Stall. A read that takes long logs its progress on log (nil:
// silent). only, when 0 or more, reads that partition alone.
//
// Slots write progress and index in transactions, all slots into the same
// partitions. A read_committed consumer stops at the last stable offset,
// the first record of the oldest transaction still open: one slot's open
// transaction (its worker paused, or killed and not fenced yet) would hide
// what every other slot committed after it, and a new owner would resume
// from an older position. So the log is read to its high watermark,
// uncommitted, with the transaction markers, and committed folds it
// (committedFold): a transaction's records count once its commit marker is
// read, in their place in the log; an aborted or still open one's never do.
func Read(ctx context.Context, log *slog.Logger, opts []kgo.Opt, adm *kadm.Client, topic string, only int32, fn func(key, value []byte) error) error {
	r := NewReader(topic, fn)
	if err := r.ReadToEnd(ctx, log, opts, adm, only); err != nil {
		return err
	}
	return r.Finish()
}

// Reader reads a state topic in steps: each ReadToEnd continues
// where the previous one stopped, so a reader kept between reads (the
// progress log of a member, progressLog) reads only what was written
// since. Each partition's committedFold lives as long as the reader: a
// transaction still open at the end of one read is decided by a marker a
// later read finds.
type Reader struct {
	topic string
	fn    func(key, value []byte) error
	next  map[int32]int64 // first offset not read yet, per partition
	folds map[int32]*committedFold
	// Records counts the records read, markers included, over every
	// ReadToEnd.
	Records int64
}

func NewReader(topic string, fn func(key, value []byte) error) *Reader {
	return &Reader{topic: topic, fn: fn, next: make(map[int32]int64), folds: make(map[int32]*committedFold)}
}

// ErrShrank is a state topic that ends before what was read from it:
// deleted and created again. What was read from it is void.
var ErrShrank = errors.New("the topic was deleted and created again")

// ReadToEnd reads from where the last read stopped to the end offsets the
// topic has when the call starts (only, when 0 or more, reads that
// partition alone), handing the committed records to fn in their order.
func (cr *Reader) ReadToEnd(ctx context.Context, log *slog.Logger, opts []kgo.Opt, adm *kadm.Client, only int32) error {
	topic := cr.topic
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	want := make(map[int32]int64)
	start := make(map[int32]kgo.Offset)
	var shrank error
	ends.Each(func(o kadm.ListedOffset) {
		if only >= 0 && o.Partition != only {
			return
		}
		from := cr.next[o.Partition]
		switch {
		case o.Offset < from:
			shrank = fmt.Errorf("read %s partition %d: ends at %d, read to %d: %w", topic, o.Partition, o.Offset, from, ErrShrank)
		case o.Offset > from:
			want[o.Partition] = o.Offset
			start[o.Partition] = kgo.NewOffset().At(from)
			if cr.folds[o.Partition] == nil {
				cr.folds[o.Partition] = newCommittedFold(cr.fn)
			}
		}
	})
	if shrank != nil {
		return shrank
	}
	if len(want) == 0 {
		return nil
	}
	// State records are small and read once: 2 MiB a fetch keeps the
	// reader's buffers at a few MiB (franz-go's 50 MiB default held 20 MiB
	// while a worker read 100,000 partitions' progress). opts may say
	// otherwise.
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.FetchMaxBytes(2 << 20)}, opts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	begin, reported := time.Now(), time.Now()
	var read int64
	for len(want) > 0 {
		pollCtx, cancel := context.WithTimeout(ctx, Stall)
		fetches := cl.PollFetches(pollCtx)
		stalled := pollCtx.Err() != nil && ctx.Err() == nil
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("read %s: %w (%d partitions not read to the end)", topic, ctx.Err(), len(want))
		}
		if stalled && fetches.NumRecords() == 0 {
			return fmt.Errorf("read %s: no record for %v (%d records read, %d partitions not read to the end)", topic, Stall, read, len(want))
		}
		read += int64(fetches.NumRecords())
		cr.Records += int64(fetches.NumRecords())
		if log != nil && time.Since(reported) >= reportEvery {
			reported = time.Now()
			log.Info("loading state", "topic", topic, "records", read, "partitions_left", len(want), "took", time.Since(begin).Round(time.Second))
		}
		var firstErr error
		fetches.EachError(func(_ string, p int32, err error) {
			if firstErr == nil {
				firstErr = fmt.Errorf("read %s partition %d: %w", topic, p, err)
			}
		})
		if firstErr != nil {
			return firstErr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || firstErr != nil {
				return // read to its end already: later records are not ours to see
			}
			if err := cr.folds[r.Partition].add(r); err != nil {
				firstErr = fmt.Errorf("%s partition %d offset %d: %w", topic, r.Partition, r.Offset, err)
				return
			}
			cr.next[r.Partition] = r.Offset + 1
			if r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
		if firstErr != nil {
			return firstErr
		}
	}
	return nil
}

// Finish ends a one-off read: records of transactions still open are not
// committed (committedFold.finish).
func (cr *Reader) Finish() error {
	for _, f := range cr.folds {
		if err := f.finish(); err != nil {
			return err
		}
	}
	return nil
}

// HeldBack calls fn, in log order per partition, for the committed
// records a read could not hand on yet because they follow a transaction
// still open: what a one-off read ending now would count (finish), without
// consuming them, for they stay in their place should that transaction
// commit later.
func (cr *Reader) HeldBack(fn func(key, value []byte) error) error {
	for _, f := range cr.folds {
		for _, e := range f.queue {
			if e.decided && e.r != nil {
				if err := fn(e.r.Key, e.r.Value); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Decided reports whether the records producer pid wrote to partition p
// up to offset were read and decided (committed or aborted): the markers
// of a transaction land on its partitions after its commit returned, so a
// transaction known to be committed may still look open for a moment.
func (cr *Reader) Decided(pid int64, p int32, offset int64) bool {
	if cr.next[p] <= offset {
		return false
	}
	if f := cr.folds[p]; f != nil {
		for _, e := range f.pending[pid] {
			if e.r.Offset <= offset {
				return false
			}
		}
	}
	return true
}

// Pending returns the records producer pid wrote to partition p that were
// read and are not decided yet, in log order. A committed transaction's
// records stay here for good when Kafka did not write its markers (see
// connector's completeLostCommit).
func (cr *Reader) Pending(pid int64, p int32) []*kgo.Record {
	f := cr.folds[p]
	if f == nil {
		return nil
	}
	out := make([]*kgo.Record, 0, len(f.pending[pid]))
	for _, e := range f.pending[pid] {
		out = append(out, e.r)
	}
	return out
}

// committedFold hands a partition's committed records to fn in the log's
// order, as a read_committed consumer would see them if nothing were open:
// records outside transactions at once, a transaction's records once its
// commit marker is read, never those of an aborted one. Records behind one
// still undecided wait in the queue.
type committedFold struct {
	fn      func(key, value []byte) error
	queue   []*foldEntry           // in log order, from the first undecided
	pending map[int64][]*foldEntry // undecided entries by producer ID
}

type foldEntry struct {
	r       *kgo.Record
	decided bool // committed or outside a transaction (dropped: r nil)
}

func newCommittedFold(fn func(key, value []byte) error) *committedFold {
	return &committedFold{fn: fn, pending: make(map[int64][]*foldEntry)}
}

// add takes the partition's next record (control records included).
func (f *committedFold) add(r *kgo.Record) error {
	switch {
	case r.Attrs.IsControl():
		var key kmsg.ControlRecordKey
		if err := key.ReadFrom(r.Key); err != nil {
			return fmt.Errorf("transaction marker: %w", err)
		}
		commit := key.Type == kmsg.ControlRecordKeyTypeCommit
		for _, e := range f.pending[r.ProducerID] {
			e.decided = true
			if !commit {
				e.r = nil
			}
		}
		delete(f.pending, r.ProducerID)
	case r.Attrs.IsTransactional():
		e := &foldEntry{r: r}
		f.queue = append(f.queue, e)
		f.pending[r.ProducerID] = append(f.pending[r.ProducerID], e)
		return nil
	default:
		if len(f.queue) == 0 {
			return f.fn(r.Key, r.Value)
		}
		f.queue = append(f.queue, &foldEntry{r: r, decided: true})
	}
	return f.drain()
}

// drain hands on the decided records at the head of the queue.
func (f *committedFold) drain() error {
	i := 0
	for ; i < len(f.queue) && f.queue[i].decided; i++ {
		if r := f.queue[i].r; r != nil {
			if err := f.fn(r.Key, r.Value); err != nil {
				return err
			}
		}
	}
	f.queue = f.queue[i:]
	return nil
}

// finish ends the read at the end offset: records of transactions still
// open are not committed (an open transaction of a slot is aborted when
// its next owner fences it), the decided ones behind them are.
func (f *committedFold) finish() error {
	for _, es := range f.pending {
		for _, e := range es {
			e.decided, e.r = true, nil
		}
	}
	clear(f.pending)
	return f.drain()
}
