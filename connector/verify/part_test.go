package verify

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/index"
)

func rec(off int64, v string) *kgo.Record {
	return &kgo.Record{Offset: off, Key: []byte("k"), Value: []byte(v), Timestamp: time.UnixMilli(1000 + off)}
}

// copyOf is the target copy at offset off of source record r.
func copyOf(r *kgo.Record, off int64) *kgo.Record {
	c := *r
	c.Offset = off
	return &c
}

// newPart is a partition over source [0, next) whose index holds runs,
// the target ending at tEnd.
func newPart(next, tEnd int64, runs ...index.Run) *part {
	p := &part{samples: 10, runs: runs, srcEnd: next, tEnd: tEnd}
	p.out.SourceTo = next
	if len(runs) > 0 {
		last := runs[len(runs)-1]
		p.out.TargetFrom, p.out.TargetTo = runs[0].Dst, last.Dst+last.N
	}
	p.dstNext = p.out.TargetFrom
	return p
}

// TestMergeDuplicatesAndExtras: a copy rewound and written again leaves
// its older copies unindexed just before the newer ones (the index keeps
// the newer: index.Partition.Add truncates); they are duplicates, while a
// record in a gap that is no copy is extra, and a source record with no
// index entry or no target record is missing.
func TestMergeDuplicatesAndExtras(t *testing.T) {
	src := make([]*kgo.Record, 10)
	for i := range src {
		src[i] = rec(int64(i), fmt.Sprint("v", i))
	}
	for _, tc := range []struct {
		name   string
		target []*kgo.Record
		runs   []index.Run
		want   Counts
	}{{
		// Source 0..4 at target 0..4; 5..7 copied at 5..7, the copy
		// rewound to 5, and 5..9 copied again at 8..12.
		name:   "rewound",
		target: []*kgo.Record{copyOf(src[0], 0), copyOf(src[1], 1), copyOf(src[2], 2), copyOf(src[3], 3), copyOf(src[4], 4), copyOf(src[5], 5), copyOf(src[6], 6), copyOf(src[7], 7), copyOf(src[5], 8), copyOf(src[6], 9), copyOf(src[7], 10), copyOf(src[8], 11), copyOf(src[9], 12)},
		runs:   []index.Run{{Src: 0, Dst: 0, N: 5}, {Src: 5, Dst: 8, N: 5}},
		want:   Counts{Matched: 10, Duplicate: 3},
	}, {
		// Rewound twice: 5..9 then 5..6 in the gap, 5.. indexed after.
		name:   "rewound twice",
		target: []*kgo.Record{copyOf(src[0], 0), copyOf(src[1], 1), copyOf(src[2], 2), copyOf(src[3], 3), copyOf(src[4], 4), copyOf(src[5], 5), copyOf(src[6], 6), copyOf(src[7], 7), copyOf(src[8], 8), copyOf(src[9], 9), copyOf(src[5], 10), copyOf(src[6], 11), copyOf(src[5], 12), copyOf(src[6], 13), copyOf(src[7], 14), copyOf(src[8], 15), copyOf(src[9], 16)},
		runs:   []index.Run{{Src: 0, Dst: 0, N: 5}, {Src: 5, Dst: 12, N: 5}},
		want:   Counts{Matched: 10, Duplicate: 7},
	}, {
		// One record of the gap is no copy.
		name:   "foreign in a gap",
		target: []*kgo.Record{copyOf(src[0], 0), copyOf(src[1], 1), copyOf(src[2], 2), copyOf(src[3], 3), copyOf(src[4], 4), copyOf(src[5], 5), rec(6, "foreign"), copyOf(src[5], 7), copyOf(src[6], 8), copyOf(src[7], 9), copyOf(src[8], 10), copyOf(src[9], 11)},
		runs:   []index.Run{{Src: 0, Dst: 0, N: 5}, {Src: 5, Dst: 7, N: 5}},
		want:   Counts{Matched: 10, Duplicate: 1, Extra: 1},
	}, {
		// A copy of a record that is not next to the gap is extra.
		name:   "far copy",
		target: []*kgo.Record{copyOf(src[0], 0), copyOf(src[1], 1), copyOf(src[2], 2), copyOf(src[3], 3), copyOf(src[9], 4), copyOf(src[4], 5), copyOf(src[5], 6), copyOf(src[6], 7), copyOf(src[7], 8), copyOf(src[8], 9), copyOf(src[9], 10)},
		runs:   []index.Run{{Src: 0, Dst: 0, N: 4}, {Src: 4, Dst: 5, N: 6}},
		want:   Counts{Matched: 10, Extra: 1},
	}, {
		// Source 3 has no index entry; target 6 (source 7's) is gone;
		// target 8 (source 9's) has another value and timestamp.
		name: "missing and different",
		target: []*kgo.Record{copyOf(src[0], 0), copyOf(src[1], 1), copyOf(src[2], 2), copyOf(src[4], 3), copyOf(src[5], 4), copyOf(src[6], 5),
			copyOf(src[8], 7), rec(8, "changed")},
		runs: []index.Run{{Src: 0, Dst: 0, N: 3}, {Src: 4, Dst: 3, N: 6}},
		want: Counts{Matched: 7, Missing: 2, Different: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			last := tc.target[len(tc.target)-1].Offset
			// Fed one record at a time and all at once, alternating
			// sides: the outcome does not depend on arrival order.
			for _, step := range []int{1, 3, 100} {
				p := newPart(10, last+1, tc.runs...)
				for i, j := 0, 0; i < len(src) || j < len(tc.target); i, j = i+step, j+step {
					if j < len(tc.target) {
						p.addTarget(tc.target[j:min(j+step, len(tc.target))])
					}
					if i < len(src) {
						p.addSource(src[i:min(i+step, len(src))])
					}
				}
				if !p.complete() {
					t.Fatalf("step %d: not complete: %+v", step, p)
				}
				if p.out.Counts != tc.want {
					t.Errorf("step %d: %+v, want %+v (%+v)", step, p.out.Counts, tc.want, p.out.Differences)
				}
			}
		})
	}
}

// TestCompareFields: null is not empty, header order and null header
// values count, and the timestamp and its type are compared.
func TestCompareFields(t *testing.T) {
	base := &kgo.Record{Key: []byte{}, Value: nil, Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b"}}, Timestamp: time.UnixMilli(5)}
	mod := func(f func(r *kgo.Record)) *kgo.Record {
		r := *base
		r.Headers = append([]kgo.RecordHeader(nil), base.Headers...)
		f(&r)
		return &r
	}
	for _, tc := range []struct {
		r    *kgo.Record
		want string
	}{
		{mod(func(*kgo.Record) {}), "[]"},
		{mod(func(r *kgo.Record) { r.Key = nil }), "[key]"},
		{mod(func(r *kgo.Record) { r.Value = []byte{} }), "[value]"},
		{mod(func(r *kgo.Record) { r.Headers[0], r.Headers[1] = r.Headers[1], r.Headers[0] }), "[headers]"},
		{mod(func(r *kgo.Record) { r.Headers[1].Value = []byte{} }), "[headers]"},
		{mod(func(r *kgo.Record) { r.Timestamp = time.UnixMilli(6) }), "[timestamp]"},
		{mod(func(r *kgo.Record) { r.Attrs = kgo.RecordAttrs{}; r.Key = []byte("x") }), "[key]"},
	} {
		if got := fmt.Sprint(compare(base, tc.r)); got != tc.want {
			t.Errorf("compare %+v: %s, want %s", tc.r, got, tc.want)
		}
	}
}
