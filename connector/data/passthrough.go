package data

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/connector/recordbatch"
	"github.com/kmirror/kmirror/connector/throttle"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// passthrough is the copier's batch path (producer.compression: source,
// without exactly_once): it fetches source partitions with raw Fetch
// requests, so batches stay compressed, and forwards each batch that is
// safe to forward (recordbatch.PassReason) to the target with a raw Produce request,
// rewriting only its header (recordbatch.Rewrite). Batches that are not safe are
// decoded with franz-go's own parser (kgo.ProcessFetchPartition: aborted
// transactions and markers dropped) and re-encoded into a batch of their
// records, with the source codec, on the same path: one producer per
// partition, so the order on the target is the order at the source.
//
// Everything else is the copier's: each record is pushed on its
// partition's in-flight queue before it is sent, and settled through the
// partition's promise with its target offset (a forwarded batch maps
// source base+delta to target base+delta), so the offset index, progress,
// failures and rewinds, delivery_timeout, shutdown accounting and parked
// partitions work as on the record path. A partition the target refuses a
// batch of (a codec it does not support, a batch larger than its
// message.max.bytes, a corrupt batch; or anything ptMaxRefusals times in a
// row) falls back to the record path of the copier (franz-go's consumer and
// producer) at its rewind, for good.
//
// The target producer is idempotent without a transactional ID
// (InitProducerID): sequences per partition, and a retried batch keeps its
// sequence so that the broker drops a duplicate. A refused batch fails the
// partition, whose next batch starts a new producer ID (the sequences of
// the failed one are unknown).
//
// Requests are pipelined: up to ptMaxRequests are in flight on a lane's
// connection to a broker, each with the next batch of every partition
// ready (a request carries at most one batch of a partition: Produce
// v3+), so a partition has up to ptMaxRequests batches in flight. That
// rests on these rules of the protocol:
//   - A broker handles a connection's requests one at a time, in the order
//     they were written, and answers them in that order. A partition's
//     batches always take the same lane, so they reach its leader in the
//     order they were sent, as long as they are written in that order:
//     kgo's Broker.Request issued from several goroutines does not promise
//     that, so a request to a lane's broker is issued only once the one
//     before it was written (OnBrokerWrite; ptWire).
//   - A broker that holds a producer's state for a partition appends a
//     batch only if its first sequence follows the last one appended
//     (else OUT_OF_ORDER_SEQUENCE_NUMBER, nothing appended), and answers a
//     batch repeating one of the last five with that batch's offsets. So
//     when a batch fails, the ones sent after it fail too or are
//     duplicates, and all of them are sent again in order, with the same
//     sequences.
//   - A broker that holds no state for the producer accepts any first
//     sequence (KIP-360): if the first batch failed and the second did
//     not, they would land in the wrong order. So a partition has one
//     batch in flight until a batch of the current producer ID was
//     acknowledged (the broker then has its state, which a new leader
//     rebuilds from the log), and again after ptPipelineFor without an
//     acknowledgement (the broker may expire an idle producer's state).
//
// Answers of a partition's batches are settled in the order the batches
// were sent, whatever order their requests' goroutines run in.
//
// A broker handles a connection's requests one at a time, and it checks
// every record of a compressed batch (decompressing it) while the
// connection waits. So partitions are spread over ptLanes connections
// (each a kgo client of its own; a partition always takes the same one):
// the target appends several requests at once. More lanes than that cost
// the target more than they gain: a broker's cost is largely per request
// and per batch, and each lane's requests carry fewer batches (with 16
// partitions on one broker, 2 lanes took the target 6.4 CPU s for
// 2,000,000 lz4 records, 4 lanes 7.3 s, one lane 6.9 s).
//
// The fetch side has lanes too (ptFetchLanes), for the link's sake: see
// ptfetch.go.
type passthrough struct {
	c   *Copier
	src *kgo.Client // raw fetches (fetch lane 0) and metadata; created with the first partition
	// fetchers are the fetch lanes after the first (src): clients of
	// their own, so connections of their own (ptFetchLanes). Empty in
	// unit tests, where every lane fetches through src.
	fetchers []*kgo.Client
	dst      *kgo.Client // metadata and producer IDs
	// lanes are the connections Produce requests take, created with the
	// first partition: a broker handles one request at a time per
	// connection, so partitions spread over several (by hash, a
	// partition always on the same lane) are written in parallel.
	lanes   []*kgo.Client
	dstOpts []kgo.Opt
	// fetchMaxBytes is a Fetch request's MaxBytes, and the most a
	// partition's own limit grows to (ptPart.fetchMax), on round trips
	// up to ptCeilingRTT (fetchCeiling).
	fetchMaxBytes int32
	// rtt is the source round trip as full fetches measured it
	// (noteRoundTrip), in nanoseconds.
	rtt atomic.Int64
	// maxBatch is the largest source batch fetched, in bytes: a fetch
	// under a rate limit has room for several (throttledMax).
	maxBatch atomic.Int64
	// awaiting is, per fetch lane and source leader, its fetches whose
	// partitions wait in ready and the partitions taken from them and not
	// yet in a session again (under mu): its next fetch waits for them
	// (heldBack).
	awaiting map[ptLaneLeader]awaited
	// throttle holds fetches to the mirror's byte-rate limits (nil:
	// none): see fetchLoop, place and fetchRequest.
	throttle *throttle.Throttle
	wires    map[ptLaneLeader]*ptWire
	wiresMu  sync.Mutex
	// requests counts the Produce requests in flight per lane and
	// broker (under mu), at most ptMaxRequests.
	requests map[ptLaneLeader]int

	mu    sync.Mutex
	parts map[TopicPartition]*ptPart
	// toPlace holds the partitions to fetch that are in no fetch
	// session: new, taken from ready, rewound, or out of a session by an
	// error. The fetch loop places them in their leader's session; a
	// partition in a session is fetched by every request to its leader
	// without the loop touching it (ptSession).
	toPlace map[TopicPartition]struct{}
	// aheads are the partitions whose ahead fetch waits to join a
	// session (ptstripe.go), and aheadBytes what all aheads are expected
	// to bring or brought.
	aheads     map[TopicPartition]struct{}
	aheadBytes int
	sessions   map[ptLaneLeader]*ptSession // by fetch lane and source leader
	ready      []ptFetch                   // fetched, not yet taken by the poll loop
	// srcMeta and dstMeta cache partition leaders (and topic IDs, needed
	// by Fetch/Produce v13+); a partition whose request fails is looked
	// up again (ptmeta.go).
	srcMeta, dstMeta ptMeta
	kickFetch        chan struct{}
	gens             atomic.Uint64 // source of ptPart.gen, unique across re-adds (newGen)

	// Producer side.
	queues map[TopicPartition]*ptQueue // every partition's, kept when empty: it holds the producer ID and sequence
	queued map[TopicPartition]*ptQueue // those with batches queued or in flight: what the send loop walks
	// queuedPeak and toPlacePeak are the most entries queued and toPlace
	// held since they were last emptied (shrunk).
	queuedPeak, toPlacePeak int
	pid                     int64 // the shared producer ID (-1: none yet)
	epoch                   int16
	// buffered and bufferedBatches are the bytes and batches queued or
	// in flight, readyBytes and readyBatches those of the fetches in
	// ready. enqueue waits while the bytes exceed the producer's buffer;
	// the fetch loop lets partitions join while all four leave room
	// (room).
	buffered, bufferedBatches int
	readyBytes, readyBatches  int
	space                     chan struct{} // closed when bytes are released
	// budget bounds the batches of every copier sharing it (BatchBudget;
	// its own unless a worker's copiers share one); heldBatches is this
	// one's share, counted into it.
	budget         *BatchBudget
	heldBatches    atomic.Int64
	kickSend       chan struct{}
	decomp         kgo.Decompressor
	comps          map[int8]kgo.Compressor
	loggedFallback map[string]bool // partition+reason, logged once

	// Exactly once (txn, set by useTransactions): batches are written
	// inside the transaction, with the worker producer's ID and
	// epoch (txnBegin), never one of the batch path's own: an
	// InitProducerID with the transactional ID would fence the
	// worker's own producer, and one without would be neither fenced nor
	// in the transaction. Under mu:
	//   - txnOpen: a transaction is open. Only then is a batch sent;
	//     batches are queued only on the poll loop's goroutine while one
	//     is (producePassthrough), and a commit waits for all of them.
	//   - txnAdded: the target partitions added to the open transaction
	//     (AddPartitionsToTxn, before a partition's first batch in it);
	//     txnTouched: an AddPartitionsToTxn was sent in it, answered or
	//     not (the transaction may hold partitions franz-go knows nothing
	//     of, so its end must reach the coordinator: endRaw).
	//   - adding: an AddPartitionsToTxn is in flight (pending counts it).
	//   - seqLost: a batch failed in a way that leaves the broker's
	//     sequence for its partition unknown. A transactional producer
	//     cannot take a new ID for the partition (the idempotent path's
	//     remedy), so the slot is taken over again (txnStep): the fence
	//     bumps the epoch, and every sequence starts at 0.
	txn        bool
	txnID      string
	txnOpen    bool
	txnAdded   map[TopicPartition]bool
	txnTouched bool
	adding     bool
	seqLost    error
}

type ptPart struct {
	pos      int64 // next offset to fetch; -1: the log start
	paused   bool
	gen      uint64 // bumped by rewinds: older fetches are dropped
	buffered bool   // a fetch of it waits in ready
	taken    bool   // a fetch of it was taken since it was added or rewound (place)
	// notBefore holds a partition back from fetching after a fetch of it
	// could not be used (retry): not fetched and decoded again at once.
	notBefore time.Time
	// The fetch session the partition is in (ptSession): sess is its lane
	// and broker (leader -1: in none; then it is in toPlace while neither
	// paused nor buffered), sessPos the fetch offset the broker holds for it,
	// and sessGen the gen it joined with.
	sess    ptLaneLeader
	sessPos int64
	sessGen uint64
	// back is the session a taken fetch of the partition came from, while
	// it is on its way back into a session (awaited.back); noSession
	// otherwise.
	back ptLaneLeader
	// The watermarks last handed to the poll loop by an empty fetch
	// (marksSet: some were): an idle partition's next empty fetch with
	// the same ones is not handed over again (with 100,000 idle
	// partitions, that was most of an idle worker's work).
	hw, lso  int64
	marksSet bool
	// fetchMax is the partition's PartitionMaxBytes (0: ptPartitionMaxBytes).
	// A partition has one fetch in flight (two when it stripes:
	// ptstripe.go), so it copies at most fetchMax per round trip to its
	// source leader: 1 MiB at 80 ms is 12.5 MB/s, whatever the link. So the limit follows the bandwidth-delay product
	// as the fetches measure it (nextFetchMax): while a fetch ends short
	// of the partition's last stable offset with the limit (nearly)
	// filled, it grows to what is left (at least doubling), up to the
	// request's MaxBytes, and falls back to
	// twice what a fetch brought once one reaches the end. On loopback a
	// partition behind grows its limit too, and catches up in fewer
	// fetches.
	fetchMax int32
	// maxBatch is the partition's largest batch fetched, in bytes
	// (throttledMax).
	maxBatch int32
	// ahead is the partition's second fetch in flight, if any; stride
	// and strideBytes are the offsets and bytes of its last fetch when
	// it filled that on its own (else 0), and seenLSO the last stable
	// offset its last fetch saw: where a fetch is expected to end, and
	// whether there is more (ptstripe.go).
	ahead               ptAhead
	stride, strideBytes int64
	seenLSO             int64
}

type ptFetch struct {
	tp   TopicPartition
	via  ptLaneLeader // the fetch lane and broker it came from (awaiting)
	gen  uint64
	from int64
	rp   kmsg.FetchResponseTopicPartition
	// rp's record bytes cut into batches once, by accept (recordbatch.Split
	// reads each batch's CRC: a pass over every byte).
	batches  [][]byte
	hs       []recordbatch.Header
	splitErr error
}

// ptQueue is one target partition's batches in order: units[:sent] were
// sent in this attempt (in flight, or answered and waiting for the ones
// before them to be answered), units[sent:] wait to be sent.
type ptQueue struct {
	ps      *PartitionState
	units   []*ptUnit
	sent    int
	retryAt time.Time
	backoff time.Duration
	pid     int64 // -1: use the shared one
	epoch   int16
	seq     int32     // the first sequence of the next batch not yet numbered
	lastAck time.Time // of a batch of the current producer ID (window)
	// failed is the error that failed the queue: batches enqueued after
	// it (fetched before the partition was paused) fail with it too,
	// rather than reaching the target ahead of the failed ones. A rewind
	// clears it.
	failed error
	// settled holds answered batches to hand to the partition, in order;
	// settling is set while one goroutine does (drainSettled).
	settled  []ptSettle
	settling bool
	// retired is set once the partition started over with a new state
	// (retire): the send loop no longer sees q, and its batches in
	// flight settle into the state they came from.
	retired bool
}

type ptUnit struct {
	batch   []byte
	count   int32
	src     []int64 // source offsets of the records, in order
	ctx     context.Context
	ts      time.Time
	forward bool // a source batch forwarded (else re-encoded records)
	seqSet  bool // rewritten for the current producer ID and sequence
	seq     int32
	// uncertain: the last answer to the batch does not say it was not
	// appended (a lost connection, a timeout, OUT_OF_ORDER_SEQUENCE_NUMBER:
	// refusedForSure).
	uncertain bool
	// The answer to the batch's last send.
	answered bool
	base     int64
	err      error
}

// ptSettle is a batch's outcome, to be handed to its partition: its
// target base offset, or the error that failed it.
type ptSettle struct {
	u    *ptUnit
	base int64
	err  error
}

// ptMaxRequests bounds the Produce requests in flight on a lane's
// connection to a broker. Two keep the broker busy (the next request is
// there when it answers one). A request carries a batch of every
// partition ready when it is sent, so while a connection has its share in
// flight, batches gather for the next one: a broker's cost is largely per
// request (sending a request per batch as soon as it was ready, 12,000
// requests for 2,000,000 lz4 records, cost the target broker 7.4 CPU s;
// 2,500 requests 6.4 s).
const ptMaxRequests = 2

// ptPipelineFor is how long after its last acknowledgement a partition
// may have more than one batch in flight (see passthrough).
const ptPipelineFor = time.Minute

// answers tells how many of q's sent batches are not answered yet, and
// whether an answer was an error. After an error nothing more is sent
// until every batch in flight is answered; then the first unacknowledged
// batch's error decides (result).
func (q *ptQueue) answers() (waiting int, failed bool) {
	for _, u := range q.units[:q.sent] {
		if !u.answered {
			waiting++
		} else if u.err != nil {
			failed = true
		}
	}
	return waiting, failed
}

// window is how many batches of q may be in flight: at most
// ptMaxRequests, well within the last five batches of a producer and
// partition that a broker recognises a duplicate among.
func (q *ptQueue) window(now time.Time) int {
	if !q.lastAck.IsZero() && now.Sub(q.lastAck) < ptPipelineFor {
		return ptMaxRequests
	}
	return 1
}

// ptMaxRefusals is how many times in a row the target may refuse a
// partition's batch-path batches, with an error not known to be about the
// batch (fallbackErr), before the partition takes the record path.
const ptMaxRefusals = 3

// Raw fetch sizes. A request asks for at most FetchMaxBytes; each
// partition starts at ptPartitionMaxBytes (franz-go's and the Java
// consumer's default), which spreads a fetch over the partitions: with
// one fetch in flight per partition, a fetch filled by a few partitions
// would leave the others idle. A partition that a fetch left behind grows
// its own limit (fetchSize): see ptPart.fetchMax.
const (
	ptPartitionMaxBytes = 1 << 20
	ptCeilingRTT        = 75 * time.Millisecond
	FetchWait           = 500 * time.Millisecond
	ptMetaMaxAge        = 30 * time.Second
	ptMaxBatchRecords   = 1 << 20 // re-encoded batches: records per batch
	ptMaxBatchBytes     = 1 << 20 // and uncompressed bytes per batch
	ptLanes             = 2
	// ptFetchLanes is how many fetch sessions the batch path keeps with
	// each source leader, each on a connection of its own (src and
	// fetchers); a partition always takes the same one (spread). One
	// session has one Fetch in flight, and its partitions leave it with
	// the data they bring and rejoin once that is taken: so a session
	// copies one response per round trip plus its transfer, and the link
	// idles while the request travels (across an ocean, a 55 MiB response
	// per 0.41 s at 150 ms). With two, one response travels while the
	// other's partitions rejoin and ask again, and two connections carry
	// twice one TCP window (and a partition that fills fetches on its
	// own fetches ahead on the other lane: ptstripe.go). A broker answers a connection's requests one
	// at a time, so each session needs its own: on one, a session of idle
	// partitions long-polling for FetchWait would hold up the other's.
	//
	// Only up to ptSpreadMax partitions spread, though: a session answers
	// as soon as any of its partitions has something, so 100,000
	// trickling partitions over two sessions made twice the Fetch
	// requests, each walking half of them (the exactly-once worker's CPU
	// went from 26% to 43%). Beyond it, one session per leader already
	// answers with many partitions at a time. A partition keeps its lane
	// as its pace changes: one moving into a session whose long poll of
	// idle partitions is out waits for that, and one moving onto a
	// connection that carried nothing yet waits for its window to grow
	// (lanes chosen by pace cost a partition at 5,000 records/s a p99 of
	// 600 ms at 0 ms and over a second at 150 ms).
	ptFetchLanes = 2
	ptSpreadMax  = 4096
)

func newPassthrough(c *Copier, dstOpts []kgo.Opt, srcLeaders, dstLeaders *LeaderCache) *passthrough {
	p := &passthrough{
		c: c, dst: c.dst,
		// No lanes without dstOpts (unit tests): the shared client.
		lanes:          make([]*kgo.Client, ptLanes*min(len(dstOpts), 1)),
		dstOpts:        dstOpts,
		fetchMaxBytes:  cmp.Or(c.fetchMaxBytes, FetchMaxBytes),
		parts:          make(map[TopicPartition]*ptPart),
		toPlace:        make(map[TopicPartition]struct{}),
		aheads:         make(map[TopicPartition]struct{}),
		sessions:       make(map[ptLaneLeader]*ptSession),
		awaiting:       make(map[ptLaneLeader]awaited),
		wires:          make(map[ptLaneLeader]*ptWire),
		requests:       make(map[ptLaneLeader]int),
		queues:         make(map[TopicPartition]*ptQueue),
		queued:         make(map[TopicPartition]*ptQueue),
		kickFetch:      make(chan struct{}, 1),
		kickSend:       make(chan struct{}, 1),
		space:          make(chan struct{}),
		pid:            -1,
		decomp:         kgo.DefaultDecompressor(),
		comps:          recordbatch.Compressors(),
		loggedFallback: make(map[string]bool),
		txnAdded:       make(map[TopicPartition]bool),
	}
	p.useBudget(NewBatchBudget())
	p.srcMeta.init(srcLeaders)
	p.dstMeta.init(dstLeaders)
	return p
}

// shrinkAbove is the size past which an emptied map is made again: a Go
// map keeps its buckets when its entries are deleted, and the batch path's
// working sets (queued, toPlace) hold every partition during a start or
// restart (6 and 4 MB at 100,000 partitions) and a handful afterwards.
const shrinkAbove = 4096

// shrunk returns m, or a new map when m is empty and held more than
// shrinkAbove entries since it was last made (*peak, reset then).
func shrunk[K comparable, V any](m map[K]V, peak *int) map[K]V {
	if len(m) > 0 || *peak <= shrinkAbove {
		return m
	}
	*peak = 0
	return make(map[K]V)
}

func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// add starts fetching tp from next (the log start when next < 0).
// newGen is a gen no fetch has yet: every later one is greater.
func (p *passthrough) newGen() uint64 { return p.gens.Add(1) }

// add fetches tp from next, as gen (newGen). The copier gives the
// partition's state the same gen before it is published (ptGen): a fetch
// taken for an earlier state of the partition (unassigned and assigned
// again since) has an older gen, and producePassthrough drops it even when
// it finds the new state by the partition's name.
func (p *passthrough) add(tp TopicPartition, next int64, gen uint64) {
	p.mu.Lock()
	if old := p.parts[tp]; old != nil {
		p.leaveSession(tp, old)
		p.dropAhead(tp, old)
		p.cameBack(old)
	}
	p.parts[tp] = &ptPart{pos: next, gen: gen, sess: noSession, back: noSession}
	p.toPlace[tp] = struct{}{}
	p.toPlacePeak = max(p.toPlacePeak, len(p.toPlace))
	if q := p.queues[tp]; q != nil {
		q.failed = nil
	}
	p.mu.Unlock()
	kick(p.kickFetch)
}

// remove stops fetching tp; fetched data of it is dropped.
func (p *passthrough) remove(tp TopicPartition) {
	p.mu.Lock()
	if pp := p.parts[tp]; pp != nil {
		p.leaveSession(tp, pp)
		p.dropAhead(tp, pp)
		p.cameBack(pp)
	}
	delete(p.parts, tp)
	delete(p.toPlace, tp)
	p.mu.Unlock()
}

// purge forgets what the batch path knows of source topics and target
// topics no partition is copied from or to any more (the copier purges
// them from its franz-go clients at the same time), so that a topic
// recreated under the same name is met with its new ID when added again.
func (p *passthrough) purge(srcTopics, dstTopics []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.srcMeta.forget(srcTopics)
	p.dstMeta.forget(dstTopics)
}

func (p *passthrough) pause(tp TopicPartition) {
	p.mu.Lock()
	if pp := p.parts[tp]; pp != nil {
		p.leaveSession(tp, pp)
		p.dropAhead(tp, pp)
		p.cameBack(pp)
		delete(p.toPlace, tp)
		pp.paused = true
		pp.gen = p.newGen()
	}
	p.mu.Unlock()
}

// rewind fetches tp again from pos and resumes it.
func (p *passthrough) rewind(tp TopicPartition, pos int64) {
	p.mu.Lock()
	if q := p.queues[tp]; q != nil {
		q.failed = nil
	}
	if pp := p.parts[tp]; pp != nil {
		p.leaveSession(tp, pp)
		p.dropAhead(tp, pp)
		pp.pos, pp.paused, pp.taken = pos, false, false
		pp.gen = p.newGen()
		p.markPending(tp, pp)
	}
	p.mu.Unlock()
	kick(p.kickFetch)
}

// retry rewinds tp to pos and fetches it again after fetchErrBackoff, as
// the record path's loop waits after a fetch error: a batch that cannot be
// decoded is not fetched and decoded again in a tight loop.
func (p *passthrough) retry(tp TopicPartition, pos int64) {
	p.mu.Lock()
	if pp := p.parts[tp]; pp != nil {
		pp.notBefore = time.Now().Add(fetchErrBackoff)
	}
	p.mu.Unlock()
	p.rewind(tp, pos)
}

// take returns the fetched partitions and lets them be fetched again.
func (p *passthrough) take() []ptFetch {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.ready
	p.ready, p.readyBytes, p.readyBatches = nil, 0, 0
	for _, f := range out {
		a := p.awaiting[f.via]
		a.fetches--
		p.awaiting[f.via] = a
	}
	p.publishHeld()
	for _, f := range out {
		if pp := p.parts[f.tp]; pp != nil {
			pp.buffered, pp.taken = false, true
			p.markPending(f.tp, pp)
			if _, pending := p.toPlace[f.tp]; pending {
				p.goingBack(pp, f.via)
			}
		}
	}
	if len(out) > 0 {
		kick(p.kickFetch)
	}
	return out
}

// current reports whether a fetch is still current (not rewound since).
func (p *passthrough) current(f ptFetch) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp := p.parts[f.tp]
	return pp != nil && pp.gen == f.gen && !pp.paused
}

// producePassthrough hands one fetched partition to the target: forwarded batches
// where every batch is safe, else its records decoded and re-encoded.
// Called on the poll loop's goroutine, like producePartition.
func (c *Copier) producePassthrough(f ptFetch) {
	if !c.pt.current(f) {
		return // rewound or paused since: read again
	}
	// The pass may unassign the partition and assign it again between
	// these two lines: the state found here is then a new one, and
	// produceFetch drops the fetch by its gen.
	if ps := c.Partition(f.tp); ps != nil {
		c.produceFetch(ps, f)
	}
}

// produceFetch hands f to the partition's state ps.
func (c *Copier) produceFetch(ps *PartitionState, f ptFetch) {
	p := c.pt
	rp := &f.rp
	batches, hs, splitErr := f.batches, f.hs, f.splitErr
	aborted := make(map[int64]bool, len(rp.AbortedTransactions))
	for _, a := range rp.AbortedTransactions {
		aborted[a.ProducerID] = true
	}
	reason := ""
	if splitErr != nil {
		reason = recordbatch.ReasonMalformed
	}
	for _, h := range hs {
		if reason != "" {
			break
		}
		if r := recordbatch.PassReason(h, f.from, aborted); r != recordbatch.ReasonControl {
			reason = r
		}
	}

	ps.Mu.Lock()
	// f.gen below the state's first gen: fetched for an earlier state
	// of the partition (passthrough.add).
	if ps.failed != nil || !ps.passthrough || f.gen < ps.ptGen {
		ps.Mu.Unlock()
		return
	}
	ps.fetchedEnd(rp.LastStableOffset, rp.HighWatermark)
	ps.Mu.Unlock()

	var units []*ptUnit
	if reason == "" {
		for i, b := range batches {
			h := hs[i]
			if h.Control() {
				continue
			}
			u := &ptUnit{batch: b, count: h.Count, ts: h.Time(), forward: true}
			u.src = make([]int64, h.Count)
			for j := range u.src {
				u.src[j] = h.Base + int64(j)
			}
			units = append(units, u)
		}
	} else {
		c.metrics.IncFallback(reason)
		p.logFallback(f.tp, reason, nil)
		var ok bool
		if units, ok = c.decodeFetch(f); !ok {
			return
		}
	}
	if len(units) == 0 {
		return
	}

	ps.Mu.Lock()
	if ps.failed != nil || !ps.passthrough {
		ps.Mu.Unlock()
		return
	}
	if ps.Acked < 0 {
		ps.Acked = units[0].src[0]
		ps.changed()
	}
	if ps.Committed < 0 {
		ps.Committed = ps.Acked
	}
	if ps.head == len(ps.inflight) {
		ps.progressAt = time.Now()
	}
	for _, u := range units {
		ps.Produced(u.src...)
	}
	ctx := ps.produceContext(c.produceCtx)
	ps.Mu.Unlock()
	if c.txn != nil {
		c.txn.produced = true // the poll loop's goroutine owns the cycle
	}
	for _, u := range units {
		u.ctx = ctx
		p.enqueue(ps, u)
	}
}

// decodeFetch decodes a fetched partition's records with franz-go's parser
// and re-encodes them, for a fetch that cannot be forwarded as it is. The
// fetcher moved the position past the fetch's last whole batch (or, on a
// malformed fetch, not at all): it goes back to where decoding stopped
// (decodedTo), so a batch that could not be decoded is fetched again,
// never skipped. ok is false when nothing is to be produced (the position
// is then back where decoding stopped).
func (c *Copier) decodeFetch(f ptFetch) (units []*ptUnit, ok bool) {
	p := c.pt
	fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		Offset:         f.from,
		IsolationLevel: kgo.ReadCommitted(),
		Topic:          f.tp.Topic,
		Partition:      f.tp.Partition,
	}, &f.rp, p.decomp, nil)
	stop, err := decodedTo(f, fp, next)
	if err != nil && len(fp.Records) == 0 {
		// As the record path's consumer does: the partition waits at
		// the batch, fetching it again, and says so.
		c.logEvery.Warn(c.log, fmt.Sprintf("pt-decode:%s/%d", f.tp.Topic, f.tp.Partition), "could not decode a fetched source batch; fetching it again", "topic", f.tp.Topic, "partition", f.tp.Partition, "offset", stop, "err", err)
		p.retry(f.tp, stop)
		return nil, false
	}
	if err != nil || f.splitErr != nil {
		p.rewind(f.tp, stop)
	}
	codec := int8(0)
	if len(f.hs) > 0 {
		codec = f.hs[0].Codec()
	} else if len(fp.Records) > 0 {
		codec = int8(fp.Records[0].Attrs.CompressionType())
	}
	units = p.encodeUnits(fp.Records, codec)
	if units == nil && len(fp.Records) > 0 {
		p.rewind(f.tp, f.from) // logged; fetched again
		return nil, false
	}
	return units, true
}

// errUndecodable is a batch franz-go's parser stopped at without an error.
var errUndecodable = errors.New("source batch could not be decoded")

// decodedTo is where franz-go's parser stopped decoding f (ProcessFetchPartition
// returned fp and next), and why, if it stopped short of the fetch's last
// whole batch. The parser stops at a batch it cannot decode (a compressed
// payload that does not decompress) and returns the records before it,
// with no error when there are some; next is then that batch's offset.
// With an error it may have moved past the bad data (an unknown magic), so
// then only the records it returned count.
func decodedTo(f ptFetch, fp kgo.FetchPartition, next int64) (int64, error) {
	if fp.Err != nil {
		stop := f.from
		if n := len(fp.Records); n > 0 {
			stop = fp.Records[n-1].Offset + 1
		}
		return stop, fp.Err
	}
	if n := len(f.hs); n > 0 && next <= f.hs[n-1].Base+int64(f.hs[n-1].LastDelta) {
		return next, fmt.Errorf("%w at offset %d", errUndecodable, next)
	}
	return next, nil
}

// encodeUnits re-encodes decoded records into batches of at most
// ptMaxBatchBytes (uncompressed), compressed with codec.
func (p *passthrough) encodeUnits(records []*kgo.Record, codec int8) []*ptUnit {
	var units []*ptUnit
	for len(records) > 0 {
		n, size := 0, 0
		for n < len(records) && n < ptMaxBatchRecords && (n == 0 || size+recordBytes(records[n]) < ptMaxBatchBytes) {
			size += recordBytes(records[n]) + 32
			n++
		}
		b, err := recordbatch.Encode(records[:n], codec, p.comps[codec])
		if err != nil {
			p.c.log.Error("could not encode a batch", "err", err)
			return nil
		}
		u := &ptUnit{batch: b, count: int32(n), ts: records[n-1].Timestamp}
		u.src = make([]int64, n)
		for i, r := range records[:n] {
			u.src[i] = r.Offset
		}
		units = append(units, u)
		records = records[n:]
	}
	return units
}

// logFallback logs once per partition and reason why batches took the
// record path.
func (p *passthrough) logFallback(tp TopicPartition, reason string, err error) {
	key := fmt.Sprintf("%s/%d/%s", tp.Topic, tp.Partition, reason)
	p.mu.Lock()
	logged := p.loggedFallback[key]
	p.loggedFallback[key] = true
	p.mu.Unlock()
	if logged {
		return
	}
	if err != nil {
		p.c.log.Warn("target refused a forwarded batch: partition copied record by record from now on", "topic", tp.Topic, "partition", tp.Partition, "reason", reason, "err", err)
		return
	}
	p.c.log.Info("source batches not forwarded as they are: their records are decoded and produced again", "topic", tp.Topic, "partition", tp.Partition, "reason", reason)
}

// enqueue queues a batch for its target partition, waiting while the
// bytes in flight exceed the producer's buffer (as franz-go's Produce
// does). A cancelled context fails the batch at once.
func (p *passthrough) enqueue(ps *PartitionState, u *ptUnit) {
	for {
		p.mu.Lock()
		if p.buffered < p.byteBudget() || p.buffered == 0 {
			break
		}
		space := p.space
		p.mu.Unlock()
		select {
		case <-space:
		case <-u.ctx.Done():
			p.settle(ps, u, -1, u.ctx.Err())
			return
		}
	}
	q := p.queues[ps.TP]
	var retired *ptQueue
	if q != nil && q.ps != ps {
		// The partition started over with a new state (its target
		// topic was recreated, its state dropped): the old state's
		// batches, failure and sequences are not the new one's.
		retired = q
		p.retireLocked(ps.TP, q)
		// Its own producer ID: the old batches may still be in flight
		// under the old sequences.
		q = &ptQueue{ps: ps, pid: -2}
		if p.txn {
			// No ID of its own inside the transaction: the
			// sequence goes on from the old queue's (the same target
			// partition, or a recreated one, which has no state for
			// the producer and takes any first sequence). Should an
			// old batch still in flight fail, the new ones meet
			// OUT_OF_ORDER_SEQUENCE_NUMBER, and the slot is taken over
			// again (seqLost).
			q = &ptQueue{ps: ps, pid: -1, seq: retired.seq, lastAck: retired.lastAck}
		}
		p.queues[ps.TP] = q
	}
	if q == nil {
		q = &ptQueue{ps: ps, pid: -1}
		p.queues[ps.TP] = q
	}
	if retired != nil {
		defer p.drainSettled(retired)
	}
	if err := q.failed; err != nil {
		q.settled = append(q.settled, ptSettle{u, -1, err})
		p.mu.Unlock()
		p.drainSettled(q)
		return
	}
	q.ps = ps
	q.units = append(q.units, u)
	p.queued[ps.TP] = q
	p.queuedPeak = max(p.queuedPeak, len(p.queued))
	p.buffered += len(u.batch)
	p.bufferedBatches++
	p.publishHeld()
	p.mu.Unlock()
	kick(p.kickSend)
}

// settle hands a batch's result to its partition's promise, record by
// record: target offset base+i for its i-th record.
func (p *passthrough) settle(ps *PartitionState, u *ptUnit, base int64, err error) {
	if err != nil {
		r := kgo.Record{Timestamp: u.ts}
		for i := range u.src {
			r.Offset = base + int64(i)
			ps.Promise(&r, err)
		}
		return
	}
	ps.ackBatch(len(u.src), base, u.ts)
	p.c.metrics.BatchWritten(u.forward)
	if m := p.c.metrics; m != nil {
		// The records are not decoded: the batch's bytes as written
		// stand for them (compressed).
		m.Bytes.Add(float64(len(u.batch)))
	}
}

// sendLoop sends the next batches of each partition to its target
// leader, one Produce request per lane and leader for all partitions with
// a batch to send, until done is closed.
func (p *passthrough) sendLoop(ctx context.Context, done <-chan struct{}) {
	var wg sync.WaitGroup
	defer wg.Wait()
	// The latest request issued per lane and leader: the next one waits
	// until it is written (ptWire).
	last := make(map[ptLaneLeader]*ptWrite)
	for {
		select {
		case <-done:
			return
		case <-p.kickSend:
		case <-time.After(50 * time.Millisecond):
		}
		now := time.Now()
		// ps is q.ps when the send was taken: enqueue replaces q.ps under
		// p.mu, and the sends are read without it.
		var ready []ptSend
		var expired []*ptQueue
		p.mu.Lock()
		p.queued = shrunk(p.queued, &p.queuedPeak)
		for tp, q := range p.queued {
			if p.txn && !p.txnOpen {
				// No transaction open: nothing is sent (it would be
				// in no transaction, or in the next one). Outside an
				// abort no batch is queued then; during one, a batch
				// answered with an error it would be retried for
				// fails here instead, once nothing of its queue is in
				// flight.
				if waiting, _ := q.answers(); waiting == 0 {
					p.failQueueLocked(tp, q, errNoTxn)
					expired = append(expired, q)
				}
				continue
			}
			if _, failed := q.answers(); failed || q.sent >= len(q.units) || q.sent >= q.window(now) || now.Before(q.retryAt) {
				continue
			}
			if err := q.units[0].ctx.Err(); q.sent == 0 && err != nil {
				p.failQueueLocked(tp, q, err)
				expired = append(expired, q)
				continue
			}
			ready = append(ready, ptSend{tp, q, q.units[q.sent], q.ps})
		}
		p.mu.Unlock()
		for _, q := range expired {
			p.drainSettled(q)
		}
		if len(ready) == 0 {
			continue
		}
		if p.txn {
			p.addToTxn(ctx, ready)
		}
		if err := p.ensurePID(ctx, ready[0].q); err != nil {
			p.c.logEvery.Warn(p.c.log, "pt-pid", "could not get a producer ID from the target; retrying", "err", err)
			continue
		}
		byLeader := make(map[ptLaneLeader][]ptSend)
		targets := make(map[string]bool)
		for _, s := range ready {
			targets[s.ps.Target] = true
		}
		p.refreshStale(ctx, p.dst, &p.dstMeta, targets)
		more := false
		for _, s := range ready {
			target := TopicPartition{s.ps.Target, s.tp.Partition}
			leader, err := p.leader(ctx, p.dst, &p.dstMeta, target)
			if err != nil {
				p.c.logEvery.Warn(p.c.log, "pt-dst-leader:"+err.Error(), "target partition leader unknown; retrying (logged once a minute per error: other partitions may be waiting too)", "topic", target.Topic, "partition", target.Partition, "err", err)
				p.retryLater(s.q)
				continue
			}
			if err := p.ensurePID(ctx, s.q); err != nil {
				continue
			}
			ll := ptLaneLeader{p.laneOf(target), leader}
			p.mu.Lock()
			if _, joins := byLeader[ll]; !joins && p.requests[ll] >= ptMaxRequests {
				// The connection has its share of requests in flight:
				// this batch goes with the next, with the others that
				// are ready by then.
				p.mu.Unlock()
				continue
			}
			if _, failed := s.q.answers(); failed || s.q.sent >= len(s.q.units) || s.q.units[s.q.sent] != s.u {
				p.mu.Unlock() // an answer came in meanwhile: the next round sees it
				continue
			}
			if p.txn && (!p.txnOpen || !p.txnAdded[target]) {
				// Never a batch outside the open transaction, nor
				// before its partition is in it (the broker would
				// refuse it, or, without partition verification,
				// start a transaction the coordinator never ends).
				p.mu.Unlock()
				continue
			}
			if !s.u.seqSet {
				pid, epoch := s.q.pid, s.q.epoch
				if pid < 0 {
					pid, epoch = p.pid, p.epoch
				}
				if err := recordbatch.Rewrite(s.u.batch, pid, epoch, s.q.seq, p.txn); err != nil {
					// Failed once nothing before it is in flight.
					if s.q.sent == 0 {
						p.failQueueLocked(s.tp, s.q, err)
					}
					p.mu.Unlock()
					p.drainSettled(s.q)
					continue
				}
				s.u.seqSet, s.u.seq = true, s.q.seq
				s.q.seq += s.u.count // int32 wraps to 0 past MaxInt32, as the broker expects
			}
			s.u.answered, s.u.err = false, nil
			s.q.sent++
			more = more || (s.q.sent < len(s.q.units) && s.q.sent < s.q.window(now))
			if _, joins := byLeader[ll]; !joins {
				p.requests[ll]++
			}
			p.mu.Unlock()
			byLeader[ll] = append(byLeader[ll], s)
		}
		for ll, ss := range byLeader {
			prev, mine := last[ll], &ptWrite{done: make(chan struct{})}
			last[ll] = mine
			wire := p.wire(ll)
			wg.Go(func() {
				req := kmsg.NewPtrProduceRequest()
				req.Acks = -1
				req.TimeoutMillis = 30_000
				if p.txn {
					// Kafka refuses transactional batches in a request
					// that names no transactional ID
					// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED: it
					// authorizes the write on the ID). kfake does not
					// check: TestTxnBatchPathForwardsCompressed does.
					req.TransactionID = &p.txnID
				}
				idx := make(map[string]int)
				for _, s := range ss {
					i := topicEntry(idx, &req.Topics, s.ps.Target, func() kmsg.ProduceRequestTopic {
						t := kmsg.NewProduceRequestTopic()
						t.Topic, t.TopicID = s.ps.Target, p.topicID(&p.dstMeta, s.ps.Target)
						return t
					})
					rp := kmsg.NewProduceRequestTopicPartition()
					rp.Partition = s.tp.Partition
					rp.Records = s.u.batch
					req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
				}
				rctx, cancel := context.WithTimeout(ctx, 45*time.Second)
				var resp *kmsg.ProduceResponse
				var err error
				if prev != nil {
					select {
					case <-prev.done:
					case <-rctx.Done():
						err = rctx.Err()
					}
				}
				if err == nil {
					wire.issue(mine)
					resp, err = req.RequestWith(rctx, p.lane(ll.lane).Broker(int(ll.leader)))
				}
				wire.written(mine) // if the hook did not (the request failed before it was written)
				cancel()
				results := make(map[TopicPartition]kmsg.ProduceResponseTopicPartition)
				if err == nil {
					for _, rt := range resp.Topics {
						topic := rt.Topic
						if topic == "" {
							topic = p.topicByID(&p.dstMeta, rt.TopicID)
						}
						for _, rp := range rt.Partitions {
							results[TopicPartition{topic, rp.Partition}] = rp
						}
					}
				}
				for _, s := range ss {
					rp, ok := results[TopicPartition{s.ps.Target, s.tp.Partition}]
					perr := err
					if perr == nil && !ok {
						perr = kerr.UnknownServerError
					} else if perr == nil {
						perr = kerr.ErrorForCode(rp.ErrorCode)
					}
					p.result(s.tp, s.q, s.u, rp.BaseOffset, perr)
				}
				p.mu.Lock()
				p.requests[ll]--
				p.mu.Unlock()
				kick(p.kickSend)
			})
		}
		if more {
			kick(p.kickSend)
		}
	}
}

// ptLaneLeader is a lane's connection to a broker: a produce lane's to a
// target broker, or a fetch lane's to a source broker (and its fetch
// session there).
type ptLaneLeader struct{ lane, leader int32 }

// noSession is a partition's ptPart.sess while it is in no fetch session.
var noSession = ptLaneLeader{lane: -1, leader: -1}

// ptWire keeps the Produce requests of a lane to a broker in the order
// they were issued: the send loop chains them (a request waits until the
// one before it is done writing), and kgo's OnBrokerWrite hook, called
// once a request is written to the broker, marks the request being
// written. Only the batch path's requests are Produce requests on a lane.
type ptWire struct {
	mu  sync.Mutex
	cur *ptWrite // issued and not yet written
}

// ptWrite is one request's place in a ptWire: done is closed once it is
// written (or failed).
type ptWrite struct {
	done   chan struct{}
	closed bool // under the wire's mu
}

func (w *ptWire) issue(r *ptWrite) {
	w.mu.Lock()
	w.cur = r
	w.mu.Unlock()
}

// written marks r written: the next request may be issued.
func (w *ptWire) written(r *ptWrite) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur == r {
		w.cur = nil
	}
	if !r.closed {
		r.closed = true
		close(r.done)
	}
}

// wroteCurrent is the hook's: the request being written is written.
func (w *ptWire) wroteCurrent() {
	w.mu.Lock()
	r := w.cur
	w.mu.Unlock()
	if r != nil {
		w.written(r)
	}
}

// wire returns the ptWire of a lane and broker.
func (p *passthrough) wire(ll ptLaneLeader) *ptWire {
	p.wiresMu.Lock()
	defer p.wiresMu.Unlock()
	w := p.wires[ll]
	if w == nil {
		w = new(ptWire)
		p.wires[ll] = w
	}
	return w
}

// ptWriteHook is a lane client's kgo hook: it tells the lane's wire to a
// broker that a Produce request was written.
type ptWriteHook struct {
	p    *passthrough
	lane int32
}

func (h ptWriteHook) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == int16(kmsg.Produce) {
		h.p.wire(ptLaneLeader{h.lane, meta.NodeID}).wroteCurrent()
	}
}

// laneOf is the lane a target partition's batches take.
func (p *passthrough) laneOf(tp TopicPartition) int32 {
	return spread(tp, len(p.lanes))
}

// spread is tp's lane of n (0 when n is 0): a topic's partitions take the
// lanes in turn from one its name picks, so one topic's are spread evenly
// and many one-partition topics' by their names.
func spread(tp TopicPartition, n int) int32 {
	if n == 0 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(tp.Topic))
	return int32((h.Sum32() + uint32(tp.Partition)) % uint32(n))
}

func (p *passthrough) lane(i int32) *kgo.Client {
	if len(p.lanes) == 0 {
		return p.dst
	}
	return p.lanes[i]
}

// result takes the answer to a batch of q. Acknowledged batches at the
// head of q are settled, in order. After an error, once every batch in
// flight is answered, the first unacknowledged batch's error decides: an
// error a retry can fix sends it and every batch after it again (same
// sequences: a batch the broker appended after all is answered as a
// duplicate, with its offsets), anything else fails the partition. The
// errors of the batches after it follow from it (OUT_OF_ORDER_SEQUENCE_NUMBER
// when it was not appended) and are not looked at.
func (p *passthrough) result(tp TopicPartition, q *ptQueue, u *ptUnit, base int64, err error) {
	p.mu.Lock()
	u.answered, u.base, u.err = true, base, err
	u.uncertain = err != nil && !refusedForSure(err)
	if q.retired {
		p.settleRetiredLocked(q)
		p.mu.Unlock()
		p.drainSettled(q)
		return
	}
	acked := 0
	for acked < q.sent && q.units[acked].answered && q.units[acked].err == nil {
		acked++
	}
	if acked > 0 {
		for _, a := range q.units[:acked] {
			q.settled = append(q.settled, ptSettle{a, a.base, nil})
			p.release(a)
		}
		q.units, q.sent = dropFront(q.units, acked), q.sent-acked
		q.lastAck, q.backoff = time.Now(), 0
	}
	if waiting, failed := q.answers(); failed && waiting == 0 {
		// Every batch sent is answered and those before the head were
		// acknowledged: the head's answer is an error, its own or one
		// that came after it.
		if err := p.afterError(tp, q, q.units[0]); err != nil {
			p.failQueueLocked(tp, q, err)
		}
	}
	if len(q.units) == 0 {
		delete(p.queued, tp)
	}
	p.mu.Unlock()
	p.drainSettled(q)
}

// afterError decides what the first unacknowledged batch's error means,
// with nothing of q in flight: a retry of q from that batch on (nil), or
// the error to fail q with. The caller holds p.mu.
func (p *passthrough) afterError(tp TopicPartition, q *ptQueue, head *ptUnit) error {
	err := head.err
	// A refusal of the batch itself goes to the record path even when
	// Kafka calls it retriable (CORRUPT_MESSAGE is): the same bytes would
	// be refused forever.
	if !fallbackErr(err) && retriable(err) && head.ctx.Err() == nil {
		target := q.ps.Target
		p.dstMeta.markStale(target)
		// Once a minute per error, not per partition: a leader move or
		// thousands of topics just created fail thousands of partitions
		// at once, each retried until it succeeds.
		p.c.logEvery.Warn(p.c.log, "pt-produce:"+err.Error(), "produce to the target failed; retrying the batch (logged once a minute per error: other partitions may be retrying too)",
			"topic", tp.Topic, "partition", tp.Partition, "target_topic", target, "err", err)
		p.retryLaterLocked(q)
		return nil
	}
	if head.ctx.Err() != nil && retriable(err) {
		err = head.ctx.Err()
	}
	return err
}

// drainSettled hands q's answered batches to the partition in order. One
// goroutine drains at a time; the others leave theirs to it.
func (p *passthrough) drainSettled(q *ptQueue) {
	for {
		p.mu.Lock()
		if q.settling || len(q.settled) == 0 {
			p.mu.Unlock()
			return
		}
		q.settling = true
		todo := q.settled
		q.settled = nil
		ps := q.ps // replaced by enqueue under p.mu
		p.mu.Unlock()
		for _, st := range todo {
			p.settle(ps, st.u, st.base, st.err)
		}
		p.mu.Lock()
		q.settling = false
		p.mu.Unlock()
	}
}

// retriable reports a produce error that a retry of the same batch can
// fix: a moved leader, an unreachable or overloaded broker.
func retriable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	// Anything else is the connection or the request's own timeout; a
	// cancelled context is a shutdown that gave up (see settle).
	return !errors.Is(err, context.Canceled)
}

// fallbackErr reports a refusal of a forwarded batch that the record path
// may not meet: franz-go builds its own batches (its size limit, a codec
// the target takes).
func fallbackErr(err error) bool {
	for _, e := range []error{kerr.CorruptMessage, kerr.UnsupportedCompressionType, kerr.MessageTooLarge,
		kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.UnsupportedForMessageFormat, kerr.InvalidTimestamp} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (p *passthrough) retryLater(q *ptQueue) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if waiting, _ := q.answers(); waiting > 0 {
		return // tried again once their answers are in (they kick the loop)
	}
	p.retryLaterLocked(q)
}

// retryLaterLocked sends q's batches again from its head, after a
// backoff. Nothing of q is in flight; the caller holds p.mu.
func (p *passthrough) retryLaterLocked(q *ptQueue) {
	for _, u := range q.units[:q.sent] {
		u.answered, u.err = false, nil
	}
	q.sent = 0
	q.backoff = min(max(2*q.backoff, 50*time.Millisecond), time.Second)
	q.retryAt = time.Now().Add(q.backoff)
}

// errStartedOver fails the batches of a retired queue not sent yet.
var errStartedOver = errors.New("the partition started over: batches of its earlier copy are dropped")

// retireLocked takes q, the queue of a partition state that is gone, out
// of the send loop: its batches not sent yet fail (into that state, which
// nothing reads any more), those in flight settle into it when answered
// (result). Without this, the new state's batches met the old one's
// failure (the cancelled context of its dropped records) and settled into
// the old state: the partition stalled with every record "in flight", and
// a shutdown reported them abandoned. The caller holds p.mu and drains
// q.settled after unlocking it.
func (p *passthrough) retireLocked(tp TopicPartition, q *ptQueue) {
	q.retired = true
	for _, u := range q.units[q.sent:] {
		p.release(u)
		q.settled = append(q.settled, ptSettle{u, -1, errStartedOver})
	}
	clear(q.units[q.sent:])
	q.units = q.units[:q.sent]
	if p.queued[tp] == q {
		delete(p.queued, tp)
	}
}

// dropFront returns units without its first n, which it lets go: a
// reslice alone kept them (their batch bytes and context) reachable from
// the backing array until the queue grew again, which for an idle
// partition is never: 30 MB after a 100,000-partition restart. An emptied
// queue holds no array at all.
func dropFront(units []*ptUnit, n int) []*ptUnit {
	clear(units[:n])
	if n == len(units) {
		return nil
	}
	return units[n:]
}

// settleRetiredLocked settles a retired queue's batches once every one in
// flight is answered, each with its own answer: nothing of it is sent
// again. The caller holds p.mu and drains q.settled after unlocking it.
func (p *passthrough) settleRetiredLocked(q *ptQueue) {
	if waiting, _ := q.answers(); waiting > 0 {
		return
	}
	for _, u := range q.units {
		p.release(u)
		if u.err != nil {
			q.settled = append(q.settled, ptSettle{u, -1, u.err})
		} else {
			q.settled = append(q.settled, ptSettle{u, u.base, nil})
		}
	}
	q.units, q.sent = nil, 0
}

// failQueueLocked fails q's batches: the partition fails (the copier
// rewinds it) and its next batch starts a new producer ID and sequence 0,
// since what the broker holds of the failed sequences is unknown. Nothing
// of q is in flight; the caller holds p.mu and then drains q.settled.
func (p *passthrough) failQueueLocked(tp TopicPartition, q *ptQueue, err error) {
	if p.txn {
		p.failTxnQueueLocked(tp, q, err)
		return
	}
	for _, u := range q.units {
		p.release(u)
		q.settled = append(q.settled, ptSettle{u, -1, err})
	}
	q.units, q.sent, q.seq, q.pid, q.failed = nil, 0, 0, -2, err
	q.lastAck = time.Time{}
	delete(p.queued, tp)
}

// release frees u's place in the buffer: enqueue may go on, and the
// fetch loop may let partitions join again (room). The caller holds
// p.mu.
func (p *passthrough) release(u *ptUnit) {
	wasFull := p.room() == 0
	p.buffered -= len(u.batch)
	p.bufferedBatches--
	p.publishHeld()
	close(p.space)
	p.space = make(chan struct{})
	if wasFull && p.room() > 0 {
		p.budget.wake() // the room may be another copier's
	}
}

// ensurePID gets the shared producer ID, or q's own after a failure
// (pid -2), from the target (InitProducerID without a transactional ID:
// an idempotent producer).
func (p *passthrough) ensurePID(ctx context.Context, q *ptQueue) error {
	p.mu.Lock()
	need := p.pid < 0 || q.pid == -2
	txn := p.txn
	p.mu.Unlock()
	if txn {
		// The slot producer's ID, set by txnBegin: never one of our own.
		if need {
			return errNoTxn
		}
		return nil
	}
	if !need {
		return nil
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60_000
	req.ProducerID = -1
	req.ProducerEpoch = -1
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, p.dst)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pid < 0 {
		p.pid, p.epoch = resp.ProducerID, resp.ProducerEpoch
	} else if q.pid == -2 {
		q.pid, q.epoch, q.seq = resp.ProducerID, resp.ProducerEpoch, 0
	}
	return nil
}

// pending is the number of batches queued or in flight, of every queue
// (a retired one's in flight too): each holds its place in the buffer
// until it settles (release). Counted, not walked: a commit polls it
// every 10 ms while thousands of partitions have a batch in flight.
func (p *passthrough) pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.bufferedBatches
	if p.adding {
		n++ // an AddPartitionsToTxn in flight: the transaction must not end under it
	}
	return n
}

// flush waits until every queued batch is settled, or ctx ends.
func (p *passthrough) flush(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for p.pending() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
