package data

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/kmirror/kmirror/connector/recordbatch"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The batch path's fetch side: raw Fetch requests to each source leader,
// in fetch sessions (KIP-227), ptFetchLanes sessions per leader, each on a
// connection of its own with one request in flight.

// ptSession is a fetch session with one source broker. The first request
// (epoch 0) names its partitions and creates it; each later request names
// only the partitions that join it (new, or at a new position) and those
// that leave it (ForgottenTopics), and the broker answers with only the
// partitions that have something new: records, moved watermarks, an
// error. Without sessions every Fetch named every partition and every
// answer listed them all: at 100,000 idle partitions an idle worker spent
// most of a core building, parsing and walking them twice a second. With
// them an idle worker's fetch is empty both ways, and the fetch loop
// touches only the partitions whose state changed (toPlace).
//
// A partition is in the session while it is to be fetched from there: it
// leaves when a response brings it data (it waits in ready, and joins
// again at its new position once taken), when it is paused, rewound or
// removed, or on an error for it; the broker then never sends data the
// fetch loop would not accept. Kafka applies a request's joins before its
// forgotten partitions, so a partition never does both in one request.
// All of it is guarded by p.mu.
type ptSession struct {
	id, epoch int32
	members   int
	forget    []TopicPartition // members that left, to name in the next request
}

// ptLogStartsPerRequest bounds a ListOffsets request's partitions.
const ptLogStartsPerRequest = 10_000

// ptMaxJoins bounds the partitions that join a session in one request; the
// others join in the next ones. A start or restart with 100,000 partitions
// otherwise fetched all of them at once, and their records, queued
// batches and progress writes all came due together: the worker's peak
// memory. In 16,000s they stream through.
const ptMaxJoins = 16_000

// ptMaxBatches bounds the batches fetched and not yet acknowledged, as the
// producer's buffer bounds their bytes (franz-go bounds a producer's
// records and bytes alike). A small batch holds far more than its bytes
// (its share of the fetch response, its unit, its produce request entry,
// the index and progress writes its acknowledgement makes: about 2 KiB),
// so bytes alone let a restart of 100,000 partitions hold all of them at
// once. Two rounds of joins: one fetched while the other is produced. A
// Fetch request costs the broker time for every partition of its session,
// so rounds are few and large rather than one per acknowledgement.
const ptMaxBatches = 2 * ptMaxJoins

type ptWant struct {
	tp    TopicPartition
	pos   int64
	gen   uint64
	lane  int32 // the fetch lane of the session it joins (joinLane)
	ahead bool  // the partition's ahead fetch (ptstripe.go), not its own
}

// leaveSession takes pp out of its fetch session, if it is in one. Called
// with p.mu held.
func (p *passthrough) leaveSession(tp TopicPartition, pp *ptPart) {
	if pp.sess == noSession {
		return
	}
	if s := p.sessions[pp.sess]; s != nil {
		s.forget = append(s.forget, tp)
		s.members--
	}
	pp.sess = noSession
}

// fetchLane is the fetch lane tp's session is on while the copier's
// partitions spread (ptFetchLanes).
func fetchLane(tp TopicPartition) int32 { return spread(tp, ptFetchLanes) }

// joinLane is the fetch lane tp joins a session on: its own (fetchLane)
// while the copier fetches at most ptSpreadMax partitions, else the first
// (see ptFetchLanes). Called with p.mu held.
func (p *passthrough) joinLane(tp TopicPartition) int32 {
	if len(p.parts) > ptSpreadMax {
		return 0
	}
	return fetchLane(tp)
}

// fetcher is the client of fetch lane i: its own connection to each
// source broker.
func (p *passthrough) fetcher(i int32) *kgo.Client {
	if i == 0 || len(p.fetchers) == 0 {
		return p.src
	}
	return p.fetchers[i-1]
}

// markPending makes pp wait for a place in a fetch session if it is to be
// fetched. Called with p.mu held.
func (p *passthrough) markPending(tp TopicPartition, pp *ptPart) {
	if !pp.paused && !pp.buffered && pp.sess == noSession {
		p.toPlace[tp] = struct{}{}
		p.toPlacePeak = max(p.toPlacePeak, len(p.toPlace))
	}
}

// fetchLoop places the partitions in toPlace in their leaders' fetch sessions and
// keeps one Fetch request in flight per session with partitions (each at
// its own pace: an idle one's long poll does not hold up the others),
// until ctx ends.
func (p *passthrough) fetchLoop(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	busy := make(map[ptLaneLeader]bool) // sessions with a fetch in flight; only this goroutine sets them
	var busyMu sync.Mutex
	done := func(s ptLaneLeader) {
		busyMu.Lock()
		busy[s] = false
		busyMu.Unlock()
	}
	for ctx.Err() == nil {
		var joins map[ptLaneLeader][]ptWant
		var retry, full bool
		// Placing while every session's fetch is in flight would be
		// done again once one returns (which kicks the loop).
		if !p.allBusy(busy, &busyMu) {
			joins, retry, full = p.place(ctx)
		}
		p.mu.Lock()
		if len(p.aheads) > 0 {
			if joins == nil {
				joins = make(map[ptLaneLeader][]ptWant)
			}
			p.aheadJoins(joins)
		}
		p.mu.Unlock()
		sessions, heldAny := p.sessionsToFetch(full, time.Now())
		for s := range joins {
			sessions[s] = true
		}
		// The mirror's rate limit: no fetch while its debt is paid
		// (throttle.Throttle); the joins stay in toPlace.
		if d := p.throttle.Delay(time.Now()); d > 0 && len(sessions) > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
			continue
		}
		for s := range sessions {
			busyMu.Lock()
			b := busy[s]
			busy[s] = true
			busyMu.Unlock()
			if b {
				continue // its joins stay in toPlace for the next round
			}
			req := p.fetchRequest(s, joins[s])
			if req == nil {
				done(s)
				continue
			}
			wg.Go(func() {
				got := p.fetch(ctx, s, req)
				done(s)
				if got {
					p.c.wakePoll()
				} else {
					// Errors, or nothing new: do not spin on this
					// session.
					select {
					case <-ctx.Done():
					case <-time.After(fetchErrBackoff):
					}
				}
				kick(p.kickFetch)
			})
		}
		// A round wakes on a change (add, take, rewind, a fetch
		// returning); on a timer only while partitions are left waiting
		// for a leader or a log start.
		var again <-chan time.Time
		switch {
		case retry:
			again = time.After(fetchErrBackoff)
		case heldAny:
			again = time.After(FetchWait) // a take kicks the loop sooner
		}
		select {
		case <-ctx.Done():
		case <-p.kickFetch:
		case <-again:
		}
	}
}

// room is how many partitions may join now: none while the batches or
// bytes fetched and not yet acknowledged leave less than a quarter of
// their bounds (joins come in rounds of thousands, not one per
// acknowledgement), else as many as the batches leave room for. The
// caller holds p.mu.
func (p *passthrough) room() int {
	held := int(p.budget.held.Load())
	batches := ptMaxBatches - held
	budget := p.byteBudget()
	bytes := budget - p.buffered - p.readyBytes
	if held > 0 && (batches < ptMaxBatches/4 || bytes < budget/4) {
		return 0
	}
	return max(1, batches)
}

// allBusy reports whether every fetch session has a fetch in flight
// (false with no session yet).
func (p *passthrough) allBusy(busy map[ptLaneLeader]bool, busyMu *sync.Mutex) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	busyMu.Lock()
	defer busyMu.Unlock()
	for s := range p.sessions {
		if !busy[s] {
			return false
		}
	}
	return len(p.sessions) > 0
}

// place finds the leader and position of each partition in toPlace: joins
// holds them by the session they join (their fetch lane's with their
// leader). Leaders and log starts are asked for in batches;
// a partition whose leader or log start cannot be had now stays there
// (logged), and retry says so. full says they wait for room (room): what
// is fetched and not yet acknowledged is at its bounds.
func (p *passthrough) place(ctx context.Context) (joins map[ptLaneLeader][]ptWant, retry, full bool) {
	p.mu.Lock()
	if len(p.toPlace) == 0 {
		p.toPlace = shrunk(p.toPlace, &p.toPlacePeak)
		p.mu.Unlock()
		return nil, false, false
	}
	// At most ptMaxJoins a round (no more can join a request), and no
	// more than the buffer has room for: a partition joining brings at
	// least a batch back. Looking up 100,000 at once held their wants,
	// leaders and joins through a restart's busiest seconds; joining
	// them all held their batches.
	room := p.room()
	if room == 0 {
		p.mu.Unlock()
		return nil, false, true // release kicks the loop
	}
	limit := min(ptMaxJoins, room)
	wants := make([]ptWant, 0, min(len(p.toPlace), limit))
	topics := make(map[string]bool)
	now := time.Now()
	// Partitions not fetched since they were added or rewound first:
	// they hold the records a start or restart waits for, while those
	// whose records were just taken rejoin to wait for new ones (and
	// each idle member makes every later Fetch of the session cost the
	// broker more).
	for _, fresh := range []bool{true, false} {
		for tp := range p.toPlace {
			if len(wants) == limit {
				retry = true // the rest are placed on the next round
				break
			}
			pp := p.parts[tp]
			if pp == nil {
				delete(p.toPlace, tp)
				continue
			}
			if pp.taken == fresh {
				continue
			}
			if now.Before(pp.notBefore) {
				retry = true // held back (retry): placed on a later round
				p.cameBack(pp)
				continue
			}
			if p.throttle.TopicDelay(tp.Topic, now) > 0 {
				retry = true // its topic's rate limit holds it back
				p.cameBack(pp)
				continue
			}
			wants = append(wants, ptWant{tp: tp, pos: pp.pos, gen: pp.gen, lane: p.joinLane(tp)})
			topics[tp.Topic] = true
		}
	}
	p.mu.Unlock()
	// One batch for the round: the leaders are then cached, and only the
	// topics it failed for are asked for again, alone.
	p.refreshStale(ctx, p.src, &p.srcMeta, topics)

	joins = make(map[ptLaneLeader][]ptWant)
	starts := make(map[int32][]ptWant) // by leader: positions to resolve
	leaders := make([]int32, len(wants))
	var misses []int
	now = time.Now()
	p.mu.Lock()
	for i, w := range wants {
		var ok bool
		if leaders[i], ok = p.srcMeta.cachedLeader(w.tp, now); !ok {
			misses = append(misses, i)
		}
	}
	p.mu.Unlock()
	for _, i := range misses {
		w := wants[i]
		leader, err := p.leader(ctx, p.src, &p.srcMeta, w.tp)
		if err != nil {
			p.c.logEvery.Warn(p.c.log, "pt-leader:"+err.Error(), "source partition leader unknown; retrying (logged once a minute per error: other partitions may be waiting too)", "topic", w.tp.Topic, "partition", w.tp.Partition, "err", err)
		}
		leaders[i] = leader // -1 on error
	}
	for i, w := range wants {
		switch leader := leaders[i]; {
		case leader < 0:
			retry = true
		case w.pos < 0:
			starts[leader] = append(starts[leader], w)
		default:
			s := ptLaneLeader{w.lane, leader}
			joins[s] = append(joins[s], w)
		}
	}
	for leader, ws := range starts {
		got := p.logStarts(ctx, leader, ws)
		p.mu.Lock()
		for _, w := range ws {
			start, ok := got[w.tp]
			if !ok {
				retry = true
				continue
			}
			if pp := p.parts[w.tp]; pp != nil && pp.gen == w.gen && pp.pos < 0 {
				pp.pos = start
			}
			w.pos = start
			s := ptLaneLeader{w.lane, leader}
			joins[s] = append(joins[s], w)
		}
		p.mu.Unlock()
	}
	return joins, retry, false
}

// logStarts asks leader for the log start offsets of ws' partitions, in
// requests of at most ptLogStartsPerRequest partitions. A partition missing
// from the result failed (logged).
func (p *passthrough) logStarts(ctx context.Context, leader int32, ws []ptWant) map[TopicPartition]int64 {
	out := make(map[TopicPartition]int64, len(ws))
	for chunk := range slices.Chunk(ws, ptLogStartsPerRequest) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		req.IsolationLevel = 1
		idx := make(map[string]int)
		for _, w := range chunk {
			i := topicEntry(idx, &req.Topics, w.tp.Topic, func() kmsg.ListOffsetsRequestTopic {
				t := kmsg.NewListOffsetsRequestTopic()
				t.Topic = w.tp.Topic
				return t
			})
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = w.tp.Partition
			rp.Timestamp = -2 // earliest
			rp.CurrentLeaderEpoch = -1
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := req.RequestWith(rctx, p.src.Broker(int(leader)))
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				p.c.logEvery.Warn(p.c.log, fmt.Sprintf("pt-start:%d", leader), "could not list the source partitions' start offsets; retrying", "broker", leader, "partitions", len(chunk), "err", err)
				p.forgetLeaders(&p.srcMeta, chunk[0].tp.Topic)
			}
			continue
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				tp := TopicPartition{rt.Topic, rp.Partition}
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					p.c.logEvery.Warn(p.c.log, fmt.Sprintf("pt-start:%s/%d", tp.Topic, tp.Partition), "could not list the source partition's start offset; retrying", "topic", tp.Topic, "partition", tp.Partition, "err", err)
					p.forgetLeaders(&p.srcMeta, tp.Topic)
					continue
				}
				out[tp] = rp.Offset
			}
		}
	}
	return out
}

// topicEntry returns the index of topic's entry in a request's topics
// (idx maps the topics added so far), appending the one mk makes when the
// topic is new: requests name each topic once, with its partitions.
func topicEntry[T any](idx map[string]int, topics *[]T, topic string, mk func() T) int {
	i, ok := idx[topic]
	if !ok {
		i = len(*topics)
		idx[topic] = i
		*topics = append(*topics, mk())
	}
	return i
}

// fetchRequest builds session s's next Fetch request: joins (still
// current) enter it at their positions, the members that left since the
// last request are forgotten. It returns nil when the session has no
// members left (the session is then dropped; the broker expires it).
func (p *passthrough) fetchRequest(s ptLaneLeader, joins []ptWant) *kmsg.FetchRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The fetch loop placed the joins and chose s (sessionsToFetch)
	// while s's previous fetch was in flight. If that fetch has since
	// brought partitions, which now wait to be taken or, taken, to join
	// again, this request would be a long poll of the idle members alone
	// and they would wait behind it: FetchWait more at the p99 of a topic
	// copying beside an idle one (bench-wan, 16 partitions at 5,000
	// records/s: 356-600 ms instead of 12-40). The take kicks the loop,
	// whose next round places them.
	if len(joins) == 0 && p.heldBack(s, time.Now()) {
		return nil
	}
	sess := p.sessions[s]
	if sess == nil {
		sess = &ptSession{}
		p.sessions[s] = sess
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(FetchWait / time.Millisecond)
	req.MinBytes = 1
	ceiling, now := p.fetchCeiling(), time.Now()
	req.MaxBytes = throttledMax(p.throttle.MaxBytes(ceiling, p.roundTrip(), now), ceiling, int32(p.maxBatch.Load()))
	req.IsolationLevel = 1 // read_committed: nothing past the last stable offset
	req.SessionID, req.SessionEpoch = sess.id, sess.epoch

	joined := make(map[TopicPartition]bool, min(len(joins), ptMaxJoins))
	// The broker fills partitions in request order up to MaxBytes: a
	// shuffle keeps one busy partition from starving the others. (In a
	// session, the broker also moves the partitions it returned data for
	// to the back.)
	rand.Shuffle(len(joins), func(i, j int) { joins[i], joins[j] = joins[j], joins[i] })
	topics := make(map[string]int)
	for _, w := range joins {
		if len(joined) == ptMaxJoins {
			break // the rest stay in toPlace
		}
		pp := p.parts[w.tp]
		if w.ahead {
			if !p.joinAhead(s, sess, w) {
				continue // changed since it was wanted
			}
		} else {
			if pp == nil || pp.gen != w.gen || pp.paused || pp.buffered || pp.sess != noSession {
				continue // changed since it was placed
			}
			if _, ok := p.toPlace[w.tp]; !ok {
				continue
			}
			if pp.ahead.sess == s && pp.ahead.state != aheadNone && pp.ahead.state != aheadHeld {
				// Its ahead was to be fetched in this session (it came
				// back here after an error): one fetch of it per
				// session.
				p.dropAhead(w.tp, pp)
			}
			delete(p.toPlace, w.tp)
			p.cameBack(pp)
			pp.sess, pp.sessPos, pp.sessGen = s, w.pos, pp.gen
			sess.members++
			p.stripe(w.tp, pp, s, w.pos)
		}
		joined[w.tp] = true
		i := topicEntry(topics, &req.Topics, w.tp.Topic, func() kmsg.FetchRequestTopic {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = w.tp.Topic, p.srcMeta.id(w.tp.Topic)
			return t
		})
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = w.tp.Partition
		rp.FetchOffset = w.pos
		rp.CurrentLeaderEpoch = -1
		rp.LastFetchedEpoch = -1
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = throttledMax(p.throttle.TopicMaxBytes(w.tp.Topic, pp.fetchSize(), p.roundTrip(), now), pp.fetchSize(), pp.maxBatch)
		if w.ahead {
			rp.PartitionMaxBytes = pp.fetchSize() // never under a rate limit (stripe)
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	forget := sess.forget
	sess.forget = nil
	if sess.members == 0 {
		sess.id, sess.epoch = 0, 0
		return nil
	}
	if sess.id == 0 {
		return req // a full fetch: the forgotten were in no session the broker holds
	}
	forgotten := make(map[string]int)
	for _, tp := range forget {
		if joined[tp] {
			continue // joining again at its new position
		}
		i := topicEntry(forgotten, &req.ForgottenTopics, tp.Topic, func() kmsg.FetchRequestForgottenTopic {
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.TopicID = tp.Topic, p.srcMeta.id(tp.Topic)
			return ft
		})
		req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, tp.Partition)
	}
	return req
}

// fetch sends session s's Fetch request and hands the response's
// partitions to accept; it reports whether any was buffered. A failed
// request ends the session: its members are in toPlace again, and its
// next request is a full one.
func (p *passthrough) fetch(ctx context.Context, s ptLaneLeader, req *kmsg.FetchRequest) bool {
	rctx, cancel := context.WithTimeout(ctx, FetchWait+30*time.Second)
	defer cancel()
	sent := time.Now()
	resp, err := req.RequestWith(rctx, p.fetcher(s.lane).Broker(int(s.leader)))
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		tps := p.endSession(s)
		// An evicted session (the broker's cache is full, or it
		// restarted) is simply made again.
		if ctx.Err() == nil && !errors.Is(err, kerr.FetchSessionIDNotFound) && !errors.Is(err, kerr.InvalidFetchSessionEpoch) {
			p.c.logEvery.Warn(p.c.log, fmt.Sprintf("pt-fetch:%d", s.leader), "fetch from source failed", "broker", s.leader, "lane", s.lane, "err", err)
			topics := make(map[string]bool)
			for _, tp := range tps {
				p.c.endUnread(tp)
				topics[tp.Topic] = true
			}
			for t := range topics {
				p.forgetLeaders(&p.srcMeta, t)
			}
		}
		return false
	}
	p.mu.Lock()
	if sess := p.sessions[s]; sess != nil {
		switch {
		case sess.id == 0 && resp.SessionID == 0:
			// A full fetch the broker made no session for (sessions
			// disabled, or its cache full): the next one names every
			// partition again.
		case sess.id == 0:
			sess.id, sess.epoch = resp.SessionID, 1
		case sess.epoch == math.MaxInt32:
			sess.epoch = 1 // epochs wrap to 1; 0 would ask for a new session
		default:
			sess.epoch++
		}
	}
	p.mu.Unlock()

	got, full := false, false
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		topic := rt.Topic
		if topic == "" {
			topic = p.topicByID(&p.srcMeta, rt.TopicID)
		}
		for j := range rt.Partitions {
			buffered, behind := p.accept(s, TopicPartition{topic, rt.Partitions[j].Partition}, rt.Partitions[j])
			got = got || buffered
			full = full || behind
		}
	}
	if resp.SessionID == 0 {
		p.endSession(s)
	}
	if full {
		// A partition had more than it got: the broker answered at
		// once, so this was the link's round trip (and the transfer),
		// not a long poll.
		p.noteRoundTrip(time.Since(sent))
	}
	return got
}

// endSession takes every member out of session s, into toPlace (the
// broker holds no session for them any more, or never made one), and
// returns them.
func (p *passthrough) endSession(s ptLaneLeader) []TopicPartition {
	p.mu.Lock()
	defer p.mu.Unlock()
	sess := p.sessions[s]
	if sess == nil || (sess.members == 0 && sess.id == 0) {
		return nil
	}
	var tps []TopicPartition
	for tp, pp := range p.parts {
		if pp.ahead.state == aheadIn && pp.ahead.sess == s {
			p.endAhead(pp) // the session is gone, and the ahead with it
			p.c.metrics.aheadDone(false)
		}
		if pp.sess != s {
			continue
		}
		pp.sess = noSession
		p.markPending(tp, pp)
		tps = append(tps, tp)
	}
	*sess = ptSession{}
	return tps
}

// ptCopyBelow: a partition's fetched bytes smaller than this are copied out
// of the response buffer (accept); larger ones keep it, where copying
// would cost more than the memory it frees.
const ptCopyBelow = 64 << 10

// accept handles one partition of a fetch response: an error moves or
// refreshes the position, data is buffered for the poll loop and the
// position moves past its last whole batch (the poll loop moves it back
// to where its decoding stopped, if it decodes them: decodeFetch). It
// reports whether it buffered anything (or held an ahead's data, or
// moved the partition on: the fetch was not idle), and whether the
// partition is behind with its fetch limit filled (nextFetchMax grew it).
// The answer for a partition's ahead (ptstripe.go) is held, or dropped.
func (p *passthrough) accept(s ptLaneLeader, tp TopicPartition, rp kmsg.FetchResponseTopicPartition) (buffered, filled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp := p.parts[tp]
	if pp == nil || pp.paused {
		return false, false
	}
	ahead := pp.ahead.state == aheadIn && pp.ahead.sess == s
	if !ahead && (pp.sess != s || pp.sessGen != pp.gen) {
		return false, false // not (any more) fetched from there at that position
	}
	gen, from := pp.gen, pp.sessPos
	if ahead {
		gen, from = pp.ahead.gen, pp.ahead.from
	}
	// A fetch from before the position: an ahead that became the
	// partition's fetch (followAhead). Speculative: an error for it
	// is not the partition's.
	promoted := !ahead && from < pp.pos
	err := kerr.ErrorForCode(rp.ErrorCode)
	switch {
	case ahead && err != nil:
		p.dropAhead(tp, pp)
		return false, false
	case promoted && err != nil:
		p.leaveSession(tp, pp)
		p.markPending(tp, pp)
		return true, false
	case errors.Is(err, kerr.OffsetOutOfRange):
		// A position the source no longer has: not fetched (nor
		// placed) until the poll loop has listed the log start and
		// applied on_source_gap (gap.go), which rewinds or pauses it.
		p.leaveSession(tp, pp)
		p.c.outOfRange(tp, from)
		return false, false
	case err != nil:
		p.c.endUnread(tp)
		p.c.logEvery.Warn(p.c.log, fmt.Sprintf("pt-fetch:%s/%d", tp.Topic, tp.Partition), "fetch from source failed", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		p.srcMeta.forgetLeader(tp)
		p.leaveSession(tp, pp)
		p.markPending(tp, pp)
		return false, false
	}
	last := int64(-1)
	if n := len(rp.RecordBatches); n > 0 && n < ptCopyBelow {
		// A few small batches would keep the whole response buffer
		// (up to the fetch's 16 MiB) alive until the target answers
		// them: with thousands of partitions waiting to be sent, a
		// start held tens of MB of buffers for a few KB each.
		rp.RecordBatches = bytes.Clone(rp.RecordBatches)
	}
	batches, hs, err := recordbatch.Split(rp.RecordBatches)
	f := ptFetch{tp: tp, via: s, gen: gen, from: from, rp: rp, batches: batches, hs: hs, splitErr: err}
	if ahead {
		p.acceptAhead(f, pp)
		return true, false
	}
	if err != nil {
		// Not v2 batches (an old message format): the record path's
		// parser reads them; a corrupt batch is its to report.
		last = -1
	}
	for _, h := range hs {
		last = h.Base + int64(h.LastDelta)
		if size := int32(min(h.Size, math.MaxInt32)); size > pp.maxBatch {
			pp.maxBatch = size
			if int64(size) > p.maxBatch.Load() {
				p.maxBatch.Store(int64(size))
			}
		}
	}
	pp.seenLSO = rp.LastStableOffset
	if promoted && (err != nil || !trimFetch(&f, pp.pos)) {
		// Nothing past the position (or not v2 batches, which the
		// record path's parser reads from the position): fetched
		// again from there.
		p.leaveSession(tp, pp)
		p.markPending(tp, pp)
		return true, false
	}
	if err == nil && last < 0 && len(rp.RecordBatches) == 0 {
		// Nothing new: still hand the watermarks over (lag), when they
		// moved (records aborted or compacted away, a marker).
		if pp.marksSet && pp.hw == rp.HighWatermark && pp.lso == rp.LastStableOffset {
			return false, false
		}
		pp.hw, pp.lso, pp.marksSet = rp.HighWatermark, rp.LastStableOffset, true
		p.leaveSession(tp, pp)
		p.await(s)
		p.ready = append(p.ready, f)
		p.readyBatches++
		p.publishHeld()
		pp.buffered = true
		return true, false
	}
	if err == nil && last >= from {
		pp.pos = last + 1
		limit := pp.fetchSize()
		got := len(rp.RecordBatches)
		left := bytesLeft(got, pp.pos-from, rp.LastStableOffset-pp.pos)
		pp.fetchMax = nextFetchMax(limit, got, left, p.fetchCeiling())
		filled = pp.pos < rp.LastStableOffset && int64(got) >= int64(limit)/2
		// It fills a fetch on its own: it may stripe (ptstripe.go).
		pp.stride, pp.strideBytes = 0, 0
		if filled && int64(got) >= int64(p.fetchCeiling())/2 {
			pp.stride, pp.strideBytes = pp.pos-from, int64(got)
		}
	}
	// On a malformed response the position stays: the poll loop decodes
	// it with franz-go's parser and rewinds to after what that returned.
	p.throttle.Took(tp.Topic, len(rp.RecordBatches), time.Now())
	p.leaveSession(tp, pp)
	p.await(s)
	p.ready = append(p.ready, f)
	p.readyBytes += len(f.rp.RecordBatches)
	p.readyBatches += max(1, len(f.hs))
	pp.buffered = true
	p.followAhead(tp, pp)
	p.publishHeld()
	return true, filled
}

// fetchSize is the partition's PartitionMaxBytes for its next fetch.
func (pp *ptPart) fetchSize() int32 {
	if pp.fetchMax <= 0 {
		return ptPartitionMaxBytes
	}
	return pp.fetchMax
}

// nextFetchMax is a partition's PartitionMaxBytes after a fetch of limit
// brought got bytes and left it left bytes behind its last stable offset
// (bytesLeft; 0: it reached the end). When the fetch (nearly) filled the
// limit and left it behind, the limit grows to cover what is left, at
// least doubling, at most ceiling: a partition minutes behind gets there
// in one step rather than a doubling per round trip (1 MiB to 64 MiB took
// six round trips, a second across an ocean). Kafka returns whole
// batches, so a full fetch ends up to a batch short of the limit: half
// filled counts. Behind with less than half, the request's MaxBytes
// shared with other partitions held it back: the limit stays. Once the
// fetch reached the end, twice what it brought, at least
// ptPartitionMaxBytes: a partition copying r bytes/s with a round trip of
// t brings about r*t a fetch, so its limit settles at twice the
// bandwidth-delay product.
func nextFetchMax(limit int32, got int, left int64, ceiling int32) int32 {
	switch {
	case left > 0 && int64(got) >= int64(limit)/2:
		return int32(min(max(int64(limit)*2, left), int64(ceiling)))
	case left > 0:
		return limit
	default:
		return int32(min(max(int64(got)*2, ptPartitionMaxBytes), int64(limit)))
	}
}

// bytesLeft estimates the bytes of a partition's lagOffsets offsets (its
// last stable offset minus its position) at the bytes per offset of a
// fetch that brought got bytes for fetched offsets: at least 1 while it is
// behind, 0 once it is not; at most math.MaxInt32 (a fetch's limit).
func bytesLeft(got int, fetched, lagOffsets int64) int64 {
	if lagOffsets <= 0 {
		return 0
	}
	perOffset := float64(got) / float64(max(fetched, 1))
	return int64(min(max(float64(lagOffsets)*perOffset, 1), math.MaxInt32))
}

// noteRoundTrip takes in the time of a fetch that a partition behind
// filled (so the broker answered at once): the round trip to the source,
// transfer included. The estimate follows a shorter one at once and a
// longer one slowly, so one slow answer does not inflate it.
func (p *passthrough) noteRoundTrip(d time.Duration) {
	old := time.Duration(p.rtt.Load())
	next := d
	if old > 0 && d > old {
		next = old + (d-old)/8
	}
	p.rtt.Store(int64(next))
}

// roundTrip is the source round trip as noteRoundTrip estimated it; 0
// before a fetch measured one.
func (p *passthrough) roundTrip() time.Duration { return time.Duration(p.rtt.Load()) }

// fetchCeiling is a fetch request's MaxBytes, and the most a partition's
// own limit grows to: fetchMaxBytes up to a round trip of ptCeilingRTT,
// and in proportion beyond it (up to 4 times), so that the partitions of
// a leader still bring about their loopback rate per round trip across an
// ocean (16 MiB per 75 ms is 213 MiB/s; at 150 ms a fetch of 32 MiB
// travels for 150 ms and then takes its transfer time). The bytes
// fetched and not yet acknowledged may reach twice the ceiling
// (byteBudget).
func (p *passthrough) fetchCeiling() int32 {
	rtt := p.roundTrip()
	if rtt <= ptCeilingRTT {
		return p.fetchMaxBytes
	}
	return int32(min(int64(p.fetchMaxBytes)*int64(rtt)/int64(ptCeilingRTT), 4*int64(p.fetchMaxBytes)))
}

// byteBudget bounds the bytes fetched and not yet acknowledged: the
// producer's buffer, or two fetches at the ceiling when that is larger
// (one fetched while the other is produced).
func (p *passthrough) byteBudget() int {
	return max(ProducerMaxBufferedBytes, 2*int(p.fetchCeiling()))
}

// ptBatchesPerFetch is how many of a partition's largest batches a fetch
// under a rate limit has room for (throttledMax).
const ptBatchesPerFetch = 16

// throttledMax is what a fetch under a rate limit asks for: capped, the
// limit's share of a window (throttle.Throttle.MaxBytes), but with room
// for ptBatchesPerFetch of the largest batches seen (batch), and never more
// than uncapped, what it asks for without a limit. A broker cuts a fetch at
// its byte limit, mid-batch, and the cut batch is fetched (and paid for)
// again: with 1 MB batches and a 4 MB cap that was 16% of what the limit
// let through; with room for 16 batches it is at most about 3%.
func throttledMax(capped, uncapped, batch int32) int32 {
	if capped >= uncapped {
		return uncapped
	}
	return min(max(capped, int32(min(int64(ptBatchesPerFetch)*int64(batch), math.MaxInt32))), uncapped)
}

// awaited is what a session's fetches brought that is not back in a
// session: fetches whose partitions wait in ready to be taken, partitions
// taken and not yet joined again (back), and since when there was any.
type awaited struct {
	fetches, back int
	since         time.Time
}

// goingBack starts pp's way back into a session from session s, taken
// from a fetch of it (awaited.back; cameBack ends it). Called with p.mu
// held.
func (p *passthrough) goingBack(pp *ptPart, s ptLaneLeader) {
	if pp.back != noSession {
		return
	}
	pp.back = s
	a := p.awaiting[s]
	a.back++
	p.awaiting[s] = a
}

// cameBack ends pp's way back into a session (ptPart.back): it joined one,
// or is not coming back soon (removed, paused, held back). Called with
// p.mu held.
func (p *passthrough) cameBack(pp *ptPart) {
	if pp.back == noSession {
		return
	}
	a := p.awaiting[pp.back]
	a.back--
	p.awaiting[pp.back] = a
	pp.back = noSession
}

// await counts a fetch of session s into ready (awaiting). Called with
// p.mu held.
func (p *passthrough) await(s ptLaneLeader) {
	a := p.awaiting[s]
	if a.fetches == 0 && a.back == 0 {
		a.since = time.Now()
	}
	a.fetches++
	p.awaiting[s] = a
}

// sessionsToFetch are the fetch sessions that have members to fetch (or
// forgotten partitions to tell of), and heldAny says some were held back
// (see below). With the buffer full, no fetch: a fetch of the members
// alone would be a long poll on partitions that mostly have nothing new,
// holding up the joins that room in the buffer lets in (release kicks the
// loop). Nor while partitions the session's last fetch brought wait to be
// taken, or to join again once taken (heldBack): they rejoin in a moment
// (take kicks the loop), and a fetch sent before would be a long poll of
// the idle members that holds them out for FetchWait (a partition copying beside an idle one on its broker moved
// 1 MiB per 500 ms: 1,591 records/s), unless they wait longer than that.
func (p *passthrough) sessionsToFetch(full bool, now time.Time) (sessions map[ptLaneLeader]bool, heldAny bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sessions = make(map[ptLaneLeader]bool, len(p.sessions))
	for key, s := range p.sessions {
		held := p.heldBack(key, now)
		heldAny = heldAny || held
		if !full && !held && (s.members > 0 || len(s.forget) > 0) {
			sessions[key] = true
		}
	}
	return sessions, heldAny
}

// heldBack reports whether session key waits for partitions its last
// fetch brought to be taken and to join a session again (awaited), for at
// most FetchWait (sessionsToFetch). Called with p.mu held.
func (p *passthrough) heldBack(key ptLaneLeader, now time.Time) bool {
	a := p.awaiting[key]
	return (a.fetches > 0 || a.back > 0) && now.Sub(a.since) < FetchWait
}
