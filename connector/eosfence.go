package connector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/connector/slots"
)

// Exactly once with one transactional producer per worker
// (docs/design/one-producer-per-worker.md): the slot plane fences its
// copier's transactions by the worker's membership in the mirror's group
// (data.TxnFence: Began, Commit, doom), and a worker taking slots over
// makes sure no earlier owner can still commit them (fenceLegacy,
// fenceDeparted) and that their last commits are settled before it reads
// where they stand (settleSlots).

// legacyTransactionalID is the transactional ID a worker of kmirror
// before the one producer per worker wrote slot with (exactly_once): a
// new owner still fences it, for such a worker may still own the slot in
// a rolling upgrade.
func (p *slotPlane) legacyTransactionalID(slot int32) string {
	return policy.InternalTopicPrefix + p.m.cfg.Name + ".slot-" + fmt.Sprint(slot)
}

// fenceLegacy takes over the transactional IDs that workers of kmirror
// before the one producer per worker wrote the slots with
// (legacyTransactionalID): InitProducerID aborts what such a worker left
// open and refuses it any further write. The slots are fenced together:
// one after the other, 16 fences (each a FindCoordinator and an
// InitProducerID) took a second on a busy broker.
func (p *slotPlane) fenceLegacy(ctx context.Context, ss []int32) error {
	errs := make([]error, len(ss))
	var fences sync.WaitGroup
	for i, slot := range ss {
		fences.Go(func() {
			if err := p.fenceID(ctx, p.legacyTransactionalID(slot)); err != nil {
				errs[i] = fmt.Errorf("slot %d: %w", slot, err)
			}
		})
	}
	fences.Wait()
	return errors.Join(errs...)
}

// fenceID takes the transactional ID id over with a client of its own,
// closed at once: see data.Fence.
func (p *slotPlane) fenceID(ctx context.Context, id string) error {
	cl, err := kgo.NewClient(append(p.m.producerOpts(), kgo.TransactionalID(id), kgo.MaxVersions(data.ClassicTransactions()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return data.Fence(ctx, cl)
}

// settleSlots waits until no commit of the slots ss is pending in the
// group (an earlier owner's transaction that carried them, still open)
// and reads the progress of their partitions (keep) up to what their last
// commits wrote: a commit returns before its markers land, so the progress
// it committed may look open for a moment. An earlier owner that left the
// group (killed, or its session expired) is fenced first (fenceDeparted):
// its open transaction would otherwise hold the slots, and what
// read_committed consumers of its partitions see, until its transaction
// timeout. Bounded by ctx.
func (p *slotPlane) settleSlots(ctx context.Context, dst *kgo.Client, ss []int32, keep func(data.TopicPartition) bool) (data.Loaded, error) {
	p.fenceDeparted(ctx, dst, ss)
	committed, err := slots.AwaitStable(ctx, dst, p.group(), p.slotsTopic(), ss)
	if err != nil {
		return data.Loaded{}, fmt.Errorf("wait for the slots' commits in group %s: %w", p.group(), err)
	}
	var marks []data.Mark
	for slot, c := range committed {
		mk, err := data.ParseMark(c.Metadata)
		if err != nil {
			// Committed by something else (an offset reset of the
			// group, say): the mark of kmirror's last commit is gone,
			// and with it what to wait for. Refusing the slot would
			// stop its copy for good; reading the progress now risks
			// only what a commit's markers still in flight hold.
			p.m.logEvery.Warn(p.m.log, fmt.Sprintf("slot-mark-%d", slot), "a slot's committed offset in the group has metadata kmirror did not write: the takeover reads the slot's progress without waiting for its last commit's markers (did something reset the group's offsets?)",
				"group", p.group(), "slot", slot, "err", err)
			continue
		}
		marks = append(marks, mk)
	}
	adm := kadm.NewClient(dst)
	backoff := 10 * time.Millisecond
	for {
		ld, err := p.progress.Current(ctx, adm, keep)
		if err != nil {
			return ld, err
		}
		settled := true
		for _, mk := range marks {
			key := mk.String()
			if p.progress.Decided(mk.ProducerID, mk.Offsets) {
				delete(p.undecidedSince, key)
				continue
			}
			settled = false
			// Kafka writes a commit's markers within milliseconds; a
			// mark still undecided after markersLost was committed
			// without some of them (completeLostCommit). The time is
			// kept across takeover attempts: each is bounded
			// (takeoverAttempt), and may be shorter.
			since, ok := p.undecidedSince[key]
			if !ok {
				p.undecidedSince[key] = time.Now()
				continue
			}
			if time.Since(since) < markersLost {
				continue
			}
			if err := p.completeLostCommit(ctx, adm, mk); err != nil {
				p.m.logEvery.Error(p.m.log, "lost-markers:"+key, "a slot's last commit is not decided in the progress topic long after it committed, and cannot be completed: the slot waits (logged once a minute)",
					"transactional_id", mk.TransactionID, "producer_id", mk.ProducerID, "progress", mk.Offsets, "undecided_for", time.Since(since).Round(time.Second), "err", err)
			}
			// Once a try: completing it again at once would not
			// help, and its markers take a moment to be read.
			p.undecidedSince[key] = time.Now()
		}
		if settled {
			return ld, nil
		}
		select {
		case <-ctx.Done():
			return data.Loaded{}, fmt.Errorf("the progress the slots' last commits wrote is not decided in %s yet: %w", p.m.progressTopic, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// markersLost is how long a slot's last commit may stay undecided in the
// progress topic before the takeover completes it (completeLostCommit):
// Kafka writes a commit's markers within milliseconds, and a commit whose
// markers were only slow is left alone anyway (taking its transactional ID
// over waits for them).
const markersLost = 5 * time.Second

// completeLostCommit ends, as committed, the transaction a slot's last
// commit names (mk) when Kafka committed it without writing its markers to
// the progress topic and the target's partitions. Kafka 4.3.1's transaction
// coordinator skips the markers of a partition it finds no leader for, as
// while its only broker shuts down, and still completes the commit (chaos
// seed 3673521089659424442: "Couldn't find leader endpoint for partitions
// ... these partitions are likely deleted already and hence can be
// skipped"). Those partitions then hold the transaction's records open for
// good: its progress is never decided, so no new owner of the slot could
// take it over (every try timed out and the slot stayed without a copier),
// and read_committed consumers of its target partitions stop before them.
//
// The mark proves the commit: the group applies a transaction's offset
// commit only once it commits. So the new owner takes the transactional ID
// over (InitProducerID returns once nothing of it is pending: markers that
// were only slow have landed, and an open transaction of it is aborted),
// reads the progress again, and commits, through that ID and producer ID, a
// transaction of the partitions that still hold its records (data.
// CommitAgain): the progress partitions, and the target partitions of the
// source partitions whose progress those records are. The records there
// then commit together, as the lost markers would have made them. If the
// producer wrote to those progress partitions again after that commit, its
// open records are not that transaction's alone, and it is left alone.
func (p *slotPlane) completeLostCommit(ctx context.Context, adm *kadm.Client, mk data.Mark) error {
	if mk.TransactionID == "" {
		return errors.New("the mark names no transactional ID to complete its transaction with")
	}
	undecided := func() (data.Undecided, error) {
		u, err := p.progress.Undecided(mk.ProducerID, mk.Offsets)
		if err == nil && u.Beyond {
			err = fmt.Errorf("producer %d wrote to progress partitions %v again after that commit, and those records are still open too: they are not that transaction's alone", mk.ProducerID, u.Partitions)
		}
		return u, err
	}
	// Before taking the ID over: that aborts the producer's open
	// transaction, which would end the lost commit's records with it if
	// it wrote to their partitions.
	if _, err := undecided(); err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(p.m.producerOpts(), kgo.TransactionalID(mk.TransactionID), kgo.MaxVersions(data.ClassicTransactions()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("take the transactional ID %s over (InitProducerID): %w", mk.TransactionID, err)
	}
	if pid != mk.ProducerID {
		return fmt.Errorf("the transactional ID %s has producer ID %d now, not %d: that producer's open records cannot be ended through it", mk.TransactionID, pid, mk.ProducerID)
	}
	if _, err := p.progress.Current(ctx, adm, func(data.TopicPartition) bool { return false }); err != nil {
		return err
	}
	u, err := undecided()
	if err != nil || len(u.Partitions) == 0 {
		return err // decided meanwhile: its markers were only slow
	}
	parts := map[string][]int32{p.m.progressTopic: u.Partitions}
	for _, tp := range u.Sources {
		target := p.m.cfg.Policy.FormatRemoteTopic(p.m.cfg.SourceAlias, tp.Topic)
		parts[target] = append(parts[target], tp.Partition)
	}
	if err := data.CommitAgain(ctx, cl, mk.TransactionID, pid, epoch, parts); err != nil {
		return fmt.Errorf("commit the transaction of %s again: %w", mk.TransactionID, err)
	}
	p.m.log.Warn("completed a slot's last commit whose transaction markers Kafka did not write (its coordinator skips a partition without a leader): committed again through its transactional ID",
		"transactional_id", mk.TransactionID, "producer_id", pid, "partitions", parts)
	return nil
}

// fenceDeparted takes over the transactional IDs of the workers that last
// committed the slots ss and are no longer members of the group, as their
// last commits' marks name them: InitProducerID aborts what such a worker
// left open (or completes a commit it had begun), and refuses it any
// further write, should it be paused rather than dead (it then takes its
// slots over again with a new copier, as a new member). Nothing is fenced
// when the group or the commits cannot be read (unknown, not departed):
// the takeover then waits for the open transactions to end, at worst
// their timeout.
func (p *slotPlane) fenceDeparted(ctx context.Context, dst *kgo.Client, ss []int32) {
	p.mu.Lock()
	member := p.member
	p.mu.Unlock()
	if member == nil {
		return
	}
	offs, err := kadm.NewClient(dst).FetchOffsets(ctx, p.group())
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		p.m.log.Warn("cannot read the slots' last commits: a worker that left the group is not fenced, and the takeover waits for its open transaction to end", "group", p.group(), "err", err)
		return
	}
	txnIDs := make(map[string]string) // transactional ID -> member
	for _, s := range ss {
		o, ok := offs.Lookup(p.slotsTopic(), s)
		if !ok || o.Metadata == "" {
			continue // never committed: nobody to fence
		}
		mk, err := data.ParseMark(o.Metadata)
		if err != nil {
			p.m.log.Warn("a slot's last commit has metadata this kmirror cannot read: its writer is not fenced", "slot", s, "err", err)
			continue
		}
		if mk.TransactionID != "" && mk.TransactionID != p.txnID {
			txnIDs[mk.TransactionID] = mk.Member
		}
	}
	if len(txnIDs) == 0 {
		return
	}
	members, err := member.MemberIDs(ctx)
	if err != nil {
		p.m.log.Warn("cannot list the group's members: a worker that left the group is not fenced, and the takeover waits for its open transaction to end", "group", p.group(), "err", err)
		return
	}
	var fences sync.WaitGroup
	for id, m := range txnIDs {
		if members[m] {
			continue // still a member: it committed what it gave up before the group moved it
		}
		fences.Go(func() {
			if err := p.fenceID(ctx, id); err != nil {
				p.m.log.Warn("cannot fence a worker that left the group: the takeover waits for its open transaction to end", "transactional_id", id, "member", m, "err", err)
				return
			}
			p.m.log.Info("fenced a worker that left the group", "transactional_id", id, "member", m)
		})
	}
	fences.Wait()
}

// txnMembership is what a transaction of the shared copier began under
// (Began): the member's ID and how many slots had been lost.
type txnMembership struct {
	member string
	lost   uint64
}

// Began implements data.TxnFence.
func (p *slotPlane) Began() any {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := txnMembership{lost: p.lost}
	if p.member != nil {
		b.member, _ = p.member.Generation()
	}
	return b
}

// Commit implements data.TxnFence: it commits, inside the transaction, the
// slots it touched (those of the partitions whose progress it wrote, and
// every slot owned now) to the group, under this member's ID and current
// generation, with the mark a new owner waits for (data.Mark). It refuses
// a transaction that began under another membership or saw slots lost:
// Kafka checks the generation and the member, never which member owns a
// slot, so committing is safe only while this member has not rejoined or
// lost anything since the transaction began (a worker whose session
// expired rejoins as a new member, maybe given the same slots back).
func (p *slotPlane) Commit(ctx context.Context, dst *kgo.Client, began any, w data.TxnWrites) error {
	b, _ := began.(txnMembership)
	p.commitMu.Lock()
	defer p.commitMu.Unlock()
	p.mu.Lock()
	member, lost := p.member, p.lost
	touched := make(map[int32]bool, len(p.owned))
	for s := range p.owned {
		touched[s] = true
	}
	for _, tp := range w.Partitions {
		touched[p.slotOfLocked(tp)] = true
	}
	p.mu.Unlock()
	if member == nil {
		return errors.New("not a member of the group")
	}
	id, gen := member.Generation()
	switch {
	case b.member == "" || id != b.member:
		return fmt.Errorf("this worker's membership changed during the transaction (member %q, then %q)", b.member, id)
	case lost != b.lost:
		return errors.New("slots were lost during the transaction")
	}
	pid, _, err := dst.ProducerID(ctx)
	if err != nil {
		return err
	}
	mark := data.Mark{ProducerID: pid, TransactionID: p.txnID, Member: id, Offsets: w.Offsets}
	return slots.CommitInTxn(ctx, dst, p.group(), p.slotsTopic(), id, gen, slices.Sorted(maps.Keys(touched)), mark.String())
}

var _ data.TxnFence = (*slotPlane)(nil)

// doom makes the shared copier's open transaction abort instead of
// committing (Commit refuses it): it holds records of slots this worker
// no longer owns. commitMu orders it with a Commit in progress: one that
// checked before it has sent its TxnOffsetCommit already, which the next
// owner's settleSlots then waits for.
func (p *slotPlane) doom() {
	p.commitMu.Lock()
	defer p.commitMu.Unlock()
	p.mu.Lock()
	p.lost++
	p.mu.Unlock()
}
