package connector

import (
	"context"
	"testing"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestIndexBudgetEvictsStoredChunksAndTranslatesExactly: over the index
// budget, chunks that are stored leave memory (the oldest, never the last
// two, never before they are stored), and a translation that needs one
// reads it back from the progress topic: still exact.
func TestIndexBudgetEvictsStoredChunksAndTranslatesExactly(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	h.createWithProgress(t, "orders", 1, 0)
	h.mustPass(t)
	tp := data.TopicPartition{Topic: "orders", Partition: 0}
	ps := h.cp.Partition(tp)
	if ps == nil {
		t.Fatal("orders/0 is not copied")
	}
	const chunks = 6
	const runs = chunks * index.ChunkRuns
	// Every other source offset was compacted away: a run per record,
	// source 2i landed at target i.
	ps.Mu.Lock()
	for i := range int64(runs) {
		ps.Index.Add(2*i, i)
	}
	ps.Acked = 2 * runs
	ps.Mu.Unlock()

	limit := int64(3 * indexChunkBytes)
	if held, n := enforceIndexBudget(h.cp.Snapshot(), limit); n != 0 || held != chunks*indexChunkBytes {
		t.Fatalf("before the chunks are stored: %d evicted, %d bytes held; want none evicted", n, held)
	}
	ctx := context.Background()
	if err := h.m.newProgressWriter(h.dst, h.cp).WriteSync(ctx); err != nil {
		t.Fatal(err)
	}
	held, n := enforceIndexBudget(h.cp.Snapshot(), limit)
	if n != chunks-2 || held != 2*indexChunkBytes {
		t.Fatalf("after storing: %d chunks evicted, %d bytes held; want %d evicted (all but the last two), %d held", n, held, chunks-2, 2*indexChunkBytes)
	}
	ps.Mu.Lock()
	stored := len(ps.Index.StoredChunks())
	inMemory := ps.Index.Len()
	ps.Mu.Unlock()
	if stored != chunks || inMemory != 2*index.ChunkRuns {
		t.Fatalf("index: %d stored chunks (want %d), %d runs in memory (want %d)", stored, chunks, inMemory, 2*index.ChunkRuns)
	}

	// The first record at or after source offset s is source 2*ceil(s/2),
	// at target ceil(s/2): in evicted chunks, between them, in memory.
	for _, s := range []int64{0, 1, 2, 2*index.ChunkRuns - 1, 2 * index.ChunkRuns, 5001, 2*4*index.ChunkRuns - 1, 2 * 4 * index.ChunkRuns, 2*runs - 2} {
		to, behind, err := h.m.translatePartition(ctx, h.dstAdm, ps, s)
		if err != nil || behind || to != (s+1)/2 {
			t.Errorf("translate %d = %d, behind %v, %v; want %d", s, to, behind, err, (s+1)/2)
		}
	}
	// Read back into the cache, not into the index.
	ps.Mu.Lock()
	evicted := ps.Index.Evicted()
	ps.Mu.Unlock()
	if evicted != chunks-2 || len(h.m.chunks.items) == 0 {
		t.Fatalf("after translating: %d chunks evicted (want %d), %d cached (want some)", evicted, chunks-2, len(h.m.chunks.items))
	}
}
