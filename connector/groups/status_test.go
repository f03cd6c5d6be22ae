package groups

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/connector/index"
)

func TestTranslateOffset(t *testing.T) {
	t.Parallel()
	ix := index.New()
	for _, m := range [][2]int64{{0, 0}, {1, 1}, {3, 2}, {4, 3}} { // 2 is a marker
		ix.Add(m[0], m[1])
	}
	for _, tc := range []struct {
		s, acked, want int64
		behind         bool
	}{
		{0, 5, 0, false}, {2, 5, 2, false}, {4, 5, 3, false},
		{5, 5, 4, false}, // everything before 5 is copied: the end is exact
		{7, 5, 4, true},  // 5 and 6 are not copied yet
	} {
		got, behind, err := TranslateOffset(ix, tc.acked, tc.s)
		if err != nil || got != tc.want || behind != tc.behind {
			t.Errorf("translate(%d, acked %d) = %d, %v, %v; want %d, %v", tc.s, tc.acked, got, behind, err, tc.want, tc.behind)
		}
	}
	if _, _, err := TranslateOffset(index.New(), 0, 0); err == nil {
		t.Error("an empty index cannot translate")
	}
}

// TestAdoptedIndexBeforeAnyCopy: an adopted partition with nothing copied
// since translates its floor exactly and later offsets as behind, at the
// floor; older ones are untranslatable, with the reason.
func TestAdoptedIndexBeforeAnyCopy(t *testing.T) {
	ix := index.NewAdopted(nil, 100, 90)
	if got, behind, err := TranslateOffset(ix, 100, 100); err != nil || got != 90 || behind {
		t.Fatalf("floor: %d %v %v", got, behind, err)
	}
	if got, behind, err := TranslateOffset(ix, 100, 105); err != nil || got != 90 || !behind {
		t.Fatalf("past the floor: %d %v %v", got, behind, err)
	}
	_, _, err := TranslateOffset(ix, 100, 99)
	if !errors.Is(err, index.ErrBelowAdopted) {
		t.Fatalf("below the floor: %v", err)
	}
	gp := Partition{SourceOffset: 99}
	gp.setTranslation(ix, 0, false, err)
	if !gp.Untranslatable || gp.TargetOffset != -1 || !strings.Contains(gp.Reason, "MirrorMaker 2") {
		t.Fatalf("below the floor: %+v, want untranslatable with a reason naming MirrorMaker 2", gp)
	}
	// Stored chunks of an earlier index are deleted by the adopted one.
	old := index.New()
	old.Add(0, 0)
	old.ChunkAcked(0, true)
	if got := index.NewAdopted(old, 5, 5).ChunksToDelete(); !slices.Contains(got, 0) {
		t.Fatalf("dropped %v, want chunk 0", got)
	}
}
