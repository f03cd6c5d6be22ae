package connector

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/connector/slots"
)

// Cluster mode (docs/cluster.md). Every worker with the same config joins
// the group kmirror.<mirror> on the target cluster; the partitions of the
// control topic kmirror.<mirror>.slots.internal are the task slots, and the
// group coordinator hands them out (connector/slots). Each source partition
// belongs to one slot forever (slots.SlotOf). A worker copies the
// partitions of every slot it owns with one copier, whose partitions come
// and go with the slots. With exactly_once that copier writes through one
// transactional producer per worker (data/txn.go), and every commit
// carries the slots it touched to the group with the member's generation
// (TxnFence, docs/design/one-producer-per-worker.md): a worker that lost
// its slots can never commit, and a new owner waits until the slots'
// commits are settled before it reads where they stand. The owner of slot
// 0 also runs the control plane's writes (creating and growing topics,
// metadata, config, ACL and group sync, listeners); every worker discovers
// and selects, so each knows what to copy.

// ClusterConfig is how the workers of a mirror share it: its slots and
// whether they write exactly once.
type ClusterConfig struct {
	// ExactlyOnce makes the worker's copier write through a
	// transactional producer whose commits carry the slots to the group
	// under the member's generation (data.TxnFence), committing records,
	// progress and index together (data/txn.go). Without it the copier
	// writes through an idempotent producer and persists its progress
	// every ProgressInterval: at least once.
	ExactlyOnce bool
	// Slots is the slot count when the control topic is created.
	Slots int32
	// SessionTimeout is the group session timeout.
	SessionTimeout time.Duration
	// CommitInterval is how often each slot commits.
	CommitInterval time.Duration
	// RebalanceTimeout bounds a rebalance (slots.Config); zero means
	// slots.DefaultRebalanceTimeout. Not in the YAML config: tests
	// shorten it.
	RebalanceTimeout time.Duration
}

// DefaultClusterConfig is the slot plane of a mirror whose config says
// nothing (as config.MirrorCluster's defaults).
func DefaultClusterConfig() *ClusterConfig {
	return &ClusterConfig{Slots: 16, SessionTimeout: 10 * time.Second, CommitInterval: data.DefaultCommitInterval}
}

// controlSlot is the slot whose owner runs the control plane.
const controlSlot = 0

// slotPlane is a worker's data plane: a copier for each slot the mirror's
// group gave it.
type slotPlane struct {
	m *Mirror

	mu    sync.Mutex
	n     int32 // slots: the control topic's partition count
	owned map[int32]*slotWorker
	// member is the worker's membership in the group, nil until joined.
	member *slots.Member
	// assigned are the slots the group gives this worker, updated in the
	// group's callbacks: the truth a takeover checks before it installs
	// a slot's copier (a takeover runs for a while, and the slot may be
	// revoked meanwhile). A slot assigned and not owned is taken over
	// again on every pass (takeOverMissing).
	assigned map[int32]bool
	// takeMu serializes takeovers.
	takeMu sync.Mutex
	// undecidedSince is when a takeover first found a slot's last
	// commit (by its mark) undecided in the progress topic, kept across
	// takeover attempts (settleSlots); guarded by takeMu.
	undecidedSince map[string]time.Time
	// routeMu serializes handing partitions to the copiers (assign) with
	// releasing slots: an assignment routed to the shared copier just
	// before its slot was released would otherwise add the partition
	// back after the release took it out, and two workers would copy it.
	// Taken before mu.
	routeMu sync.Mutex
	// members is the group as last described (refreshed every pass),
	// membersErr why the last description failed (the list is then the
	// previous one: unknown this time, not empty).
	members    []slots.MemberInfo
	membersErr error
	// ctx is the worker's run context (set by join): a slot taken over
	// again outside a pass (after a commit's outcome was unknown) is
	// taken over within it. closing is set once shutdown began: nothing
	// is installed after that.
	ctx     context.Context
	closing bool
	// progress is this worker's copy of the progress topic, kept current
	// by each takeover and group-sync pass (progressLog).
	progress *data.ProgressLog
	// shared is the one copier of every slot this worker owns (created
	// with the first slot): a single worker's data path, whose
	// partitions come and go with the slots. One copier rather than one
	// per slot: its fetches and produce requests carry the partitions of
	// every slot (16 copiers cost a third more CPU per record and half as
	// much again memory at 100,000 partitions; with exactly_once, a
	// transactional producer per slot sent one batch per request and
	// copied compressed topics at half at least once's rate).
	shared *slotWorker
	// txnID is this worker's transactional ID with exactly_once,
	// kmirror.<mirror>.worker-<random>: new for each process, so that two
	// workers never share one, and the same for every copier this
	// process builds (taking its own ID over again settles a commit
	// whose outcome was unknown).
	txnID string
	// commitMu orders doom with Commit.
	commitMu sync.Mutex
	// lost counts the slots lost (the session expired) while copying: a
	// transaction open across a loss aborts (txnMembership).
	lost uint64
	// recordPath: partitions whose slot copies them on the record path
	// although the batch path is on (exactly_once: txnAbort). It
	// survives the slot's copiers.
	recordPath *data.RecordPathSet
	// srcLeaders and dstLeaders are the clusters' leaders and topic IDs,
	// cached once for the batch paths of every slot copied here.
	srcLeaders, dstLeaders *data.LeaderCache
	// batchBudget bounds the batches the slots' batch paths hold fetched
	// and not yet acknowledged, together (data.BatchBudget).
	batchBudget *data.BatchBudget
}

// slotWorker is one owned slot, copied through the plane's shared copier
// (cp, dst and writer are the shared worker's, which outlives the slot),
// with what it found in the progress topic when it took the slot over; or
// the shared worker itself (slot -1).
type slotWorker struct {
	slot int32
	cp   *data.Copier
	// dst is the copier's producer: with exactly_once transactional
	// (the worker's txnID), else idempotent.
	dst *kgo.Client
	// loaded holds the committed progress and indexes of the slot's
	// partitions not resumed yet (and those of the slots taken over with
	// it: see takeOver); guarded by the plane's mu.
	loaded data.Loaded
	// writer persists the progress every progress_interval (at least
	// once); nil with exactly_once, where progress commits with the
	// records (cp.txn).
	writer *data.ProgressWriter

	stop          context.CancelFunc // ends the poll loop and the writer's ticks
	produceCtx    context.Context    // of the slot's records and progress writes
	cancelProduce context.CancelFunc
	done          chan struct{} // closed when the poll loop and the writer's ticks ended
	running       bool
}

func newSlotPlane(m *Mirror) *slotPlane {
	return &slotPlane{m: m, owned: make(map[int32]*slotWorker), assigned: make(map[int32]bool), undecidedSince: make(map[string]time.Time),
		txnID:    policy.InternalTopicPrefix + m.cfg.Name + ".worker-" + rand.Text()[:16],
		progress: data.NewProgressLog(m.log, m.cfg.TargetOpts, m.progressTopic), recordPath: data.NewRecordPathSet(),
		srcLeaders: data.NewLeaderCache(), dstLeaders: data.NewLeaderCache(), batchBudget: data.NewBatchBudget()}
}

// join joins the group and returns once the worker is a member; slots are
// handed to takeOver and release from the group's goroutine.
func (p *slotPlane) join(ctx context.Context) error {
	cc := p.m.cfg.Cluster
	member, err := slots.Join(ctx, slots.Config{
		Group:             policy.InternalTopicPrefix + p.m.cfg.Name,
		Topic:             policy.InternalTopic(p.m.cfg.Name, "slots"),
		Slots:             cc.Slots,
		ReplicationFactor: p.m.cfg.ReplicationFactor,
		SessionTimeout:    cc.SessionTimeout,
		RebalanceTimeout:  cc.RebalanceTimeout,
		ClientOpts:        p.m.cfg.TargetOpts,
		Logger:            p.m.log,
		OnAssigned:        p.onAssigned,
		OnRevoked:         func(ctx context.Context, ss []int32) { p.release(ctx, ss, true) },
		OnLost:            func(ctx context.Context, ss []int32) { p.release(ctx, ss, false) },
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.member = member
	p.ctx = ctx
	p.n = member.Slots()
	p.m.metrics.setSlots(p.n)
	p.mu.Unlock()
	// Slots assigned before Join returned waited for the slot count.
	p.takeOverMissing(ctx)
	return nil
}

// onAssigned records the slots the group gave this worker and takes them
// over (once the slot count is known: the first assignment comes before
// Join returns, and join takes those over).
func (p *slotPlane) onAssigned(ctx context.Context, ss []int32) {
	p.mu.Lock()
	for _, s := range ss {
		p.assigned[s] = true
	}
	known := p.n > 0
	p.mu.Unlock()
	if known {
		p.takeOver(ctx, ss)
	}
}

// takeOverMissing takes over every slot the group gave this worker that
// has no copier: assigned before the slot count was known, or whose
// takeover failed (a broker down), or whose copier was fenced. The pass
// calls it, so a failed takeover is retried every refresh interval.
func (p *slotPlane) takeOverMissing(ctx context.Context) {
	p.mu.Lock()
	var missing []int32
	for s := range p.assigned {
		if p.owned[s] == nil {
			missing = append(missing, s)
		}
	}
	p.mu.Unlock()
	if len(missing) > 0 {
		slices.Sort(missing)
		p.takeOver(ctx, missing)
	}
}

// slotOf is the slot of a source partition (0 before the slot count is
// known).
func (p *slotPlane) slotOf(tp data.TopicPartition) int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.slotOfLocked(tp)
}

// ownsControl reports whether this worker runs the control plane.
func (p *slotPlane) ownsControl() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.owned[controlSlot]
	return ok
}

// takeOver starts the slots the group handed this worker: read where
// each stands in the progress topic, then copy its partitions from there
// through the shared copier. With exactly_once it first makes sure no
// earlier owner can still commit: a worker of an earlier version is fenced
// (its slot's transactional ID taken over), and the slots' commits in the
// group are waited for until none is pending and the progress they name
// is read (settleSlots). A slot that cannot start is logged and retried on
// the next assignment or pass.
func (p *slotPlane) takeOver(ctx context.Context, ss []int32) {
	p.takeMu.Lock()
	defer p.takeMu.Unlock()
	p.mu.Lock()
	// Revoked already: its new owner copies it. Fencing its legacy ID now
	// would stall nothing, but reading it is work for nothing.
	ss = slices.DeleteFunc(slices.Clone(ss), func(s int32) bool { return !p.assigned[s] || p.owned[s] != nil || p.closing })
	p.mu.Unlock()
	if len(ss) == 0 {
		return
	}
	slices.Sort(ss)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, p.takeoverAttempt())
	defer cancel()
	// The group's callbacks get the group client's context, which a
	// shutdown does not cancel: a takeover waiting for a slot's commits
	// to settle kept a worker running 30 s after SIGTERM (chaos seed
	// 3673521089659424442). The worker's own context ends it too.
	p.mu.Lock()
	runCtx := p.ctx
	p.mu.Unlock()
	if runCtx != nil {
		defer context.AfterFunc(runCtx, cancel)()
	}
	fail := func(what string, err error) {
		p.m.log.Error("cannot take the slots over ("+what+"); they stay without a copier until the next rebalance or pass", "slots", ss, "err", err)
	}
	if p.m.cfg.Cluster.ExactlyOnce {
		if err := p.fenceLegacy(ctx, ss); err != nil {
			fail("fence a worker of an earlier version", err)
			return
		}
	}
	dst, err := p.sharedProducer(ctx)
	if err != nil {
		fail("create the worker's producer", err)
		return
	}
	// Only these slots' partitions: the progress log holds them all.
	keep := func(tp data.TopicPartition) bool { return slices.Contains(ss, p.slotOf(tp)) }
	var ld data.Loaded
	if p.m.cfg.Cluster.ExactlyOnce {
		ld, err = p.settleSlots(ctx, dst, ss, keep)
	} else {
		// A revoked owner persisted its progress before the group
		// moved the slot; a lost one, what it last wrote.
		ld, err = p.progress.Current(ctx, kadm.NewClient(dst), keep)
	}
	if err != nil {
		fail("read their progress in "+p.m.progressTopic, err)
		return
	}
	// The slots taken over together share what was loaded: a partition
	// belongs to one slot, and Assign resumes each (taking it out of the
	// maps) under p.mu. A copy per slot cost 10 MB at 100,000 partitions.
	var installed []int32
	p.mu.Lock()
	sh := p.shared
	for _, slot := range ss {
		if !p.assigned[slot] || p.owned[slot] != nil || p.closing || sh == nil {
			continue // revoked while it was being taken over
		}
		p.owned[slot] = &slotWorker{slot: slot, cp: sh.cp, dst: sh.dst, writer: sh.writer, loaded: ld}
		installed = append(installed, slot)
	}
	p.mu.Unlock()
	for _, slot := range installed {
		p.m.metrics.slotOwned(slot, true, "assigned")
	}
	p.shareRateLimit()
	p.m.log.Info("slots taken over", "slots", installed, "partitions_stored", len(ld.Positions), "took", time.Since(begin).Round(time.Millisecond))
	// Partitions of topics already mirrored start now, not at the next
	// pass.
	p.assignKnown(installed)
}

// takeoverAttempt bounds one try to take slots over. A takeover runs in
// the group's assignment callback, and the group's next rebalance waits for
// the callback: franz-go goes on heartbeating, but cannot rejoin until it
// returns, and a member that does not rejoin within the rebalance timeout
// is removed from the group with every slot it owns. A takeover bounded
// by a minute, waiting for a slot's commit that could not settle, had its
// worker removed at every rebalance, and the next owner of the slot then
// waited the same way (chaos seed 3673521089659424442). So a try stops
// well within the rebalance timeout (a quarter of it: a try from the pass
// may hold takeMu while the callback waits), and the slot, assigned and
// without a copier, is tried again on every pass (takeOverMissing): what a
// try read of the progress topic is kept, and a wait for an open
// transaction goes on where it stood.
func (p *slotPlane) takeoverAttempt() time.Duration {
	rt := p.m.cfg.Cluster.RebalanceTimeout
	if rt <= 0 {
		rt = slots.DefaultRebalanceTimeout
	}
	return rt / 4
}

func (p *slotPlane) group() string      { return policy.InternalTopicPrefix + p.m.cfg.Name }
func (p *slotPlane) slotsTopic() string { return policy.InternalTopic(p.m.cfg.Name, "slots") }

// sharedProducer is the shared copier's producer, created with the shared
// copier on the first call: idempotent, or with exactly_once transactional
// with the worker's ID, which it takes over (InitProducerID: what an
// earlier copier of this worker left open is settled).
func (p *slotPlane) sharedProducer(ctx context.Context) (*kgo.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shared != nil {
		return p.shared.dst, nil
	}
	cfg := p.m.cfg
	opts := append(p.m.producerOpts(), p.m.metadataMinAge())
	var ends *data.EndTxnCounter
	if cfg.Cluster.ExactlyOnce {
		ends = new(data.EndTxnCounter)
		opts = append(opts,
			kgo.WithHooks(ends),
			kgo.TransactionalID(p.txnID),
			kgo.TransactionTimeout(max(time.Minute, 10*cfg.Cluster.CommitInterval)),
			// Transactions the pre-Kafka-4 way (EndTxn at most v4, so
			// franz-go adds partitions with AddPartitionsToTxn): see
			// data.ClassicTransactions.
			kgo.MaxVersions(data.ClassicTransactions()),
		)
	}
	dst, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	if cfg.Cluster.ExactlyOnce {
		if err := data.Fence(ctx, dst); err != nil {
			dst.Close()
			return nil, err
		}
	}
	produceCtx, cancelProduce := context.WithCancel(context.Background())
	w := &slotWorker{slot: -1, dst: dst, produceCtx: produceCtx, cancelProduce: cancelProduce, done: make(chan struct{})}
	w.cp = data.NewCopier(p.m.log, p.m.metrics.data(), dst, produceCtx, p.m.gapOpts(data.CopierOpts{DeadLetter: cfg.DeadLetterTopic, DeliveryTimeout: cfg.DeliveryTimeout, Passthrough: cfg.SourceCompression, DstOpts: cfg.TargetOpts,
		RecordPath: p.recordPath, SourceLeaders: p.srcLeaders, TargetLeaders: p.dstLeaders, BatchBudget: p.batchBudget, Throttle: p.m.throttle,
		FetchMaxBytes: cfg.FetchMaxBytes}))
	if cfg.Cluster.ExactlyOnce {
		// The batch path writes inside the transactions too
		// (data/pttxn.go), with the producer's ID and epoch.
		w.cp.Transactional(p.txnID, cfg.Cluster.CommitInterval, p.m.newProgressWriter(dst, w.cp), ends, p)
	} else {
		w.writer = p.m.newProgressWriter(dst, w.cp)
	}
	p.shared = w
	return dst, nil
}

// release stops slots that leave this worker. Revoked (a rebalance): what
// was copied of them is committed (with exactly_once, the open
// transaction; else the progress, once their records in flight settled)
// before the group hands them on, so the next owner continues where this
// one stopped. Lost (the session expired): another worker may own them
// already, and nothing more is written for them; with exactly_once the
// open transaction aborts.
func (p *slotPlane) release(ctx context.Context, ss []int32, commit bool) {
	var gone []*slotWorker
	p.routeMu.Lock()
	if !commit {
		p.doom()
	}
	p.mu.Lock()
	for _, slot := range ss {
		if w := p.owned[slot]; w != nil {
			gone = append(gone, w)
		}
		delete(p.owned, slot)
		delete(p.assigned, slot)
	}
	p.mu.Unlock()
	var out []data.TopicPartition
	if len(gone) > 0 {
		out = p.takeOutShared(gone)
	}
	p.routeMu.Unlock()
	if len(gone) > 0 {
		if err := p.settleShared(ctx, out, commit); err != nil {
			p.m.log.Error("released slots: what was copied of them and not committed in time is copied again by the next owner", "err", err)
		}
	}
	if !commit {
		p.doom() // a transaction begun while they were taken out
	}
	for _, w := range gone {
		p.m.metrics.slotOwned(w.slot, false, map[bool]string{true: "revoked", false: "lost"}[commit])
		p.m.log.Info("slot released", "slot", w.slot, "committed", commit)
	}
	p.shareRateLimit()
}

// takeOutShared stops the shared copier copying the partitions of slots
// leaving this worker (parked: their records in flight still settle) and
// returns them, those parked already (their topic left the selection)
// included. The caller holds routeMu.
func (p *slotPlane) takeOutShared(ws []*slotWorker) []data.TopicPartition {
	gone := make(map[int32]bool, len(ws))
	for _, w := range ws {
		gone[w.slot] = true
	}
	cp := ws[0].cp
	var tps []data.TopicPartition
	for _, ps := range cp.Persistable() {
		if gone[p.slotOf(ps.TP)] {
			tps = append(tps, ps.TP)
		}
	}
	cp.Unassign(tps)
	return tps
}

// settleShared finishes releasing the shared copier's partitions tps.
// Revoked (commit): within the shutdown timeout, before the group hands
// the slots on, with exactly_once the open transaction commits; else
// their records in flight settle and the progress is persisted. The next
// owner resumes where this worker stopped, nothing copied twice. Lost:
// another worker may own them already; progress written now could move
// theirs back. Either way their states go, so that the slots taken again
// later resume from the progress topic.
func (p *slotPlane) settleShared(ctx context.Context, tps []data.TopicPartition, commit bool) error {
	p.mu.Lock()
	sh := p.shared
	p.mu.Unlock()
	if sh == nil {
		return nil // rebuilt meanwhile: its states went with it
	}
	defer sh.cp.DropParked(tps)
	if !commit {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.m.cfg.ShutdownTimeout)
	defer cancel()
	if p.m.cfg.Cluster.ExactlyOnce {
		ended := make(chan error, 1)
		go func() { ended <- sh.cp.EndTxnNow(cctx) }()
		select {
		case err := <-ended:
			if err != nil {
				return fmt.Errorf("the transaction holding the released slots' records did not commit: %w", err)
			}
			return nil
		case <-cctx.Done():
			// It must not commit once the group moved the slots on.
			p.doom()
			return fmt.Errorf("the transaction holding the released slots' records did not end within shutdown_timeout (%v): it aborts", p.m.cfg.ShutdownTimeout)
		}
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	var abandonedErr error
	for {
		unsettled := 0
		for _, tp := range tps {
			if ps, settled := sh.cp.ParkedState(tp); ps != nil && !settled {
				unsettled++
			}
		}
		if unsettled == 0 {
			break
		}
		select {
		case <-t.C:
			continue
		case <-cctx.Done():
		}
		// Not acknowledged in time: cut them off (the partitions'
		// own contexts) and leave them to the next owner.
		n := 0
		for _, tp := range tps {
			if ps, settled := sh.cp.ParkedState(tp); ps != nil && !settled {
				n += ps.Abandon()
			}
		}
		abandonedErr = fmt.Errorf("%d records of %d partitions not acknowledged by the target within shutdown_timeout (%v)", n, unsettled, p.m.cfg.ShutdownTimeout)
		break
	}
	progressCtx := cctx
	if cctx.Err() != nil {
		var cancel context.CancelFunc
		progressCtx, cancel = context.WithTimeout(context.Background(), finalProgressTimeout)
		defer cancel()
	}
	if err := sh.writer.WriteSync(progressCtx); err != nil {
		return errors.Join(abandonedErr, fmt.Errorf("persist the progress of the released slots: %w; the next owner copies their records since the last write again", err))
	}
	return abandonedErr
}

// stopShared ends the shared copier: its poll loop, then its last
// transaction, or without exactly_once its records in flight and its last
// progress, all within the shutdown timeout. The loop may be blocked in a
// flush or a produce that the target keeps refusing: once the timeout
// passes, the produce context is cancelled, which ends both; the open
// transaction is then left open (it can no longer commit: the member
// leaves the group next, and its coordinator aborts it at its timeout),
// and records not acknowledged are copied again by the next owner.
func (p *slotPlane) stopShared(ctx context.Context, w *slotWorker) error {
	p.mu.Lock()
	stop, running := w.stop, w.running
	p.mu.Unlock()
	if stop != nil {
		stop()
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.m.cfg.ShutdownTimeout)
	defer cancel()
	stopUnblocking := context.AfterFunc(cctx, w.cancelProduce)
	defer stopUnblocking()
	var err error
	stopped := !running || p.waitLoop(w, cctx)
	switch {
	case w.writer != nil:
		// At least once: what was acknowledged is worth persisting
		// even after a loop that did not stop in time.
		err = p.m.drain(cctx, w.dst, w.cp, w.writer, w.cancelProduce, w.cp.Logger())
	case !stopped:
		err = fmt.Errorf("the poll loop did not stop within the shutdown timeout %v", p.m.cfg.ShutdownTimeout)
	case cctx.Err() == nil:
		err = w.cp.TxnEnd(cctx)
	}
	if !stopped && err == nil {
		err = fmt.Errorf("the poll loop did not stop within the shutdown timeout %v", p.m.cfg.ShutdownTimeout)
	}
	w.cancelProduce()
	w.cp.Close()
	w.dst.Close()
	return err
}

// loopGrace bounds the wait for a slot's poll loop after its produce
// context was cancelled: every blocking call in it takes that context, so
// it ends at once; the bound keeps a stop bounded should one not.
const loopGrace = 5 * time.Second

// waitLoop waits for the slot's poll loop to end, until ctx is done; then
// (its produce context now cancelled) for loopGrace more. It reports
// whether the loop ended before ctx was done.
func (p *slotPlane) waitLoop(w *slotWorker, ctx context.Context) bool {
	select {
	case <-w.done:
		return true
	case <-ctx.Done():
	}
	w.cancelProduce()
	select {
	case <-w.done:
	case <-time.After(loopGrace):
		p.m.log.Error("a slot's poll loop did not end after its produce context was cancelled: its producer is closed under it", "slot", w.slot)
	}
	return false
}

// assignKnown assigns the partitions of the given slots that belong to
// topics the control plane already handed out.
func (p *slotPlane) assignKnown(ss []int32) {
	want := make(map[int32]bool, len(ss))
	for _, s := range ss {
		want[s] = true
	}
	m := p.m
	var as []data.Assignment
	m.mu.Lock()
	for _, ts := range m.topics {
		if ts.fatal != nil {
			continue
		}
		for part := range ts.assigned {
			tp := data.TopicPartition{Topic: ts.source, Partition: part}
			if !want[p.slotOf(tp)] {
				continue
			}
			a := data.Assignment{TP: tp, Target: ts.target, TopicID: ts.id, Next: -1}
			// Where the slot has no committed position: MM2's, as the
			// control plane decided when it assigned the partition.
			if floor, _ := m.adoptedStart(tp); floor != nil {
				a.Next, a.Index = floor.Src, index.NewAdopted(nil, floor.Src, floor.Dst)
			}
			as = append(as, a)
		}
	}
	m.mu.Unlock()
	if _, err := p.Assign(as, m.cfg.SourceOpts); err != nil {
		m.log.Error("cannot start copying the slots' partitions; retrying on the next pass", "err", err)
	}
}

// assign routes each assignment to the copier of its slot, from the
// position that slot found committed when it was taken over; partitions of
// slots owned elsewhere are skipped.
func (p *slotPlane) Assign(as []data.Assignment, srcOpts []kgo.Opt) (bool, error) {
	p.routeMu.Lock()
	defer p.routeMu.Unlock()
	bySlot := make(map[*slotWorker][]data.Assignment)
	p.mu.Lock()
	for _, a := range as {
		w := p.owned[p.slotOfLocked(a.TP)]
		if w == nil {
			continue
		}
		// The slot's committed position, read when it was taken over,
		// is where the partition resumes.
		bySlot[w] = append(bySlot[w], w.loaded.Resume(a))
	}
	for _, w := range p.owned {
		if w != nil && w.loaded.Drained() {
			w.loaded = data.Loaded{}
		}
	}
	p.mu.Unlock()
	var errs []error
	for w, as := range bySlot {
		started, err := w.cp.Assign(as, srcOpts)
		if err != nil {
			errs = append(errs, fmt.Errorf("slot %d: %w", w.slot, err))
			continue
		}
		p.mu.Lock()
		sh := p.shared
		p.mu.Unlock()
		if started && sh != nil && sh.cp == w.cp {
			p.run(sh) // its poll loop serves every slot
		}
	}
	return false, errors.Join(errs...)
}

func (p *slotPlane) slotOfLocked(tp data.TopicPartition) int32 {
	if p.n <= 0 {
		return 0
	}
	return slots.SlotOf(tp.Topic, tp.Partition, p.n)
}

// run starts a slot's poll loop, and without exactly_once its progress
// writer's ticks.
func (p *slotPlane) run(w *slotWorker) {
	ctx, stop := context.WithCancel(context.Background())
	p.mu.Lock()
	if w.running {
		p.mu.Unlock()
		stop()
		return // a copier's second client started: its loop serves both
	}
	w.stop, w.running = stop, true
	p.mu.Unlock()
	p.m.log.Debug("slot copying", "slot", w.slot)
	var ticks sync.WaitGroup
	if w.writer != nil {
		ticks.Go(func() {
			var gate data.PersistGate
			every(ctx, data.ProgressTick(p.m.cfg.ProgressInterval), func() {
				if gate.Due(w.cp.ChangeCount(), time.Now()) {
					w.writer.WriteAsync(w.produceCtx)
				}
			})
		})
	}
	go func() {
		defer close(w.done)
		defer ticks.Wait()
		w.cp.Run(ctx)
		if !w.cp.TxnStopped() {
			return
		}
		stop()
		p.rebuildShared(w)
	}()
}

// rebuildShared replaces the shared copier w after its transactions
// stopped: a commit's outcome unknown, or the worker's producer fenced
// (its coordinator aborted a transaction that outlived its timeout). Every
// slot it copied is taken over again with a new copier, whose producer
// takes the worker's transactional ID over again (settling what was left
// open) and reads where each slot stands. A shutdown in progress closes
// it instead.
func (p *slotPlane) rebuildShared(w *slotWorker) {
	p.routeMu.Lock()
	p.mu.Lock()
	mine := p.shared == w && !p.closing
	var slotsGone []int32
	if mine {
		p.shared = nil
		for s, ow := range p.owned {
			if ow.cp == w.cp {
				slotsGone = append(slotsGone, s)
				delete(p.owned, s)
			}
		}
	}
	runCtx := p.ctx
	p.mu.Unlock()
	p.routeMu.Unlock()
	if !mine {
		return
	}
	for _, s := range slotsGone {
		p.m.metrics.slotOwned(s, false, "lost")
	}
	p.shareRateLimit()
	w.cancelProduce()
	w.cp.Close()
	w.dst.Close()
	slices.Sort(slotsGone)
	p.m.log.Warn("the worker's transactions stopped: its slots are taken over again by a new copier, from where their commits stand", "slots", slotsGone, "fenced", w.cp.Fenced())
	p.takeOverMissing(runCtx)
}

// owns reports whether this worker owns slot s.
func (p *slotPlane) owns(s int32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.owned[s] != nil
}

// sharedCopier is the shared copier, nil before the first slot.
func (p *slotPlane) sharedCopier() *data.Copier {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shared == nil {
		return nil
	}
	return p.shared.cp
}

func (p *slotPlane) worker(tp data.TopicPartition) *slotWorker {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.owned[p.slotOfLocked(tp)]
}

func (p *slotPlane) Unassign(tps []data.TopicPartition) {
	by := make(map[*slotWorker][]data.TopicPartition)
	for _, tp := range tps {
		if w := p.worker(tp); w != nil {
			by[w] = append(by[w], tp)
		}
	}
	for w, tps := range by {
		w.cp.Unassign(tps)
	}
}

func (p *slotPlane) ParkedState(tp data.TopicPartition) (*data.PartitionState, bool) {
	if w := p.worker(tp); w != nil {
		return w.cp.ParkedState(tp)
	}
	return nil, false
}

func (p *slotPlane) DropParked(tps []data.TopicPartition) map[data.TopicPartition]*index.Partition {
	out := make(map[data.TopicPartition]*index.Partition)
	for _, tp := range tps {
		if w := p.worker(tp); w != nil {
			maps.Copy(out, w.cp.DropParked([]data.TopicPartition{tp}))
		}
	}
	return out
}

func (p *slotPlane) Partition(tp data.TopicPartition) *data.PartitionState {
	if w := p.worker(tp); w != nil {
		return w.cp.Partition(tp)
	}
	return nil
}

func (p *slotPlane) Snapshot() []*data.PartitionState {
	var out []*data.PartitionState
	for _, cp := range p.copiers() {
		out = append(out, cp.Snapshot()...)
	}
	return out
}

func (p *slotPlane) InFlight() int {
	n := 0
	for _, cp := range p.copiers() {
		n += cp.InFlight()
	}
	return n
}

// copiers are the copiers of the slots this worker owns: the shared one,
// which serves every slot (and is there while it has records in flight of
// slots gone).
func (p *slotPlane) copiers() []*data.Copier {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shared == nil {
		return nil
	}
	return []*data.Copier{p.shared.cp}
}

// shutdown commits and stops the shared copier, then leaves the group so
// that the others take the slots over at once. It returns an error when
// the last transaction did not commit, or (at least once) records were
// not acknowledged in time: the next owner copies them again.
func (p *slotPlane) shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.closing = true
	sh := p.shared
	p.mu.Unlock()
	var err error
	if sh != nil {
		err = p.stopShared(ctx, sh)
		if err != nil && sh.writer == nil {
			err = fmt.Errorf("last transaction not committed (%w); the next owner copies its records again", err)
		}
	}
	p.mu.Lock()
	clear(p.owned)
	member := p.member
	p.mu.Unlock()
	if member != nil {
		member.Close()
	}
	return err
}

var _ dataPlane = (*slotPlane)(nil)

// translationView is what the group sync translates through: the
// partitions copied here answer from their live state, the others (their
// slots owned by other workers) from their committed progress and index in
// the progress topic (committed records only), read when the first of them
// is asked for. A worker that copies every partition a group has reads
// nothing: at 100,000 partitions that read decoded every progress record
// its own slots had just written, only to drop them (0.6 s of CPU and
// 25 MB after a restart). err reports a read that failed (the partitions
// it would have answered for are then not copied, as far as the sync
// knows).
func (m *Mirror) translationView(ctx context.Context, c *clients, dp dataPlane) *storedView {
	return &storedView{dataPlane: dp, load: func() (data.Loaded, error) {
		ld, err := m.slots.progress.Current(ctx, c.dstAdm, func(tp data.TopicPartition) bool { return dp.Partition(tp) == nil })
		if err != nil {
			return ld, fmt.Errorf("read the committed offset indexes in %s: %w", m.progressTopic, m.dstErr(err))
		}
		return ld, nil
	}}
}

// storedView answers Partition from the live data plane when the
// partition is copied here, else from the committed progress and index.
type storedView struct {
	dataPlane
	load func() (data.Loaded, error)

	once sync.Once
	ld   data.Loaded
	err  error
}

func (v *storedView) Partition(tp data.TopicPartition) *data.PartitionState {
	if ps := v.dataPlane.Partition(tp); ps != nil {
		return ps
	}
	v.once.Do(func() { v.ld, v.err = v.load() })
	pos, ok := v.ld.Positions[tp]
	if !ok {
		return nil
	}
	ix := v.ld.Indexes[tp]
	if ix == nil {
		ix = index.New()
	}
	return &data.PartitionState{TP: tp, Acked: pos.Next, Persisted: pos.Next, Committed: pos.Next, Index: ix, End: -1}
}

// refreshMembers describes the group, for status and the slots without an
// owner; an error keeps the previous list. It also reports a group that
// does not settle (watchSettling).
func (p *slotPlane) refreshMembers(ctx context.Context) {
	p.mu.Lock()
	member := p.member
	p.mu.Unlock()
	if member == nil {
		return
	}
	p.watchSettling(member)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ms, err := member.Members(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.membersErr = err
	if err == nil {
		p.members = ms
		p.m.metrics.setSlotsUnowned(len(unownedSlots(p.n, ms)))
	}
}

// unownedSlots are the slots of n that no member of the described group is
// assigned, sorted.
func unownedSlots(n int32, ms []slots.MemberInfo) []int32 {
	owned := make(map[int32]bool)
	for _, mi := range ms {
		for _, s := range mi.Slots {
			owned[s] = true
		}
	}
	var out []int32
	for s := range n {
		if !owned[s] {
			out = append(out, s)
		}
	}
	return out
}

// watchSettling exports how long this worker has been in a rebalance and,
// past the time a healthy group needs (slots.Member.SettleBound), says so
// in a warning a minute: the group's coordinator does not complete the
// rebalance, and slots may stay without an owner meanwhile.
func (p *slotPlane) watchSettling(member *slots.Member) {
	s, ok := member.Settling()
	if !ok {
		p.m.metrics.setRebalanceSeconds(0)
		p.m.logEvery.Forget(logKeyUnsettled)
		return
	}
	took := time.Since(s.Since)
	p.m.metrics.setRebalanceSeconds(took.Seconds())
	if took <= member.SettleBound() {
		return
	}
	args := []any{"group", member.Group(), "waiting_for", waitingFor(s), "since", s.Since.Format(time.RFC3339), "for", took.Round(time.Second), "bound", member.SettleBound()}
	if s.Err != nil {
		args = append(args, "last_error", s.Err)
	}
	p.m.logEvery.Warn(p.m.log, logKeyUnsettled, "the slots group does not settle: this worker is still in a rebalance after the session timeout plus the rebalance timeout; slots may have no owner until it completes", args...)
}

// logKeyUnsettled is the logLimiter key of watchSettling's warning.
const logKeyUnsettled = "cluster-unsettled"

// waitingFor says what a worker in a rebalance waits for.
func waitingFor(s slots.Settling) string {
	switch s.Waiting {
	case "JoinGroup":
		return "JoinGroup: the coordinator to complete the rebalance (every member to rejoin)"
	case "SyncGroup":
		return "SyncGroup: the group leader's assignment"
	}
	return "joining the group"
}

// status is this worker's part of the cluster, and the group as last
// described.
func (p *slotPlane) status() *ClusterStatus {
	p.mu.Lock()
	st := &ClusterStatus{Slots: p.n, Owned: slices.Sorted(maps.Keys(p.owned)), SlotLag: make(map[int32]*int64)}
	if st.Owned == nil {
		st.Owned = []int32{}
	}
	_, st.ControlPlane = p.owned[controlSlot]
	if p.member != nil {
		st.Member = p.member.ID()
	}
	for _, mi := range p.members {
		st.Workers = append(st.Workers, WorkerStatus{Member: mi.MemberID, ClientID: mi.ClientID, Host: mi.Host, Slots: mi.Slots, ControlPlane: slices.Contains(mi.Slots, controlSlot)})
	}
	if p.membersErr != nil {
		st.WorkersError = p.membersErr.Error()
	}
	if p.members != nil {
		st.Unowned = unownedSlots(p.n, p.members)
	}
	member := p.member
	workers := slices.Collect(maps.Values(p.owned))
	p.mu.Unlock()
	if member != nil {
		if s, ok := member.Settling(); ok {
			st.Rebalance = &RebalanceStatus{Since: s.Since, WaitingFor: waitingFor(s), NotSettling: time.Since(s.Since) > member.SettleBound()}
			if s.Err != nil {
				st.Rebalance.Error = s.Err.Error()
			}
		}
	}
	// One walk over the shared copier serves every slot.
	lags := make(map[int32]*lagSum, len(workers))
	for _, w := range workers {
		lags[w.slot] = &lagSum{}
	}
	if sh := p.sharedCopier(); sh != nil {
		for _, ps := range sh.Snapshot() {
			if s := p.slotOf(ps.TP); p.owns(s) && lags[s] != nil {
				lags[s].add(ps.Lag())
			}
		}
	}
	for s, l := range lags {
		st.SlotLag[s] = l.known()
	}
	return st
}

// shareRateLimit makes this worker take its share of the mirror's rate
// limit: the slots it owns over all slots (the workers together then
// fetch at the limit).
func (p *slotPlane) shareRateLimit() {
	p.mu.Lock()
	owned, total := len(p.owned), int(p.n)
	p.mu.Unlock()
	p.m.throttle.SetShare(owned, total, time.Now())
}
