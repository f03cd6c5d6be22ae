package listeners_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/listeners"
)

// recorder is a listener that records every call and can be told to fail
// or to block.
type recorder struct {
	mu     sync.Mutex
	topics []listeners.TopicsChange
	groups []listeners.GroupsChange
	fail   int           // fail this many calls first
	failed int           // calls failed so far
	block  chan struct{} // when set, calls wait on it (ignoring ctx)
	closed bool
}

func (r *recorder) TopicsChanged(_ context.Context, c listeners.TopicsChange) error {
	if r.block != nil {
		<-r.block
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		r.failed++
		return errors.New("listener down")
	}
	r.topics = append(r.topics, c)
	return nil
}

func (r *recorder) GroupsChanged(_ context.Context, c listeners.GroupsChange) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups = append(r.groups, c)
	return nil
}

func (r *recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

func (r *recorder) calls() []listeners.TopicsChange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]listeners.TopicsChange(nil), r.topics...)
}

func (r *recorder) groupCalls() []listeners.GroupsChange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]listeners.GroupsChange(nil), r.groups...)
}

// setFail makes the next n calls fail; failures returns how many failed.
func (r *recorder) setFail(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = n
}

func (r *recorder) failures() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// waitFor polls cond for up to 30s: the dispatcher's goroutines may be
// slow to run on a loaded machine, never wrong.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func topic(name string, parts int32) listeners.Topic {
	return listeners.Topic{Upstream: name, Downstream: "east." + name, Partitions: parts, State: "mirroring"}
}

func names(ts []listeners.Topic) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.Upstream)
	}
	return out
}

func TestDispatcherInitialStateThenDiffs(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	d := listeners.NewDispatcher(listeners.DispatcherOptions{Mirror: "m", MinBackoff: time.Millisecond})
	d.Add("rec", r, r)
	d.Start()
	defer d.Close()

	d.SetTopics([]listeners.Topic{topic("c", 1), topic("a", 1), topic("b", 1)})
	waitFor(t, "the first call", func() bool { return len(r.calls()) == 1 })
	first := r.calls()[0]
	if first.Sequence != 1 || !reflect.DeepEqual(names(first.Topics), []string{"a", "b", "c"}) || !reflect.DeepEqual(names(first.Added), []string{"a", "b", "c"}) {
		t.Fatalf("first call = %+v", first)
	}
	// Publishing the same set again calls nobody.
	d.SetTopics([]listeners.Topic{topic("a", 1), topic("b", 1), topic("c", 1)})
	d.SetTopics([]listeners.Topic{topic("a", 1), topic("b", 3), topic("d", 1)})
	waitFor(t, "the diff", func() bool { return len(r.calls()) == 2 })
	second := r.calls()[1]
	if second.Sequence != 2 || !reflect.DeepEqual(names(second.Added), []string{"d"}) ||
		!reflect.DeepEqual(names(second.Removed), []string{"c"}) || !reflect.DeepEqual(names(second.Changed), []string{"b"}) {
		t.Fatalf("second call = %+v", second)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(r.calls()); n != 2 {
		t.Fatalf("%d calls, want 2 (no call without a change)", n)
	}
}

// TestDispatcherCoalescesWhileFailing: a listener that fails gets, once it
// recovers, one call with the latest state and a diff covering everything
// it missed.
func TestDispatcherCoalescesWhileFailing(t *testing.T) {
	t.Parallel()
	r := &recorder{fail: 1 << 30} // down until the test says otherwise
	var mu sync.Mutex
	results := map[string]int{}
	observed := func() (errs, oks int) {
		mu.Lock()
		defer mu.Unlock()
		return results["error"], results["ok"]
	}
	d := listeners.NewDispatcher(listeners.DispatcherOptions{Mirror: "m", MinBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		OnCall: func(_, _ string, err error, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				results["error"]++
			} else {
				results["ok"]++
			}
		}})
	d.Add("rec", r, nil)
	d.Start()
	defer d.Close()
	// Every set is published while the listener fails, and a retry sees
	// the first two: the listener misses them all.
	d.SetTopics([]listeners.Topic{topic("a", 1)})
	waitFor(t, "a failed call", func() bool { errs, _ := observed(); return errs >= 1 })
	d.SetTopics([]listeners.Topic{topic("a", 1), topic("b", 1)})
	n := r.failures()
	waitFor(t, "a failed retry", func() bool { return r.failures() > n })
	d.SetTopics([]listeners.Topic{topic("b", 1), topic("c", 1)})
	// The second failure from now was a call made after the first one
	// returned, so after the last SetTopics: from then on every call
	// carries the last set, also one in flight when the listener recovers.
	n = r.failures()
	waitFor(t, "two more failed retries", func() bool { return r.failures() >= n+2 })
	r.setFail(0)
	waitFor(t, "delivery after the failures", func() bool { return len(r.calls()) == 1 })
	c := r.calls()[0]
	if c.Sequence != 1 || !reflect.DeepEqual(names(c.Topics), []string{"b", "c"}) || !reflect.DeepEqual(names(c.Added), []string{"b", "c"}) || len(c.Removed) != 0 {
		t.Fatalf("coalesced call = %+v", c)
	}
	// OnCall runs after the listener returned: wait for the ok.
	waitFor(t, "OnCall to see the delivery", func() bool { _, oks := observed(); return oks == 1 })
	if errs, oks := observed(); errs != r.failures() || oks != 1 {
		t.Fatalf("observed %d errors and %d ok, want %d errors (the listener's failures) and 1 ok", errs, oks, r.failures())
	}
	// Nothing is left to deliver: no second call.
	time.Sleep(100 * time.Millisecond)
	if n := len(r.calls()); n != 1 {
		t.Fatalf("%d calls, want the one coalesced call", n)
	}
}

// TestDispatcherSlowListenerNeverBlocks: publishing never waits for a
// listener, a call is cut at the timeout, and Close does not wait for a
// listener that ignores its context. The slow listener blocks until the
// test ends, so a publish or a Close that waited for it would never return:
// the bounds below are far above any scheduling delay, not timings.
func TestDispatcherSlowListenerNeverBlocks(t *testing.T) {
	t.Parallel()
	slow := &recorder{block: make(chan struct{})}
	defer close(slow.block)
	fast := &recorder{}
	d := listeners.NewDispatcher(listeners.DispatcherOptions{Mirror: "m", Timeout: 50 * time.Millisecond, MinBackoff: 10 * time.Millisecond})
	d.Add("slow", slow, nil)
	d.Add("fast", fast, nil)
	d.Start()
	returns := func(what string, fn func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { defer close(done); fn() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s is still waiting for the blocked listener after 30s", what)
		}
	}
	returns("publishing 1000 sets", func() {
		for i := range 1000 {
			d.SetTopics([]listeners.Topic{topic("a", int32(i+1))})
		}
	})
	waitFor(t, "the fast listener to see the last set", func() bool {
		cs := fast.calls()
		return len(cs) > 0 && cs[len(cs)-1].Topics[0].Partitions == 1000
	})
	returns("Close", d.Close)
}

func TestDispatcherResync(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	d := listeners.NewDispatcher(listeners.DispatcherOptions{Mirror: "m"})
	d.Add("rec", r, r)
	d.Start()
	defer d.Close()
	d.SetTopics([]listeners.Topic{topic("a", 1), topic("b", 1)})
	d.SetGroups([]listeners.Group{{Name: "g1"}})
	// Both first calls, so that the resync is what makes the next ones.
	waitFor(t, "the first topics and groups calls", func() bool { return len(r.calls()) == 1 && len(r.groupCalls()) == 1 })
	d.Resync("rec")
	// One delivery makes the topics call, then the groups call.
	waitFor(t, "resync", func() bool { return len(r.calls()) == 2 && len(r.groupCalls()) == 2 })
	c := r.calls()[1]
	if c.Sequence != 2 || !reflect.DeepEqual(names(c.Added), []string{"a", "b"}) {
		t.Fatalf("resync call = %+v: want the full state as added, sequence going on", c)
	}
	if g := r.groupCalls()[1]; g.Sequence != 2 || len(g.Added) != 1 || g.Added[0].Name != "g1" {
		t.Fatalf("resync groups call = %+v: want the full state as added, sequence going on", g)
	}
}

func TestDiffGroups(t *testing.T) {
	t.Parallel()
	added, removed := listeners.DiffGroups([]listeners.Group{{Name: "a"}, {Name: "b"}}, []listeners.Group{{Name: "c"}, {Name: "b"}})
	if len(added) != 1 || added[0].Name != "c" || len(removed) != 1 || removed[0].Name != "a" {
		t.Fatalf("added %v removed %v", added, removed)
	}
}
