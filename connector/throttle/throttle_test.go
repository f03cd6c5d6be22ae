package throttle

import (
	"math/rand/v2"
	"testing"
	"time"
)

// fetcher is a saturated source fetched through a Throttle on a clock of
// the test's own: each fetch waits out the delay, asks for MaxBytes (per
// topic, TopicMaxBytes) and brings that, or one whole batch more than
// asked (Kafka returns whole batches), and takes rtt.
type fetcher struct {
	t   *Throttle
	now time.Time
	rtt time.Duration
	// lag is how late each fetch goes out after the throttle lets it: a
	// busy machine, or fetched partitions waiting to be written.
	lag    time.Duration
	batch  int
	rng    *rand.Rand
	copied map[string]int64
}

func newFetcher(th *Throttle, rtt time.Duration) *fetcher {
	return &fetcher{t: th, now: time.Unix(1_000_000, 0), rtt: rtt, batch: 16 << 10, rng: rand.New(rand.NewPCG(1, 2)), copied: map[string]int64{}}
}

// run fetches topics (all behind) for d of the fetcher's clock.
func (f *fetcher) run(d time.Duration, topics ...string) {
	end := f.now.Add(d)
	for f.now.Before(end) {
		f.now = f.now.Add(f.t.Delay(f.now) + f.lag)
		room := int(f.t.MaxBytes(16<<20, f.rtt, f.now))
		for _, topic := range topics {
			if f.t.TopicDelay(topic, f.now) > 0 || room <= 0 {
				continue
			}
			n := min(int(f.t.TopicMaxBytes(topic, 1<<20*16, f.rtt, f.now)), room)
			// Whole batches up to n, and sometimes the one batch past it.
			got := n / f.batch * f.batch
			if got == 0 || f.rng.IntN(2) == 0 {
				got += f.batch
			}
			room -= got
			f.copied[topic] += int64(got)
			f.t.Took(topic, got, f.now)
		}
		f.now = f.now.Add(f.rtt)
	}
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if got < want*(1-tol) || got > want*(1+tol) {
		t.Errorf("%s: %.0f bytes/s, want %.0f within %.0f%%", what, got, want, tol*100)
	} else {
		t.Logf("%s: %.0f bytes/s (limit %.0f)", what, got, want)
	}
}

// TestMirrorLimitHolds: on a saturated source a mirror's limit holds within
// 5% over 30 s (of the test's clock), at loopback and WAN round trips and
// with fetches that bring a batch more than asked; and no fetch asks for
// more than the limit allows in a window.
func TestMirrorLimitHolds(t *testing.T) {
	for _, rtt := range []time.Duration{time.Millisecond, 80 * time.Millisecond, 150 * time.Millisecond} {
		for _, limit := range []int64{1 << 20, 10e6, 100e6} {
			th := New()
			f := newFetcher(th, rtt)
			th.Set(Limits{Mirror: limit}, f.now)
			if mb := th.MaxBytes(16<<20, rtt, f.now); int64(mb) > max(limit*int64(max(Window, 2*rtt))/int64(time.Second), MinFetchBytes) {
				t.Errorf("rtt %v limit %d: a fetch asks for %d bytes", rtt, limit, mb)
			}
			start := f.now
			f.run(30*time.Second, "a", "b")
			rate := float64(f.copied["a"]+f.copied["b"]) / f.now.Sub(start).Seconds()
			within(t, "rtt "+rtt.String()+" limit "+time.Duration(limit).String(), rate, float64(limit), 0.05)
		}
	}
}

// TestLimitHoldsWithASlowLoop: a fetch loop that sends each fetch late
// (up to 400 ms after the throttle let it go, beyond Window) still copies
// at its limit: the time it lost is saved up (Credit) and asked for by
// the next fetch. (With a bucket one Window deep, a 20 MB/s limit at
// 80 ms copied 0.87 of it with a lag of 150 ms.)
func TestLimitHoldsWithASlowLoop(t *testing.T) {
	for _, lag := range []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond} {
		for _, rtt := range []time.Duration{time.Millisecond, 80 * time.Millisecond} {
			th := New()
			f := newFetcher(th, rtt)
			f.lag = lag
			th.Set(Limits{Mirror: 20e6}, f.now)
			start := f.now
			f.run(30*time.Second, "a", "b")
			rate := float64(f.copied["a"]+f.copied["b"]) / f.now.Sub(start).Seconds()
			within(t, "lag "+lag.String()+" rtt "+rtt.String(), rate, 20e6, 0.05)
		}
	}
}

// TestTopicLimitNeitherStarvesNorIsStarved: a topic with a limit of its
// own copies at it while an unlimited topic takes the rest of the
// mirror's limit; neither holds up the other.
func TestTopicLimitNeitherStarvesNorIsStarved(t *testing.T) {
	th := New()
	f := newFetcher(th, 20*time.Millisecond)
	th.Set(Limits{Mirror: 20e6, Topics: map[string]int64{"slow": 2e6}}, f.now)
	start := f.now
	f.run(30*time.Second, "slow", "fast")
	secs := f.now.Sub(start).Seconds()
	within(t, "topic slow (limit 2 MB/s)", float64(f.copied["slow"])/secs, 2e6, 0.05)
	within(t, "topic fast (the mirror's 20 MB/s less slow's)", float64(f.copied["fast"])/secs, 18e6, 0.05)
	st := th.Status(f.now)
	// slow waits on its own limit, fast on the mirror's (slow too, then).
	if st.Topics["slow"].Held < 10*time.Second || st.Topics["slow"].Limit != 2e6 || st.MirrorHeld < 10*time.Second {
		t.Errorf("status %+v: want slow's limit, and both limits holding back a good part of 30s", st)
	}
}

// TestReloadChangesLimit: Set on a running throttle (a reload) moves the
// rate from then on, keeps the wait a debt already makes, and a limit
// removed lets fetching go at once.
func TestReloadChangesLimit(t *testing.T) {
	th := New()
	f := newFetcher(th, 10*time.Millisecond)
	th.Set(Limits{Mirror: 5e6}, f.now)
	f.run(10*time.Second, "a")
	before := f.copied["a"]
	th.Set(Limits{Mirror: 20e6}, f.now)
	start := f.now
	f.run(30*time.Second, "a")
	within(t, "after raising the limit to 20 MB/s", float64(f.copied["a"]-before)/f.now.Sub(start).Seconds(), 20e6, 0.05)

	wait := th.Delay(f.now)
	th.Set(Limits{Mirror: 1e6}, f.now)
	if d := th.Delay(f.now); d < wait-time.Millisecond || d > wait+time.Millisecond || wait == 0 {
		t.Errorf("lowering the limit made the wait %v, want the %v it was (a debt)", d, wait)
	}
	before, start = f.copied["a"], f.now
	f.run(30*time.Second, "a")
	within(t, "after lowering it to 1 MB/s", float64(f.copied["a"]-before)/f.now.Sub(start).Seconds(), 1e6, 0.05)

	f.t.Took("a", 50<<20, f.now) // a debt of 50 s at 1 MB/s
	th.Set(Limits{}, f.now)
	if d := th.Delay(f.now); d != 0 || th.Limited() {
		t.Fatalf("limit removed: delay %v, limited %v; want none", d, th.Limited())
	}
	if mb := th.MaxBytes(16<<20, 0, f.now); mb != 16<<20 {
		t.Fatalf("limit removed: a fetch asks for %d, want the default", mb)
	}
}

// TestShareSplitsMirrorLimit: a worker owning 4 of 16 slots takes a
// quarter of the mirror's limit; topic limits are not split (a topic's
// partitions may all be one worker's).
func TestShareSplitsMirrorLimit(t *testing.T) {
	th := New()
	f := newFetcher(th, 5*time.Millisecond)
	th.Set(Limits{Mirror: 40e6, Topics: map[string]int64{"t": 8e6}}, f.now)
	th.SetShare(4, 16, f.now)
	st := th.Status(f.now)
	if st.Mirror != 10e6 || st.Topics["t"].Limit != 8e6 {
		t.Fatalf("status %+v: want the mirror's 10 MB/s share and t's own 8 MB/s", st)
	}
	start := f.now
	f.run(30*time.Second, "a")
	within(t, "a quarter of 40 MB/s", float64(f.copied["a"])/f.now.Sub(start).Seconds(), 10e6, 0.05)
}

// TestHeldTime: the time a limit holds fetching back counts as it
// elapses; an idle throttle holds nothing.
func TestHeldTime(t *testing.T) {
	th := New()
	now := time.Unix(0, 0)
	th.Set(Limits{Mirror: 1e6}, now)
	if st := th.Status(now); st.HeldNow || st.MirrorHeld != 0 {
		t.Fatalf("idle: %+v", st)
	}
	th.Took("a", 3e6+windowOf(1e6), now) // 3 s of debt past the window of credit a bucket starts with
	st := th.Status(now.Add(time.Second))
	if !st.HeldNow || st.MirrorHeld != time.Second {
		t.Fatalf("1s into a 3s debt: %+v, want held now, 1s held", st)
	}
	st = th.Status(now.Add(10 * time.Second))
	if st.HeldNow || st.MirrorHeld != 3*time.Second {
		t.Fatalf("after the debt: %+v, want 3s held", st)
	}
}
