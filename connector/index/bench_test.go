package index

import (
	"math/rand/v2"
	"testing"

	"github.com/kmirror/kmirror/connector/offsets"
)

// buildIndex simulates mirroring n records of a partition whose source
// has a transaction marker after every txnSize records and, now and then,
// a stretch removed by compaction: the gaps that make an index grow.
func buildIndex(n int, txnSize int) *Partition {
	r := rand.New(rand.NewPCG(1, 2))
	ix := New()
	src, dst := int64(0), int64(0)
	for i := range n {
		ix.Add(src, dst)
		src++
		dst++
		if txnSize > 0 && (i+1)%txnSize == 0 {
			src++ // the commit marker
		}
		if r.IntN(1000) == 0 {
			src += int64(1 + r.IntN(50)) // compacted away
		}
	}
	return ix
}

// BenchmarkOffsetStorage reports the bytes kmirror stores for the offset
// index per million mirrored records, uncompressed and per codec, for a
// partition with a transaction every 100 records (one run per
// transaction: a hard case; without gaps the index is a single run).
func BenchmarkOffsetStorage(b *testing.B) {
	ix := buildIndex(1_000_000, 100)
	var chunks [][]byte
	for k := ix.first; k <= ix.first+int64(len(ix.runs)-1)/ChunkRuns; k++ {
		chunks = append(chunks, EncodeChunk(ix.chunk(k)))
	}
	b.Logf("1M records -> %d runs in %d chunks", len(ix.runs), len(chunks))
	for _, c := range offsets.Codecs() {
		b.Run(c.String(), func(b *testing.B) {
			total := 0
			for b.Loop() {
				total = 0
				for _, ch := range chunks {
					rec, err := offsets.Encode(c, ch)
					if err != nil {
						b.Fatal(err)
					}
					total += len(rec)
				}
			}
			b.ReportMetric(float64(total), "bytes/1M-records")
		})
	}
}

// BenchmarkTranslate reports offset translations per second on an index of
// a million records.
func BenchmarkTranslate(b *testing.B) {
	ix := buildIndex(1_000_000, 100)
	end := ix.runs[len(ix.runs)-1].SrcEnd()
	r := rand.New(rand.NewPCG(3, 4))
	qs := make([]int64, 4096)
	for i := range qs {
		qs[i] = r.Int64N(end)
	}
	i := 0
	for b.Loop() {
		if _, err := ix.Translate(qs[i%len(qs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
}
