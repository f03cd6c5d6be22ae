package connector

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/offsets"
	"github.com/kmirror/kmirror/connector/policy"
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

// TestIndexPersistsWithProgress: the writer stores index chunks and the
// position; a restart reassembles the same index, and a rewrite after
// pruning deletes the dropped chunks.
func TestIndexPersistsWithProgress(t *testing.T) {
	t.Parallel()
	_, dst := testClusters(t)
	cl := newClient(t, dst)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	topic := policy.InternalTopic("m", "progress")
	if _, err := ensureCompactedTopic(ctx, adm, topic, 1, -1); err != nil {
		t.Fatal(err)
	}
	cp := newCopier(discardLogger(), nil, cl, ctx, copierOpts{})
	tp := topicPartition{"orders", 3}
	if _, err := cp.assign([]assignment{{tp: tp, target: "src.orders", topicID: "ID1", next: 0}}, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.close)
	ps := cp.partition(tp)
	for i := int64(0); i < 2*indexChunkRuns+7; i++ { // a marker after every record
		ps.inflight = append(ps.inflight, 2*i)
		ps.promise(&kgo.Record{Offset: i, Timestamp: time.Now()}, nil)
	}
	w := &progressWriter{topic: topic, dst: cl, c: cp, sealer: sealer{offsets.CodecZstd}}
	load := func() loaded {
		t.Helper()
		if err := w.writeSync(ctx); err != nil {
			t.Fatal(err)
		}
		ld, err := loadProgress(ctx, nil, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, adm, topic)
		if err != nil {
			t.Fatal(err)
		}
		return ld
	}
	ld := load()
	if pos := ld.positions[tp]; pos.next != 2*(2*indexChunkRuns+6)+1 || pos.topicID != "ID1" {
		t.Fatalf("position = %+v", pos)
	}
	if got := ld.indexes[tp]; got == nil || !reflect.DeepEqual(got.runs, ps.index.runs) || got.first != 0 {
		t.Fatalf("reloaded index differs: %d runs from %d", len(got.runs), got.first)
	}

	ps.mu.Lock()
	ps.index.prune(2 * (indexChunkRuns + 1)) // chunk 0 only maps deleted records
	ps.mu.Unlock()
	ld = load()
	if got := ld.indexes[tp]; got.first != 1 || len(got.runs) != indexChunkRuns+7 {
		t.Fatalf("after pruning: first=%d runs=%d", got.first, len(got.runs))
	}
	if s, err := ld.indexes[tp].translate(2*(indexChunkRuns+3) - 1); err != nil || s != indexChunkRuns+3 {
		t.Fatalf("translate after reload = %d, %v", s, err)
	}
}

func TestSealerFallsBackToNone(t *testing.T) {
	t.Parallel()
	s := sealer{offsets.CodecZstd}
	small := []byte(`{"next_offset":1}`)
	if _, c, err := offsets.Decode(s.seal(small)); err != nil || c != offsets.CodecNone {
		t.Fatalf("a tiny record: codec %v, %v", c, err)
	}
	runs := make([]offsetRun, indexChunkRuns)
	for i := range runs {
		runs[i] = offsetRun{src: int64(2 * i), dst: int64(i), n: 1}
	}
	payload := encodeIndexChunk(runs)
	sealed := s.seal(payload)
	if _, c, err := offsets.Decode(sealed); err != nil || c != offsets.CodecZstd {
		t.Fatalf("an index chunk: codec %v, %v", c, err)
	}
	if ratio := float64(len(payload)) / float64(len(sealed)); ratio < 10 {
		t.Fatalf("zstd on a chunk: %.1fx smaller, want at least 10x", ratio)
	}
}
