package index

import (
	"errors"
	"reflect"
	"testing"
)

func TestOffsetIndexTranslate(t *testing.T) {
	t.Parallel()
	ix := New()
	// Source 0..4 -> target 0..4; source 5 is a transaction marker;
	// 6..7 -> 5..6; 8..10 were compacted away; 11 -> 7.
	for _, m := range [][2]int64{{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}, {6, 5}, {7, 6}, {11, 7}} {
		ix.Add(m[0], m[1])
	}
	if want := []Run{{0, 0, 5}, {6, 5, 2}, {11, 7, 1}}; !reflect.DeepEqual(ix.runs, want) {
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
		got, err := ix.Translate(s)
		if err != nil || got != want {
			t.Errorf("translate(%d) = %d, %v; want %d", s, got, err, want)
		}
	}
	if _, err := ix.Translate(12); !errors.Is(err, ErrPastIndex) {
		t.Errorf("translate past the end: %v", err)
	}
}

// TestOffsetIndexRewindNewerCopyWins: records 3..5 were produced twice
// (a crash before progress was saved); translation points after the
// duplicates, at the second copy.
func TestOffsetIndexRewindNewerCopyWins(t *testing.T) {
	t.Parallel()
	ix := New()
	for s := int64(0); s < 6; s++ {
		ix.Add(s, s)
	}
	for s := int64(3); s < 8; s++ { // re-copied from 3, landing at 6..10
		ix.Add(s, s+3)
	}
	if want := []Run{{0, 0, 3}, {3, 6, 5}}; !reflect.DeepEqual(ix.runs, want) {
		t.Fatalf("runs = %v, want %v", ix.runs, want)
	}
	for s, want := range map[int64]int64{2: 2, 3: 6, 5: 8, 7: 10} {
		if got, err := ix.Translate(s); err != nil || got != want {
			t.Errorf("translate(%d) = %d, %v; want %d", s, got, err, want)
		}
	}
}

func TestOffsetIndexChunksPruneAndBound(t *testing.T) {
	t.Parallel()
	ix := New()
	// Every other source offset is a marker: one run per record.
	for i := int64(0); i < 3*ChunkRuns+10; i++ {
		ix.Add(2*i, i)
	}
	if ix.dirtyFrom != 0 || len(ix.runs) != 3*ChunkRuns+10 {
		t.Fatalf("dirtyFrom=%d runs=%d", ix.dirtyFrom, len(ix.runs))
	}
	// Log start inside chunk 2: chunks 0 and 1 can go.
	ix.Prune(2*(2*ChunkRuns) + 10)
	if ix.first != 2 || !reflect.DeepEqual(ix.dropped, []int64{0, 1}) {
		t.Fatalf("first=%d dropped=%v", ix.first, ix.dropped)
	}
	if _, err := ix.Translate(0); !errors.Is(err, ErrBehindIndex) {
		t.Fatalf("translate below the index: %v", err)
	}
	if got, err := ix.Translate(2 * (2*ChunkRuns + 5)); err != nil || got != 2*ChunkRuns+5 {
		t.Fatalf("translate after prune = %d, %v", got, err)
	}
	if len(ix.chunk(2)) != ChunkRuns || len(ix.chunk(3)) != 10 || ix.chunk(1) != nil {
		t.Fatalf("chunks: %d %d %v", len(ix.chunk(2)), len(ix.chunk(3)), ix.chunk(1))
	}

	big := New()
	for i := int64(0); i < maxRuns+5; i++ {
		big.Add(2*i, i)
	}
	if len(big.runs) > maxRuns {
		t.Fatalf("index holds %d runs, bound is %d", len(big.runs), maxRuns)
	}
}

func TestIndexChunkCodec(t *testing.T) {
	t.Parallel()
	runs := []Run{{5, 0, 100}, {106, 100, 1}, {1 << 40, 101, 7}}
	got, err := DecodeChunk(EncodeChunk(runs))
	if err != nil || !reflect.DeepEqual(got, runs) {
		t.Fatalf("round trip = %v, %v", got, err)
	}
	if got, err := DecodeChunk(EncodeChunk(nil)); err != nil || len(got) != 0 {
		t.Fatalf("empty = %v, %v", got, err)
	}
	for name, b := range map[string][]byte{
		"empty":     nil,
		"version":   {9, 0, 0, 0, 0},
		"truncated": EncodeChunk(runs)[:30],
		"overlap":   EncodeChunk([]Run{{5, 0, 10}, {6, 10, 1}}),
		"zero run":  EncodeChunk([]Run{{5, 0, 0}}),
	} {
		if _, err := DecodeChunk(b); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

// TestIndexEvictableOnlyWhenStored: a chunk may leave memory only once it is
// stored as it is: written and not changed since (not dirty), its write
// acknowledged, and in a transaction committed (an aborted transaction's
// chunk writes count for nothing).
func TestIndexEvictableOnlyWhenStored(t *testing.T) {
	ix := New()
	for i := range int64(5 * ChunkRuns) {
		ix.Add(2*i, i)
	}
	if n := ix.Evictable(); n != 0 {
		t.Fatalf("dirty chunks: %d evictable, want 0", n)
	}
	ix.dirtyFrom = -1 // written (as writeAsync does), not acknowledged
	if n := ix.Evictable(); n != 0 {
		t.Fatalf("written, unacknowledged chunks: %d evictable, want 0", n)
	}
	for k := range int64(5) {
		ix.ChunkAcked(k, false) // acknowledged inside an open transaction
	}
	if n := ix.Evictable(); n != 0 {
		t.Fatalf("uncommitted chunks: %d evictable, want 0", n)
	}
	ix.ackedBelow = ix.storedBelow // the transaction aborted
	ix.ChunkAcked(4, true)         // written again, outside a transaction
	if n := ix.Evictable(); n != 3 {
		t.Fatalf("stored chunks: %d evictable, want 3 (all but the last two)", n)
	}
	ix.markDirty(1 * ChunkRuns) // chunk 1 changed since
	if n := ix.Evictable(); n != 1 {
		t.Fatalf("chunk 1 dirty: %d evictable, want 1 (chunk 0)", n)
	}
}
