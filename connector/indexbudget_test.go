package connector

import (
	"context"
	"fmt"
	"testing"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/internal/kfaketest"

	"github.com/kmirror/kmirror/filters"
)

// TestIndexBudgetEvictsStoredChunksAndTranslatesExactly: over the index
// budget, chunks that are stored leave memory (the oldest, never the last
// two, never before they are stored), and a group's translation that needs
// one reads it back from the progress topic: still exact.
func TestIndexBudgetEvictsStoredChunksAndTranslatesExactly(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	cfg := passHarnessConfig()
	cfg.GroupFilters = []filters.GroupFilter{filters.Regex{Include: filters.MustCompileAll(".*")}}
	h := newPassHarnessFor(t, src, dst, cfg)
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

	// A group committed at source offset s translates to the first record
	// at or after it, source 2*ceil(s/2), at target ceil(s/2): in evicted
	// chunks, between them, in memory.
	offs := []int64{0, 1, 2, 2*index.ChunkRuns - 1, 2 * index.ChunkRuns, 5001, 2*4*index.ChunkRuns - 1, 2 * 4 * index.ChunkRuns, 2*runs - 2}
	for i, s := range offs {
		kfaketest.CommitOffsets(t, h.srcAdm, fmt.Sprintf("g%d", i), "orders", map[int32]int64{0: s})
	}
	if err := h.m.syncGroups(ctx, h.c, h.cp); err != nil {
		t.Fatal(err)
	}
	for _, g := range h.m.Groups() {
		var i int
		if _, err := fmt.Sscanf(g.Group, "g%d", &i); err != nil || len(g.Partitions) != 1 {
			t.Fatalf("group %+v", g)
		}
		s, p := offs[i], g.Partitions[0]
		if p.Untranslatable || p.Behind || p.TargetOffset != (s+1)/2 {
			t.Errorf("translate %d = %+v; want %d", s, p, (s+1)/2)
		}
	}
	// Read back (into the groups plane's cache), not into the index.
	ps.Mu.Lock()
	evicted := ps.Index.Evicted()
	ps.Mu.Unlock()
	if evicted != chunks-2 {
		t.Fatalf("after translating: %d chunks evicted, want %d", evicted, chunks-2)
	}
}
