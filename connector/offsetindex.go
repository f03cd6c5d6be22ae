package connector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// The offset index maps source offsets to target offsets, exactly, for
// every record the target acknowledged (after Pulsar's compressed
// ManagedCursorInfo and unlike MM2's sparse offset syncs).
//
// A run is a stretch where both sides advance one by one: source records
// src..src+n-1 are target records dst..dst+n-1. A run ends wherever the
// source skips offsets the target does not (records removed by
// compaction, aborted records, transaction markers) or where the copy
// restarted and produced records again. Translating a committed source
// offset s gives the target offset of the first source record at or after
// s: a consumer that starts there on the target reads exactly the records
// it had not read on the source.
//
// When records are copied twice (a crash before progress was written), the
// newer copy wins: the index is truncated at the rewound offset and
// continues with the new target offsets, so translation lands after every
// duplicate rather than before them.
type offsetRun struct {
	src, dst, n int64
}

func (r offsetRun) srcEnd() int64 { return r.src + r.n }

// indexChunkRuns is the number of runs per stored chunk. Chunks keep every
// index record small (far below Kafka's 1 MB default message limit) and
// make a progress tick rewrite only the open chunk, not the whole index.
const indexChunkRuns = 1024

// maxIndexRuns bounds one partition's index in memory; beyond it the oldest
// chunks are dropped (translation of offsets that old then reports the
// group as behind the index rather than guessing).
const maxIndexRuns = 64 * indexChunkRuns

// partitionIndex is one source partition's index. Runs are sorted by src
// and do not overlap. Chunk k holds the runs with global number in
// [k*indexChunkRuns, (k+1)*indexChunkRuns); runs[0] has global number
// first*indexChunkRuns.
type partitionIndex struct {
	runs  []offsetRun
	first int64 // the chunk number of runs[0]
	// dirtyFrom is the lowest global run number changed since the last
	// persist (-1: nothing changed); dropped lists chunks to delete.
	dirtyFrom int64
	dropped   []int64
	// evicted are the chunks before first that are stored but no longer
	// held in memory (the mirror's index budget, indexbudget.go), in
	// order: what a translation of an offset that old reads back.
	evicted []evictedChunk
	// storedBelow: every chunk below it is stored as it is in memory
	// (acknowledged, and in cluster mode committed); ackedBelow is the
	// same before a transaction's commit.
	storedBelow, ackedBelow int64
	// floor, when set, is the position the partition's copy started from when it was adopted from MirrorMaker
	// 2 (mm2.go): source offset floor.src is target offset floor.dst.
	// Records below it were copied by MM2, whose mapping kmirror does not
	// know: translating an offset below the floor is an error, not the
	// target offset of the first run (which would skip records).
	floor *offsetRun
}

// evictedChunk is a stored chunk evicted from memory: its number and the
// source offsets its runs cover.
type evictedChunk struct {
	k, src, srcEnd int64
}

func newPartitionIndex() *partitionIndex { return &partitionIndex{dirtyFrom: -1} }

// adoptedIndex returns an empty index whose copy starts at source offset
// src, which is target offset dst (see partitionIndex.floor); it deletes
// the stored chunks of prev (nil: none), like replacement.
func adoptedIndex(prev *partitionIndex, src, dst int64) *partitionIndex {
	ix := newPartitionIndex()
	if prev != nil {
		ix = prev.replacement()
	}
	ix.floor = &offsetRun{src: src, dst: dst}
	return ix
}

// adopted reports whether ix has a floor.
func (ix *partitionIndex) adopted() bool { return ix.floor != nil }

// replacement returns an empty index that, once persisted, deletes every
// stored chunk of ix: the copy of the partition starts over.
func (ix *partitionIndex) replacement() *partitionIndex {
	fresh := newPartitionIndex()
	fresh.dropped = append(ix.storedChunks(), ix.dropped...)
	return fresh
}

// storedChunks are the numbers of the chunks ix has (or will have) in the
// progress topic.
func (ix *partitionIndex) storedChunks() []int64 {
	var out []int64
	for _, e := range ix.evicted {
		out = append(out, e.k)
	}
	for k := ix.first; k <= ix.first+int64(len(ix.runs)-1)/indexChunkRuns; k++ {
		out = append(out, k)
	}
	return out
}

func (ix *partitionIndex) markDirty(global int64) {
	if ix.dirtyFrom < 0 || global < ix.dirtyFrom {
		ix.dirtyFrom = global
	}
}

// add records that source record src landed at target offset dst.
func (ix *partitionIndex) add(src, dst int64) {
	base := ix.first * indexChunkRuns
	if n := len(ix.runs); n > 0 {
		last := &ix.runs[n-1]
		if src == last.srcEnd() && dst == last.dst+last.n {
			last.n++
			ix.markDirty(base + int64(n-1))
			return
		}
		if src < last.srcEnd() {
			ix.truncate(src)
		}
	}
	ix.runs = append(ix.runs, offsetRun{src: src, dst: dst, n: 1})
	ix.markDirty(base + int64(len(ix.runs)-1))
	if len(ix.evicted)*indexChunkRuns+len(ix.runs) > maxIndexRuns {
		ix.dropChunks(1)
	}
}

// truncate forgets every mapping at or after source offset src: the copy
// was rewound and those records are being produced again. (A rewind goes
// back at most to the acknowledged position, which lies in the chunks held
// in memory: evicted chunks are stored ones, well behind it.)
func (ix *partitionIndex) truncate(src int64) {
	i := sort.Search(len(ix.runs), func(i int) bool { return ix.runs[i].srcEnd() > src })
	if i == len(ix.runs) {
		return
	}
	if r := &ix.runs[i]; r.src < src {
		r.n = src - r.src
		i++
	}
	ix.runs = ix.runs[:i]
	ix.markDirty(ix.first*indexChunkRuns + int64(max(i-1, 0)))
}

// dropChunks forgets the oldest k chunks, evicted ones first.
func (ix *partitionIndex) dropChunks(k int) {
	for range k {
		if len(ix.evicted) > 0 {
			ix.dropped = append(ix.dropped, ix.evicted[0].k)
			ix.evicted = ix.evicted[1:]
			continue
		}
		if len(ix.runs) == 0 {
			return
		}
		ix.dropped = append(ix.dropped, ix.first)
		ix.runs = ix.runs[min(indexChunkRuns, len(ix.runs)):]
		ix.first++
	}
	if ix.dirtyFrom >= 0 && ix.dirtyFrom < ix.first*indexChunkRuns {
		ix.dirtyFrom = ix.first * indexChunkRuns
	}
}

// prune drops whole chunks that map only source offsets below logStart:
// those records no longer exist at the source, so no group can commit
// them.
func (ix *partitionIndex) prune(logStart int64) {
	for len(ix.evicted) > 0 && ix.evicted[0].srcEnd <= logStart {
		ix.dropChunks(1)
	}
	if len(ix.evicted) > 0 {
		return // the chunks in memory are newer than one still needed
	}
	k := 0
	for (k+1)*indexChunkRuns <= len(ix.runs) && ix.runs[(k+1)*indexChunkRuns-1].srcEnd() <= logStart {
		k++
	}
	ix.dropChunks(k)
}

// Translation errors.
var (
	// ErrBehindIndex: the offset is older than the oldest mapping kept.
	ErrBehindIndex = errors.New("source offset is older than the offset index")
	// ErrPastIndex: no record at or after the offset was copied yet.
	ErrPastIndex = errors.New("source offset is past what was copied")
	// ErrBelowAdopted: the offset is older than the position the copy
	// was adopted from MirrorMaker 2 at; MM2 copied those records.
	ErrBelowAdopted = errors.New("source offset is older than the position adopted from MirrorMaker 2")
)

// EvictedChunkError says that translating an offset needs stored chunk K,
// which the index budget evicted from memory: read it back and translate
// with translateRuns.
type EvictedChunkError struct{ K int64 }

func (e *EvictedChunkError) Error() string {
	return fmt.Sprintf("the offset index chunk %d is stored but not in memory", e.K)
}

// translate returns the target offset of the first copied source record at
// or after s.
func (ix *partitionIndex) translate(s int64) (int64, error) {
	if ix.adopted() {
		switch {
		case s < ix.floor.src:
			return 0, ErrBelowAdopted
		case s == ix.floor.src && len(ix.runs) == 0 && len(ix.evicted) == 0:
			// Nothing copied since the adoption: the next record
			// lands at the floor's target offset.
			return ix.floor.dst, nil
		}
	}
	if len(ix.evicted) > 0 {
		oldest := ix.evicted[0]
		if oldest.k > 0 && s < oldest.src {
			return 0, ErrBehindIndex
		}
		if len(ix.runs) == 0 || s < ix.runs[0].src {
			// The first evicted chunk with a record at or after s
			// holds the answer (between two chunks, it is the
			// later one's first record).
			i := sort.Search(len(ix.evicted), func(i int) bool { return ix.evicted[i].srcEnd > s })
			if i < len(ix.evicted) {
				return 0, &EvictedChunkError{K: ix.evicted[i].k}
			}
		}
	}
	if len(ix.runs) == 0 {
		return 0, ErrPastIndex
	}
	if ix.first > 0 && len(ix.evicted) == 0 && s < ix.runs[0].src {
		return 0, ErrBehindIndex
	}
	return translateRuns(ix.runs, s)
}

// translateRuns translates s through sorted runs: the target offset of the
// first record at or after s, or ErrPastIndex.
func translateRuns(runs []offsetRun, s int64) (int64, error) {
	i := sort.Search(len(runs), func(i int) bool { return runs[i].srcEnd() > s })
	if i == len(runs) {
		return 0, ErrPastIndex
	}
	r := runs[i]
	if s <= r.src {
		return r.dst, nil
	}
	return r.dst + (s - r.src), nil
}

// evictable is how many chunks from the oldest in memory may be evicted:
// stored as they are, and not among the last two.
func (ix *partitionIndex) evictable() int {
	n := 0
	for k := ix.first; ; k++ {
		// Never the last two chunks: the open one, and the one a
		// rewind near a chunk boundary may still cut into.
		full := int64(len(ix.runs)) >= (k-ix.first+3)*indexChunkRuns
		clean := ix.dirtyFrom < 0 || k < ix.dirtyFrom/indexChunkRuns
		if !full || !clean || k >= ix.storedBelow {
			return n
		}
		n++
	}
}

// evict moves the oldest n chunks in memory out of it (they must be
// evictable), keeping what a translation needs to find them again.
func (ix *partitionIndex) evict(n int) {
	for range n {
		rs := ix.runs[:indexChunkRuns]
		ix.evicted = append(ix.evicted, evictedChunk{k: ix.first, src: rs[0].src, srcEnd: rs[len(rs)-1].srcEnd()})
		ix.runs = ix.runs[indexChunkRuns:]
		ix.first++
	}
	// A fresh backing array: the evicted runs' memory is released.
	ix.runs = append([]offsetRun(nil), ix.runs...)
}

// chunkAcked records that chunk k was written as it was when the write
// was issued; stored says the write is durable (it is once acknowledged,
// or in cluster mode once its transaction committed: see committed).
func (ix *partitionIndex) chunkAcked(k int64, stored bool) {
	if k+1 > ix.ackedBelow {
		ix.ackedBelow = k + 1
	}
	if stored {
		ix.storedBelow = ix.ackedBelow
	}
}

// oldestSource is the oldest source offset the index maps (in memory or
// evicted), -1 when it is empty.
func (ix *partitionIndex) oldestSource() int64 {
	switch {
	case len(ix.evicted) > 0:
		return ix.evicted[0].src
	case len(ix.runs) > 0:
		return ix.runs[0].src
	}
	return -1
}

// chunk returns the runs of chunk k.
func (ix *partitionIndex) chunk(k int64) []offsetRun {
	lo := (k - ix.first) * indexChunkRuns
	if lo < 0 || lo >= int64(len(ix.runs)) {
		return nil
	}
	return ix.runs[lo:min(lo+indexChunkRuns, int64(len(ix.runs)))]
}

// Chunk payload: version 1, then the run count, then three columns of
// fixed-width big-endian int64: the first run's src and dst, then each
// run's distance from the previous one (src and dst), then the lengths.
// Fixed-width columns of small numbers are mostly zero bytes, which the
// offset envelope's codecs compress well, and any run can be read without
// decoding the ones before it.
const indexChunkVersion = 1

func encodeIndexChunk(runs []offsetRun) []byte {
	b := make([]byte, 0, 5+24*len(runs))
	b = append(b, indexChunkVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(runs)))
	var ps, pd int64
	for _, r := range runs {
		b = binary.BigEndian.AppendUint64(b, uint64(r.src-ps))
		ps = r.src
	}
	for _, r := range runs {
		b = binary.BigEndian.AppendUint64(b, uint64(r.dst-pd))
		pd = r.dst
	}
	for _, r := range runs {
		b = binary.BigEndian.AppendUint64(b, uint64(r.n))
	}
	return b
}

func decodeIndexChunk(b []byte) ([]offsetRun, error) {
	if len(b) < 5 || b[0] != indexChunkVersion {
		return nil, fmt.Errorf("offset index chunk: unknown version or truncated header (%d bytes)", len(b))
	}
	n := int(binary.BigEndian.Uint32(b[1:5]))
	if n < 0 || len(b) != 5+24*n {
		return nil, fmt.Errorf("offset index chunk: %d bytes cannot hold %d runs", len(b), n)
	}
	runs := make([]offsetRun, n)
	col := func(c, i int) int64 { return int64(binary.BigEndian.Uint64(b[5+8*(c*n+i):])) }
	var ps, pd int64
	for i := range runs {
		ps += col(0, i)
		pd += col(1, i)
		runs[i] = offsetRun{src: ps, dst: pd, n: col(2, i)}
		if runs[i].n <= 0 || (i > 0 && runs[i].src < runs[i-1].srcEnd()) {
			return nil, fmt.Errorf("offset index chunk: run %d is empty or overlaps the previous one", i)
		}
	}
	return runs, nil
}
