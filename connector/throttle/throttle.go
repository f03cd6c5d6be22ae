// Package throttle caps the bytes per second a mirror's worker fetches
// from the source: the mirror's rate_limit, and the limits of its topics
// (topic_rate_limits). The data path asks it, before it fetches, how long
// to hold back (Delay, TopicDelay) and how much one fetch may bring
// (MaxBytes, TopicMaxBytes), and tells it what every fetch brought
// (Took): the bytes are paid for after the fact, as a debt that later
// fetches wait out. So a limit holds over any window longer than a fetch,
// whatever a fetch brings (Kafka returns at least one whole batch, which
// may be larger than asked for), and a fetch is never cut short of a
// batch.
//
// Smoothness: one fetch brings at most what the limit allows in
// Window, or in two round trips to the source when the round trip is
// longer (the caller's estimate, passed to MaxBytes), or the credit a
// slow fetch loop saved up (at most Credit), so a capped mirror copies
// steadily instead of fetching 16 MiB and then waiting seconds; and a topic's limit holds
// back only that topic's partitions, so a capped topic neither holds up
// the others nor is starved by them.
//
// The buckets are golang.org/x/time/rate limiters, driven with explicit
// times (the caller's clock), which is what lets the tests count bytes
// against a clock of their own.
package throttle

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Window is the time one fetch may cover at the limit: a fetch brings at
// most limit*Window bytes (or limit*2*round trip, when longer).
const Window = 200 * time.Millisecond

// MinFetchBytes is the least one fetch may ask for under a limit: below
// it, requests cost more than the records they bring.
const MinFetchBytes = 64 << 10

// Limits are the byte rates of one mirror: Mirror for all its topics
// together (0: none) and Topics for single topics (each topic its own
// bucket; a topic not named has no limit of its own).
type Limits struct {
	Mirror int64
	Topics map[string]int64
}

// Throttle is one worker's limits for one mirror. The zero value is not
// usable; New makes one. All methods are safe for concurrent use, and
// those the data path calls are no-ops on a nil *Throttle (no limits).
type Throttle struct {
	mu sync.Mutex
	// share is the part of the mirror's limit this worker takes: its
	// slots over all slots, when several workers copy the mirror.
	share  float64
	limits Limits
	mirror *bucket
	topics map[string]*bucket
	// topicsHeld sums the time topic limits held their topics back, over
	// all topics (a topic whose limit went keeps its part).
	topicsHeld time.Duration
}

// bucket is one limit: its rate and the time the limit held fetching back.
type bucket struct {
	lim *rate.Limiter
	// heldUntil is when the debt so far is paid; held sums the time
	// covered by debts (overlapping debts once).
	heldUntil time.Time
	held      time.Duration
}

// New returns a Throttle with no limits.
func New() *Throttle {
	return &Throttle{share: 1, topics: make(map[string]*bucket)}
}

// Set applies limits from now on (a reload): a limit that changes keeps
// the wait its bucket's debt makes, a limit removed lets its topic go at
// once.
func (t *Throttle) Set(l Limits, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.limits = l
	t.apply(now)
}

// SetShare makes this worker take owned/total of the mirror's limit: the
// workers of a mirror split it by the slots they own. A worker owning no
// slot copies nothing, and takes no part.
func (t *Throttle) SetShare(owned, total int, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := 1.0
	if total > 0 {
		s = float64(owned) / float64(total)
	}
	if s == t.share {
		return
	}
	t.share = s
	t.apply(now)
}

// apply makes the buckets follow t.limits and t.share. Called with t.mu held.
func (t *Throttle) apply(now time.Time) {
	mirror := int64(float64(t.limits.Mirror) * t.share)
	if t.limits.Mirror > 0 && mirror < 1 {
		mirror = 1 // a share of a limit is never no limit
	}
	t.mirror = t.follow(t.mirror, mirror, now)
	for topic := range t.topics {
		if t.limits.Topics[topic] <= 0 {
			delete(t.topics, topic)
		}
	}
	for topic, r := range t.limits.Topics {
		if r > 0 {
			t.topics[topic] = t.follow(t.topics[topic], r, now)
		}
	}
}

// follow returns b at rate r (nil for no limit), made when new.
func (t *Throttle) follow(b *bucket, r int64, now time.Time) *bucket {
	if r <= 0 {
		return nil
	}
	burst := burstOf(r)
	if b == nil {
		// Starts with a window's credit: the first fetch goes at once,
		// asking for no more than a window.
		b = &bucket{lim: rate.NewLimiter(rate.Limit(r), burst)}
		b.reserve(burst-windowOf(r), now)
		return b
	}
	old := b.lim.Limit()
	if old == rate.Limit(r) {
		return b
	}
	// A debt owed is time to wait, not bytes: it is kept as the same
	// wait at the new rate. (Kept in bytes, lowering a limit from 20 to
	// 1 MB/s made the debt of the last 4 MB fetch a pause of 4 s.)
	tok := min(b.lim.TokensAt(now), float64(burst))
	if tok < 0 {
		tok *= float64(r) / float64(old)
	}
	b.lim = rate.NewLimiter(rate.Limit(r), burst)
	b.reserve(int(float64(burst)-tok), now)
	return b
}

// reserve takes n bytes out of b's bucket at now, in steps of at most the
// burst (what rate.Limiter reserves at once).
func (b *bucket) reserve(n int, now time.Time) {
	burst := b.lim.Burst()
	for n > 0 {
		k := min(n, burst)
		b.lim.ReserveN(now, k)
		n -= k
	}
}

// Credit is the most time at the limit a bucket saves up unused. A fetch
// may ask for what was saved (MaxBytes), so a fetch loop held up beyond
// Window (a busy machine, partitions waiting to be written) makes up for
// it with its next fetch instead of losing the time: on a loaded 2-core
// machine a 20 MB/s limit copied 0.947 of it when a bucket saved one
// Window. Twice Window keeps a fetch within two windows at the limit.
const Credit = 2 * Window

// burstOf is the bucket depth at rate r: what Credit allows, at least
// MinFetchBytes.
func burstOf(r int64) int {
	return int(min(max(r*int64(Credit)/int64(time.Second), MinFetchBytes), math.MaxInt32))
}

// windowOf is what rate r allows in Window, at least MinFetchBytes.
func windowOf(r int64) int {
	return int(min(max(r*int64(Window)/int64(time.Second), MinFetchBytes), math.MaxInt32))
}

// Limited reports whether the mirror or any topic has a limit.
func (t *Throttle) Limited() bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mirror != nil || len(t.topics) > 0
}

// Took pays for n bytes a fetch brought of topic, at now.
func (t *Throttle) Took(topic string, n int, now time.Time) {
	if t == nil {
		return
	}
	if n <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mirror.take(n, now)
	t.topicsHeld += t.topics[topic].take(n, now)
}

// take reserves n bytes in b (a nil b has no limit) and moves heldUntil
// to when they are paid; it returns the time that adds to held.
func (b *bucket) take(n int, now time.Time) time.Duration {
	if b == nil {
		return 0
	}
	b.reserve(n, now)
	until := now.Add(b.delay(now))
	if !until.After(b.heldUntil) {
		return 0
	}
	added := until.Sub(later(b.heldUntil, now))
	b.held += added
	b.heldUntil = until
	return added
}

// delay is how long until b has no debt.
func (b *bucket) delay(now time.Time) time.Duration {
	if b == nil {
		return 0
	}
	tok := b.lim.TokensAt(now)
	if tok >= 0 {
		return 0
	}
	return time.Duration(-tok / float64(b.lim.Limit()) * float64(time.Second))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Delay is how long fetching of the mirror is held back from now (its
// limit's debt).
func (t *Throttle) Delay(now time.Time) time.Duration {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mirror.delay(now)
}

// TopicDelay is how long fetching of topic is held back from now, by its
// own limit or the mirror's.
func (t *Throttle) TopicDelay(topic string, now time.Time) time.Duration {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(t.mirror.delay(now), t.topics[topic].delay(now))
}

// MaxBytes is the most one fetch of the mirror may ask for at now: def
// without a limit, else what the limit allows in a window (Window, or two
// round trips to the source, rtt, when longer: the caller's estimate, 0
// if it has none) or the credit saved up (Credit), whichever is more, at
// least MinFetchBytes.
func (t *Throttle) MaxBytes(def int32, rtt time.Duration, now time.Time) int32 {
	if t == nil {
		return def
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mirror.maxBytes(def, rtt, now)
}

// TopicMaxBytes is the most one fetch may ask for of one partition of
// topic: def, or less under the topic's or the mirror's limit.
func (t *Throttle) TopicMaxBytes(topic string, def int32, rtt time.Duration, now time.Time) int32 {
	if t == nil {
		return def
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return min(t.mirror.maxBytes(def, rtt, now), t.topics[topic].maxBytes(def, rtt, now))
}

// maxBytes is what one fetch may ask for under b (def for no limit): see
// MaxBytes.
func (b *bucket) maxBytes(def int32, rtt time.Duration, now time.Time) int32 {
	if b == nil {
		return def
	}
	w := max(Window, 2*rtt)
	c := max(int64(float64(b.lim.Limit())*w.Seconds()), int64(b.lim.TokensAt(now)))
	return int32(min(max(c, MinFetchBytes), int64(def)))
}

// Status is what the throttle shows: the limits in force (bytes/s, this
// worker's share of the mirror's) and the time each held fetching back
// (counted up to the time asked: a debt is time held as it elapses).
type Status struct {
	Mirror     int64
	MirrorHeld time.Duration
	Topics     map[string]TopicStatus
	// TopicsHeld sums the time topic limits held their topics back, over
	// every topic that ever had a limit.
	TopicsHeld time.Duration
	// HeldNow: a limit holds fetching back at the time asked.
	HeldNow bool
}

// TopicStatus is one topic's limit and the time it held the topic back.
type TopicStatus struct {
	Limit int64
	Held  time.Duration
}

// Status reports the limits and held times at now.
func (t *Throttle) Status(now time.Time) Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Status{Topics: make(map[string]TopicStatus, len(t.topics))}
	if b := t.mirror; b != nil {
		s.Mirror = int64(b.lim.Limit())
		s.MirrorHeld = b.heldAt(now)
		s.HeldNow = b.heldUntil.After(now)
	}
	s.TopicsHeld = t.topicsHeld
	for topic, b := range t.topics {
		s.Topics[topic] = TopicStatus{Limit: int64(b.lim.Limit()), Held: b.heldAt(now)}
		if b.heldUntil.After(now) {
			s.TopicsHeld -= b.heldUntil.Sub(now) // its debt not yet elapsed
			s.HeldNow = true
		}
	}
	return s
}

// heldAt is the time held up to now (a debt not yet paid counts up to now).
func (b *bucket) heldAt(now time.Time) time.Duration {
	if b.heldUntil.After(now) {
		return b.held - b.heldUntil.Sub(now)
	}
	return b.held
}
