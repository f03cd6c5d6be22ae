package data

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/loglimit"
	"github.com/kmirror/kmirror/connector/recordbatch"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/throttle"
)

// Memory bounds of the data path. franz-go's defaults (a 50 MiB fetch per
// broker, an unbounded producer buffer up to 50,000 records) let a mirror
// at full speed hold ~150 MiB of records, which Go's GC roughly doubles in
// RSS. A fetch of 16 MiB and 32 MiB of records in flight to the target
// keep the pipe full on loopback and LAN round trips (measured: throughput
// unchanged) at a fraction of the memory. The bench's limit loop uses the
// same values so the comparison stays fair.
const (
	FetchMaxBytes            = 16 << 20
	ProducerMaxBufferedBytes = 32 << 20
)

// recordPathRTT is the round trip the record path gives the throttle: it
// does not time its fetches (franz-go's consumer sends them), so a capped
// fetch asks for what the limit allows in throttle.Window.
const recordPathRTT = 0

// copier is the data plane: it reads the assigned source partitions and
// produces every record to the same partition of the target topic.
//
// Acknowledgements drive progress. franz-go produces records in order per
// partition and calls promises serially, so each partition keeps a FIFO of
// the source offsets it has in flight: an ack pops the head and moves the
// partition's acked position past it. Only acked positions are persisted,
// which is what makes a crash repeat records rather than lose them.
//
// A record the target refuses (after franz-go's own retries) marks its
// partition failed: the copier stops producing that partition, waits for
// its in-flight records to settle, rewinds the source read to the last
// acked offset and tries again with backoff. A failure therefore costs a
// metric, a log line and a visible state, never a skipped record.
type Copier struct {
	log     *slog.Logger
	metrics *Metrics
	// src is the record path's consumer, created with the first
	// partition that takes that path: by an assignment (the control
	// pass's goroutine) or by a partition leaving the batch path (the
	// poll loop's). So it is created under srcMu, with srcOpts, and read
	// through source().
	srcMu   sync.Mutex
	srcOpts []kgo.Opt // under srcMu
	src     atomic.Pointer[kgo.Client]
	dst     *kgo.Client // producer, shared with the control plane

	// A partition unassigned and assigned again (its target topic
	// deleted: the copy starts over with a new state) must never be
	// given records the poll loop fetched for its earlier assignment:
	// producePartition looks partitions up by name, and a new state
	// takes the first record it is given as its start, so such a
	// stale fetch (offsets 2500-2999 where the copy starts over at 0)
	// made it skip everything below, and the copy never completed,
	// silently. So:
	//   - consumerMu serializes the poll (PollFetches, then reading
	//     assignGen) with unassign's removal of partitions from the
	//     consumer: a poll takes its records wholly before a removal
	//     or wholly after it (franz-go drops what was buffered for a
	//     removed partition).
	//   - assignGen counts assignments; each state records its own
	//     (gen) before its partition is added to the consumer. A poll
	//     that read assignGen below a state's gen took its records
	//     before that state's partition was added: none of them are
	//     that state's, and producePartition drops them.
	//   - purgeTargets are target topics unassign purged from the
	//     producer, purged again by the poll loop before its next poll:
	//     records of an old state the poll loop was producing while the
	//     pass unassigned it can reach the producer after the first
	//     purge, and must not sit ahead of the new state's records
	//     (franz-go fails a partition's whole buffer with its first
	//     record's error: the old state's cancelled context).
	consumerMu   sync.Mutex
	assignGen    atomic.Uint64
	purgeTargets map[string]bool // under consumerMu

	// produceCtx is cancelled only when a shutdown has given up waiting,
	// to unblock a Produce stuck on a full buffer.
	produceCtx context.Context

	// changes counts what the progress writer may have to write: an
	// acknowledgement, an index change, an assignment, a failed write to
	// redo. A writer tick that finds it unchanged since its last walk
	// skips the walk over every partition (persistGate), so that idle
	// topics cost nothing.
	changes atomic.Uint64

	mu    sync.Mutex
	parts map[TopicPartition]*PartitionState
	// parked holds the state of partitions no longer copied (their topic
	// left the selection): records still in flight settle into it, the
	// progress writer persists it, and a later assignment resumes from
	// it, so a topic selected again continues where it stopped rather
	// than from the position loaded at start.
	parked map[TopicPartition]*PartitionState
	// attention is set by a failing promise so the poll loop looks for
	// partitions to pause and rewind without scanning on every poll.
	attention atomic.Bool
	// wakeFn is c.wake, made once: every partition's onFail shares it
	// (a method value per partition is an allocation per partition).
	wakeFn func()
	// fetchErrLogged rate-limits fetch error logs per partition: franz-go
	// can return the same error on every poll.
	fetchErrLogged map[TopicPartition]time.Time
	// deadLetter is the topic for records the target will never accept
	// ("": none, such a partition stops).
	deadLetter string
	// deliveryTimeout, when positive, fails a partition whose oldest record
	// in flight has waited that long for an acknowledgement (see
	// expireDeliveries).
	deliveryTimeout time.Duration
	expiredAt       time.Time // when expireDeliveries last ran
	logEvery        *loglimit.Limiter
	// txn, when set, makes the copier transactional (exactly_once; see
	// txn.go): the producer has a transactional ID, and records,
	// progress and index commit together.
	txn *TxnCycle
	// cancelPoll ends the poll in progress early (wake): a partition
	// isolating its records must not wait a whole poll timeout per record.
	cancelPoll atomic.Pointer[context.CancelFunc]
	woken      atomic.Bool
	// loopMu is held by each turn of the poll loop (step), so that
	// EndTxnNow ends a transaction between two turns.
	loopMu sync.Mutex
	// recordPath holds the partitions a transactional copier copies on
	// the record path although it has a batch path (see txnAbort).
	recordPath *RecordPathSet
	// throttle holds fetches to the mirror's rate limits (nil: none);
	// held are the record path's topics it paused (holdRecordPath),
	// under consumerMu.
	throttle *throttle.Throttle
	held     map[string]bool
	fetchMax int32 // the record path consumer's fetch sizes, when a limit set them
	// fetchMaxBytes is the most a fetch asks for without a limit
	// (mirrors[].fetch.max_bytes).
	fetchMaxBytes int32
	// pt, when set, copies partitions as batches (passthrough.go).
	pt       *passthrough
	stopPT   context.CancelFunc
	ptDone   chan struct{}
	ptFetchD chan struct{}
	// gaps are the partitions whose fetch was out of range (gap.go).
	gaps gapState
	// unread are the partitions whose fetch failed (lag.go).
	unread unreadEnds
}

// wake asks the poll loop to look at the partitions now rather than at the
// end of its current poll.
func (c *Copier) wake() {
	c.attention.Store(true)
	c.wakePoll()
}

// wakePoll ends the poll in progress (the batch path has fetched data).
func (c *Copier) wakePoll() {
	c.woken.Store(true)
	if cancel := c.cancelPoll.Load(); cancel != nil {
		(*cancel)()
	}
}

type TopicPartition struct {
	Topic     string
	Partition int32
}

// partitionState is one source partition's copy position. Promises (on
// franz-go's promise goroutine) and the poll loop share it under mu.
type PartitionState struct {
	TP      TopicPartition
	Target  string
	TopicID string // the source topic's ID, stored with the progress

	Mu sync.Mutex
	// gen is the copier's assignGen when this state was last assigned
	// (see copier.consumerMu); ptGen the batch path's first gen for it
	// (passthrough.add).
	gen, ptGen uint64
	// index maps every acknowledged source offset to its target offset.
	Index *index.Partition
	// inflight holds the source offsets produced and not yet acked, in
	// produce order; head indexes the oldest.
	inflight []int64
	head     int
	// acked is the next source offset not yet acknowledged by the target:
	// everything below it is on the target. -1 until known.
	Acked int64
	// persisted is the acked value last written to the progress topic.
	Persisted int64
	// committed is, in a transactional copier, the acked value at the
	// last commit: where the partition goes back to when a transaction
	// aborts (-1: nothing committed, and nothing read yet).
	Committed int64
	// end is the source's last stable offset as last seen, for lag.
	End int64
	// endWritten is the End in the last progress record produced (the
	// writer's; a failed write is not retried for it alone).
	endWritten int64
	// failed holds the target's refusal while the partition is rewinding.
	failed error
	// t holds what only a partition in trouble needs; nil otherwise.
	t      *partTrouble
	paused bool
	// passthrough: copied by the batch path (passthrough.go), not by the
	// record path's consumer and producer.
	passthrough bool
	acks        uint64 // acknowledgements, for sampling latency
	// copied counts the records acknowledged since start and lastCopied
	// is the (source) timestamp of the last: the status's throughput and
	// time lag.
	Copied     int64
	lastCopied int64 // Unix ns; 0: none yet

	// Delivery timeout. Records are produced with ctx, the partition's own
	// context: cancelling it makes franz-go fail the partition's buffered
	// records, which the usual failure path then retries. franz-go's own
	// RecordDeliveryTimeout cannot be used: it counts from each record's
	// timestamp, which for a mirror is the source's (often long past).
	ctx        context.Context
	cancel     context.CancelFunc
	progressAt time.Time // when the oldest record in flight was produced, or last acknowledged

	metrics *Metrics
	onFail  func() // sets the copier's attention flag
	// changes is the copier's counter (nil outside a copier): bumped
	// under mu wherever acked, the index or what is persisted moves.
	changes *atomic.Uint64
}

// partTrouble is what a partition keeps only while something goes wrong
// (a refusal and its retry, an isolation, a poison record, a delivery
// timeout, an aborted transaction), and nil the rest of the time: inline,
// it made every partition's state 448 bytes (280 without), and a worker holds one per
// partition. Reached through PartitionState.trouble, with ps.mu held.
type partTrouble struct {
	// retryAt is when a failed partition is retried; backoff the wait,
	// doubled from minRetryBackoff at each failure since the last
	// acknowledgement.
	retryAt time.Time
	backoff time.Duration
	// ptRefusals counts the batch path's refusals since the last
	// acknowledgement: past ptMaxRefusals the partition takes the record
	// path, whatever the reason.
	ptRefusals int
	// refusalLogged: the current refusal was logged (once per failure).
	refusalLogged bool

	// Isolation. A refusal no retry can fix (isPermanent) names a batch,
	// not a record: franz-go fails every record of the refused batch. So
	// after one, records are produced one at a time, each waiting for its
	// acknowledgement, from the last acknowledged offset up to
	// isolateUntil (the refused batch's last offset): the record the
	// target refuses alone is the poison. It is written to the dead-letter
	// topic and skipped, or, without one, the partition stops there
	// (stuck), retried with backoff in case the target's limits change.
	isolateUntil int64 // -1: not isolating
	isolatedOut  bool  // the one isolated record is in flight
	poison       *poisonRecord
	stuck        error // the poison's refusal, while no dead letter takes it
	// refused (exactly_once) is a poison found in a transaction, which
	// the refusal aborted, losing the records before it too. Read again,
	// it is written to the dead-letter topic in its place, inside the
	// transaction, so that the dead letter and the progress past it
	// commit together; without a dead-letter topic the partition stops
	// before it until the records before it are committed and retryAt
	// has passed, and then produces it again. Cleared once committed
	// past.
	refused *poisonRecord

	expired error // why the partition's produce context was cancelled
	// lastAbort is why the last transaction aborted (shown in status
	// until a commit).
	lastAbort error
	// cancelled counts records failed because the produce context was
	// cancelled: a shutdown that gave up on them (see inFlight).
	cancelled int
	// gap is the source gap the partition stopped before (on_source_gap:
	// fail; gap.go): its position stays before it.
	gap *GapError
	// endUnread is when reading the source's end first failed since it
	// was last read (a listing or a fetch that failed): the lag is
	// unknown while it is set (lag.go).
	endUnread time.Time
}

// trouble returns p's partTrouble, making it first if p has none.
func (p *PartitionState) trouble() *partTrouble {
	if p.t == nil {
		p.t = &partTrouble{isolateUntil: -1}
	}
	return p.t
}

// isolateUntil is the last offset produced one record at a time (-1: not
// isolating).
func (p *PartitionState) isolateUntil() int64 {
	if p.t == nil {
		return -1
	}
	return p.t.isolateUntil
}

// retryAt is when a failed partition is retried (zero: at once).
func (p *PartitionState) retryAt() time.Time {
	if p.t == nil {
		return time.Time{}
	}
	return p.t.retryAt
}

// acknowledged is the trouble's end at an acknowledgement: the backoff
// and the batch path's refusals start over, and a partition with nothing
// else to remember drops its partTrouble.
func (p *PartitionState) acknowledged() {
	t := p.t
	if t == nil {
		return
	}
	t.backoff, t.ptRefusals = 0, 0
	t.stuck = nil
	p.dropTroubleIfOver()
}

// dropTroubleIfOver lets p's partTrouble go once it holds nothing that
// matters any more (a retryAt past its failure does not).
func (p *PartitionState) dropTroubleIfOver() {
	t := p.t
	if p.failed == nil && t.backoff == 0 && t.ptRefusals == 0 && !t.refusalLogged && t.isolateUntil < 0 && !t.isolatedOut &&
		t.poison == nil && t.stuck == nil && t.refused == nil && t.expired == nil && t.lastAbort == nil && t.cancelled == 0 && t.gap == nil && t.endUnread.IsZero() {
		p.t = nil
	}
}

// produceContext returns the context to produce the partition's records
// with, making one from parent if it has none or its last was cancelled.
// The caller holds p.mu.
func (p *PartitionState) produceContext(parent context.Context) context.Context {
	if p.ctx == nil || p.ctx.Err() != nil {
		p.ctx, p.cancel = context.WithCancel(parent)
		if p.t != nil {
			p.t.expired = nil
		}
	}
	return p.ctx
}

// poisonRecord is a record the target refused on its own with an error no
// retry can fix.
type poisonRecord struct {
	rec     *kgo.Record // as produced to the target
	offset  int64       // its source offset
	err     error
	sending bool // being written to the dead-letter topic
}

const (
	minRetryBackoff = 500 * time.Millisecond
	maxRetryBackoff = 30 * time.Second
)

// isPermanent reports a produce error that retrying the same records can
// never fix: the records themselves are refused (too large, invalid, a
// timestamp or policy the target will not take). franz-go fails a record
// larger than the producer's batch or buffer limit with MESSAGE_TOO_LARGE
// without sending it.
func isPermanent(err error) bool {
	for _, e := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord,
		kerr.InvalidTimestamp, kerr.PolicyViolation, kerr.CorruptMessage} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// promise is the produce callback for every record of the partition. It
// must not block: franz-go calls all promises on one goroutine.
func (p *PartitionState) Promise(r *kgo.Record, err error) {
	p.Mu.Lock()
	p.changed()
	var src int64 = -1
	if p.head < len(p.inflight) {
		src = p.inflight[p.head]
		p.head++
		switch {
		case p.head == len(p.inflight):
			p.inflight, p.head = p.inflight[:0], 0
			// Nothing in flight: the partition's context is let go
			// (the next produce makes one). Kept, each idle partition
			// held one, and its parent a map entry for it: 13 MB at
			// 100,000 partitions.
			if p.cancel != nil {
				p.cancel()
				p.ctx, p.cancel = nil, nil
			}
		case p.head >= 4096 && 2*p.head >= len(p.inflight):
			// Under a continuous backlog the queue never drains; move
			// the live tail down so it does not grow with every record.
			n := copy(p.inflight, p.inflight[p.head:])
			p.inflight, p.head = p.inflight[:n], 0
		}
	}
	isolated := p.t != nil && p.t.isolatedOut
	if isolated {
		p.t.isolatedOut = false
	}
	p.progressAt = time.Now()
	if err != nil && p.t != nil && p.t.expired != nil && errors.Is(err, context.Canceled) {
		err = p.t.expired
	}
	if err != nil && src >= 0 && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		p.trouble().cancelled++
	}
	if err != nil {
		t := p.trouble()
		if p.failed == nil {
			p.failed = err
			if t.backoff == 0 {
				t.backoff = minRetryBackoff
			} else {
				t.backoff = min(2*t.backoff, maxRetryBackoff)
			}
			t.retryAt = time.Now().Add(t.backoff)
			if isPermanent(err) && src >= 0 {
				if isolated {
					t.poison = &poisonRecord{rec: r, offset: src, err: err}
				} else {
					// Find the refused record: no backoff before
					// isolating, the retry itself is the search.
					t.retryAt = time.Now()
				}
			}
		}
		if isPermanent(err) && src >= 0 && !isolated {
			t.isolateUntil = max(t.isolateUntil, src)
		}
		p.Mu.Unlock()
		if m := p.metrics; m != nil {
			m.ProduceErrors.Inc()
		}
		p.onFail()
		return
	}
	// While failed, later records may still be acked; they will be
	// produced again after the rewind, so they must not move the position.
	if p.failed == nil && src >= 0 && p.t != nil && p.t.refused != nil && src == p.t.refused.offset && r.Topic != p.Target {
		// A dead letter in a transaction (deadLetter): the source
		// record is past, and nothing of it is on the target topic.
		p.Acked = src + 1
		p.t.backoff = 0
	} else if p.failed == nil && src >= 0 {
		p.Acked = src + 1
		p.acknowledged()
		p.Index.Add(src, r.Offset)
		p.Copied, p.lastCopied = p.Copied+1, r.Timestamp.UnixNano()
	}
	p.acks++
	// Latency is sampled: every 16th acknowledgement, and the last one
	// of a burst (so a slow stream is measured record by record). Taking
	// the clock and observing for every record cost ~4% of the copier's
	// CPU at full speed.
	sample := p.acks%16 == 0 || p.head == len(p.inflight)
	p.Mu.Unlock()
	if isolated {
		p.onFail() // the poll loop moves on to the next record
	}
	if m := p.metrics; m != nil {
		// Counters are single atomic adds: cheap enough per record,
		// and exact, so the count can be watched live.
		m.Records.Inc()
		m.Bytes.Add(float64(recordBytes(r)))
		if sample {
			m.Latency.Observe(time.Since(r.Timestamp).Seconds())
		}
	}
}

// changed tells the progress writer that p has something to write.
func (p *PartitionState) changed() {
	if p.changes != nil {
		p.changes.Add(1)
	}
}

// ackBatch is promise for n records acknowledged together at target
// offsets base..base+n-1 (a batch of the batch path), in one step: the
// per-record bookkeeping under one lock, the counters added once.
func (p *PartitionState) ackBatch(n int, base int64, ts time.Time) {
	p.Mu.Lock()
	p.changed()
	isolated := p.t != nil && p.t.isolatedOut
	if isolated {
		p.t.isolatedOut = false
	}
	p.progressAt = time.Now()
	for i := range n {
		var src int64 = -1
		if p.head < len(p.inflight) {
			src = p.inflight[p.head]
			p.head++
		}
		if p.failed == nil && src >= 0 {
			p.Acked = src + 1
			p.Index.Add(src, base+int64(i))
			p.Copied++
		}
	}
	if p.head == len(p.inflight) {
		p.inflight, p.head = p.inflight[:0], 0
	} else if p.head >= 4096 && 2*p.head >= len(p.inflight) {
		k := copy(p.inflight, p.inflight[p.head:])
		p.inflight, p.head = p.inflight[:k], 0
	}
	if p.failed == nil {
		p.acknowledged()
		p.lastCopied = ts.UnixNano()
	}
	p.acks += uint64(n)
	p.Mu.Unlock()
	if isolated {
		p.onFail()
	}
	if m := p.metrics; m != nil {
		m.Records.Add(float64(n))
		m.Latency.Observe(time.Since(ts).Seconds())
	}
}

func recordBytes(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// copierOpts are the copier's optional behaviours.
type CopierOpts struct {
	DeadLetter      string        // Config.DeadLetterTopic
	DeliveryTimeout time.Duration // Config.DeliveryTimeout
	// passthrough forwards source batches as they are where safe
	// (producer.compression: source, without exactly_once).
	Passthrough bool
	// dstOpts build the batch path's connections to the target (its
	// lanes, see passthrough).
	DstOpts []kgo.Opt
	// recordPath is shared by the copiers of a slot (nil: the copier's
	// own): see txnAbort.
	RecordPath *RecordPathSet
	// SourceLeaders and TargetLeaders cache the clusters' leaders and
	// topic IDs for the batch path, shared by the copiers of a worker
	// (nil: the copier's own).
	SourceLeaders, TargetLeaders *LeaderCache
	// BatchBudget bounds the batch path's batches together with the
	// other copiers of the worker that share it (nil: its own bound).
	BatchBudget *BatchBudget
	// Throttle holds the batch path's fetches to the mirror's byte-rate
	// limits, shared by the copiers of a worker (nil: no limits).
	Throttle *throttle.Throttle
	// FetchMaxBytes is the most one fetch from the source asks for (0:
	// FetchMaxBytes); the batch path grows it across a long round trip.
	FetchMaxBytes int32
	// GapPolicy is what a partition does at a source gap (nil: skip);
	// OnGap, when set, is told of every gap (gap.go).
	GapPolicy *GapPolicyVar
	OnGap     func(SourceGap)
}

// recordPathSet is a set of partitions that a transactional slot copies on
// the record path, though the batch path would take them: the target
// refused what the batch path sent. It outlives the slot's copiers: the
// copier that found the refusal stops, and the slot's next one (a new
// producer epoch) starts the partitions on the record path.
type RecordPathSet struct {
	mu sync.Mutex
	m  map[TopicPartition]bool
}

func NewRecordPathSet() *RecordPathSet {
	return &RecordPathSet{m: make(map[TopicPartition]bool)}
}

func (s *RecordPathSet) add(tp TopicPartition) {
	s.mu.Lock()
	s.m[tp] = true
	s.mu.Unlock()
}

func (s *RecordPathSet) Has(tp TopicPartition) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[tp]
}

func NewCopier(log *slog.Logger, m *Metrics, dst *kgo.Client, produceCtx context.Context, opts CopierOpts) *Copier {
	c := &Copier{
		deadLetter:      opts.DeadLetter,
		deliveryTimeout: opts.DeliveryTimeout,
		logEvery:        loglimit.New(time.Minute),
		log:             log,
		metrics:         m,
		dst:             dst,
		produceCtx:      produceCtx,
		parts:           make(map[TopicPartition]*PartitionState),
		parked:          make(map[TopicPartition]*PartitionState),
		fetchErrLogged:  make(map[TopicPartition]time.Time),
		purgeTargets:    make(map[string]bool),
	}
	c.wakeFn = c.wake
	c.gaps.policy, c.gaps.onGap = opts.GapPolicy, opts.OnGap
	c.recordPath = opts.RecordPath
	if c.recordPath == nil {
		c.recordPath = NewRecordPathSet()
	}
	c.throttle = opts.Throttle
	c.fetchMaxBytes = cmp.Or(opts.FetchMaxBytes, FetchMaxBytes)
	if opts.Passthrough {
		c.pt = newPassthrough(c, opts.DstOpts, opts.SourceLeaders, opts.TargetLeaders)
		c.pt.throttle = opts.Throttle
		if b := opts.BatchBudget; b != nil {
			c.pt.useBudget(b)
		}
	}
	return c
}

// assignment is one partition to start copying, from next (or from the
// start of the source log when next < 0).
type Assignment struct {
	TP      TopicPartition
	Target  string
	TopicID string
	Next    int64
	Index   *index.Partition // what was loaded; a fresh one when nil
	// resume, when set, is the partition's parked state to continue
	// with (next and index are then its own).
	Resume *PartitionState
}

// assign starts copying the given partitions. The first call creates the
// source consumer with srcOpts, because franz-go's direct consumer needs
// at least one partition when it is created.
func (c *Copier) Assign(as []Assignment, srcOpts []kgo.Opt) (started bool, err error) {
	if len(as) == 0 {
		return false, nil
	}
	c.srcMu.Lock()
	c.srcOpts = srcOpts
	c.srcMu.Unlock()
	offsets := make(map[string]map[int32]kgo.Offset)
	type ptStart struct {
		tp   TopicPartition
		next int64
		gen  uint64
	}
	var batchPath []ptStart
	c.mu.Lock()
	for _, a := range as {
		if _, ok := c.parts[a.TP]; ok {
			continue
		}
		ps := a.Resume
		if ps != nil {
			ps.Mu.Lock()
			// A refusal that parked with the partition is retried now.
			ps.failed, ps.paused = nil, false
			if ps.t != nil {
				// A gap it stopped before is found again (gap.go).
				ps.t.backoff, ps.t.poison, ps.t.gap = 0, nil, nil
			}
			a.Next = ps.Acked
			ps.Mu.Unlock()
		} else {
			ps = &PartitionState{TP: a.TP, Target: a.Target, TopicID: a.TopicID, Acked: a.Next, Persisted: a.Next, Committed: a.Next, End: -1, endWritten: a.Next, metrics: c.metrics, Index: a.Index}
			if ps.Index == nil {
				ps.Index = index.New()
			}
			ps.onFail = c.wakeFn
			ps.changes = &c.changes
			ps.passthrough = c.pt != nil && !c.recordPath.Has(a.TP)
		}
		delete(c.parked, a.TP)
		c.parts[a.TP] = ps
		ps.Mu.Lock()
		ps.gen = c.assignGen.Add(1) // before the partition is added to the consumer (consume, below)
		pass := ps.passthrough
		if pass {
			// Before a fetch can find the state (passthrough.add).
			ps.ptGen = c.pt.newGen()
			batchPath = append(batchPath, ptStart{a.TP, ps.Acked, ps.ptGen})
		}
		ps.Mu.Unlock()
		if pass {
			continue
		}
		o := kgo.NewOffset().AtStart()
		if a.Next >= 0 {
			o = kgo.NewOffset().At(a.Next)
		}
		if offsets[a.TP.Topic] == nil {
			offsets[a.TP.Topic] = make(map[int32]kgo.Offset)
		}
		offsets[a.TP.Topic][a.TP.Partition] = o
	}
	c.mu.Unlock()
	if len(as) > 0 {
		c.changes.Add(1) // an adopted or restarted index may have chunks to write or delete
	}
	if len(batchPath) > 0 {
		ptStarted, err := c.startPassthrough()
		if err != nil {
			return false, err
		}
		started = ptStarted
		for _, a := range batchPath {
			c.pt.add(a.tp, a.next, a.gen)
		}
	}
	if len(offsets) == 0 {
		return started, nil
	}
	srcStarted, err := c.consume(offsets)
	return started || srcStarted, err
}

// consume adds partitions to the record path's consumer, creating it (with
// them: franz-go's direct consumer needs at least one partition when it is
// created) the first time.
func (c *Copier) consume(offsets map[string]map[int32]kgo.Offset) (created bool, err error) {
	c.srcMu.Lock()
	defer c.srcMu.Unlock()
	if c.src.Load() == nil {
		// Its first fetch goes out at once, before a poll could cap it
		// (holdRecordPath): capped from the start under a rate limit.
		fetchMax := c.throttle.MaxBytes(c.fetchMaxBytes, recordPathRTT, time.Now())
		c.fetchMax = fetchMax // read by polls, which come after c.src is set
		opts := append(append([]kgo.Opt(nil), c.srcOpts...),
			kgo.ConsumePartitions(offsets),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			// A partition added to the consumer is first fetched when
			// the fetch in flight returns; franz-go's 5s default
			// would delay a new topic's first records by that long.
			kgo.FetchMaxWait(500*time.Millisecond),
			kgo.FetchMaxBytes(fetchMax),
			// One partition may fill a fetch: with one fetch in flight
			// per broker, 1 MiB per partition (franz-go's default)
			// copies one partition at 1 MiB per round trip, 12.5 MB/s
			// at 80 ms. The broker still spreads a fetch over the
			// partitions behind (franz-go rotates their order).
			kgo.FetchMaxPartitionBytes(fetchMax),
			kgo.WithHooks(fetchedBytes{c.throttle}),
			// A position the source no longer has is never
			// moved silently: the fetch error goes to the poll
			// loop, which applies on_source_gap (gap.go).
			kgo.ConsumeResetOffset(kgo.NoResetOffset().AtStart()),
		)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return false, err
		}
		c.src.Store(cl)
		return true, nil
	}
	c.src.Load().AddConsumePartitions(offsets)
	return false, nil
}

// source is the record path's consumer, nil until a partition took it.
func (c *Copier) source() *kgo.Client { return c.src.Load() }

// startPassthrough starts the batch path's fetch and send loops the first
// time a partition takes it.
func (c *Copier) startPassthrough() (started bool, err error) {
	if c.pt.src != nil {
		return false, nil
	}
	c.srcMu.Lock()
	srcOpts := c.srcOpts
	c.srcMu.Unlock()
	// The fetch lanes (ptFetchLanes): src is the first, the others are
	// clients of their own for connections of their own.
	srcs := make([]*kgo.Client, 0, ptFetchLanes)
	closeAll := func() {
		for _, cl := range srcs {
			cl.Close()
		}
		for _, l := range c.pt.lanes {
			if l != nil {
				l.Close()
			}
		}
		clear(c.pt.lanes)
	}
	for range ptFetchLanes {
		cl, err := kgo.NewClient(srcOpts...)
		if err != nil {
			closeAll()
			return false, err
		}
		srcs = append(srcs, cl)
	}
	for i := range c.pt.lanes {
		opts := append(slices.Clip(c.pt.dstOpts), kgo.WithHooks(ptWriteHook{c.pt, int32(i)}))
		lane, err := kgo.NewClient(opts...)
		if err != nil {
			closeAll()
			return false, err
		}
		c.pt.lanes[i] = lane
	}
	c.pt.src, c.pt.fetchers = srcs[0], srcs[1:]
	ctx, cancel := context.WithCancel(context.Background())
	c.stopPT = cancel
	c.ptDone, c.ptFetchD = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(c.ptFetchD)
		c.pt.fetchLoop(ctx)
	}()
	go func() {
		defer close(c.ptDone)
		c.pt.sendLoop(c.produceCtx, ctx.Done())
	}()
	return c.source() == nil, nil
}

// unassign stops copying the given partitions (their topic left the
// selection, was deleted at the source, or starts over). Their state is
// parked: records in flight still settle into it and are persisted, and
// takeParked hands it to a later assignment.
func (c *Copier) Unassign(tps []TopicPartition) {
	if len(tps) == 0 {
		return
	}
	rm := make(map[string][]int32)
	targets := make(map[string]string) // source topic -> target topic
	c.mu.Lock()
	for _, tp := range tps {
		if ps := c.parts[tp]; ps != nil {
			targets[tp.Topic] = ps.Target
			c.parked[tp] = ps
		}
		delete(c.parts, tp)
		delete(c.fetchErrLogged, tp)
		c.forgetGap(tp)
		if c.pt != nil {
			c.pt.remove(tp)
		}
		rm[tp.Topic] = append(rm[tp.Topic], tp.Partition)
	}
	// Topics with no partition left are forgotten by both clients:
	// franz-go keeps a topic's ID until the topic is purged, so a topic
	// deleted and recreated under the same name (at the source or the
	// target) would fail forever with UNKNOWN_TOPIC_ID.
	// One walk over the partitions left, not one per topic: a released
	// slot takes thousands of topics' partitions out at once.
	left := make(map[string]bool)
	for tp := range c.parts {
		if _, ok := rm[tp.Topic]; ok {
			left[tp.Topic] = true
		}
	}
	var gone, goneTargets []string
	for topic := range rm {
		if !left[topic] {
			gone = append(gone, topic)
			if t, ok := targets[topic]; ok {
				goneTargets = append(goneTargets, t)
			}
		}
	}
	c.mu.Unlock()
	if src := c.source(); src != nil {
		c.wakePoll() // the poll in progress holds consumerMu
		c.consumerMu.Lock()
		src.RemoveConsumePartitions(rm)
		src.PurgeTopicsFromConsuming(gone...)
		for _, t := range goneTargets {
			c.purgeTargets[t] = true
		}
		c.consumerMu.Unlock()
	}
	c.dst.PurgeTopicsFromProducing(goneTargets...)
	if c.pt != nil {
		c.pt.purge(gone, goneTargets)
	}
}

// parkedState returns a partition's parked state, nil if there is none.
// settled reports that none of its records is still in flight: only then
// is its acked position final, and can copying resume from it.
func (c *Copier) ParkedState(tp TopicPartition) (ps *PartitionState, settled bool) {
	c.mu.Lock()
	ps = c.parked[tp]
	c.mu.Unlock()
	if ps == nil {
		return nil, false
	}
	ps.Mu.Lock()
	defer ps.Mu.Unlock()
	return ps, ps.head == len(ps.inflight)
}

// dropParked forgets the parked state of the given partitions (their
// source topic is gone, or the copy starts over) and returns their
// indexes, whose stored chunks the caller deletes.
func (c *Copier) DropParked(tps []TopicPartition) map[TopicPartition]*index.Partition {
	out := make(map[TopicPartition]*index.Partition)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tp := range tps {
		if ps := c.parked[tp]; ps != nil {
			ps.Mu.Lock()
			out[tp] = ps.Index
			if ps.cancel != nil {
				ps.cancel() // releases the context; what is in flight no longer counts
			}
			ps.Mu.Unlock()
			delete(c.parked, tp)
		}
	}
	return out
}

func (c *Copier) Partition(tp TopicPartition) *PartitionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parts[tp]
}

// snapshot returns the states of the partitions being copied.
func (c *Copier) Snapshot() []*PartitionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*PartitionState, 0, len(c.parts))
	for _, p := range c.parts {
		out = append(out, p)
	}
	return out
}

// persistable returns the states whose progress the writer persists: the
// partitions being copied and the parked ones (their last records may be
// acknowledged after they were parked).
func (c *Copier) Persistable() []*PartitionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*PartitionState, 0, len(c.parts)+len(c.parked))
	for _, p := range c.parts {
		out = append(out, p)
	}
	for _, p := range c.parked {
		out = append(out, p)
	}
	return out
}

const (
	fetchErrLogEvery = 10 * time.Second
	fetchErrBackoff  = 100 * time.Millisecond
)

// pollTimeout bounds one poll so the loop notices failed partitions and
// shutdown even when no records arrive.
const pollTimeout = 500 * time.Millisecond

// pollWait is how long the poll loop may wait for records: pollTimeout,
// or until the open transaction is due to commit once it holds records.
// The commit is made at the top of the loop (txnStep); waiting the whole
// pollTimeout for records that did not come kept the ones already written
// invisible to read_committed consumers up to 400 ms past their commit
// interval (the exactly-once p99 at 5,000 records/s in bench-mm2).
func (c *Copier) pollWait(now time.Time) time.Duration {
	t := c.txn
	if t == nil || !t.open || !t.produced {
		return pollTimeout
	}
	return min(pollTimeout, max(t.began.Add(t.every).Sub(now), time.Millisecond))
}

// run polls and produces until ctx is cancelled. It returns once no more
// records will be produced; the caller then flushes the producer.
func (c *Copier) Run(ctx context.Context) {
	for ctx.Err() == nil {
		c.loopMu.Lock()
		more, wait := c.step(ctx)
		c.loopMu.Unlock()
		if !more {
			return
		}
		if wait {
			c.txnWait(ctx) // after an abort: read nothing outside a transaction
		}
	}
}

// step is one turn of the poll loop, under loopMu: a poll and what it
// fetched produced. It reports whether the loop goes on, and whether it
// waits before the next turn (after an abort, no transaction is open).
func (c *Copier) step(ctx context.Context) (more, wait bool) {
	if c.txn != nil {
		if !c.txnStep(ctx) {
			return false, false // fenced
		}
		if !c.txn.open {
			return true, true
		}
	}
	pollCtx, cancel := context.WithTimeout(ctx, c.pollWait(time.Now()))
	c.cancelPoll.Store(&cancel)
	if c.woken.Swap(false) {
		cancel() // woken between polls: do not wait
	}
	var fetches kgo.Fetches
	var gen uint64
	if src := c.source(); src != nil {
		fetches, gen = c.poll(pollCtx, src)
	} else {
		<-pollCtx.Done() // the batch path's fetches wake it
	}
	c.cancelPoll.Store(nil)
	cancel()
	if ctx.Err() != nil {
		// Records fetched but not produced are simply read again
		// after a restart: progress never moved past them.
		return false, false
	}
	errs := 0
	fetches.EachError(func(topic string, partition int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		errs++
		tp := TopicPartition{topic, partition}
		if isOutOfRange(err) {
			if ps := c.Partition(tp); ps != nil {
				ps.Mu.Lock()
				from := ps.nextWanted()
				ps.Mu.Unlock()
				c.outOfRange(tp, from)
			}
			return
		}
		c.endUnread(tp)
		if time.Since(c.fetchErrLogged[tp]) > fetchErrLogEvery {
			c.fetchErrLogged[tp] = time.Now()
			c.log.Warn("fetch from source failed", "topic", topic, "partition", partition, "err", err)
		}
	})
	c.applyUnreadEnds()
	if errs > 0 && fetches.NumRecords() == 0 {
		// Only errors: do not spin on a partition that fails at once.
		select {
		case <-ctx.Done():
		case <-time.After(fetchErrBackoff):
		}
	}
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) { c.producePartition(fp, gen) })
	c.resolveGaps(ctx)
	if c.pt != nil {
		for _, f := range c.pt.take() {
			c.producePassthrough(f)
		}
	}
	c.expireDeliveries()
	if c.attention.Load() {
		if c.txn != nil && c.failedPartition() != nil {
			// A refusal dooms the transaction: end it now (it
			// aborts, and every partition goes back to its
			// committed position).
			c.attention.Store(false)
			c.TxnEnd(ctx)
			return true, false
		}
		// Isolation steps (one record at a time after a batch
		// refused for good), in a transaction too.
		c.rewindFailed()
	}
	return true, false
}

// poll polls the record path's consumer and returns the fetches with the
// assignGen they were taken at (see copier.consumerMu). Target topics
// unassigned since the last poll are purged from the producer first:
// whatever the previous poll's records of their old states put there
// goes before a new state's first record can.
func (c *Copier) poll(ctx context.Context, src *kgo.Client) (kgo.Fetches, uint64) {
	c.consumerMu.Lock()
	defer c.consumerMu.Unlock()
	if len(c.purgeTargets) > 0 {
		c.dst.PurgeTopicsFromProducing(slices.Collect(maps.Keys(c.purgeTargets))...)
		clear(c.purgeTargets)
	}
	c.holdRecordPath(src, time.Now())
	fetches := src.PollFetches(ctx)
	return fetches, c.assignGen.Load()
}

// fetchedBytes pays the throttle for every batch the record path's
// consumer read, as the bytes it took on the wire (compressed, as the batch
// path counts them): a rate limit caps the link, whatever the path.
type fetchedBytes struct{ t *throttle.Throttle }

func (f fetchedBytes) OnFetchBatchRead(_ kgo.BrokerMetadata, topic string, _ int32, m kgo.FetchBatchMetrics) {
	f.t.Took(topic, m.CompressedBytes, time.Now())
}

// holdRecordPath pauses the record path's topics that a rate limit holds
// back now (the mirror's limit holds them all) and resumes those it no
// longer holds; the poll loop's next turns look again. The batch path
// holds its own fetches (fetchLoop). Called under consumerMu.
func (c *Copier) holdRecordPath(src *kgo.Client, now time.Time) {
	if c.throttle == nil {
		return
	}
	// A fetch asks for no more than the limits allow in a window (or
	// the credit they saved).
	if mb := c.throttle.MaxBytes(c.fetchMaxBytes, recordPathRTT, now); mb != c.fetchMax {
		src.UpdateFetchMaxBytes(mb, mb)
		c.fetchMax = mb
	}
	if len(c.held) == 0 && !c.throttle.Limited() {
		return
	}
	var pause, resume []string
	for _, topic := range src.GetConsumeTopics() {
		held := c.throttle.TopicDelay(topic, now) > 0
		switch {
		case held && !c.held[topic]:
			pause = append(pause, topic)
		case !held && c.held[topic]:
			resume = append(resume, topic)
		}
	}
	for topic := range c.held {
		if !slices.Contains(resume, topic) && c.throttle.TopicDelay(topic, now) == 0 {
			resume = append(resume, topic) // no longer consumed, or no longer held
		}
	}
	if len(pause) > 0 {
		src.PauseFetchTopics(pause...)
		if c.held == nil {
			c.held = make(map[string]bool)
		}
		for _, t := range pause {
			c.held[t] = true
		}
	}
	if len(resume) > 0 {
		src.ResumeFetchTopics(resume...)
		for _, t := range resume {
			delete(c.held, t)
		}
	}
}

// producePartition produces one fetched batch, taken by a poll at assignGen
// gen. Records of a failed partition are dropped here: the rewind reads
// them again.
func (c *Copier) producePartition(fp kgo.FetchTopicPartition, gen uint64) {
	if len(fp.Records) == 0 {
		return
	}
	ps := c.Partition(TopicPartition{fp.Topic, fp.Partition})
	if ps == nil {
		return // unassigned while the fetch was buffered
	}
	ps.Mu.Lock()
	if ps.gen > gen {
		// Fetched for the partition's earlier assignment (the pass
		// unassigned it and assigned it again since the poll): not
		// this state's records. Its own are read from where it was
		// assigned to start.
		ps.Mu.Unlock()
		return
	}
	if ps.failed != nil {
		ps.Mu.Unlock()
		return
	}
	if ps.Acked < 0 {
		// Nothing was acked before: everything below the first record
		// this partition ever returned is not there to copy.
		ps.Acked = fp.Records[0].Offset
		ps.changed()
	}
	if ps.Committed < 0 {
		ps.Committed = ps.Acked // where an aborted first transaction goes back to
	}
	ps.fetchedEnd(fp.LastStableOffset, fp.HighWatermark)
	records := fp.Records
	if u := ps.isolateUntil(); u >= 0 && u >= ps.Acked {
		if ps.t.isolatedOut || ps.paused {
			ps.Mu.Unlock()
			return // fetched before the pause took effect: read again
		}
		if c.holds(ps, records[0].Offset, time.Now()) {
			// Stopped before the refused record until its retry.
			ps.paused = true
			ps.Mu.Unlock()
			c.attention.Store(true)
			return
		}
		// One record at a time; the rest is read again after its
		// acknowledgement (see isolation in partitionState).
		records = records[:1]
		ps.t.isolatedOut, ps.paused = true, true
		c.attention.Store(true) // pause the partition's fetches
	}
	if ps.head == len(ps.inflight) {
		ps.progressAt = time.Now()
	}
	for _, r := range records {
		ps.Produced(r.Offset)
	}
	ctx := ps.produceContext(c.produceCtx)
	var refused *poisonRecord
	if ps.t != nil {
		refused = ps.t.refused
	}
	ps.Mu.Unlock()
	if c.txn != nil {
		c.txn.produced = true // the poll loop's goroutine owns the cycle
	}
	for _, r := range records {
		out := &kgo.Record{
			Topic:     ps.Target,
			Partition: r.Partition,
			Key:       r.Key,
			Value:     r.Value,
			Headers:   r.Headers,
			Timestamp: r.Timestamp,
		}
		if refused != nil && r.Offset == refused.offset && c.deadLetter != "" {
			// Refused for good in an aborted transaction: the dead
			// letter takes its place in this one (its promise moves
			// the position past it, with no index entry).
			out = deadLetterRecord(c.deadLetter, ps.TP, &poisonRecord{rec: out, offset: r.Offset, err: refused.err})
		}
		c.dst.Produce(ctx, out, ps.Promise)
	}
}

// expireDeliveries fails, at most once a second, every partition whose
// oldest record in flight has waited deliveryTimeout for the target's
// acknowledgement: its context is cancelled, so franz-go fails its buffered
// records (those already sent once they are answered) and the partition is
// retried from its last acknowledged offset like after any refusal.
func (c *Copier) expireDeliveries() {
	if c.deliveryTimeout <= 0 || time.Since(c.expiredAt) < time.Second {
		return
	}
	now := time.Now()
	c.expiredAt = now
	for _, ps := range c.Snapshot() {
		ps.Mu.Lock()
		if ps.head < len(ps.inflight) && (ps.t == nil || ps.t.expired == nil) && ps.cancel != nil && now.Sub(ps.progressAt) > c.deliveryTimeout {
			ps.trouble().expired = fmt.Errorf("not acknowledged by the target within producer.delivery_timeout (%v)", c.deliveryTimeout)
			ps.cancel()
		}
		ps.Mu.Unlock()
	}
}

// rewindFailed pauses failed partitions and, once their in-flight records
// have settled and the backoff has passed, rewinds them to the last acked
// offset and resumes them. It also steps isolating partitions (one record
// at a time) and hands poison records to the dead-letter topic.
func (c *Copier) rewindFailed() {
	c.attention.Store(false)
	now := time.Now()
	pause := make(map[string][]int32)
	resume := make(map[string][]int32)
	rewind := make(map[string]map[int32]kgo.EpochOffset)
	var deadLetters, fallback []*PartitionState
	again := false
	for _, ps := range c.Snapshot() {
		ps.Mu.Lock()
		settled := ps.head == len(ps.inflight)
		switch {
		case ps.failed == nil && !ps.paused:
			ps.Mu.Unlock()
			continue
		case ps.failed != nil && c.txn != nil:
			// Failed since the poll loop looked: its transaction
			// aborts on the next look (a refused record is never
			// produced again inside the same transaction).
			ps.Mu.Unlock()
			again = true
			continue
		case ps.failed == nil:
			// Isolating: pause while the one record is in flight,
			// then read on from the next offset.
			if !settled {
				pause[ps.TP.Topic] = append(pause[ps.TP.Topic], ps.TP.Partition)
				again = true
				break
			}
			if c.holds(ps, ps.Acked, now) {
				pause[ps.TP.Topic] = append(pause[ps.TP.Topic], ps.TP.Partition)
				again = true
				break
			}
			if u := ps.isolateUntil(); u >= 0 && ps.Acked > u {
				ps.t.isolateUntil = -1
				c.log.Info("isolation over: copying in batches again", "topic", ps.TP.Topic, "partition", ps.TP.Partition, "acked_offset", ps.Acked)
			}
			addRewind(rewind, resume, ps)
			ps.paused = false
		default:
			if !ps.paused {
				ps.paused = true
				if ps.passthrough {
					c.pt.pause(ps.TP)
				} else {
					pause[ps.TP.Topic] = append(pause[ps.TP.Topic], ps.TP.Partition)
				}
			}
			t := ps.trouble()
			if !t.refusalLogged {
				t.refusalLogged = true
				c.logRefusal(ps)
			}
			switch {
			case !settled || now.Before(t.retryAt):
				again = true // look again on the next poll
			case t.poison != nil && c.deadLetter != "":
				if !t.poison.sending {
					t.poison.sending = true
					deadLetters = append(deadLetters, ps)
				}
			default:
				if t.poison != nil {
					// Retried with backoff: the target's limits
					// may change; it stays failed meanwhile.
					t.stuck = fmt.Errorf("record at offset %d refused by the target: %w", t.poison.offset, t.poison.err)
					t.poison = nil
				}
				switch {
				case ps.passthrough && (fallbackErr(ps.failed) || t.isolateUntil >= ps.Acked || t.ptRefusals >= ptMaxRefusals):
					// The target refuses what the batch path sends:
					// the record path's own batches (and its
					// isolation of a refused record) take over.
					ps.passthrough = false
					c.pt.remove(ps.TP)
					c.pt.logFallback(ps.TP, recordbatch.ReasonRefused, ps.failed)
					c.metrics.IncFallback(recordbatch.ReasonRefused)
					fallback = append(fallback, ps)
				case ps.passthrough:
					if t.expired == nil && !errors.Is(ps.failed, context.Canceled) {
						t.ptRefusals++ // a refusal, not a timeout or a shutdown
					}
					c.pt.rewind(ps.TP, ps.Acked)
				default:
					addRewind(rewind, resume, ps)
				}
				ps.failed, ps.paused, t.refusalLogged = nil, false, false
			}
		}
		ps.Mu.Unlock()
	}
	if again {
		c.attention.Store(true)
	}
	if len(fallback) > 0 {
		offsets := make(map[string]map[int32]kgo.Offset)
		for _, ps := range fallback {
			if offsets[ps.TP.Topic] == nil {
				offsets[ps.TP.Topic] = make(map[int32]kgo.Offset)
			}
			offsets[ps.TP.Topic][ps.TP.Partition] = kgo.NewOffset().At(ps.Acked)
		}
		if _, err := c.consume(offsets); err != nil {
			c.log.Error("could not create the source consumer for partitions leaving the batch path; retrying", "err", err)
			for _, ps := range fallback {
				ps.Mu.Lock()
				ps.passthrough = true
				ps.failed = errors.New("no source consumer for the record path")
				ps.ptGen = c.pt.newGen()
				gen := ps.ptGen
				ps.Mu.Unlock()
				c.pt.add(ps.TP, ps.Acked, gen)
				c.pt.pause(ps.TP)
			}
			c.attention.Store(true)
		}
	}
	if src := c.source(); len(pause) > 0 && src != nil {
		src.PauseFetchPartitions(pause)
		// Many refusals come from stale metadata (a partition or topic
		// the producer does not know yet); refresh before the retry.
		c.dst.ForceMetadataRefresh()
	}
	for _, ps := range deadLetters {
		c.writeDeadLetter(ps)
	}
	if src := c.source(); len(rewind) > 0 && src != nil {
		src.SetOffsets(rewind)
		src.ResumeFetchPartitions(resume)
		c.log.Debug("reading partitions again from their last acknowledged offsets", "partitions", resume)
	}
}

// holds reports whether a partition in a transaction stops before the
// record at offset: the record the target refused for good (refused),
// with no dead-letter topic to take it, until the records before it are
// committed (producing it again aborts the transaction) and its retry is
// due. The caller holds ps.mu.
func (c *Copier) holds(ps *PartitionState, offset int64, now time.Time) bool {
	if ps.t == nil {
		return false
	}
	r := ps.t.refused
	return r != nil && c.deadLetter == "" && offset == r.offset && (ps.Committed < r.offset || now.Before(ps.t.retryAt))
}

func addRewind(rewind map[string]map[int32]kgo.EpochOffset, resume map[string][]int32, ps *PartitionState) {
	if rewind[ps.TP.Topic] == nil {
		rewind[ps.TP.Topic] = make(map[int32]kgo.EpochOffset)
	}
	rewind[ps.TP.Topic][ps.TP.Partition] = kgo.EpochOffset{Epoch: -1, Offset: ps.Acked}
	resume[ps.TP.Topic] = append(resume[ps.TP.Topic], ps.TP.Partition)
}

// logRefusal logs a partition's refusal once per pause, and a poison
// record at most once a minute per partition. The caller holds ps.mu.
func (c *Copier) logRefusal(ps *PartitionState) {
	t := ps.trouble()
	switch {
	case t.poison != nil && c.deadLetter == "":
		c.logEvery.Error(c.log, fmt.Sprintf("poison:%s/%d", ps.TP.Topic, ps.TP.Partition),
			"the target refuses a record for good: partition stopped there (retried with backoff); set mirrors[].dead_letter to skip such records",
			"topic", ps.TP.Topic, "partition", ps.TP.Partition, "target_topic", ps.Target, "offset", t.poison.offset, "err", t.poison.err)
	case t.poison != nil:
	case isPermanent(ps.failed) && t.isolateUntil >= ps.Acked:
		c.log.Warn("target refused a batch for good; producing its records one at a time to find the refused one",
			"topic", ps.TP.Topic, "partition", ps.TP.Partition, "target_topic", ps.Target, "from_offset", ps.Acked, "to_offset", t.isolateUntil, "err", ps.failed)
	default:
		c.log.Error("target refused records; partition paused and will be retried from its last acknowledged offset",
			"topic", ps.TP.Topic, "partition", ps.TP.Partition, "target_topic", ps.Target,
			"acked_offset", ps.Acked, "retry_in", t.backoff, "err", ps.failed)
	}
}

// Headers of a dead-lettered record, naming where it came from and why.
const (
	HeaderSourceTopic     = "kmirror.source.topic"
	HeaderSourcePartition = "kmirror.source.partition"
	HeaderSourceOffset    = "kmirror.source.offset"
	HeaderError           = "kmirror.error"
	HeaderTruncated       = "kmirror.truncated"
)

// deadLetterRecord is the record written to the dead-letter topic for p,
// refused by the target: p's own key, value and headers, with headers
// naming its origin and the refusal (its key and value are left out when
// the refusal says it is too large: it would be for that topic too).
func deadLetterRecord(topic string, tp TopicPartition, p *poisonRecord) *kgo.Record {
	dl := &kgo.Record{
		Topic:     topic,
		Partition: 0,
		Key:       p.rec.Key,
		Value:     p.rec.Value,
		Timestamp: p.rec.Timestamp,
		Headers: append(append([]kgo.RecordHeader(nil), p.rec.Headers...),
			kgo.RecordHeader{Key: HeaderSourceTopic, Value: []byte(tp.Topic)},
			kgo.RecordHeader{Key: HeaderSourcePartition, Value: strconv.AppendInt(nil, int64(tp.Partition), 10)},
			kgo.RecordHeader{Key: HeaderSourceOffset, Value: strconv.AppendInt(nil, p.offset, 10)},
			kgo.RecordHeader{Key: HeaderError, Value: []byte(p.err.Error())},
		),
	}
	if errors.Is(p.err, kerr.MessageTooLarge) || errors.Is(p.err, kerr.RecordListTooLarge) {
		dl.Key, dl.Value = nil, nil
		dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: HeaderTruncated, Value: []byte("true")})
	}
	return dl
}

// writeDeadLetter writes a partition's poison record to the dead-letter
// topic; once the target acknowledges it, the partition moves past it (the
// offset index has no entry for it: a group committed there translates to
// the next copied record).
func (c *Copier) writeDeadLetter(ps *PartitionState) {
	ps.Mu.Lock()
	t := ps.trouble()
	p := t.poison
	ps.Mu.Unlock()
	dl := deadLetterRecord(c.deadLetter, ps.TP, p)
	c.dst.Produce(c.produceCtx, dl, func(_ *kgo.Record, err error) {
		defer c.wake()
		ps.Mu.Lock()
		defer ps.Mu.Unlock()
		if err != nil {
			p.sending = false
			t.retryAt = time.Now().Add(t.backoff)
			if m := c.metrics; m != nil {
				m.IncInternalWriteErrors(WriteDeadLetter)
			}
			c.logEvery.Warn(c.log, "dead-letter:"+c.deadLetter, "could not write a refused record to the dead-letter topic; retrying", "topic", ps.TP.Topic, "partition", ps.TP.Partition, "offset", p.offset, "dead_letter_topic", c.deadLetter, "err", err)
			return
		}
		c.metrics.IncDeadLetters()
		c.log.Warn("record refused by the target written to the dead-letter topic; partition moves on",
			"topic", ps.TP.Topic, "partition", ps.TP.Partition, "offset", p.offset, "dead_letter_topic", c.deadLetter, "refusal", p.err)
		ps.Acked = max(ps.Acked, p.offset+1)
		ps.changed()
		ps.failed = nil
		t.poison, t.stuck, t.backoff, t.refusalLogged = nil, nil, 0, false
		// Still paused: the next rewindFailed reads on from acked.
	})
}

// inFlight counts the records produced and not acknowledged, over the
// partitions being copied and the parked ones: those still in flight, and
// those failed because the produce context was cancelled (a shutdown gave
// up on them; franz-go may fail them before the shutdown looks).
func (c *Copier) InFlight() int {
	n := 0
	for _, ps := range c.Persistable() {
		ps.Mu.Lock()
		// Counted together under the lock: a promise moves a record
		// from the queue to cancelled in one step.
		n += len(ps.inflight) - ps.head
		if ps.t != nil {
			n += ps.t.cancelled
		}
		ps.Mu.Unlock()
	}
	return n
}

// copyStats are the records acknowledged since start and the timestamp of
// the last of them (zero before the first).
func (p *PartitionState) CopyStats() (copied int64, last time.Time) {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	if p.lastCopied != 0 {
		last = time.Unix(0, p.lastCopied)
	}
	return p.Copied, last
}

// status returns the partition's acked position, source end and current
// error, if it is failing.
func (p *PartitionState) Status() (acked, end int64, failed error) {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	switch t := p.t; {
	case t == nil:
	case t.gap != nil:
		return p.Acked, p.End, t.gap
	case t.stuck != nil:
		return p.Acked, p.End, t.stuck
	case p.failed == nil && t.lastAbort != nil && p.Committed < p.End:
		return p.Acked, p.End, fmt.Errorf("transaction aborted: %w", t.lastAbort)
	}
	return p.Acked, p.End, p.failed
}

func (c *Copier) Close() {
	if src := c.source(); src != nil {
		src.Close()
	}
	if c.stopPT != nil {
		c.stopPT()
		<-c.ptFetchD
		<-c.ptDone
		c.pt.src.Close()
		for _, f := range c.pt.fetchers {
			f.Close()
		}
		for _, l := range c.pt.lanes {
			l.Close()
		}
	}
	if c.pt != nil {
		c.pt.budget.leave(c.pt)
	}
}

// flushPassthrough waits for the batch path's batches to settle, or ctx
// (the record path's are franz-go's: Flush).
func (c *Copier) FlushPassthrough(ctx context.Context) error {
	if c.pt == nil {
		return nil
	}
	return c.pt.flush(ctx)
}

// logger is the copier's logger (a slot's carries its number).
func (c *Copier) Logger() *slog.Logger { return c.log }

// changeCount counts the changes to the copier's partitions' progress so
// far: a progress writer that sees it unchanged has nothing to write.
func (c *Copier) ChangeCount() uint64 { return c.changes.Load() }

// abandon cuts off the records of ps in flight (its own context) and
// returns how many there were: they are left to the partition's next
// owner.
func (ps *PartitionState) Abandon() int {
	ps.Mu.Lock()
	defer ps.Mu.Unlock()
	n := len(ps.inflight) - ps.head
	if ps.cancel != nil {
		ps.cancel()
	}
	return n
}

// Produced records that the records at these source offsets were produced
// and wait for the target's acknowledgement (Promise), in produce order.
// ps.Mu must be held.
func (ps *PartitionState) Produced(offsets ...int64) {
	ps.inflight = append(ps.inflight, offsets...)
}

// BatchesInFlight is the number of tp's batches the batch path sent and
// the target has not answered yet.
func (c *Copier) BatchesInFlight(tp TopicPartition) int {
	if c.pt == nil {
		return 0
	}
	c.pt.mu.Lock()
	defer c.pt.mu.Unlock()
	if q := c.pt.queues[tp]; q != nil {
		return q.sent
	}
	return 0
}

// OnBatchPath reports whether ps is copied by the batch path (its source
// batches forwarded as they are). ps.Mu must be held.
func (ps *PartitionState) OnBatchPath() bool { return ps.passthrough }
