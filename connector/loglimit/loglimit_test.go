package loglimit

import (
	"testing"
	"time"
)

// TestPassCountsHeld: a key's line passes once per interval, and the one
// that passes after it says how many were held back meanwhile; other keys
// are counted apart.
func TestPassCountsHeld(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	l := New(time.Minute)
	l.now = func() time.Time { return now }
	if ok, held := l.Pass("a"); !ok || held != 0 {
		t.Fatalf("first line: %v, %d held; want it through, 0 held", ok, held)
	}
	for range 5 {
		if ok, _ := l.Pass("a"); ok {
			t.Fatal("a repeat within the interval went through")
		}
	}
	if ok, held := l.Pass("b"); !ok || held != 0 {
		t.Fatalf("another key: %v, %d held; want it through, 0 held", ok, held)
	}
	now = now.Add(time.Minute)
	if ok, held := l.Pass("a"); !ok || held != 5 {
		t.Fatalf("after the interval: %v, %d held; want it through, 5 held", ok, held)
	}
	if ok, _ := l.Pass("a"); ok {
		t.Fatal("the count restarted but the interval did not")
	}
	now = now.Add(time.Minute)
	if ok, held := l.Pass("a"); !ok || held != 1 {
		t.Fatalf("next interval: %v, %d held; want it through, 1 held", ok, held)
	}
}
