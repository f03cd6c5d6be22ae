package groups

import (
	"container/list"
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/offsets"
	"github.com/kmirror/kmirror/connector/state"
)

// A translation of an old offset may need a chunk of the offset index that
// the mirror's index budget evicted from memory (connector's
// enforceIndexBudget): every chunk it evicts is stored in the progress
// topic, so it is read back from there, through a small cache.

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
func (s *Syncer) readIndexChunk(ctx context.Context, dstAdm *kadm.Client, tp data.TopicPartition, k int64) ([]index.Run, error) {
	key := string(data.IndexChunkKey(tp, k))
	var value []byte
	found := false
	part := state.PartitionFor(s.mirror.StatePartitions(s.cfg.ProgressTopic), tp.Topic, tp.Partition)
	err := state.Read(ctx, nil, s.cfg.TargetOpts, dstAdm, s.cfg.ProgressTopic, part, func(kb, v []byte) error {
		if string(kb) == key {
			value, found = v, v != nil
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("chunk %d of the offset index of %s/%d is not in %s", k, tp.Topic, tp.Partition, s.cfg.ProgressTopic)
	}
	payload, _, err := offsets.Decode(value)
	if err != nil {
		return nil, fmt.Errorf("chunk %d of the offset index of %s/%d: %w", k, tp.Topic, tp.Partition, err)
	}
	return index.DecodeChunk(payload)
}

// translatePartition translates committed source offset so of ps for a
// group: through the index in memory, or through a chunk the budget
// evicted, read back (or from the cache).
func (s *Syncer) translatePartition(ctx context.Context, dstAdm *kadm.Client, ps *data.PartitionState, so int64) (target int64, behind bool, err error) {
	ps.Mu.Lock()
	ix, acked := ps.Index, ps.Acked
	target, behind, err = TranslateOffset(ix, acked, so)
	ps.Mu.Unlock()
	ev, ok := err.(*index.EvictedChunkError)
	if !ok {
		return target, behind, err
	}
	key := chunkCacheKey{ix, ev.K}
	runs, hit := s.chunks.get(key)
	if !hit {
		if runs, err = s.readIndexChunk(ctx, dstAdm, ps.TP, ev.K); err != nil {
			return 0, false, fmt.Errorf("read back the offset index: %w", err)
		}
		s.chunks.put(key, runs)
	}
	target, err = index.TranslateRuns(runs, so)
	return target, false, err
}
