package english

import "testing"

func TestCount(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{0: "0 groups", 1: "1 group", 2: "2 groups", -1: "-1 groups"} {
		if got := Count(n, "group"); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}
