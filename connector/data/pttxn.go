package data

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The batch path inside a slot's transaction (exactly_once). Source
// batches are forwarded as they are, as without exactly_once, but written
// as the worker's transactional producer writes its records:
//
//   - with the worker producer's ID and epoch (txnBegin, read again at every
//     BeginTransaction: franz-go may bump the epoch after an abort), the
//     transactional bit set (recordbatch.Rewrite), so that a fence (the next
//     owner's InitProducerID) refuses them like any write of the old owner,
//     and read_committed consumers see them only once committed;
//   - each target partition added to the transaction (AddPartitionsToTxn,
//     addToTxn) before its first batch in it, as franz-go does for its own
//     records: the classic protocol (classicTransactions), which the slot
//     producer keeps to;
//   - a commit waits for every batch (txnEnd), an abort for those in
//     flight, and drops those not sent (txnClose); the partitions then go
//     back to their committed positions with the record path's;
//   - the transaction's end reaches the coordinator even when franz-go
//     wrote nothing in it (endRaw): franz-go sends EndTxn only for a
//     transaction it added a partition to.
//
// Sequences continue across the transactions of one epoch: the broker
// keeps a producer's last sequence per partition, aborted or committed. A
// batch refused for sure (refusedForSure) gives its sequence back to the
// next one (failTxnQueueLocked); a failure that leaves the broker's
// sequence unknown cannot be mended with a new producer ID as the
// idempotent path does, so the slot is taken over again (seqLost), and the
// fence's new epoch starts every sequence at 0.

// ptSend is a batch the send loop took to send: ps is q.ps when it was
// taken (enqueue replaces q.ps under p.mu, and sends are read without it).
type ptSend struct {
	tp TopicPartition
	q  *ptQueue
	u  *ptUnit
	ps *PartitionState
}

// errNoTxn fails batches that would be sent with no transaction open.
var errNoTxn = errors.New("no transaction open: the batch is read and written again in the next one")

// useTransactions makes the batch path write inside the slot's
// transactions (txnID is the worker producer's transactional ID). Call it
// before the first partition is added. The lanes keep to the slot
// producer's protocol versions: Produce below v12, so that the broker
// checks each batch's partition is in the transaction instead of adding it
// itself (KIP-890 part 2, which franz-go's classic transactions do not
// follow: see classicTransactions).
func (p *passthrough) useTransactions(txnID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.txn, p.txnID = true, txnID
	p.dstOpts = append(slices.Clip(p.dstOpts), kgo.MaxVersions(ClassicTransactions()))
}

// txnBegin opens a transaction for the batch path with the slot
// producer's ID and epoch as franz-go holds them now. A new ID or epoch
// starts every partition's sequence at 0 (the broker has no state for
// it). It fails when batches are still queued: they were numbered for the
// transaction before, and nothing may carry them into this one.
func (p *passthrough) txnBegin(pid int64, epoch int16) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queued) > 0 {
		return fmt.Errorf("%d partitions still have batches of the last transaction queued", len(p.queued))
	}
	if pid != p.pid || epoch != p.epoch {
		for _, q := range p.queues {
			q.seq, q.lastAck = 0, time.Time{}
		}
		p.pid, p.epoch = pid, epoch
	}
	p.txnOpen, p.txnTouched = true, false
	clear(p.txnAdded)
	return nil
}

// txnClose ends the batch path's part of the transaction: nothing more is
// sent. After a commit every batch was settled; for an abort, batches not
// sent yet fail (errNoTxn) and those in flight fail once answered with an
// error, so wait with flush before ending the transaction. It reports
// whether an AddPartitionsToTxn was sent in the transaction.
func (p *passthrough) txnClose() (touched bool) {
	p.mu.Lock()
	p.txnOpen = false
	touched = p.txnTouched
	p.mu.Unlock()
	kick(p.kickSend)
	return touched
}

// txnDone forgets the partitions added to the ended transaction.
func (p *passthrough) txnDone() {
	p.mu.Lock()
	p.txnTouched = false
	clear(p.txnAdded)
	p.mu.Unlock()
}

// sequenceLost is why the slot must be taken over again, if it must.
func (p *passthrough) sequenceLost() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seqLost
}

// addToTxn adds the target partitions of ready that are not in the open
// transaction yet, in one AddPartitionsToTxn (franz-go sends it to the
// transaction coordinator). CONCURRENT_TRANSACTIONS (the last
// transaction's markers are still being written) is retried after a short
// backoff, bounded by ctx and ptAddTimeout. A partition refused with an
// error a retry may fix waits for its queue's backoff; any other refusal
// fails its queue (a fenced one stops the copier, through the aborted
// transaction: txnAbort).
func (p *passthrough) addToTxn(ctx context.Context, ready []ptSend) {
	p.mu.Lock()
	if !p.txnOpen || p.adding {
		p.mu.Unlock()
		return
	}
	queues := make(map[TopicPartition][]*ptQueue)
	for _, s := range ready {
		target := TopicPartition{s.ps.Target, s.tp.Partition}
		if !p.txnAdded[target] {
			queues[target] = append(queues[target], s.q)
		}
	}
	if len(queues) == 0 {
		p.mu.Unlock()
		return
	}
	// Set before the request is sent, under mu with txnOpen checked: an
	// abort waits for it (pending), and its end then reaches the
	// coordinator whatever the request's answer was (txnTouched).
	p.adding, p.txnTouched = true, true
	pid, epoch := p.pid, p.epoch
	p.mu.Unlock()

	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = p.txnID, pid, epoch
	byTopic := make(map[string]int)
	for target := range queues {
		i, ok := byTopic[target.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[target.Topic] = i
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic = target.Topic
			req.Topics = append(req.Topics, rt)
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, target.Partition)
	}
	results, err := p.requestAdd(ctx, req)

	var failed []*ptQueue
	p.mu.Lock()
	p.adding = false
	for target, qs := range queues {
		perr := err
		if perr == nil {
			var ok bool
			if perr, ok = results[target]; !ok {
				perr = kerr.UnknownServerError
			}
		}
		if perr == nil {
			p.txnAdded[target] = true
			continue
		}
		p.c.logEvery.Warn(p.c.log, "pt-add-txn:"+perr.Error(), "could not add a target partition to the transaction (logged once a minute per error)", "topic", target.Topic, "partition", target.Partition, "err", perr)
		for _, q := range qs {
			// Nothing of q was sent in this transaction: its
			// partition was not in it.
			if waiting, _ := q.answers(); waiting > 0 || q.sent > 0 || len(q.units) == 0 {
				continue
			}
			if (retriable(perr) || errors.Is(perr, kerr.OperationNotAttempted)) && !IsFenced(perr) && ctx.Err() == nil {
				p.retryLaterLocked(q)
				continue
			}
			p.failQueueLocked(q.ps.TP, q, fmt.Errorf("add the partition to the transaction: %w", perr))
			failed = append(failed, q)
		}
	}
	p.mu.Unlock()
	for _, q := range failed {
		p.drainSettled(q)
	}
}

// ptAddTimeout bounds an AddPartitionsToTxn with its retries.
const ptAddTimeout = 30 * time.Second

// requestAdd sends req, retrying CONCURRENT_TRANSACTIONS, and returns each
// partition's error (nil: added), or the request's.
func (p *passthrough) requestAdd(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) (map[TopicPartition]error, error) {
	ctx, cancel := context.WithTimeout(ctx, ptAddTimeout)
	defer cancel()
	start := time.Now()
	for {
		resp, err := req.RequestWith(ctx, p.dst)
		if err != nil {
			return nil, err
		}
		out := make(map[TopicPartition]error)
		again := false
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				err := kerr.ErrorForCode(rp.ErrorCode)
				again = again || errors.Is(err, kerr.ConcurrentTransactions)
				out[TopicPartition{rt.Topic, rp.Partition}] = err
			}
		}
		if !again {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (the last transaction's end still being written: %w)", ctx.Err(), kerr.ConcurrentTransactions)
		case <-time.After(concurrentTxnBackoff(time.Since(start))):
		}
	}
}

// concurrentTxnBackoff is the wait before asking again after
// CONCURRENT_TRANSACTIONS, stalled for so long: the last transaction's
// markers are being written, which takes a few milliseconds to a few tens,
// so the wait stays short (20 ms, as franz-go and the Java producer wait)
// and grows only once the stall is long (franz-go's steps). A backoff
// doubling from 10 ms waited up to 150 ms for markers written in 100, and
// the first records of the transaction waited with it.
func concurrentTxnBackoff(stalled time.Duration) time.Duration {
	switch {
	case stalled > 5*time.Second:
		return time.Second
	case stalled > 5*time.Second/2:
		return 500 * time.Millisecond
	case stalled > time.Second:
		return 200 * time.Millisecond
	}
	return 20 * time.Millisecond
}

// failTxnQueueLocked is failQueueLocked in a transactional copier: q's
// batches fail (the partition fails, and the transaction aborts). There is
// no new producer ID to move the partition to: if its first unacknowledged
// batch was refused for sure (so were those sent behind it: the broker
// takes a partition's batches only in sequence), the next batch takes its
// sequence; if not, the broker's sequence for the partition is unknown and
// the slot is taken over again (seqLost). Nothing of q is in flight; the
// caller holds p.mu and then drains q.settled.
func (p *passthrough) failTxnQueueLocked(tp TopicPartition, q *ptQueue, err error) {
	if len(q.units) > 0 {
		if head := q.units[0]; head.seqSet {
			if head.uncertain {
				if p.seqLost == nil {
					p.seqLost = fmt.Errorf("%s/%d: the target may or may not have appended a batch (%w): its sequence is unknown", tp.Topic, tp.Partition, err)
				}
			} else {
				q.seq = head.seq
			}
		}
	}
	for _, u := range q.units {
		p.release(u)
		q.settled = append(q.settled, ptSettle{u, -1, err})
	}
	q.units, q.sent, q.failed = nil, 0, err
	delete(p.queued, tp)
}

// refusedForSure reports a produce error that says the broker did not
// append the batch: it refused it before it reached the log (its records,
// its producer, its partition). A lost connection, a timeout or an
// unexpected answer may follow an append; OUT_OF_ORDER_SEQUENCE_NUMBER
// says the broker's sequence is not the one kmirror counted.
func refusedForSure(err error) bool {
	if fallbackErr(err) || IsFenced(err) {
		return true
	}
	for _, e := range []error{kerr.NotLeaderForPartition, kerr.UnknownTopicOrPartition, kerr.UnknownTopicID,
		kerr.NotEnoughReplicas, kerr.InvalidTxnState, kerr.InvalidProducerIDMapping, kerr.TopicAuthorizationFailed,
		kerr.PolicyViolation, kerr.InvalidRequiredAcks, kerr.ConcurrentTransactions} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// endTxnCounter counts the EndTxn requests a transactional producer wrote (a kgo
// hook): EndTransaction sends none when franz-go added no partition to
// the transaction itself, and the batch path's partitions may be in it
// (endRaw).
type EndTxnCounter struct{ n atomic.Int64 }

func (h *EndTxnCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.EndTxn) && err == nil {
		h.n.Add(1)
	}
}

// writes is the EndTxn requests written so far (0 without a counter).
func (h *EndTxnCounter) writes() int64 {
	if h == nil {
		return 0
	}
	return h.n.Load()
}

// endRaw ends the transaction the batch path added partitions to when
// franz-go's EndTransaction did not send EndTxn (it wrote nothing in it):
// an abort left to the transaction timeout would let the next commit, at
// the same epoch, commit the aborted batches too. sentBefore is the
// counter's value before EndTransaction; without a counter (nil) the
// EndTxn is sent anyway (a repeated EndTxn of a completed transaction is
// answered as done). If franz-go's producer ID or epoch changed meanwhile
// (it re-initialized it, which aborted the transaction), nothing is sent:
// for a commit that is an unknown outcome.
func (c *Copier) endRaw(ctx context.Context, commit bool, sentBefore int64) error {
	t, p := c.txn, c.pt
	if t.endTxns != nil && t.endTxns.writes() != sentBefore {
		return nil // franz-go ended it
	}
	pid, epoch, err := c.dst.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("end the batch path's transaction: the producer ID: %w", err)
	}
	p.mu.Lock()
	same := pid == p.pid && epoch == p.epoch
	p.mu.Unlock()
	if !same {
		if commit {
			return fmt.Errorf("end the batch path's transaction: the producer was re-initialized (epoch %d), which aborted it", epoch)
		}
		return nil
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = p.txnID, pid, epoch, commit
	start := time.Now()
	for {
		resp, err := req.RequestWith(ctx, c.dst)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if !errors.Is(err, kerr.ConcurrentTransactions) {
			if err != nil {
				return fmt.Errorf("end the batch path's transaction (EndTxn): %w", err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("end the batch path's transaction (EndTxn): %w", ctx.Err())
		case <-time.After(concurrentTxnBackoff(time.Since(start))):
		}
	}
}
