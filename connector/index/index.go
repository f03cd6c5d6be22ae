package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// Package index keeps kmirror's offset index: the exact mapping from
// source offsets to target offsets of one copied partition, kept in
// memory in chunks that the progress topic stores.
//
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
type Run struct {
	Src, Dst, N int64
}

func (r Run) SrcEnd() int64 { return r.Src + r.N }

// ChunkRuns is the number of runs per stored chunk. Chunks keep every
// index record small (far below Kafka's 1 MB default message limit) and
// make a progress tick rewrite only the open chunk, not the whole index.
const ChunkRuns = 1024

// maxRuns bounds one partition's index in memory; beyond it the oldest
// chunks are dropped (translation of offsets that old then reports the
// group as behind the index rather than guessing).
const maxRuns = 64 * ChunkRuns

// Partition is one source partition's index. Runs are sorted by src
// and do not overlap. Chunk k holds the runs with global number in
// [k*ChunkRuns, (k+1)*ChunkRuns); runs[0] has global number
// first*ChunkRuns.
type Partition struct {
	runs  []Run
	first int64 // the chunk number of runs[0]
	// dirtyFrom is the lowest global run number changed since the last
	// persist (-1: nothing changed); dropped lists chunks to delete.
	dirtyFrom int64
	dropped   []int64
	// evicted are the chunks before first that are stored but no longer
	// held in memory (the mirror's index budget, connector/indexbudget.go), in
	// order: what a translation of an offset that old reads back.
	evicted []evictedChunk
	// storedBelow: every chunk below it is stored as it is in memory
	// (acknowledged, and in cluster mode committed); ackedBelow is the
	// same before a transaction's commit.
	storedBelow, ackedBelow int64
	// floor, when set, is the position the partition's copy started from when it was adopted from MirrorMaker
	// 2 (connector/mm2.go): source offset floor.Src is target offset floor.Dst.
	// Records below it were copied by MM2, whose mapping kmirror does not
	// know: translating an offset below the floor is an error, not the
	// target offset of the first run (which would skip records).
	floor *Run
}

// evictedChunk is a stored chunk evicted from memory: its number and the
// source offsets its runs cover.
type evictedChunk struct {
	k, src, srcEnd int64
}

func New() *Partition { return &Partition{dirtyFrom: -1} }

// NewAdopted returns an empty index whose copy starts at source offset
// src, which is target offset dst (see Partition.floor); it deletes
// the stored chunks of prev (nil: none), like replacement.
func NewAdopted(prev *Partition, src, dst int64) *Partition {
	ix := New()
	if prev != nil {
		ix = prev.Replacement()
	}
	ix.floor = &Run{Src: src, Dst: dst}
	return ix
}

// Adopted reports whether ix has a floor.
func (ix *Partition) Adopted() bool { return ix.floor != nil }

// Replacement returns an empty index that, once persisted, deletes every
// stored chunk of ix: the copy of the partition starts over.
func (ix *Partition) Replacement() *Partition {
	fresh := New()
	fresh.dropped = ix.ChunksToDelete()
	return fresh
}

// StoredChunks are the numbers of the chunks ix has (or will have) in the
// progress topic.
func (ix *Partition) StoredChunks() []int64 {
	var out []int64
	for _, e := range ix.evicted {
		out = append(out, e.k)
	}
	for k := ix.first; k <= ix.first+int64(len(ix.runs)-1)/ChunkRuns; k++ {
		out = append(out, k)
	}
	return out
}

func (ix *Partition) markDirty(global int64) {
	if ix.dirtyFrom < 0 || global < ix.dirtyFrom {
		ix.dirtyFrom = global
	}
}

// Add records that source record src landed at target offset dst.
func (ix *Partition) Add(src, dst int64) {
	base := ix.first * ChunkRuns
	if n := len(ix.runs); n > 0 {
		last := &ix.runs[n-1]
		if src == last.SrcEnd() && dst == last.Dst+last.N {
			last.N++
			ix.markDirty(base + int64(n-1))
			return
		}
		if src < last.SrcEnd() {
			ix.Truncate(src)
		}
	}
	ix.runs = append(ix.runs, Run{Src: src, Dst: dst, N: 1})
	ix.markDirty(base + int64(len(ix.runs)-1))
	if len(ix.evicted)*ChunkRuns+len(ix.runs) > maxRuns {
		ix.dropChunks(1)
	}
}

// Truncate forgets every mapping at or after source offset src: the copy
// was rewound and those records are being produced again. (A rewind goes
// back at most to the acknowledged position, which lies in the chunks held
// in memory: evicted chunks are stored ones, well behind it.)
func (ix *Partition) Truncate(src int64) {
	i := sort.Search(len(ix.runs), func(i int) bool { return ix.runs[i].SrcEnd() > src })
	if i == len(ix.runs) {
		return
	}
	if r := &ix.runs[i]; r.Src < src {
		r.N = src - r.Src
		i++
	}
	ix.runs = ix.runs[:i]
	ix.markDirty(ix.first*ChunkRuns + int64(max(i-1, 0)))
}

// dropChunks forgets the oldest k chunks, evicted ones first.
func (ix *Partition) dropChunks(k int) {
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
		ix.runs = ix.runs[min(ChunkRuns, len(ix.runs)):]
		ix.first++
	}
	if ix.dirtyFrom >= 0 && ix.dirtyFrom < ix.first*ChunkRuns {
		ix.dirtyFrom = ix.first * ChunkRuns
	}
}

// Prune drops whole chunks that map only source offsets below logStart:
// those records no longer exist at the source, so no group can commit
// them.
func (ix *Partition) Prune(logStart int64) {
	for len(ix.evicted) > 0 && ix.evicted[0].srcEnd <= logStart {
		ix.dropChunks(1)
	}
	if len(ix.evicted) > 0 {
		return // the chunks in memory are newer than one still needed
	}
	k := 0
	for (k+1)*ChunkRuns <= len(ix.runs) && ix.runs[(k+1)*ChunkRuns-1].SrcEnd() <= logStart {
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
// with TranslateRuns.
type EvictedChunkError struct{ K int64 }

func (e *EvictedChunkError) Error() string {
	return fmt.Sprintf("the offset index chunk %d is stored but not in memory", e.K)
}

// Translate returns the target offset of the first copied source record at
// or after s.
func (ix *Partition) Translate(s int64) (int64, error) {
	if ix.Adopted() {
		switch {
		case s < ix.floor.Src:
			return 0, ErrBelowAdopted
		case s == ix.floor.Src && len(ix.runs) == 0 && len(ix.evicted) == 0:
			// Nothing copied since the adoption: the next record
			// lands at the floor's target offset.
			return ix.floor.Dst, nil
		}
	}
	if len(ix.evicted) > 0 {
		oldest := ix.evicted[0]
		if oldest.k > 0 && s < oldest.src {
			return 0, ErrBehindIndex
		}
		if len(ix.runs) == 0 || s < ix.runs[0].Src {
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
	if ix.first > 0 && len(ix.evicted) == 0 && s < ix.runs[0].Src {
		return 0, ErrBehindIndex
	}
	return TranslateRuns(ix.runs, s)
}

// TranslateRuns translates s through sorted runs: the target offset of the
// first record at or after s, or ErrPastIndex.
func TranslateRuns(runs []Run, s int64) (int64, error) {
	i := sort.Search(len(runs), func(i int) bool { return runs[i].SrcEnd() > s })
	if i == len(runs) {
		return 0, ErrPastIndex
	}
	r := runs[i]
	if s <= r.Src {
		return r.Dst, nil
	}
	return r.Dst + (s - r.Src), nil
}

// Evictable is how many chunks from the oldest in memory may be evicted:
// stored as they are, and not among the last two.
func (ix *Partition) Evictable() int {
	n := 0
	for k := ix.first; ; k++ {
		// Never the last two chunks: the open one, and the one a
		// rewind near a chunk boundary may still cut into.
		full := int64(len(ix.runs)) >= (k-ix.first+3)*ChunkRuns
		clean := ix.dirtyFrom < 0 || k < ix.dirtyFrom/ChunkRuns
		if !full || !clean || k >= ix.storedBelow {
			return n
		}
		n++
	}
}

// Evict moves the oldest n chunks in memory out of it (they must be
// evictable), keeping what a translation needs to find them again.
func (ix *Partition) Evict(n int) {
	for range n {
		rs := ix.runs[:ChunkRuns]
		ix.evicted = append(ix.evicted, evictedChunk{k: ix.first, src: rs[0].Src, srcEnd: rs[len(rs)-1].SrcEnd()})
		ix.runs = ix.runs[ChunkRuns:]
		ix.first++
	}
	// A fresh backing array: the evicted runs' memory is released.
	ix.runs = append([]Run(nil), ix.runs...)
}

// ChunkAcked records that chunk k was written as it was when the write
// was issued; stored says the write is durable (it is once acknowledged,
// or in cluster mode once its transaction committed: see committed).
func (ix *Partition) ChunkAcked(k int64, stored bool) {
	if k+1 > ix.ackedBelow {
		ix.ackedBelow = k + 1
	}
	if stored {
		ix.storedBelow = ix.ackedBelow
	}
}

// OldestSource is the oldest source offset the index maps (in memory or
// evicted), -1 when it is empty.
func (ix *Partition) OldestSource() int64 {
	switch {
	case len(ix.evicted) > 0:
		return ix.evicted[0].src
	case len(ix.runs) > 0:
		return ix.runs[0].Src
	}
	return -1
}

// chunk returns the runs of chunk k.
func (ix *Partition) chunk(k int64) []Run {
	lo := (k - ix.first) * ChunkRuns
	if lo < 0 || lo >= int64(len(ix.runs)) {
		return nil
	}
	return ix.runs[lo:min(lo+ChunkRuns, int64(len(ix.runs)))]
}

// Chunk payload: version 1, then the run count, then three columns of
// fixed-width big-endian int64: the first run's src and dst, then each
// run's distance from the previous one (src and dst), then the lengths.
// Fixed-width columns of small numbers are mostly zero bytes, which the
// offset envelope's codecs compress well, and any run can be read without
// decoding the ones before it.
const chunkVersion = 1

func EncodeChunk(runs []Run) []byte {
	b := make([]byte, 0, 5+24*len(runs))
	b = append(b, chunkVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(runs)))
	var ps, pd int64
	for _, r := range runs {
		b = binary.BigEndian.AppendUint64(b, uint64(r.Src-ps))
		ps = r.Src
	}
	for _, r := range runs {
		b = binary.BigEndian.AppendUint64(b, uint64(r.Dst-pd))
		pd = r.Dst
	}
	for _, r := range runs {
		b = binary.BigEndian.AppendUint64(b, uint64(r.N))
	}
	return b
}

func DecodeChunk(b []byte) ([]Run, error) {
	if len(b) < 5 || b[0] != chunkVersion {
		return nil, fmt.Errorf("offset index chunk: unknown version or truncated header (%d bytes)", len(b))
	}
	n := int(binary.BigEndian.Uint32(b[1:5]))
	if n < 0 || len(b) != 5+24*n {
		return nil, fmt.Errorf("offset index chunk: %d bytes cannot hold %d runs", len(b), n)
	}
	runs := make([]Run, n)
	col := func(c, i int) int64 { return int64(binary.BigEndian.Uint64(b[5+8*(c*n+i):])) }
	var ps, pd int64
	for i := range runs {
		ps += col(0, i)
		pd += col(1, i)
		runs[i] = Run{Src: ps, Dst: pd, N: col(2, i)}
		if runs[i].N <= 0 || (i > 0 && runs[i].Src < runs[i-1].SrcEnd()) {
			return nil, fmt.Errorf("offset index chunk: run %d is empty or overlaps the previous one", i)
		}
	}
	return runs, nil
}

// Chunk is one chunk of a partition's index as the progress topic stores
// it: its number K and its runs. A Chunk with nil Runs is a deletion.
type Chunk struct {
	K    int64
	Runs []Run
}

// Assemble rebuilds an index from its stored chunks, sorted by number.
// Only the newest contiguous sequence of full chunks (plus the open last
// one) is kept: a gap means chunks were pruned, and older ones cannot be
// trusted to line up. The chunks it drops are deleted at the next
// persist (see Changes).
func Assemble(cs []Chunk) *Partition {
	ix := New()
	start := len(cs) - 1
	for start > 0 && cs[start-1].K == cs[start].K-1 && len(cs[start-1].Runs) == ChunkRuns {
		start--
	}
	if start < 0 {
		return ix
	}
	// Chunks of an index that started over (a recreated topic) may
	// outlive a crash before their deletion was written: keep only what
	// follows the last place the runs go backwards.
	for {
		ix.first = cs[start].K
		ix.runs = ix.runs[:0]
		restart := -1
		for i, c := range cs[start:] {
			rs := c.Runs
			if n := len(ix.runs); n > 0 && len(rs) > 0 && rs[0].Src < ix.runs[n-1].SrcEnd() {
				restart = start + i
			}
			ix.runs = append(ix.runs, rs...)
		}
		if restart < 0 {
			break
		}
		start = restart
	}
	// Chunks below the kept sequence are stale: delete them.
	for _, c := range cs[:start] {
		ix.dropped = append(ix.dropped, c.K)
	}
	// What was read is stored.
	ix.storedBelow = ix.first + int64(len(ix.runs)+ChunkRuns-1)/ChunkRuns
	ix.ackedBelow = ix.storedBelow
	return ix
}

// Changes returns what changed since the last call, for the progress
// writer to store: deletions of dropped chunks, then copies of every
// chunk changed (the open chunk keeps growing). A change whose write fails
// is handed back with Unwrite.
func (ix *Partition) Changes() []Chunk {
	var out []Chunk
	for _, k := range ix.dropped {
		out = append(out, Chunk{K: k})
	}
	ix.dropped = nil
	if ix.dirtyFrom >= 0 {
		last := ix.first + int64(len(ix.runs)-1)/ChunkRuns
		for k := ix.dirtyFrom / ChunkRuns; k <= last && len(ix.runs) > 0; k++ {
			out = append(out, Chunk{K: k, Runs: append([]Run(nil), ix.chunk(k)...)})
		}
		ix.dirtyFrom = -1
	}
	return out
}

// Unwrite makes a change that did not reach the target (refused, or in a
// transaction that aborted) pending again.
func (ix *Partition) Unwrite(c Chunk) {
	if c.Runs == nil {
		ix.dropped = append(ix.dropped, c.K)
	} else {
		ix.markDirty(c.K * ChunkRuns)
	}
}

// Committed says that the chunk writes acknowledged so far were part of a
// transaction that committed: they are stored.
func (ix *Partition) Committed() { ix.storedBelow = ix.ackedBelow }

// Aborted says that the chunk writes acknowledged since the last commit
// were part of a transaction that aborted: they are not stored.
func (ix *Partition) Aborted() { ix.ackedBelow = ix.storedBelow }

// Floor is the position the copy was adopted from MirrorMaker 2 at (see
// NewAdopted); ok is false when it was not adopted.
func (ix *Partition) Floor() (floor Run, ok bool) {
	if ix.floor == nil {
		return Run{}, false
	}
	return *ix.floor, true
}

// SetFloor sets the position the copy was adopted at, as stored with the
// partition's progress.
func (ix *Partition) SetFloor(src, dst int64) { ix.floor = &Run{Src: src, Dst: dst} }

// Last is the newest run in memory; ok is false when none is.
func (ix *Partition) Last() (last Run, ok bool) {
	if len(ix.runs) == 0 {
		return Run{}, false
	}
	return ix.runs[len(ix.runs)-1], true
}

// Len is the number of runs held in memory.
func (ix *Partition) Len() int { return len(ix.runs) }

// Evicted is the number of chunks of the index stored but no longer held
// in memory.
func (ix *Partition) Evicted() int { return len(ix.evicted) }

// Runs returns a copy of the runs held in memory, oldest first.
func (ix *Partition) Runs() []Run { return append([]Run(nil), ix.runs...) }

// ChunksToDelete are the numbers of every chunk the index has, had or will
// have in the progress topic: what deleting the partition's stored progress
// tombstones.
func (ix *Partition) ChunksToDelete() []int64 {
	return append(ix.StoredChunks(), ix.dropped...)
}
