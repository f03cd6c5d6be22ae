package history

import (
	"slices"
	"testing"
)

// TestRing: a ring keeps the last values pushed, oldest first, and never
// more than its size.
func TestRing(t *testing.T) {
	r := NewRing[int](3)
	if got := r.Values(); len(got) != 0 {
		t.Fatalf("empty ring: %v", got)
	}
	for i, want := range [][]int{{1}, {1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {4, 5, 6}, {5, 6, 7}} {
		r.Push(i + 1)
		if got := r.Values(); !slices.Equal(got, want) || r.Len() != len(want) {
			t.Errorf("after pushing 1..%d: %v (len %d), want %v", i+1, got, r.Len(), want)
		}
	}
	one := NewRing[string](0) // at least one value
	one.Push("a")
	one.Push("b")
	if got := one.Values(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("a ring of size 0 holds %v, want [b]", got)
	}
}
