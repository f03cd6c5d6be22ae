//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// val is the unique value of the seq-th record of partition p in a test.
func val(prefix string, p int32, seq int) string {
	return fmt.Sprintf("%s-p%d-%d", prefix, p, seq)
}

// seqRecords returns n records per partition of topic with values
// val(prefix, p, i), and the expected values per partition.
func seqRecords(topic, prefix string, partitions, n int) ([]*kgo.Record, map[int32][]string) {
	want := make(map[int32][]string, partitions)
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		for p := int32(0); p < int32(partitions); p++ {
			v := val(prefix, p, i)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(v)})
			want[p] = append(want[p], v)
		}
	}
	return recs, want
}

// countPrefix counts the values written by seqRecords with prefix.
func countPrefix(got map[int32][]string, prefix string) int {
	n := 0
	for _, vs := range got {
		for _, v := range vs {
			if strings.HasPrefix(v, prefix+"-") {
				n++
			}
		}
	}
	return n
}

// appendWant appends more's values to want, per partition.
func appendWant(want map[int32][]string, more map[int32][]string) map[int32][]string {
	out := make(map[int32][]string, len(want))
	for p, vs := range want {
		out[p] = append([]string(nil), vs...)
	}
	for p, vs := range more {
		out[p] = append(out[p], vs...)
	}
	return out
}

// richRecords builds n records over `partitions` partitions that exercise
// everything a copy must preserve: nil and empty keys, nil values
// (tombstones) and empty values, no headers, several headers with duplicate
// keys, nil and empty header values, explicit out-of-order timestamps (all
// within the last hour, so that neither retention nor
// message.timestamp.*.max.ms gets in the way on real Kafka).
func richRecords(topic string, partitions, n int) []*kgo.Record {
	base := time.Now().Add(-30 * time.Minute).Truncate(time.Millisecond)
	seq := make([]int, partitions)
	recs := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		p := int32(i % partitions)
		s := seq[p]
		seq[p]++
		r := &kgo.Record{
			Topic:     topic,
			Partition: p,
			// Timestamps jump around (not monotonic) within ~17 min.
			Timestamp: base.Add(time.Duration((i*7919)%1000000) * time.Millisecond),
		}
		switch i % 10 {
		case 0:
			r.Key = nil
		case 1:
			r.Key = []byte{}
		default:
			r.Key = []byte(fmt.Sprintf("key-%d", i%37)) // repeating keys
		}
		switch i % 7 {
		case 0:
			r.Value = nil // tombstone
		case 1:
			r.Value = []byte{}
		case 2:
			r.Value = bytes.Repeat([]byte{0x00, 0xff, byte(i)}, 100) // binary
		default:
			r.Value = []byte(val(topic, p, s))
		}
		switch i % 5 {
		case 0:
			// no headers
		case 1:
			r.Headers = []kgo.RecordHeader{{Key: "trace", Value: []byte(fmt.Sprintf("t-%d", i))}}
		default:
			r.Headers = []kgo.RecordHeader{
				{Key: "dup", Value: []byte("second-first")},
				{Key: "nil", Value: nil},
				{Key: "dup", Value: []byte("first-second")},
				{Key: "empty", Value: []byte{}},
				{Key: "", Value: []byte("empty key")},
				{Key: "seq", Value: []byte(fmt.Sprintf("%d", i))},
			}
		}
		recs = append(recs, r)
	}
	return recs
}

// byPartition groups records by partition, keeping their order.
func byPartition(recs []*kgo.Record) map[int32][]*kgo.Record {
	out := make(map[int32][]*kgo.Record)
	for _, r := range recs {
		out[r.Partition] = append(out[r.Partition], r)
	}
	return out
}

// diffRecords compares the records of one partition field by field: key and
// value (nil and empty are different), headers (order, duplicates, nil
// values), timestamp (ms) and partition. It reports at most 10 differences.
func diffRecords(p int32, want, got []*kgo.Record) string {
	var b strings.Builder
	if len(want) != len(got) {
		fmt.Fprintf(&b, "partition %d: want %d records, got %d\n", p, len(want), len(got))
	}
	diffs := 0
	for i := 0; i < len(want) && i < len(got) && diffs < 10; i++ {
		w, g := want[i], got[i]
		var fields []string
		if !bytesEq(w.Key, g.Key) {
			fields = append(fields, fmt.Sprintf("key: want %s, got %s", fmtBytes(w.Key), fmtBytes(g.Key)))
		}
		if !bytesEq(w.Value, g.Value) {
			fields = append(fields, fmt.Sprintf("value: want %s, got %s", fmtBytes(w.Value), fmtBytes(g.Value)))
		}
		if !headersEq(w.Headers, g.Headers) {
			fields = append(fields, fmt.Sprintf("headers: want %s, got %s", fmtHeaders(w.Headers), fmtHeaders(g.Headers)))
		}
		if w.Timestamp.UnixMilli() != g.Timestamp.UnixMilli() {
			fields = append(fields, fmt.Sprintf("timestamp: want %d, got %d", w.Timestamp.UnixMilli(), g.Timestamp.UnixMilli()))
		}
		if w.Partition != g.Partition {
			fields = append(fields, fmt.Sprintf("partition: want %d, got %d", w.Partition, g.Partition))
		}
		if len(fields) > 0 {
			diffs++
			fmt.Fprintf(&b, "partition %d record %d (target offset %d): %s\n", p, i, g.Offset, strings.Join(fields, "; "))
		}
	}
	return b.String()
}

func bytesEq(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

func headersEq(a, b []kgo.RecordHeader) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytesEq(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

func fmtBytes(b []byte) string {
	if b == nil {
		return "<nil>"
	}
	if len(b) > 40 {
		return fmt.Sprintf("%q...(%d bytes)", b[:40], len(b))
	}
	return fmt.Sprintf("%q", b)
}

func fmtHeaders(hs []kgo.RecordHeader) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = fmt.Sprintf("%q=%s", h.Key, fmtBytes(h.Value))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
