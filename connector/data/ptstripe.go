package data

import (
	"math"
	"time"
)

// Stripes: a second fetch of one partition in flight.
//
// A partition has one fetch in flight in its session, and rejoins at its
// new position once that fetch's data is taken: it copies one fetch per
// round trip plus the fetch's transfer. A broker answers a fetch with at
// most its fetch.max.bytes (55 MiB by default) whatever the request asks
// for, and moving and handling that much took about 215 ms here besides
// the round trip: a topic with one partition copied 0.70x its loopback
// rate at 80 ms and 0.56x at 150 ms, however large the fetch it asked
// for. Many partitions hide the round trip behind each other; one cannot.
//
// So a partition that fills a fetch on its own (stride) has a second fetch
// in flight on the other fetch lane (its ahead), at the offset where the
// first is expected to end: its offsets per fetch so far, less a margin,
// so that the two overlap a little rather than leave a gap. When the
// first's data comes, the position moves to the end of it, and the ahead
// becomes the partition's fetch (promote: its data is cut to start at the
// position, trim) while a new ahead goes out on the lane just freed. Two
// fetches then travel at any time, each started a round trip before its
// data is needed. An ahead whose data comes first is held until the
// position reaches it; one that would leave a gap (the first ended short
// of its offset: records larger than before) is dropped, and the partition
// goes on from its position. Its fetches are speculative: an error for one
// (an offset past the end, a leader moved) drops it, never moves the
// partition; the partition's own fetch meets the error if it is real.
//
// Not under a rate limit (a capped mirror is not short of round trips),
// nor near the partition's end (an ahead past the last stable offset would
// be a long poll), nor while what is fetched and not yet acknowledged
// fills the byte budget: the ahead is a third fetch's bytes beside the one
// produced and the one in flight.

// aheadState is where a partition's ahead fetch is.
type aheadState uint8

const (
	aheadNone   aheadState = iota
	aheadWanted            // to join sess (passthrough.aheads)
	aheadIn                // a member of sess, its fetch in flight or next
	aheadHeld              // its data came before the position reached it (got)
)

// ptAhead is a partition's ahead fetch (see Stripes above).
type ptAhead struct {
	state aheadState
	sess  ptLaneLeader // the session it joins or is in
	from  int64        // its fetch offset
	gen   uint64       // the partition's gen it was made for
	got   *ptFetch     // aheadHeld: its data
	size  int          // the bytes it is expected to bring (passthrough.aheadBytes)
}

// stripeMargin is the share of its expected offsets an ahead starts short
// of the fetch it follows ends: records a little larger than the last
// fetch's would otherwise leave a gap, and a gap drops the ahead.
const stripeMargin = 0.97

// stripe lets tp's next fetch be fetched ahead: the partition's fetch from
// from is in (or joins) session s, and the ahead goes to the other lane of
// the same leader, at where that fetch is expected to end, if the
// partition fills fetches on its own and nothing above holds it back.
// Called with p.mu held.
func (p *passthrough) stripe(tp TopicPartition, pp *ptPart, s ptLaneLeader, from int64) {
	if pp.ahead.state != aheadNone || pp.stride <= 0 || pp.paused {
		return
	}
	now := time.Now()
	if p.throttle.TopicMaxBytes(tp.Topic, math.MaxInt32, p.roundTrip(), now) < math.MaxInt32 {
		return // a rate limit holds the mirror or topic
	}
	// The bytes fetched and not yet acknowledged, and those the other
	// partitions' aheads bring, are within the budget (one ahead more
	// may pass it): partitions that each fill a fetch do not each hold
	// a third.
	if p.buffered+p.readyBytes+p.aheadBytes >= p.byteBudget() {
		return
	}
	// Offsets the fetch from from is expected to bring: the last full
	// fetch's, in proportion when the limit is smaller now.
	n := pp.stride
	limit := min(int64(pp.fetchSize()), int64(p.fetchCeiling()))
	if limit < pp.strideBytes {
		n = n * limit / pp.strideBytes
	}
	next := from + int64(float64(n)*stripeMargin)
	if n < 2 || next+n/2 > pp.seenLSO {
		return // too close to the end: the ahead would have little or nothing at once
	}
	size := int(min(limit, pp.strideBytes))
	pp.ahead = ptAhead{state: aheadWanted, sess: ptLaneLeader{(s.lane + 1) % ptFetchLanes, s.leader}, from: next, gen: pp.gen, size: size}
	p.aheadBytes += size
	p.aheads[tp] = struct{}{}
	kick(p.kickFetch)
}

// aheadJoins are the aheads waiting to join, by session; they stay waiting
// until a request takes them (joinAhead). Called with p.mu held.
func (p *passthrough) aheadJoins(joins map[ptLaneLeader][]ptWant) {
	for tp := range p.aheads {
		pp := p.parts[tp]
		if pp == nil || pp.ahead.state != aheadWanted {
			delete(p.aheads, tp)
			continue
		}
		a := pp.ahead
		joins[a.sess] = append(joins[a.sess], ptWant{tp: tp, pos: a.from, gen: a.gen, lane: a.sess.lane, ahead: true})
	}
}

// joinAhead lets w's ahead join session s if it is still wanted there.
// Called with p.mu held.
func (p *passthrough) joinAhead(s ptLaneLeader, sess *ptSession, w ptWant) bool {
	pp := p.parts[w.tp]
	if pp == nil || pp.gen != w.gen || pp.paused || pp.ahead.state != aheadWanted || pp.ahead.sess != s || pp.ahead.from != w.pos {
		return false
	}
	delete(p.aheads, w.tp)
	pp.ahead.state = aheadIn
	sess.members++
	return true
}

// dropAhead takes pp's ahead out of its session or its wait to join one,
// and forgets it. Called with p.mu held.
func (p *passthrough) dropAhead(tp TopicPartition, pp *ptPart) {
	if pp.ahead.state != aheadNone {
		p.c.metrics.aheadDone(false)
	}
	switch pp.ahead.state {
	case aheadWanted:
		delete(p.aheads, tp)
	case aheadIn:
		p.leaveAheadSession(tp, pp)
	}
	p.endAhead(pp)
}

// endAhead forgets pp's ahead, and its bytes. Called with p.mu held.
func (p *passthrough) endAhead(pp *ptPart) {
	p.aheadBytes -= pp.ahead.size
	pp.ahead = ptAhead{}
}

// leaveAheadSession takes pp's ahead out of the session it is in. Called
// with p.mu held.
func (p *passthrough) leaveAheadSession(tp TopicPartition, pp *ptPart) {
	if s := p.sessions[pp.ahead.sess]; s != nil {
		s.forget = append(s.forget, tp)
		s.members--
	}
}

// acceptAhead handles the partition's ahead fetch answered in session s
// (accept, for a partition whose ahead is in s): the data waits until the
// position reaches it; an error or nothing drops it. Called with p.mu
// held.
func (p *passthrough) acceptAhead(f ptFetch, pp *ptPart) {
	if f.splitErr != nil || len(f.hs) == 0 || f.rp.ErrorCode != 0 || pp.ahead.gen != pp.gen {
		p.dropAhead(f.tp, pp)
		return
	}
	p.leaveAheadSession(f.tp, pp)
	pp.ahead.state, pp.ahead.got = aheadHeld, &f
}

// followAhead moves pp's ahead on now that its fetch brought
// data and the position moved: a held ahead's data that starts at or
// before the position is handed on after it (trimmed), and the partition
// then rejoins at its end; an ahead in flight from at or before the
// position becomes the partition's fetch (promote) and a new ahead goes
// out on the lane just freed. An ahead past the position (a gap) is
// dropped. Called with p.mu held.
func (p *passthrough) followAhead(tp TopicPartition, pp *ptPart) {
	a := pp.ahead
	switch {
	case a.state == aheadNone:
	case a.gen != pp.gen || a.from > pp.pos:
		p.dropAhead(tp, pp)
	case a.state == aheadHeld:
		p.endAhead(pp)
		f := *a.got
		if !trimFetch(&f, pp.pos) {
			p.c.metrics.aheadDone(false)
			return // all of it is before the position
		}
		p.c.metrics.aheadDone(true)
		pp.pos = f.hs[len(f.hs)-1].Base + int64(f.hs[len(f.hs)-1].LastDelta) + 1
		p.await(f.via)
		p.ready = append(p.ready, f)
		p.readyBytes += len(f.rp.RecordBatches)
		p.readyBatches += len(f.hs)
		p.publishHeld()
	case a.state == aheadIn:
		p.endAhead(pp)
		p.c.metrics.aheadDone(true)
		pp.sess, pp.sessPos, pp.sessGen = a.sess, a.from, a.gen
		p.stripe(tp, pp, pp.sess, a.from)
	default:
		p.dropAhead(tp, pp) // still waiting to join: the partition rejoins at its position
	}
}

// trimFetch cuts f's leading batches that end before pos, so that it
// starts at pos (an ahead's fetch overlapping the one before it). It
// reports whether anything is left.
func trimFetch(f *ptFetch, pos int64) bool {
	cut, k := 0, 0
	for k < len(f.hs) && f.hs[k].Base+int64(f.hs[k].LastDelta) < pos {
		cut += len(f.batches[k])
		k++
	}
	f.batches, f.hs = f.batches[k:], f.hs[k:]
	f.rp.RecordBatches = f.rp.RecordBatches[cut:]
	f.from = max(f.from, pos)
	return len(f.hs) > 0
}
