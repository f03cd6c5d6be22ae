package verify

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Target records in the covered range that no indexed source record maps
// to are in a gap of the index: a stretch of target offsets between two
// runs. Some gaps are kmirror's own at-least-once re-deliveries: a copy
// rewound (a worker restarted before its progress was written, a produce
// failure) writes the records from its last stored position again, and
// the offset index keeps the newer copy (index.Partition.Add truncates at
// the rewound offset). The older copies then sit in a gap, just before the
// newer ones, and each equals one of the records that follow the gap. So
// a gap record is a duplicate, not an extra, when it equals (key, value,
// headers, timestamp and its type) one of the next N target records after
// the gap, N being the gap's length: every re-delivered record was copied
// again within that many records. Anything else in a gap (a record
// written to the target by something other than kmirror) is extra.
//
// Equality is by SHA-256 of the fields, so a gap holds 40 bytes a record
// and its window as much; gaps are as long as what was in flight when a
// copy rewound.

type gaps struct {
	windows []*window
	counted struct{ dup, extra int64 }
	extras  []int64 // the first extras' target offsets
}

type window struct {
	recs       []gapRec
	collecting bool // the gap goes on
	left       int  // records after the gap still to look at
	seen       map[[sha256.Size]byte]bool
}

type gapRec struct {
	off  int64
	hash [sha256.Size]byte
}

const maxExtraSamples = 100

// open reports whether a gap waits for records after it.
func (g *gaps) open() bool { return len(g.windows) > 0 }

// add takes a target record in a gap.
func (g *gaps) add(r *kgo.Record) {
	var w *window
	if n := len(g.windows); n > 0 && g.windows[n-1].collecting {
		w = g.windows[n-1]
	} else {
		w = &window{collecting: true, seen: map[[sha256.Size]byte]bool{}}
		g.windows = append(g.windows, w)
	}
	w.recs = append(w.recs, gapRec{off: r.Offset, hash: hashRecord(r)})
}

// follow shows every target record to the gaps before it (called before
// add, for every record): a record ends the gap being collected unless
// add takes it into it, and counts in the windows of the gaps before.
func (g *gaps) follow(r *kgo.Record, inGap bool) {
	if len(g.windows) == 0 {
		return
	}
	var h [sha256.Size]byte
	hashed := false
	keep := g.windows[:0]
	for _, w := range g.windows {
		if w.collecting {
			if inGap {
				keep = append(keep, w)
				continue
			}
			w.collecting, w.left = false, len(w.recs)
		}
		if !hashed {
			h, hashed = hashRecord(r), true
		}
		w.seen[h] = true
		w.left--
		if w.left > 0 {
			keep = append(keep, w)
			continue
		}
		g.resolve(w)
	}
	clear(g.windows[len(keep):])
	g.windows = keep
}

func (g *gaps) resolve(w *window) {
	for _, r := range w.recs {
		if w.seen[r.hash] {
			g.counted.dup++
			continue
		}
		g.counted.extra++
		if len(g.extras) < maxExtraSamples {
			g.extras = append(g.extras, r.off)
		}
	}
}

// close resolves every gap with the records seen after it, adds the
// duplicates and extras to c, and returns the first extras' offsets.
func (g *gaps) close(c *Counts) []int64 {
	for _, w := range g.windows {
		g.resolve(w)
	}
	g.windows = nil
	c.Duplicate += g.counted.dup
	c.Extra += g.counted.extra
	return g.extras
}

// hashRecord hashes what a copy keeps of a record, each field with its
// length (and null apart from empty).
func hashRecord(r *kgo.Record) [sha256.Size]byte {
	h := sha256.New()
	var b [binary.MaxVarintLen64]byte
	bytesField := func(v []byte) {
		n := int64(len(v))
		if v == nil {
			n = -1
		}
		h.Write(b[:binary.PutVarint(b[:], n)])
		h.Write(v)
	}
	bytesField(r.Key)
	bytesField(r.Value)
	h.Write(b[:binary.PutVarint(b[:], int64(len(r.Headers)))])
	for _, hd := range r.Headers {
		bytesField([]byte(hd.Key))
		bytesField(hd.Value)
	}
	h.Write(b[:binary.PutVarint(b[:], r.Timestamp.UnixMilli())])
	h.Write(b[:binary.PutVarint(b[:], int64(r.Attrs.TimestampType()))])
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}
