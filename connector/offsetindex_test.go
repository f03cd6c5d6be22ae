package connector

import (
	"errors"
	"reflect"
	"testing"
)

func TestOffsetIndexTranslate(t *testing.T) {
	t.Parallel()
	ix := newPartitionIndex()
	// Source 0..4 -> target 0..4; source 5 is a transaction marker;
	// 6..7 -> 5..6; 8..10 were compacted away; 11 -> 7.
	for _, m := range [][2]int64{{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}, {6, 5}, {7, 6}, {11, 7}} {
		ix.add(m[0], m[1])
	}
	if want := []offsetRun{{0, 0, 5}, {6, 5, 2}, {11, 7, 1}}; !reflect.DeepEqual(ix.runs, want) {
		t.Fatalf("runs = %v, want %v", ix.runs, want)
	}
	tests := map[int64]int64{
		0: 0, 3: 3, 4: 4,
		5:  5, // the marker: the next record is source 6 at target 5
		6:  5,
		7:  6,
		8:  7, // compacted away: the next record is source 11
		10: 7,
		11: 7,
	}
	for s, want := range tests {
		got, err := ix.translate(s)
		if err != nil || got != want {
			t.Errorf("translate(%d) = %d, %v; want %d", s, got, err, want)
		}
	}
	if _, err := ix.translate(12); !errors.Is(err, ErrPastIndex) {
		t.Errorf("translate past the end: %v", err)
	}
}

// TestOffsetIndexRewindNewerCopyWins: records 3..5 were produced twice
// (a crash before progress was saved); translation points after the
// duplicates, at the second copy.
func TestOffsetIndexRewindNewerCopyWins(t *testing.T) {
	t.Parallel()
	ix := newPartitionIndex()
	for s := int64(0); s < 6; s++ {
		ix.add(s, s)
	}
	for s := int64(3); s < 8; s++ { // re-copied from 3, landing at 6..10
		ix.add(s, s+3)
	}
	if want := []offsetRun{{0, 0, 3}, {3, 6, 5}}; !reflect.DeepEqual(ix.runs, want) {
		t.Fatalf("runs = %v, want %v", ix.runs, want)
	}
	for s, want := range map[int64]int64{2: 2, 3: 6, 5: 8, 7: 10} {
		if got, err := ix.translate(s); err != nil || got != want {
			t.Errorf("translate(%d) = %d, %v; want %d", s, got, err, want)
		}
	}
}

func TestOffsetIndexChunksPruneAndBound(t *testing.T) {
	t.Parallel()
	ix := newPartitionIndex()
	// Every other source offset is a marker: one run per record.
	for i := int64(0); i < 3*indexChunkRuns+10; i++ {
		ix.add(2*i, i)
	}
	if ix.dirtyFrom != 0 || len(ix.runs) != 3*indexChunkRuns+10 {
		t.Fatalf("dirtyFrom=%d runs=%d", ix.dirtyFrom, len(ix.runs))
	}
	// Log start inside chunk 2: chunks 0 and 1 can go.
	ix.prune(2*(2*indexChunkRuns) + 10)
	if ix.first != 2 || !reflect.DeepEqual(ix.dropped, []int64{0, 1}) {
		t.Fatalf("first=%d dropped=%v", ix.first, ix.dropped)
	}
	if _, err := ix.translate(0); !errors.Is(err, ErrBehindIndex) {
		t.Fatalf("translate below the index: %v", err)
	}
	if got, err := ix.translate(2 * (2*indexChunkRuns + 5)); err != nil || got != 2*indexChunkRuns+5 {
		t.Fatalf("translate after prune = %d, %v", got, err)
	}
	if len(ix.chunk(2)) != indexChunkRuns || len(ix.chunk(3)) != 10 || ix.chunk(1) != nil {
		t.Fatalf("chunks: %d %d %v", len(ix.chunk(2)), len(ix.chunk(3)), ix.chunk(1))
	}

	big := newPartitionIndex()
	for i := int64(0); i < maxIndexRuns+5; i++ {
		big.add(2*i, i)
	}
	if len(big.runs) > maxIndexRuns {
		t.Fatalf("index holds %d runs, bound is %d", len(big.runs), maxIndexRuns)
	}
}

func TestIndexChunkCodec(t *testing.T) {
	t.Parallel()
	runs := []offsetRun{{5, 0, 100}, {106, 100, 1}, {1 << 40, 101, 7}}
	got, err := decodeIndexChunk(encodeIndexChunk(runs))
	if err != nil || !reflect.DeepEqual(got, runs) {
		t.Fatalf("round trip = %v, %v", got, err)
	}
	if got, err := decodeIndexChunk(encodeIndexChunk(nil)); err != nil || len(got) != 0 {
		t.Fatalf("empty = %v, %v", got, err)
	}
	for name, b := range map[string][]byte{
		"empty":     nil,
		"version":   {9, 0, 0, 0, 0},
		"truncated": encodeIndexChunk(runs)[:30],
		"overlap":   encodeIndexChunk([]offsetRun{{5, 0, 10}, {6, 10, 1}}),
		"zero run":  encodeIndexChunk([]offsetRun{{5, 0, 0}}),
	} {
		if _, err := decodeIndexChunk(b); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}
