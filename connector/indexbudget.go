package connector

import (
	"slices"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
)

// The index budget (Config.IndexMemory) bounds the memory of a mirror's
// offset indexes, whatever the number of partitions or runs. Every index
// chunk is stored in the progress topic, so a chunk that is stored as it is
// in memory can leave memory without losing anything: the index keeps its
// number and source range (evictedChunk), and a translation that needs it
// reads it back (the groups plane's readIndexChunk, through a small cache).
// Translation stays exact; only a translation of an old offset gets slower.
//
// enforceIndexBudget runs on the metrics ticker. It evicts from the
// largest indexes first, their oldest chunks first (the ones translations
// need least: groups commit near the head), down to 90% of the budget so
// that it does not run on every tick. The last two chunks of an index, and
// any chunk changed since it was stored, stay.

// indexRunBytes is what one run costs in memory.
const indexRunBytes = 24

// indexChunkBytes is what a full chunk costs in memory.
const indexChunkBytes = index.ChunkRuns * indexRunBytes

// indexMemory is the memory the indexes of states hold (the runs in
// memory, by length).
func indexMemory(states []*data.PartitionState) int64 {
	var total int64
	for _, ps := range states {
		ps.Mu.Lock()
		if ix := ps.Index; ix != nil {
			total += int64(ix.Len()) * indexRunBytes
		}
		ps.Mu.Unlock()
	}
	return total
}

// enforceIndexBudget evicts stored chunks from the indexes of states until
// they hold at most 90% of limit bytes, or nothing more can go. It returns
// the memory they hold afterwards and the chunks evicted.
func enforceIndexBudget(states []*data.PartitionState, limit int64) (held int64, evicted int) {
	held = indexMemory(states)
	if limit <= 0 || held <= limit {
		return held, 0
	}
	type candidate struct {
		ps   *data.PartitionState
		runs int
	}
	var cands []candidate
	for _, ps := range states {
		ps.Mu.Lock()
		if ix := ps.Index; ix != nil && ix.Evictable() > 0 {
			cands = append(cands, candidate{ps, ix.Len()})
		}
		ps.Mu.Unlock()
	}
	slices.SortFunc(cands, func(a, b candidate) int { return b.runs - a.runs })
	target := limit / 10 * 9
	for _, c := range cands {
		if held <= target {
			break
		}
		c.ps.Mu.Lock()
		if ix := c.ps.Index; ix != nil {
			need := int((held - target + indexChunkBytes - 1) / indexChunkBytes)
			n := min(ix.Evictable(), need)
			ix.Evict(n)
			held -= int64(n) * indexChunkBytes
			evicted += n
		}
		c.ps.Mu.Unlock()
	}
	return held, evicted
}

// enforceIndexBudget applies the mirror's index budget to the partitions it
// copies.
func (m *Mirror) enforceIndexBudget() {
	m.mu.Lock()
	cp := m.copier
	m.mu.Unlock()
	if cp == nil {
		return
	}
	held, evicted := enforceIndexBudget(cp.Snapshot(), m.cfg.IndexMemory)
	m.metrics.setIndexMemory(held, evicted)
}
