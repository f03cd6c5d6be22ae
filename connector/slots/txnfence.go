package slots

// Fencing a worker's transactions by its membership, Kafka Streams' way
// since KIP-447 (docs/design/one-producer-per-worker.md): each transaction
// commits the slots it touched to the group, as the slots topic's
// partitions, under the member's ID and generation, and the group
// coordinator refuses that commit from a member it no longer knows. A new
// owner of a slot waits until no open transaction holds a pending commit of
// the slot (AwaitStable) before it reads the slot's progress.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CommitInTxn commits slots (partitions of the slots topic topic, each at
// offset 0 with metadata) to group inside the transaction producer has
// open, as the member memberID of generation generation (Member.Generation):
// an AddOffsetsToTxn request for group, then a TxnOffsetCommit. The offsets
// become visible (and the slots stable, see AwaitStable) when the
// transaction commits, and are dropped if it aborts.
//
// producer must be a transactional client (kgo.TransactionalID) with a
// transaction begun and at least one record produced in it: franz-go sends
// no EndTxn for a transaction it added no partition to, and knows nothing
// of the group added here. Pass every slot the transaction touched: the
// coordinator checks the member and its generation, never which slots it
// owns.
//
// The caller must ABORT the transaction on any error. A refusal
// (ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID: the group moved on without this
// member, whose slots may be owned by another worker already) does not stop
// the transaction: franz-go's EndTransaction does not look at this answer,
// and Kafka commits the transaction's records even after it refused their
// TxnOffsetCommit. Any other error leaves unknown whether the offsets are
// pending in the transaction. Errors wrap the Kafka error, so
// errors.Is(err, kerr.IllegalGeneration) tells a stale member.
//
// It refuses, sending nothing, an empty memberID, a generation below 0 and
// an empty slots, which would let a zombie commit: Kafka accepts
// generation -1 with an empty member ID without any check (kfake an empty
// member ID with the current generation), and the answer to a commit of no
// partition has nowhere to say it was refused (the errors are per
// partition).
//
// It also needs topic's ID, which TxnOffsetCommit v6 (Kafka 4.4, and
// kfake) names the topic by: from the producer's metadata cache, asked
// for at most every kgo.MetadataMinAge (5s by default).
func CommitInTxn(ctx context.Context, producer *kgo.Client, group, topic, memberID string, generation int32, slots []int32, metadata string) error {
	switch {
	case memberID == "" || generation < 0:
		return fmt.Errorf("slots: group %q: refusing to commit slots %v under member %q, generation %d: a commit without both is not fenced (not joined yet?)", group, slots, memberID, generation)
	case len(slots) == 0:
		return fmt.Errorf("slots: group %q: refusing to commit no slots: the answer could not say whether the member was refused", group)
	}
	txnID, ok := transactionalID(producer)
	if !ok {
		return fmt.Errorf("slots: group %q: the producer has no transactional ID", group)
	}
	want := slices.Compact(slices.Sorted(slices.Values(slots)))

	pid, epoch, err := producer.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("slots: group %q: producer ID of transactional ID %q: %w", group, txnID, err)
	}

	id, err := topicID(ctx, producer, topic)
	if err != nil {
		return fmt.Errorf("slots: group %q: the ID of topic %q for TxnOffsetCommit: %w", group, topic, err)
	}

	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, pid, epoch, group
	addResp, err := add.RequestWith(ctx, producer)
	if err == nil {
		err = kerr.ErrorForCode(addResp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("slots: group %q: AddOffsetsToTxn for transactional ID %q: %w", group, txnID, err)
	}

	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group = txnID, group
	req.ProducerID, req.ProducerEpoch = pid, epoch
	req.MemberID, req.Generation = memberID, generation
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	// Both: v0-v5 send the name, v6 the ID.
	rt.Topic, rt.TopicID = topic, id
	for _, s := range want {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = s, 0, -1, &metadata
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, producer)
	if err != nil {
		return fmt.Errorf("slots: group %q: TxnOffsetCommit of slots %v of %q: %w", group, want, topic, err)
	}

	// The answer has no error of its own: every partition carries it,
	// and each must be checked (a partition left out was not committed).
	byErr := map[error][]int32{}
	var errs []error // byErr's keys, in the order met
	answered := map[int32]bool{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if !slices.Contains(want, p.Partition) {
				continue
			}
			answered[p.Partition] = true
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				if _, seen := byErr[err]; !seen {
					errs = append(errs, err)
				}
				byErr[err] = append(byErr[err], p.Partition)
			}
		}
	}
	for _, s := range want {
		if !answered[s] {
			if _, seen := byErr[errNoAnswer]; !seen {
				errs = append(errs, errNoAnswer)
			}
			byErr[errNoAnswer] = append(byErr[errNoAnswer], s)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	// One %w per error, so that errors.Is finds each.
	parts := make([]string, 0, len(errs))
	args := make([]any, 0, len(errs))
	for _, e := range errs {
		parts = append(parts, fmt.Sprintf("slots %v: %%w", byErr[e]))
		args = append(args, e)
	}
	return fmt.Errorf("slots: group %q: TxnOffsetCommit of %q as member %q, generation %d refused: "+strings.Join(parts, "; "),
		append([]any{group, topic, memberID, generation}, args...)...)
}

// errNoAnswer is a partition a response left out.
var errNoAnswer = errors.New("not in the response")

// transactionalID returns the producer's transactional ID, and whether it
// has one.
func transactionalID(cl *kgo.Client) (string, bool) {
	// OptValues answers the ID and whether the option was given.
	v := cl.OptValues(kgo.TransactionalID)
	if len(v) != 2 {
		return "", false
	}
	id, _ := v[0].(string)
	set, _ := v[1].(bool)
	return id, set && id != ""
}

// topicID returns topic's ID from cl's metadata cache, refreshed when
// older than the client's MetadataMinAge: a commit every 100ms must not
// cost a Metadata request each. It is zero from a broker older than Kafka
// 2.8, which cannot take TxnOffsetCommit v6 either.
func topicID(ctx context.Context, cl *kgo.Client, topic string) ([16]byte, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.RequestCachedMetadata(ctx, req, 0)
	if err != nil {
		return [16]byte{}, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return [16]byte{}, err
		}
		return t.TopicID, nil
	}
	return [16]byte{}, kerr.UnknownTopicOrPartition
}

// Committed is a slot's offset as committed to the group.
type Committed struct {
	Offset   int64
	Metadata string
}

// The backoff of AwaitStable between two questions: short at first (a
// transaction that is ending takes milliseconds to write its markers), at
// most stableBackoffMax (an open one may take a commit interval or, for a
// dead worker's, its transaction timeout).
const (
	stableBackoffMin = 20 * time.Millisecond
	stableBackoffMax = 200 * time.Millisecond
)

// AwaitStable returns the offsets committed to group for slots (partitions
// of the slots topic topic) once no open transaction holds a pending commit
// of any of them: it asks with OffsetFetch and RequireStable (v7+, Kafka
// 2.5+) and, while a slot is answered UNSTABLE_OFFSET_COMMIT, asks again
// for the slots still unstable, 20ms later at first and at most 200ms.
// A slot with no committed offset is left out of the map: there is nothing
// to wait for.
//
// ctx bounds the wait: when it ends, the error names the slots still
// unstable, and wraps ctx's error (and kerr.UnstableOffsetCommit if they
// were answered so). Any other error is returned at once, never taken for
// "nothing committed": a refused fetch, a slot the answer left out, a
// broker too old for RequireStable (which older versions silently drop,
// so that a pending offset would look committed).
//
// franz-go retries a group-wide UNSTABLE_OFFSET_COMMIT itself, at its own
// request backoff, before this function sees it; Kafka and the vendored
// kfake answer it per partition.
func AwaitStable(ctx context.Context, cl *kgo.Client, group, topic string, slots []int32) (map[int32]Committed, error) {
	out := make(map[int32]Committed)
	pending := slices.Compact(slices.Sorted(slices.Values(slots)))
	start := time.Now()
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(min(stableBackoffMin<<min(attempt-1, 8), stableBackoffMax))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, stillUnstable(ctx, group, topic, pending, start, true)
			case <-t.C:
			}
		}
		unstable, err := fetchStable(ctx, cl, group, topic, pending, out)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, stillUnstable(ctx, group, topic, pending, start, attempt > 0)
		case err != nil:
			return nil, err
		}
		pending = unstable
	}
	return out, nil
}

// stillUnstable is AwaitStable's error when ctx ended first; answered says
// whether pending were answered UNSTABLE_OFFSET_COMMIT (rather than ctx
// ending during the first question).
func stillUnstable(ctx context.Context, group, topic string, pending []int32, start time.Time, answered bool) error {
	took := time.Since(start).Round(time.Millisecond)
	if !answered {
		return fmt.Errorf("slots: group %q: slots %v of %q not known stable after %v: %w", group, pending, topic, took, ctx.Err())
	}
	return fmt.Errorf("slots: group %q: slots %v of %q still unstable after %v (a transaction holding their offsets is open): %w: %w", group, pending, topic, took, ctx.Err(), kerr.UnstableOffsetCommit)
}

// fetchStable asks once for the stable offsets of slots, adds the stable
// ones that have an offset to out, and returns those answered unstable.
func fetchStable(ctx context.Context, cl *kgo.Client, group, topic string, slots []int32, out map[int32]Committed) ([]int32, error) {
	// The batched shape (v8+): franz-go fills in the single-group one
	// (v7 and below) from it, sends the topic's ID at v10, and always
	// answers in this shape.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = true
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = topic, slices.Clone(slots)
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("slots: group %q: OffsetFetch of slots %v of %q: %w", group, slots, topic, err)
	}
	if resp.Version < 7 {
		return nil, fmt.Errorf("slots: group %q: OffsetFetch went at v%d, which has no RequireStable (v7+, Kafka 2.5+): a pending offset would look committed", group, resp.Version)
	}
	i := slices.IndexFunc(resp.Groups, func(g kmsg.OffsetFetchResponseGroup) bool { return g.Group == group })
	if i < 0 {
		return nil, fmt.Errorf("slots: group %q: OffsetFetch of slots %v of %q: the group is not in the response", group, slots, topic)
	}
	g := resp.Groups[i]
	if err := kerr.ErrorForCode(g.ErrorCode); errors.Is(err, kerr.UnstableOffsetCommit) {
		return slots, nil
	} else if err != nil {
		return nil, fmt.Errorf("slots: group %q: OffsetFetch of slots %v of %q: %w", group, slots, topic, err)
	}
	var unstable []int32
	answered := map[int32]bool{}
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			err := kerr.ErrorForCode(p.ErrorCode)
			switch {
			case err != nil && !errors.Is(err, kerr.UnstableOffsetCommit):
				// Whatever the topic: franz-go leaves the name empty
				// when it cannot map a v10 answer's topic ID, and
				// says why here.
				return nil, fmt.Errorf("slots: group %q: OffsetFetch of slot %d of %q: %w", group, p.Partition, topic, err)
			case t.Topic != topic || !slices.Contains(slots, p.Partition):
				continue
			}
			answered[p.Partition] = true
			switch {
			case err != nil:
				unstable = append(unstable, p.Partition)
			case p.Offset >= 0:
				var md string
				if p.Metadata != nil {
					md = *p.Metadata
				}
				out[p.Partition] = Committed{Offset: p.Offset, Metadata: md}
			}
		}
	}
	for _, s := range slots {
		if !answered[s] {
			return nil, fmt.Errorf("slots: group %q: OffsetFetch of slots %v of %q: slot %d not in the response", group, slots, topic, s)
		}
	}
	slices.Sort(unstable)
	return unstable, nil
}
