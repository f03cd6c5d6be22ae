package connector

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/state"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/connector/offsets"
)

// The index budget (Config.IndexMemory) bounds the memory of a mirror's
// offset indexes, whatever the number of partitions or runs. Every index
// chunk is stored in the progress topic, so a chunk that is stored as it is
// in memory can leave memory without losing anything: the index keeps its
// number and source range (evictedChunk), and a translation that needs it
// reads it back (readIndexChunk, through a small cache). Translation stays
// exact; only a translation of an old offset gets slower.
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

// chunkCache keeps the chunks read back for translations, so that a group
// lagging far behind does not read the progress topic on every sync.
type chunkCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of chunkCacheKey, most recent first
	items map[chunkCacheKey]*list.Element
	runs  map[chunkCacheKey][]index.Run
}

// chunkCacheKey names a chunk of one index: an index that starts over is a
// new index, and its chunk numbers start over too.
type chunkCacheKey struct {
	ix *index.Partition
	k  int64
}

func newChunkCache(max int) *chunkCache {
	return &chunkCache{max: max, order: list.New(), items: map[chunkCacheKey]*list.Element{}, runs: map[chunkCacheKey][]index.Run{}}
}

func (c *chunkCache) get(key chunkCacheKey) ([]index.Run, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return c.runs[key], true
}

func (c *chunkCache) put(key chunkCacheKey, runs []index.Run) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		c.runs[key] = runs
		return
	}
	c.items[key] = c.order.PushFront(key)
	c.runs[key] = runs
	for c.order.Len() > c.max {
		old := c.order.Remove(c.order.Back()).(chunkCacheKey)
		delete(c.items, old)
		delete(c.runs, old)
	}
}

// readIndexChunk reads stored chunk k of tp's index back from the progress
// topic: the partition that holds tp's records, its committed records to
// the end; the last record of the chunk's key wins.
func (m *Mirror) readIndexChunk(ctx context.Context, dstAdm *kadm.Client, tp data.TopicPartition, k int64) ([]index.Run, error) {
	key := string(data.IndexChunkKey(tp, k))
	var value []byte
	found := false
	part := state.PartitionFor(m.statePartitions(m.progressTopic), tp.Topic, tp.Partition)
	err := state.Read(ctx, nil, m.cfg.TargetOpts, dstAdm, m.progressTopic, part, func(kb, v []byte) error {
		if string(kb) == key {
			value, found = v, v != nil
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("chunk %d of the offset index of %s/%d is not in %s", k, tp.Topic, tp.Partition, m.progressTopic)
	}
	payload, _, err := offsets.Decode(value)
	if err != nil {
		return nil, fmt.Errorf("chunk %d of the offset index of %s/%d: %w", k, tp.Topic, tp.Partition, err)
	}
	return index.DecodeChunk(payload)
}

// translatePartition translates committed source offset s of ps for a
// group: through the index in memory, or through a chunk the budget
// evicted, read back (or from the cache).
func (m *Mirror) translatePartition(ctx context.Context, dstAdm *kadm.Client, ps *data.PartitionState, s int64) (target int64, behind bool, err error) {
	ps.Mu.Lock()
	ix, acked := ps.Index, ps.Acked
	target, behind, err = translateOffset(ix, acked, s)
	ps.Mu.Unlock()
	ev, ok := err.(*index.EvictedChunkError)
	if !ok {
		return target, behind, err
	}
	key := chunkCacheKey{ix, ev.K}
	runs, hit := m.chunks.get(key)
	if !hit {
		if runs, err = m.readIndexChunk(ctx, dstAdm, ps.TP, ev.K); err != nil {
			return 0, false, fmt.Errorf("read back the offset index: %w", err)
		}
		m.chunks.put(key, runs)
	}
	target, err = index.TranslateRuns(runs, s)
	return target, false, err
}
