package groups

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
)

// TestTranslatePartitionReadsBackEvictedChunks: a translation that needs a
// chunk the index budget evicted reads it back from the progress topic
// (the last record of its key), exactly, into the cache and not into the
// index.
func TestTranslatePartitionReadsBackEvictedChunks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	const chunks = 4
	const runs = chunks * index.ChunkRuns
	// Every other source offset was compacted away: a run per record,
	// source 2i landed at target i.
	ix := index.New()
	for i := range int64(runs) {
		ix.Add(2*i, i)
	}
	h.copied(0, ix, 2*runs)
	tp := data.TopicPartition{Topic: hTopic, Partition: 0}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Stored as the progress writer stores them; an older copy of chunk
	// 0 first, which the later one replaces.
	stale := &kgo.Record{Topic: h.s.cfg.ProgressTopic, Key: data.IndexChunkKey(tp, 0), Value: h.s.cfg.Sealer.Seal(index.EncodeChunk([]index.Run{{Src: 0, Dst: 999, N: 1}}))}
	if err := h.c.Dst.ProduceSync(ctx, stale).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, c := range ix.Changes() {
		r := &kgo.Record{Topic: h.s.cfg.ProgressTopic, Key: data.IndexChunkKey(tp, c.K), Value: h.s.cfg.Sealer.Seal(index.EncodeChunk(c.Runs))}
		if err := h.c.Dst.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		ix.ChunkAcked(c.K, true)
	}
	ix.Evict(ix.Evictable())
	if ix.Evicted() != chunks-2 {
		t.Fatalf("%d chunks evicted, want %d (all but the last two)", ix.Evicted(), chunks-2)
	}

	// The first record at or after source offset s is source 2*ceil(s/2),
	// at target ceil(s/2): in evicted chunks, between them, in memory.
	ps := h.plane.Partition(tp)
	for _, s := range []int64{0, 1, 2, 2*index.ChunkRuns - 1, 2 * index.ChunkRuns, 2*2*index.ChunkRuns - 1, 2 * 2 * index.ChunkRuns, 2*runs - 2} {
		to, behind, err := h.s.translatePartition(ctx, h.c.DstAdm, ps, s)
		if err != nil || behind || to != (s+1)/2 {
			t.Errorf("translate %d = %d, behind %v, %v; want %d", s, to, behind, err, (s+1)/2)
		}
	}
	if ix.Evicted() != chunks-2 || len(h.s.chunks.items) != chunks-2 {
		t.Fatalf("after translating: %d chunks evicted (want %d), %d cached (want %d)", ix.Evicted(), chunks-2, len(h.s.chunks.items), chunks-2)
	}
}
