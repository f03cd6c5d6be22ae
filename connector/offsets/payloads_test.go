package offsets

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
)

// Realistic offset payloads for the tests and benchmarks. The offset index
// format is not this package's business; these are two plausible encodings
// of the same runs (verbose JSON and delta uvarints), so the benchmark shows
// what compression does for both.

// progressPayload is one progress value as connector/data/progress.go writes it.
func progressPayload() []byte {
	return []byte(`{"next_offset":123456789,"topic_id":"q7BJcmFbT4mYtZ0Xl2pHkA"}`)
}

// checkpointPayload is one checkpoint value (group, partition, source
// offset, target offset).
func checkpointPayload() []byte {
	return []byte(`{"group":"orders-billing","topic":"orders","partition":17,"source_offset":123456789,"target_offset":118734021}`)
}

// indexRun is one produced batch: count source offsets from source landed
// at count target offsets from target.
type indexRun struct {
	Source int64 `json:"source"`
	Target int64 `json:"target"`
	Count  int64 `json:"count"`
}

// indexRuns returns n runs of one partition: batches of 100 to 300 records
// (a producer cutting batches by size and linger), a gap of one offset
// after one batch in ten (a transaction marker) and of 1 to 5000 offsets
// after one in twenty (compaction). Deterministic.
func indexRuns(n int) []indexRun {
	r := rand.New(rand.NewPCG(1, 2))
	runs := make([]indexRun, n)
	src, dst := int64(123_456_789), int64(118_734_021)
	for i := range runs {
		c := int64(100 + r.IntN(201))
		runs[i] = indexRun{Source: src, Target: dst, Count: c}
		src += c
		dst += c
		switch x := r.IntN(20); {
		case x < 2:
			src++ // transaction marker: not copied
		case x == 2:
			src += int64(1 + r.IntN(5000)) // compacted away
		}
	}
	return runs
}

// indexJSONPayload is n runs as a JSON document.
func indexJSONPayload(n int) []byte {
	b, err := json.Marshal(struct {
		Topic     string     `json:"topic"`
		Partition int32      `json:"partition"`
		Runs      []indexRun `json:"runs"`
	}{"orders", 17, indexRuns(n)})
	if err != nil {
		panic(err)
	}
	return b
}

// indexBinaryPayload is n runs as uvarints: the first run's source and
// target offsets, then per run the count and the source and target gaps
// since the previous run's end.
func indexBinaryPayload(n int) []byte {
	runs := indexRuns(n)
	var b []byte
	var prevSrc, prevDst int64
	for i, r := range runs {
		if i == 0 {
			b = binary.AppendUvarint(b, uint64(r.Source))
			b = binary.AppendUvarint(b, uint64(r.Target))
		} else {
			b = binary.AppendUvarint(b, uint64(r.Source-prevSrc))
			b = binary.AppendUvarint(b, uint64(r.Target-prevDst))
		}
		b = binary.AppendUvarint(b, uint64(r.Count))
		prevSrc, prevDst = r.Source+r.Count, r.Target+r.Count
	}
	return b
}
