package app

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/filters"
)

func TestCoalescerSharesConcurrentCallsAndExpires(t *testing.T) {
	t.Parallel()
	// A TTL far above any scheduling delay: a caller the scheduler starts
	// late still finds the answer, so the count below does not depend on
	// the machine's load.
	c := newCoalescer(time.Minute)
	var calls atomic.Int32
	release := make(chan struct{})
	call := func(context.Context) ([]string, error) {
		calls.Add(1)
		<-release
		return []string{"a"}, nil
	}
	req := filters.TopicRequest{Properties: map[string]string{"team": "x"}, Topics: []filters.Topic{{Name: "a", Partitions: 1}}}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if got, err := c.do(context.Background(), "p", req, call); err != nil || len(got) != 1 {
				t.Errorf("got %v, %v", got, err)
			}
		})
	}
	// Usually all five are waiting on the one call by now.
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("5 concurrent identical calls reached the plugin %d times, want 1", n)
	}
	// Within the TTL the answer is shared.
	if _, err := c.do(context.Background(), "p", req, call); err != nil || calls.Load() != 1 {
		t.Fatalf("within the TTL: calls = %d, %v", calls.Load(), err)
	}
	// Different properties are a different question.
	other := req
	other.Properties = map[string]string{"team": "y"}
	if _, err := c.do(context.Background(), "p", other, call); err != nil || calls.Load() != 2 {
		t.Fatalf("calls = %d, %v", calls.Load(), err)
	}

	// After the TTL (less than a pass), the plugin is asked again: an
	// edited catalog is seen.
	short := newCoalescer(50 * time.Millisecond)
	if _, err := short.do(context.Background(), "p", req, call); err != nil || calls.Load() != 3 {
		t.Fatalf("calls = %d, %v", calls.Load(), err)
	}
	time.Sleep(60 * time.Millisecond) // at least the TTL
	if _, err := short.do(context.Background(), "p", req, call); err != nil || calls.Load() != 4 {
		t.Fatalf("after the TTL: calls = %d, %v", calls.Load(), err)
	}
}

func TestCoalescerDoesNotCacheErrors(t *testing.T) {
	t.Parallel()
	c := newCoalescer(time.Minute)
	n := 0
	fail := func(context.Context) ([]string, error) { n++; return nil, errors.New("plugin down") }
	req := filters.TopicRequest{Topics: []filters.Topic{{Name: "a"}}}
	for range 2 {
		if _, err := c.do(context.Background(), "p", req, fail); err == nil {
			t.Fatal("want the plugin's error")
		}
	}
	if n != 2 {
		t.Fatalf("a failed call was cached: %d calls", n)
	}
}
