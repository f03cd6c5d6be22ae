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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
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
	r := &recorder{fail: 3}
	var mu sync.Mutex
	results := map[string]int{}
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
	d.SetTopics([]listeners.Topic{topic("a", 1)})
	d.SetTopics([]listeners.Topic{topic("a", 1), topic("b", 1)})
	d.SetTopics([]listeners.Topic{topic("b", 1), topic("c", 1)})
	waitFor(t, "delivery after the failures", func() bool { return len(r.calls()) == 1 })
	c := r.calls()[0]
	if c.Sequence != 1 || !reflect.DeepEqual(names(c.Topics), []string{"b", "c"}) || !reflect.DeepEqual(names(c.Added), []string{"b", "c"}) || len(c.Removed) != 0 {
		t.Fatalf("coalesced call = %+v", c)
	}
	mu.Lock()
	defer mu.Unlock()
	if results["error"] != 3 || results["ok"] != 1 {
		t.Fatalf("observed %v, want 3 errors and 1 ok", results)
	}
}

// TestDispatcherSlowListenerNeverBlocks: publishing never waits for a
// listener, a call is cut at the timeout, and Close does not wait for a
// listener that ignores its context.
func TestDispatcherSlowListenerNeverBlocks(t *testing.T) {
	t.Parallel()
	slow := &recorder{block: make(chan struct{})}
	fast := &recorder{}
	d := listeners.NewDispatcher(listeners.DispatcherOptions{Mirror: "m", Timeout: 50 * time.Millisecond, MinBackoff: 10 * time.Millisecond})
	d.Add("slow", slow, nil)
	d.Add("fast", fast, nil)
	d.Start()
	start := time.Now()
	for i := range 1000 {
		d.SetTopics([]listeners.Topic{topic("a", int32(i+1))})
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Fatalf("publishing 1000 sets took %v", took)
	}
	waitFor(t, "the fast listener to see the last set", func() bool {
		cs := fast.calls()
		return len(cs) > 0 && cs[len(cs)-1].Topics[0].Partitions == 1000
	})
	start = time.Now()
	d.Close()
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Close waited %v for a blocked listener", took)
	}
	close(slow.block)
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
	waitFor(t, "first call", func() bool { return len(r.calls()) == 1 })
	d.Resync("rec")
	waitFor(t, "resync", func() bool { return len(r.calls()) == 2 })
	c := r.calls()[1]
	if c.Sequence != 2 || !reflect.DeepEqual(names(c.Added), []string{"a", "b"}) {
		t.Fatalf("resync call = %+v: want the full state as added, sequence going on", c)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.groups) < 2 || len(r.groups[len(r.groups)-1].Added) != 1 {
		t.Fatalf("group calls = %+v", r.groups)
	}
}

func TestDiffGroups(t *testing.T) {
	t.Parallel()
	added, removed := listeners.DiffGroups([]listeners.Group{{Name: "a"}, {Name: "b"}}, []listeners.Group{{Name: "c"}, {Name: "b"}})
	if len(added) != 1 || added[0].Name != "c" || len(removed) != 1 || removed[0].Name != "a" {
		t.Fatalf("added %v removed %v", added, removed)
	}
}
