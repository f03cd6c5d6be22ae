package data

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/connector/recordbatch"
	"github.com/kmirror/kmirror/connector/throttle"
)

var broker1Lane1 = ptLaneLeader{lane: 1, leader: 1}

// stripeBatch is the source log of TestStripe*: batches of 16 records of
// 1 KiB, the first at offset 0.
const stripeBatch = 16

// stripeAnswer is a fetch response from from (rounded down to its batch,
// as a broker answers) with n records, the source's last stable offset
// at lso.
func stripeAnswer(t *testing.T, from int64, n int, lso int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	var raw []byte
	base := from / stripeBatch * stripeBatch
	for off := base; off < from+int64(n); off += stripeBatch {
		b, err := recordbatch.Encode(kibRecords(stripeBatch), 0, recordbatch.Compressors()[0])
		if err != nil {
			t.Fatal(err)
		}
		binary.BigEndian.PutUint64(b, uint64(off))
		raw = append(raw, b...)
	}
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.HighWatermark, rp.LastStableOffset, rp.RecordBatches = lso, lso, raw
	return rp
}

// stripeCopy follows what a stripes test hands the poll loop: the
// offsets taken, which must follow each other without a gap or a repeat.
type stripeCopy struct {
	t    *testing.T
	p    *passthrough
	next int64
}

func (c *stripeCopy) take() {
	c.t.Helper()
	for _, f := range c.p.take() {
		for _, h := range f.hs {
			if h.Base != c.next {
				c.t.Fatalf("a batch at offset %d taken after offset %d: a gap or a repeat", h.Base, c.next-1)
			}
			c.next = h.Base + int64(h.LastDelta) + 1
		}
	}
}

// fetchOffset is the offset session s's next request asks tp for (-1:
// none), joining wants.
func fetchOffset(t *testing.T, p *passthrough, s ptLaneLeader, wants []ptWant) int64 {
	t.Helper()
	req := p.fetchRequest(s, wants)
	if req == nil {
		return -1
	}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			return rp.FetchOffset
		}
	}
	return -1
}

// aheadWants are the aheads waiting to join, by session.
func aheadWants(p *passthrough) map[ptLaneLeader][]ptWant {
	p.mu.Lock()
	defer p.mu.Unlock()
	joins := make(map[ptLaneLeader][]ptWant)
	p.aheadJoins(joins)
	return joins
}

// kibRecords are n records of 1 KiB.
func kibRecords(n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Value: bytes.Repeat([]byte{1}, 1024)}
	}
	return recs
}

// newStripePath is a batch path fetching one partition from 0, in
// fetches of 512 KiB (the ceiling), and the partition's gen.
func newStripePath(t *testing.T) (*passthrough, TopicPartition, uint64) {
	t.Helper()
	p := newPassthrough(&Copier{fetchMaxBytes: 512 << 10}, nil, nil, nil)
	tp := TopicPartition{"t", 0}
	p.add(tp, 0, p.newGen())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.parts[tp].fetchMax = 512 << 10
	return p, tp, p.parts[tp].gen
}

// newStripeTest is a batch path fetching one partition whose fetches of
// 512 KiB (the ceiling) each bring 400 records, far behind the source's
// end, and its first fetch done: it fills fetches on its own.
func newStripeTest(t *testing.T) (*passthrough, TopicPartition, *stripeCopy) {
	t.Helper()
	p, tp, gen := newStripePath(t)
	if off := fetchOffset(t, p, broker1, []ptWant{{tp: tp, gen: gen}}); off != 0 {
		t.Fatalf("first fetch from %d, want 0", off)
	}
	if len(aheadWants(p)) != 0 {
		t.Fatal("an ahead before any fetch filled")
	}
	if _, filled := p.accept(broker1, tp, stripeAnswer(t, 0, 400, 100_000)); !filled {
		t.Fatal("a fetch of 400 KiB at a limit of 512 KiB, far behind, is not filled")
	}
	c := &stripeCopy{t: t, p: p}
	c.take()
	return p, tp, c
}

// TestStripeFetchesAhead: a partition that fills fetches on its own has a
// second fetch in flight on the other lane, from where the first is
// expected to end (a little before); when the first's data comes, the
// second becomes the partition's fetch, its overlap cut, and a new one
// goes out on the lane just freed. The records handed on follow each
// other without a gap or a repeat.
func TestStripeFetchesAhead(t *testing.T) {
	p, tp, c := newStripeTest(t)
	gen := p.parts[tp].gen
	// It rejoins at 400 on its lane, and its ahead waits for lane 1, at
	// 400 + 97% of 400.
	if off := fetchOffset(t, p, broker1, []ptWant{{tp: tp, pos: 400, gen: gen}}); off != 400 {
		t.Fatalf("second fetch from %d, want 400", off)
	}
	const ahead1 = 400 + 388
	wants := aheadWants(p)
	if len(wants) != 1 || len(wants[broker1Lane1]) != 1 || wants[broker1Lane1][0].pos != ahead1 {
		t.Fatalf("aheads waiting %v, want one on lane 1 from %d", wants, ahead1)
	}
	if off := fetchOffset(t, p, broker1Lane1, wants[broker1Lane1]); off != ahead1 {
		t.Fatalf("lane 1 fetches from %d, want the ahead's %d", off, ahead1)
	}
	if len(aheadWants(p)) != 0 {
		t.Fatal("the ahead still waits after joining")
	}

	// The first answers 400..799: the ahead (788) becomes the
	// partition's fetch, and the next ahead waits for lane 0 at 788+388.
	p.accept(broker1, tp, stripeAnswer(t, 400, 400, 100_000))
	c.take()
	if c.next != 800 {
		t.Fatalf("taken up to %d, want 800", c.next)
	}
	p.mu.Lock()
	pp := p.parts[tp]
	promoted := pp.sess == broker1Lane1 && pp.sessPos == ahead1
	_, placed := p.toPlace[tp]
	p.mu.Unlock()
	if !promoted || placed {
		t.Fatalf("after the first answer: in session %v from %d, to place %v; want the ahead's (lane 1, %d) as its fetch", pp.sess, pp.sessPos, placed, ahead1)
	}
	const ahead2 = ahead1 + 388
	wants = aheadWants(p)
	if len(wants[broker1]) != 1 || wants[broker1][0].pos != ahead2 {
		t.Fatalf("aheads waiting %v, want one on lane 0 from %d", wants, ahead2)
	}
	if off := fetchOffset(t, p, broker1, wants[broker1]); off != ahead2 {
		t.Fatalf("lane 0 fetches from %d, want %d", off, ahead2)
	}

	// The ahead answers from its batch (784) to 1199: what was taken
	// already is cut, and the rest follows at once.
	p.accept(broker1Lane1, tp, stripeAnswer(t, ahead1, 400, 100_000))
	c.take()
	if c.next != 1200 {
		t.Fatalf("taken up to %d, want 1200", c.next)
	}

	// The next brings less than expected (larger records, say): the
	// ahead after it would leave a gap, and is dropped; the partition
	// goes on from its position.
	wants = aheadWants(p)
	const ahead3 = ahead2 + 399 // the fetch before brought 412 offsets (788..1199)
	if len(wants[broker1Lane1]) != 1 || wants[broker1Lane1][0].pos != ahead3 {
		t.Fatalf("aheads waiting %v, want one on lane 1 from %d", wants, ahead3)
	}
	fetchOffset(t, p, broker1Lane1, wants[broker1Lane1])
	p.accept(broker1, tp, stripeAnswer(t, ahead2, 200, 100_000))
	c.take()
	if c.next != 1376 {
		t.Fatalf("taken up to %d, want 1376", c.next)
	}
	p.mu.Lock()
	_, placed = p.toPlace[tp]
	state := pp.ahead.state
	forgotten := p.sessions[broker1Lane1].forget
	p.mu.Unlock()
	if !placed || state != aheadNone || len(forgotten) != 1 {
		t.Fatalf("after a short fetch: to place %v, ahead %v, lane 1 forgets %v; want placed, no ahead, the ahead forgotten", placed, state, forgotten)
	}
	if p.aheadBytes != 0 {
		t.Fatalf("no ahead left, but %d bytes counted for aheads", p.aheadBytes)
	}
	// Its late answer is not handed on.
	if got, _ := p.accept(broker1Lane1, tp, stripeAnswer(t, ahead3, 400, 100_000)); got {
		t.Fatal("a dropped ahead's answer was accepted")
	}
	c.take()
	if c.next != 1376 {
		t.Fatalf("taken up to %d after a dropped ahead's answer, want 1376", c.next)
	}
}

// TestStripeAheadFirst: an ahead whose answer comes before the fetch it
// follows waits for it, and is handed on after it, cut where it ends.
func TestStripeAheadFirst(t *testing.T) {
	p, tp, c := newStripeTest(t)
	gen := p.parts[tp].gen
	fetchOffset(t, p, broker1, []ptWant{{tp: tp, pos: 400, gen: gen}})
	fetchOffset(t, p, broker1Lane1, aheadWants(p)[broker1Lane1])
	if got, _ := p.accept(broker1Lane1, tp, stripeAnswer(t, 788, 400, 100_000)); !got {
		t.Fatal("the ahead's answer was not held")
	}
	c.take()
	if c.next != 400 {
		t.Fatalf("the ahead's answer was handed on before the fetch it follows: taken up to %d", c.next)
	}
	p.accept(broker1, tp, stripeAnswer(t, 400, 400, 100_000))
	c.take()
	if c.next != 1200 {
		t.Fatalf("taken up to %d, want 1200 (both answers, the overlap once)", c.next)
	}
	// Both taken: the partition rejoins at the end of both.
	p.mu.Lock()
	_, placed := p.toPlace[tp]
	pos, state := p.parts[tp].pos, p.parts[tp].ahead.state
	p.mu.Unlock()
	if !placed || pos != 1200 || state != aheadNone {
		t.Fatalf("after both: to place %v at %d, ahead %v; want placed at 1200, no ahead", placed, pos, state)
	}
}

// TestStripeAheadErrors: an error for an ahead is not the partition's:
// an offset past the end drops the ahead and nothing else (no gap is
// looked for, the position stays); the partition's own fetch goes on.
func TestStripeAheadErrors(t *testing.T) {
	p, tp, c := newStripeTest(t)
	gen := p.parts[tp].gen
	fetchOffset(t, p, broker1, []ptWant{{tp: tp, pos: 400, gen: gen}})
	fetchOffset(t, p, broker1Lane1, aheadWants(p)[broker1Lane1])
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.ErrorCode = kerr.OffsetOutOfRange.Code
	p.accept(broker1Lane1, tp, rp) // the Copier has no gap handling here: a call would panic
	p.mu.Lock()
	state, pos := p.parts[tp].ahead.state, p.parts[tp].pos
	p.mu.Unlock()
	if state != aheadNone || pos != 400 {
		t.Fatalf("after an ahead's error: ahead %v, position %d; want none, 400", state, pos)
	}
	p.accept(broker1, tp, stripeAnswer(t, 400, 400, 100_000))
	c.take()
	if c.next != 800 {
		t.Fatalf("taken up to %d, want 800", c.next)
	}

	// A rewind drops an ahead on its way.
	fetchOffset(t, p, broker1, []ptWant{{tp: tp, pos: 800, gen: gen}})
	if len(aheadWants(p)) != 1 {
		t.Fatal("no ahead after a filled fetch")
	}
	p.rewind(tp, 100)
	if len(aheadWants(p)) != 0 {
		t.Fatal("an ahead survived a rewind")
	}
}

// TestStripeNotNearTheEnd: no ahead for a partition near its source's
// end (it would be a long poll), nor under a rate limit.
func TestStripeNotNearTheEnd(t *testing.T) {
	p, tp, gen := newStripePath(t)
	fetchOffset(t, p, broker1, []ptWant{{tp: tp, gen: gen}})
	p.accept(broker1, tp, stripeAnswer(t, 0, 400, 900)) // 500 left: less than 388 + 200
	p.take()
	fetchOffset(t, p, broker1, []ptWant{{tp: tp, pos: 400, gen: gen}})
	if w := aheadWants(p); len(w) != 0 {
		t.Fatalf("an ahead 500 records from the end: %v", w)
	}

	// Far from it, but under a rate limit for the topic.
	p.throttle = throttle.New()
	p.throttle.Set(throttle.Limits{Topics: map[string]int64{"t": 100 << 20}}, time.Now())
	p.accept(broker1, tp, stripeAnswer(t, 400, 400, 100_000))
	p.take()
	fetchOffset(t, p, broker1, []ptWant{{tp: tp, pos: 800, gen: gen}})
	if w := aheadWants(p); len(w) != 0 {
		t.Fatalf("an ahead under a rate limit: %v", w)
	}
	p.throttle.Set(throttle.Limits{}, time.Now())
	p.accept(broker1, tp, stripeAnswer(t, 800, 400, 100_000))
	p.take()
	fetchOffset(t, p, broker1, []ptWant{{tp: tp, pos: 1200, gen: gen}})
	if w := aheadWants(p); len(w) != 1 {
		t.Fatalf("no ahead once the limit is lifted: %v", w)
	}
}

// TestStripeBytesBounded: aheads are a third fetch's bytes beside the one
// produced and the one in flight; several partitions that each fill
// fetches stripe only while what is fetched and not acknowledged, with
// the other aheads' bytes, is within the byte budget.
func TestStripeBytesBounded(t *testing.T) {
	p := newPassthrough(&Copier{fetchMaxBytes: 512 << 10}, nil, nil, nil)
	a, b := TopicPartition{"a", 0}, TopicPartition{"b", 0}
	for _, tp := range []TopicPartition{a, b} {
		p.add(tp, 0, p.newGen())
		p.parts[tp].fetchMax = 512 << 10
		fetchOffset(t, p, broker1, []ptWant{{tp: tp, gen: p.parts[tp].gen}})
		p.accept(broker1, tp, stripeAnswer(t, 0, 400, 100_000))
	}
	p.take()
	p.buffered = p.byteBudget() - 300<<10 // being produced
	fetchOffset(t, p, broker1, []ptWant{{tp: a, pos: 400, gen: p.parts[a].gen}})
	if w := aheadWants(p); len(w[broker1Lane1]) != 1 {
		t.Fatalf("the first partition has no ahead with 300 KiB of the budget left: %v", w)
	}
	fetchOffset(t, p, broker1, []ptWant{{tp: b, pos: 400, gen: p.parts[b].gen}})
	if w := aheadWants(p); len(w[broker1Lane1]) != 1 || w[broker1Lane1][0].tp != a {
		t.Fatalf("aheads %v: the second partition striped past the budget (the first's ahead brings about 400 KiB)", w)
	}
}
