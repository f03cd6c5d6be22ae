package data

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kmirror/kmirror/connector/recordbatch"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Transactions (exactly_once). A worker's copier writes through a producer
// with the worker's transactional ID (kmirror.<mirror>.worker-<random>),
// and everything it writes (records, progress, index chunks) goes into
// transactions that it commits every commitInterval:
//
//   - Fencing: each commit carries the slots it touched to the mirror's
//     group with the member's generation (TxnFence, implemented by the slot
//     plane in connector/cluster.go); the group coordinator refuses a
//     member it no longer knows, and the copier then aborts. A new owner
//     of a slot waits until no transaction holds a commit of it, and may
//     take a departed worker's ID over (Fence: InitProducerID bumps the
//     epoch and aborts what was left open; the old producer can never
//     commit again, PRODUCER_FENCED or INVALID_PRODUCER_EPOCH).
//   - Exactly once: records, the progress that says they were copied and
//     the index entries that translate them commit together or not at all.
//     A read_committed consumer of the target sees every source record once;
//     a restart (or the next owner) resumes from the committed progress:
//     every record whose transaction committed, also those behind another
//     slot's open transaction (state.Read).
//
// Inside a transaction the copier works as it does without one: promises
// move each partition's acked position and index. A commit first flushes
// (every record acknowledged or failed), then writes the progress and index
// records, flushes again and ends the transaction. The committed position
// of each partition is what acked was at the commit. Any failure (a refused
// record, a failed commit) aborts the transaction: every partition goes back
// to its committed position, its index is cut there, its progress and index
// writes become pending again, and the source is read again from there.
type TxnCycle struct {
	every  time.Duration
	writer *ProgressWriter

	open bool
	// began is when the open transaction's commit interval started (see
	// nextBegan); lastCommit when the last commit started.
	began, lastCommit time.Time
	// produced is set once the open transaction has a record: an empty
	// one is not ended (nothing to commit), only extended.
	produced bool
	// After an abort the copier waits until retryAt (backoff doubling
	// from minRetryBackoff to maxRetryBackoff) before it reads again.
	retryAt time.Time
	backoff time.Duration
	// fenced is set once another owner took the slot over: the copier
	// stops and writes nothing more.
	fenced error
	// unknown is set when a commit's outcome is unknown (its answer was
	// lost: a dropped connection, a timeout, an unexpected error after
	// the coordinator may have written PrepareCommit). Rewinding would
	// copy the records again if it committed; going on would lose them
	// if it did not. The copier stops, and the slot is taken over again:
	// the fence completes or aborts the transaction, and the slot's
	// progress, committed in it or not, says where to resume.
	unknown error
	// endTxns counts the EndTxn requests the transactional producer wrote (nil
	// when it has no such hook): the batch path ends a transaction
	// franz-go did not (endRaw).
	endTxns *EndTxnCounter
	// fence, when set, ties the transactions to a group membership
	// (TxnFence); membership is what its Began returned when the open
	// transaction began.
	fence      TxnFence
	membership any
}

// TxnFence ties a copier's transactions to its worker's membership in the
// mirror's group, Kafka Streams' way since KIP-447: one transactional
// producer copies every slot a worker owns, and each commit carries the
// slots it touched to the group with the member's generation
// (TxnOffsetCommit), which the group coordinator refuses from a member it
// no longer knows. A zombie (a paused worker whose slots moved on) can
// therefore never commit, although its producer is never fenced.
type TxnFence interface {
	// Began is called just before each transaction begins; what it
	// returns is handed to Commit.
	Began() any
	// Commit puts the fence's offsets into the open transaction, after
	// its records and progress were acknowledged and before it ends:
	// w says what the transaction wrote to the progress topic. Any
	// error (a refusal, an unknown outcome, a membership that changed
	// since began) aborts the transaction: Kafka would commit the data
	// of a transaction whose TxnOffsetCommit it refused.
	Commit(ctx context.Context, dst *kgo.Client, began any, w TxnWrites) error
}

// ptTxnFlushTimeout bounds the wait for the batch path's batches at a
// commit or an abort: past it their outcome is unknown, and the slot is
// taken over again.
const ptTxnFlushTimeout = time.Minute

// ptTxn reports whether the copier's batch path writes inside its
// transactions.
func (c *Copier) ptTxn() bool { return c.txn != nil && c.pt != nil && c.pt.txn }

// defaultCommitInterval is how often a slot commits when nothing else
// says: short enough for a low end-to-end latency (records are visible to
// read_committed consumers only once committed), long enough that commit
// round trips cost little.
const DefaultCommitInterval = 100 * time.Millisecond

// IsFenced reports an error that means another producer took the
// transactional ID over.
func IsFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}

// txnStep is called once per poll loop iteration of a transactional copier:
// it opens a transaction when none is, and commits the open one once it is
// commitInterval old. It reports false once the copier is fenced.
func (c *Copier) txnStep(ctx context.Context) bool {
	t := c.txn
	if c.TxnStopped() {
		return false
	}
	if c.ptTxn() {
		if err := c.pt.sequenceLost(); err != nil {
			t.unknown = err
			c.log.Warn("the batch path lost track of a partition's sequence: the slot is taken over again (a new epoch starts every sequence at 0)", "err", err)
			return false
		}
	}
	if t.open && t.produced && time.Since(t.began) >= t.every {
		c.TxnEnd(ctx)
	}
	if c.TxnStopped() {
		return false
	}
	if !t.open && !time.Now().Before(t.retryAt) {
		if t.fence != nil {
			t.membership = t.fence.Began()
		}
		t.writer.takeTxnWrites() // what an aborted transaction wrote is not this one's
		if err := c.dst.BeginTransaction(); err != nil {
			// franz-go refuses to begin only when the producer ID has
			// a fatal error, which no retry clears: fenced (another
			// worker took the slot over, even one that then gave it
			// up), or in a state this producer cannot leave. Either
			// way this copier stops, and the slot is taken over again
			// with a new producer if it is still assigned here.
			// Retrying here kept a slot stalled until its worker died
			// (the chaos soak, seed 7021084470302495820).
			if IsFenced(err) {
				t.fenced = err
				c.log.Warn("fenced: another worker took the slot over; this one writes nothing more", "err", err)
			} else {
				t.unknown = err
				c.log.Warn("cannot begin a transaction: the slot is taken over again", "err", err)
			}
			return false
		}
		if c.ptTxn() && !c.ptBegin(ctx) {
			return false
		}
		t.open, t.began, t.produced = true, t.nextBegan(time.Now()), false
	}
	return true
}

// ptBegin opens the transaction for the batch path with the slot
// producer's ID and epoch as franz-go holds them after BeginTransaction
// (it may have bumped the epoch, recovering from an abort). It reports
// false when the copier stops.
func (c *Copier) ptBegin(ctx context.Context) bool {
	t := c.txn
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pid, epoch, err := c.dst.ProducerID(ctx)
	if err == nil {
		err = c.pt.txnBegin(pid, epoch)
	}
	switch {
	case err == nil:
		return true
	case IsFenced(err):
		t.fenced = err
		c.log.Warn("fenced: another worker took the slot over; this one writes nothing more", "err", err)
	default:
		t.unknown = err
		c.log.Warn("the batch path cannot join the transaction: the slot is taken over again", "err", err)
	}
	return false
}

// nextBegan is when the interval of a transaction opened at now starts.
// Commits follow one another every commit interval, counted from the start
// of the last commit rather than from its end: a record that arrives while
// a commit is made waits for the next, and counted from the end, each
// commit's own time was added to every record's wait once more (the
// exactly-once p99 at 5,000 records/s in bench-mm2 was the interval plus
// two commits). A transaction stays open at least half an interval, so
// that commits slower than that do not leave the copier committing without
// copying.
func (t *TxnCycle) nextBegan(now time.Time) time.Time {
	if t.lastCommit.IsZero() {
		return now
	}
	return later(t.lastCommit, now.Add(-t.every/2))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// txnWait waits, bounded by ctx, until a transaction can be opened again.
func (c *Copier) txnWait(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(c.txn.retryAt)):
	}
}

// txnEnd flushes, writes the progress and index into the open transaction
// and commits it; on any failure it aborts instead and rewinds.
func (c *Copier) TxnEnd(ctx context.Context) error {
	t := c.txn
	if !t.open {
		return nil
	}
	if !t.produced {
		return nil // nothing was written in it: nothing to commit; it stays open
	}
	t.open, t.produced = false, false
	begin := time.Now()
	// A commit must not be cut short by the copy's context: an unknown
	// outcome aborts it. Flushes are bounded by the produce context.
	err := c.dst.Flush(c.produceCtx)
	if err == nil && c.ptTxn() {
		// The batch path's batches are the transaction's too: every
		// one is answered before the progress says they were copied.
		fctx, cancel := context.WithTimeout(c.produceCtx, ptTxnFlushTimeout)
		if err = c.pt.flush(fctx); err != nil {
			err = fmt.Errorf("batches of the batch path not answered: %w", err)
		}
		cancel()
	}
	if err == nil {
		err = c.failedSinceCommit()
	}
	var written []partitionWrites
	if err == nil {
		written = t.writer.WriteAsync(c.produceCtx)
		if err = c.dst.Flush(c.produceCtx); err == nil {
			err = c.failedSinceCommit()
		}
	}
	if err == nil && t.fence != nil {
		fctx, cancel := context.WithTimeout(c.produceCtx, 30*time.Second)
		if err = t.fence.Commit(fctx, c.dst, t.membership, t.writer.takeTxnWrites()); err != nil {
			err = fmt.Errorf("commit the slots to the group: %w", err)
		}
		cancel()
	}
	if err == nil {
		// Bounded by the produce context too: a stop that waited its
		// shutdown timeout cancels it (the outcome is then unknown, and
		// the next owner's fence settles it).
		endCtx, cancel := context.WithTimeout(c.produceCtx, 30*time.Second)
		sent := t.endTxns.writes()
		err = c.dst.EndTransaction(endCtx, kgo.TryCommit)
		if err == nil && c.ptTxn() {
			if c.pt.txnClose() {
				if err := c.endRaw(endCtx, true, sent); err != nil {
					cancel()
					c.pt.txnDone()
					return c.txnUnknown(err)
				}
			}
			c.pt.txnDone()
		}
		cancel()
		if err == nil {
			c.committed()
			t.backoff, t.lastCommit = 0, begin
			c.metrics.TxnEnded(TxnCommitted, time.Since(begin))
			return nil
		}
		if !IsFenced(err) && !errors.Is(err, kerr.OperationNotAttempted) {
			if c.ptTxn() {
				c.pt.txnClose()
			}
			return c.txnUnknown(err)
		}
	}
	c.metrics.TxnEnded(TxnAborted, 0)
	c.txnAbort(ctx, written, err)
	return err
}

// EndTxnNow ends the open transaction between two steps of the poll loop
// (committing it, or aborting it when it cannot commit) and returns how
// it ended: a worker giving slots up commits what it copied of them before
// the group hands them on. It waits for the loop's step in progress,
// whose poll it cuts short.
func (c *Copier) EndTxnNow(ctx context.Context) error {
	c.wakePoll()
	c.loopMu.Lock()
	defer c.loopMu.Unlock()
	if t := c.txn; t.fenced != nil || t.unknown != nil {
		return errors.Join(t.fenced, t.unknown)
	}
	return c.TxnEnd(ctx)
}

// txnUnknown stops the copier after a commit whose outcome is unknown.
func (c *Copier) txnUnknown(err error) error {
	c.txn.unknown = err
	c.metrics.TxnEnded(TxnUnknown, 0)
	c.log.Warn("the outcome of a commit is unknown: the slot is taken over again to learn it from its committed progress", "err", err)
	return err
}

// failedSinceCommit returns the refusal of a partition in this
// transaction, if any: the transaction cannot commit.
func (c *Copier) failedSinceCommit() error {
	if err := c.failedPartition(); err != nil {
		return err
	}
	if n, first := c.txn.writer.takeFailures(); n > 0 {
		// The first refusal is wrapped: a fenced one stops the copier
		// (txnAbort), where aborting and beginning again would fail
		// for good.
		return fmt.Errorf("%d progress or index writes refused, the first: %w", n, first)
	}
	return nil
}

// failedPartition returns the refusal of a partition being copied, if any.
func (c *Copier) failedPartition() error {
	for _, ps := range c.Snapshot() {
		ps.Mu.Lock()
		err := ps.failed
		ps.Mu.Unlock()
		if err != nil {
			return fmt.Errorf("%s/%d: %w", ps.TP.Topic, ps.TP.Partition, err)
		}
	}
	return nil
}

// committed moves every partition's committed position to where it was
// acknowledged.
func (c *Copier) committed() {
	for _, ps := range c.Persistable() {
		ps.Mu.Lock()
		ps.Committed = ps.Acked
		ps.Persisted = ps.Acked
		if t := ps.t; t != nil {
			t.lastAbort = nil
			if r := t.refused; r != nil && ps.Committed > r.offset {
				t.refused, t.stuck = nil, nil
				if c.deadLetter != "" {
					c.metrics.IncDeadLetters()
					c.log.Warn("record refused by the target written to the dead-letter topic; partition moves on",
						"topic", ps.TP.Topic, "partition", ps.TP.Partition, "offset", r.offset, "dead_letter_topic", c.deadLetter, "refusal", r.err)
				} else {
					c.log.Info("the target accepted a record it had refused; partition moves on", "topic", ps.TP.Topic, "partition", ps.TP.Partition, "offset", r.offset)
				}
			}
			ps.dropTroubleIfOver()
		}
		if ps.Index != nil {
			ps.Index.Committed() // durable
		}
		ps.Mu.Unlock()
	}
}

// txnAbort aborts the open transaction and sends every partition back to
// its committed position. A fenced copier stops for good.
func (c *Copier) txnAbort(ctx context.Context, written []partitionWrites, why error) {
	t := c.txn
	if IsFenced(why) {
		t.fenced = why
		c.log.Warn("fenced: another worker took the slot over; this one writes nothing more", "err", why)
		return
	}
	touched := false
	if c.ptTxn() {
		// Nothing more of the batch path is sent; what is in flight
		// is answered before the transaction ends (a batch landing
		// after the abort would join the next transaction), and its
		// partitions are rewound below with the others.
		touched = c.pt.txnClose()
		fctx, cancel := context.WithTimeout(c.produceCtx, ptTxnFlushTimeout)
		err := c.pt.flush(fctx)
		cancel()
		if err != nil {
			t.unknown = fmt.Errorf("batches of the batch path still in flight at an abort: %w", err)
			c.log.Warn("cannot abort the transaction with batches in flight: the slot is taken over again", "err", t.unknown)
			return
		}
	}
	endCtx, cancel := context.WithTimeout(c.produceCtx, 30*time.Second)
	defer cancel()
	if err := c.dst.AbortBufferedRecords(endCtx); err != nil {
		c.log.Warn("aborting buffered records", "err", err)
	}
	sent := t.endTxns.writes()
	err := c.dst.EndTransaction(endCtx, kgo.TryAbort)
	if err == nil && touched {
		err = c.endRaw(endCtx, false, sent)
	}
	if c.ptTxn() {
		c.pt.txnDone()
	}
	if err != nil {
		if IsFenced(err) {
			t.fenced = err
			c.log.Warn("fenced: another worker took the slot over; this one writes nothing more", "err", err)
			return
		}
		// The producer's state is unknown (franz-go reloads its ID
		// before the next transaction, or refuses one): take the slot
		// over again, as after a commit whose outcome is unknown.
		t.unknown = err
		c.log.Warn("cannot abort the transaction: the slot is taken over again", "err", err)
		return
	}
	if c.ptTxn() {
		if err := c.pt.sequenceLost(); err != nil {
			t.unknown = err
			c.log.Warn("transaction aborted; the batch path lost track of a partition's sequence: the slot is taken over again (a new epoch starts every sequence at 0)", "err", err)
			return
		}
	}
	if t.backoff == 0 {
		t.backoff = minRetryBackoff
	} else {
		t.backoff = min(2*t.backoff, maxRetryBackoff)
	}
	t.retryAt = time.Now().Add(t.backoff)
	c.log.Warn("transaction aborted: partitions go back to their committed positions", "retry_in", t.backoff, "err", why)
	// Many aborts come from stale metadata: the copier's producer is not the
	// control plane's, so it never learns grown partition counts
	// (awaitProducerPartitions) and fails every record for a new
	// partition at once. Refresh before the retry, as the plain copier
	// does after a refusal.
	c.dst.ForceMetadataRefresh()
	for _, pw := range written {
		for _, cw := range pw.writes {
			pw.ps.unwrite(cw)
		}
	}
	rewind := make(map[string]map[int32]kgo.EpochOffset)
	resume := make(map[string][]int32)
	var leave []TopicPartition
	for _, ps := range c.Persistable() {
		ps.Mu.Lock()
		ps.Acked, ps.Persisted = ps.Committed, ps.Committed
		ps.endWritten = -1 // the aborted progress carried it: written again
		if ps.Committed >= 0 {
			// Entries for records of the aborted transaction: their
			// target offsets hold nothing a consumer will ever see.
			ps.Index.Truncate(ps.Committed)
		}
		if ps.Index != nil {
			ps.Index.Aborted() // those writes were aborted
		}
		ps.inflight, ps.head = ps.inflight[:0], 0
		if ps.failed != nil {
			if ps.passthrough && c.leavesBatchPath(ps) {
				leave = append(leave, ps.TP)
			}
		}
		t := ps.trouble()
		if t.poison != nil {
			// Refused alone, for good (see refused): read again, it
			// goes to the dead-letter topic in the next transaction;
			// without one, the partition stops before it and retries
			// it with backoff, and says so, as the copier does
			// outside a transaction.
			t.refused, t.poison = t.poison, nil
			if c.deadLetter != "" {
				c.log.Warn("the target refuses a record for good: the next transaction writes it to the dead-letter topic instead",
					"topic", ps.TP.Topic, "partition", ps.TP.Partition, "offset", t.refused.offset, "dead_letter_topic", c.deadLetter, "refusal", t.refused.err)
			} else {
				t.stuck = fmt.Errorf("record at offset %d refused by the target: %w", t.refused.offset, t.refused.err)
				t.poison = t.refused // for logRefusal
				c.logRefusal(ps)
				t.poison = nil
			}
		}
		ps.failed, ps.paused, t.refusalLogged = nil, false, false
		t.lastAbort = why
		ps.Mu.Unlock()
	}
	if len(leave) > 0 {
		// franz-go would write these partitions with the slot
		// producer's ID and epoch from sequence 0, where the broker
		// holds the batch path's sequences: OUT_OF_ORDER_SEQUENCE_NUMBER.
		// They take the record path under the slot's next epoch, whose
		// sequences all start at 0: the slot is taken over again.
		for _, tp := range leave {
			c.recordPath.add(tp)
		}
		t.unknown = fmt.Errorf("partitions %v leave the batch path: %w", leave, why)
		c.log.Warn("the target refuses what the batch path sends: the partitions take the record path, and the slot is taken over again to give them a new producer epoch", "partitions", leave, "err", why)
		return
	}
	for _, ps := range c.Snapshot() { // parked partitions are not read
		ps.Mu.Lock()
		if at := ps.Committed; at >= 0 && ps.passthrough {
			c.pt.rewind(ps.TP, at)
		} else if at >= 0 {
			if rewind[ps.TP.Topic] == nil {
				rewind[ps.TP.Topic] = make(map[int32]kgo.EpochOffset)
			}
			rewind[ps.TP.Topic][ps.TP.Partition] = kgo.EpochOffset{Epoch: -1, Offset: at}
			resume[ps.TP.Topic] = append(resume[ps.TP.Topic], ps.TP.Partition)
		}
		ps.Mu.Unlock()
	}
	if src := c.source(); src != nil && len(rewind) > 0 {
		src.SetOffsets(rewind)
		src.ResumeFetchPartitions(resume)
	}
}

// leavesBatchPath decides, in an abort, whether a batch-path partition that
// failed takes the record path: the target refuses what the batch path
// sends (fallbackErr, or refusals ptMaxRefusals times in a row), as
// rewindFailed decides outside a transaction. The caller holds ps.mu.
func (c *Copier) leavesBatchPath(ps *PartitionState) bool {
	t := ps.trouble()
	refusal := t.expired == nil && !errors.Is(ps.failed, context.Canceled) && !errors.Is(ps.failed, errNoTxn)
	if refusal {
		t.ptRefusals++
	}
	if !fallbackErr(ps.failed) && t.ptRefusals < ptMaxRefusals {
		return false
	}
	c.pt.logFallback(ps.TP, recordbatch.ReasonRefused, ps.failed)
	c.metrics.IncFallback(recordbatch.ReasonRefused)
	return true
}

// fence takes a transactional ID over: InitProducerID bumps the epoch and
// aborts whatever the previous owner left open, so that it can never write
// again. Call it before reading the slot's progress.
func Fence(ctx context.Context, cl *kgo.Client) error {
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return fmt.Errorf("take the transactional ID over (InitProducerID): %w", err)
	}
	return nil
}

// CommitAgain ends, as committed, a transaction of producer pid whose
// markers Kafka did not write to the partitions parts (topic -> partitions)
// although its coordinator committed it: cl's transactional ID must be the
// one that wrote it, taken over already (Fence), at producer ID pid. It adds
// parts to a new transaction of that ID (AddPartitionsToTxn) and commits it
// (EndTxn), writing nothing: the coordinator then writes a commit marker of
// pid to each of parts, and a partition counts the records of pid it still
// holds open as that transaction's, committing them, as it would have with
// the lost markers. A partition without such records gets a marker that ends
// nothing. CONCURRENT_TRANSACTIONS is retried, bounded by ctx.
func CommitAgain(ctx context.Context, cl *kgo.Client, txnID string, pid int64, epoch int16, parts map[string][]int32) error {
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = txnID, pid, epoch
	for _, topic := range slices.Sorted(maps.Keys(parts)) {
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = topic, parts[topic]
		add.Topics = append(add.Topics, rt)
	}
	if err := retryConcurrent(ctx, func() error {
		resp, err := add.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		var errs []error
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					errs = append(errs, fmt.Errorf("%s/%d: %w", rt.Topic, rp.Partition, err))
				}
			}
		}
		if len(errs) > 0 && slices.ContainsFunc(errs, func(err error) bool { return errors.Is(err, kerr.ConcurrentTransactions) }) {
			return kerr.ConcurrentTransactions
		}
		return errors.Join(errs...)
	}); err != nil {
		return fmt.Errorf("add the partitions to a transaction (AddPartitionsToTxn): %w", err)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, pid, epoch, true
	if err := retryConcurrent(ctx, func() error {
		resp, err := end.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}); err != nil {
		return fmt.Errorf("commit (EndTxn): %w", err)
	}
	return nil
}

// retryConcurrent calls fn again while it fails with
// CONCURRENT_TRANSACTIONS (the transactional ID's last transaction still
// ending), bounded by ctx.
func retryConcurrent(ctx context.Context, fn func() error) error {
	start := time.Now()
	for {
		err := fn()
		if !errors.Is(err, kerr.ConcurrentTransactions) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", ctx.Err(), err)
		case <-time.After(concurrentTxnBackoff(time.Since(start))):
		}
	}
}

// txnStopped reports whether the copier stopped for good: fenced, or a
// commit's outcome unknown (the slot must be taken over again).
func (c *Copier) TxnStopped() bool {
	return c.txn != nil && (c.txn.fenced != nil || c.txn.unknown != nil)
}

// fenced reports whether the copier's transactions stopped because
// another producer took its transactional ID over.
func (c *Copier) Fenced() bool { return c.txn != nil && c.txn.fenced != nil }

// transactional makes the copier write inside transactions of its
// producer (transactional ID id), committed every interval with the
// progress w writes; endTxns counts the producer's EndTxn requests
// (endRaw); fence, when not nil, ties them to a group membership
// (TxnFence). The batch path writes inside them too (pttxn.go), with the
// producer's ID and epoch.
func (c *Copier) Transactional(id string, every time.Duration, w *ProgressWriter, endTxns *EndTxnCounter, fence TxnFence) {
	c.txn = &TxnCycle{every: every, writer: w, endTxns: endTxns, fence: fence}
	if c.pt != nil {
		c.pt.useTransactions(id)
	}
}

// ClassicTransactions are the request versions a transactional producer of kmirror may use:
// the newest, except EndTxn at most v4, which keeps franz-go off Kafka 4's
// transaction protocol (KIP-890 part 2, transaction.version=2, on by
// default in Kafka 4). Under it a produce registers its partition in the
// transaction itself, and the first produce after a commit is refused with
// CONCURRENT_TRANSACTIONS until the previous transaction's markers are
// written. franz-go v1.22.3 then resends the refused batch, sequence 0 of
// the new epoch, after later batches of the partition reached the broker:
// they all fail with OUT_OF_ORDER_SEQUENCE_NUMBER and the transaction
// aborts. On Kafka 4.3.1 that cost 1 to 5 s per commit and cut the
// exactly-once throughput to 19,000 records/s (bench-mm2). With explicit
// AddPartitionsToTxn, franz-go retries that request on
// CONCURRENT_TRANSACTIONS before any record is sent, the path every Kafka
// version since 0.11 supports. Fencing and exactly-once are the same under
// both protocols.
//
// Produce stays below v12, AddPartitionsToTxn at v3 and TxnOffsetCommit at v4 (franz-go uses
// those for its own records under the classic protocol anyway) for the
// batch path's raw requests, which take the transactional producer's versions (or
// its lanes', built with these): a Produce v12 would let a broker that
// runs KIP-890 part 2 add the partition to the transaction itself, in a
// transaction the coordinator runs the classic way; AddPartitionsToTxn v4+
// is the brokers' own batched form.
func ClassicTransactions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	v.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	v.SetMaxKeyVersion(int16(kmsg.AddPartitionsToTxn), 3)
	// TxnOffsetCommit v5 is for KIP-890 part 2 transactions (franz-go
	// keeps its own below it under the classic protocol); the slots'
	// commits (slots.CommitInTxn) follow an explicit AddOffsetsToTxn.
	v.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	return v
}
