package data

import (
	"maps"
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestMarkRoundTrip guards the metadata a slot's commit leaves in the
// slots group (Mark): a new owner parses what the previous owner's String
// wrote and waits for exactly those records of the progress topic, from
// that producer. A mark that does not survive the round trip makes the new
// owner wait for the wrong records (resuming from an older position:
// records copied twice) or fail the takeover. A mark without progress
// offsets (a transaction whose progress writes were not acknowledged yet
// when it committed the slots, or wrote none) is a mark too: nothing to
// wait for.
func TestMarkRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		mark Mark
	}{
		{"several partitions", Mark{ProducerID: 42, TransactionID: "kmirror.m.worker-0123456789abcdef", Member: "kgo-3c1e-member",
			Offsets: map[int32]int64{3: 100, 0: 7, 1: 0}}},
		{"one partition", Mark{ProducerID: 0, TransactionID: "t", Member: "m", Offsets: map[int32]int64{5: 12}}},
		{"no offsets", Mark{ProducerID: 9, TransactionID: "t", Member: "m", Offsets: map[int32]int64{}}},
		{"nil offsets", Mark{ProducerID: 9, TransactionID: "t", Member: "m"}},
		{"largest values", Mark{ProducerID: math.MaxInt64, TransactionID: "t", Member: "m", Offsets: map[int32]int64{math.MaxInt32: math.MaxInt64}}},
		{"characters to escape", Mark{ProducerID: 1, TransactionID: `a "quoted", spaced\id`, Member: "é\n", Offsets: map[int32]int64{0: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.mark.String()
			got, err := ParseMark(s)
			if err != nil {
				t.Fatalf("ParseMark(%q): %v", s, err)
			}
			if got.ProducerID != tc.mark.ProducerID || got.TransactionID != tc.mark.TransactionID || got.Member != tc.mark.Member {
				t.Fatalf("ParseMark(%q) = %+v, want %+v", s, got, tc.mark)
			}
			if !maps.Equal(got.Offsets, tc.mark.Offsets) {
				t.Fatalf("ParseMark(%q): offsets %v, want %v", s, got.Offsets, tc.mark.Offsets)
			}
			// Encoded again, the same metadata: marks compare as
			// strings nowhere, but a parse that drops anything would
			// show here.
			if again := got.String(); again != s {
				t.Fatalf("a parsed mark encodes as %q, the original as %q", again, s)
			}
		})
	}
}

// TestMarkFitsOffsetMetadata: Kafka refuses an offset commit whose
// metadata is longer than offset.metadata.max.bytes (4,096 by default),
// and then the slots could never be committed: every transaction would
// abort. The mark of a transaction that wrote to every partition of a
// progress topic of 100 partitions, at the largest offsets, with a
// worker's transactional ID and a franz-go member ID, must fit.
func TestMarkFitsOffsetMetadata(t *testing.T) {
	m := Mark{ProducerID: math.MaxInt64, TransactionID: "kmirror." + strings.Repeat("m", 64) + ".worker-0123456789abcdef",
		Member: "kgo-" + strings.Repeat("f", 36), Offsets: make(map[int32]int64)}
	for p := range int32(100) {
		m.Offsets[p] = math.MaxInt64
	}
	if n := len(m.String()); n > 4096 {
		t.Fatalf("the mark of 100 progress partitions is %d bytes, above Kafka's default offset.metadata.max.bytes (4,096)", n)
	}
}

// TestParseMarkErrors: metadata that is not a mark this kmirror reads
// (written by anything else, by another version of the mark, or damaged)
// is an error naming the metadata, so that an operator can find what is in
// the slots group; never a mark with a made-up producer or offsets (the
// new owner would then wait for records that never come, or for none at
// all).
func TestParseMarkErrors(t *testing.T) {
	valid := Mark{ProducerID: 7, TransactionID: "t", Member: "m", Offsets: map[int32]int64{0: 1}}.String()
	if _, err := ParseMark(valid); err != nil {
		t.Fatalf("a valid mark %q: %v", valid, err)
	}
	for _, s := range []string{
		"",
		" ",
		"seq=1", // what the design's throwaway test wrote
		"kmirror/1 pid=1 progress=0:1",
		"null",
		"[]",
		"{}", // no version
		strings.Replace(valid, `"v":1`, `"v":2`, 1),             // a version this build does not know
		strings.Replace(valid, `"v":1`, `"v":0`, 1),             // nor this
		strings.Replace(valid, `"pid":7`, `"pid":"7"`, 1),       // a producer ID that is not a number
		strings.Replace(valid, `"pid":7`, `"pid":7.5`, 1),       // nor an integer
		strings.Replace(valid, `"0":1`, `"-1":1`, 1),            // a negative progress partition
		strings.Replace(valid, `"0":1`, `"0":-1`, 1),            // a negative offset
		strings.Replace(valid, `"0":1`, `"a":1`, 1),             // a partition that is not a number
		strings.Replace(valid, `"0":1`, `"2147483648":1`, 1),    // a partition beyond int32
		strings.Replace(valid, `"0":1`, `"0":"1"`, 1),           // an offset that is not a number
		strings.Replace(valid, `"pid":7`, `"pid":7,"seq":3`, 1), // a field this version does not know
		valid[:len(valid)-1],                                    // cut short
	} {
		m, err := ParseMark(s)
		if err == nil {
			t.Errorf("ParseMark(%q) = %+v, want an error", s, m)
			continue
		}
		if !strings.Contains(err.Error(), strconv.Quote(s)) {
			t.Errorf("ParseMark(%q): error %q does not name the metadata", s, err)
		}
		if m.ProducerID != 0 || m.Offsets != nil || m.TransactionID != "" || m.Member != "" {
			t.Errorf("ParseMark(%q): an error with a mark %+v", s, m)
		}
	}
}
