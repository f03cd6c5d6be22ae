package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testRecords are records with every field a batch carries: null and empty
// keys, a tombstone, headers (one with a null value), distinct timestamps.
func testRecords() []*kgo.Record {
	t0 := time.UnixMilli(1_700_000_000_000)
	return []*kgo.Record{
		{Key: []byte("k0"), Value: []byte(`{"id":0,"name":"alpha"}`), Timestamp: t0, Offset: 10,
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "null", Value: nil}}},
		{Key: nil, Value: []byte("no key"), Timestamp: t0.Add(-time.Second), Offset: 11},
		{Key: []byte{}, Value: nil, Timestamp: t0.Add(time.Hour), Offset: 12}, // tombstone, empty key
	}
}

// decodeBatch parses a batch the way a consumer does (franz-go's parser,
// which checks the CRC) and returns its records.
func decodeBatch(t testing.TB, b []byte) []*kgo.Record {
	t.Helper()
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = b
	rp.HighWatermark = 1 << 40
	rp.LastStableOffset = 1 << 40
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "t", IsolationLevel: kgo.ReadCommitted()}, &rp, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		t.Fatalf("decode: %v", fp.Err)
	}
	return fp.Records
}

func sameRecords(t *testing.T, got, want []*kgo.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Key, w.Key) || (g.Key == nil) != (w.Key == nil) || !bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) ||
			!g.Timestamp.Equal(w.Timestamp) || len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: got key %q value %q ts %v headers %v, want key %q value %q ts %v headers %v",
				i, g.Key, g.Value, g.Timestamp, g.Headers, w.Key, w.Value, w.Timestamp, w.Headers)
		}
		for j := range w.Headers {
			if g.Headers[j].Key != w.Headers[j].Key || !bytes.Equal(g.Headers[j].Value, w.Headers[j].Value) {
				t.Fatalf("record %d header %d: got %v, want %v", i, j, g.Headers[j], w.Headers[j])
			}
		}
	}
}

// TestEncodeBatchRoundTrip: a re-encoded batch, with each codec, decodes to
// the same records (key, value, null vs empty, headers, timestamps), with
// offset deltas 0..n-1 (what the offset index relies on).
func TestEncodeBatchRoundTrip(t *testing.T) {
	t.Parallel()
	comps := Compressors()
	for codec := int8(0); codec <= 4; codec++ {
		b, err := Encode(testRecords(), codec, comps[codec])
		if err != nil {
			t.Fatal(err)
		}
		h, err := Parse(b)
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if h.Codec() != codec || h.Count != 3 || h.LastDelta != 2 || h.LogAppendTime() || h.Transactional() {
			t.Fatalf("codec %d: header %+v", codec, h)
		}
		got := decodeBatch(t, b)
		sameRecords(t, got, testRecords())
		for i, r := range got {
			if r.Offset != int64(i) {
				t.Fatalf("codec %d: record %d has offset %d", codec, i, r.Offset)
			}
			if int8(r.Attrs.CompressionType()) != codec {
				t.Fatalf("codec %d: record says codec %d", codec, r.Attrs.CompressionType())
			}
		}
	}
}

// sourceBatch builds a batch as a source broker stores it: base offset,
// leader epoch, a producer, a sequence, maybe transactional.
func sourceBatch(t testing.TB, base int64, codec int8, attrs uint16) []byte {
	b, err := Encode(testRecords(), codec, Compressors()[codec])
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(b[OffBase:], uint64(base))
	binary.BigEndian.PutUint32(b[OffLeaderEpoch:], 7)
	binary.BigEndian.PutUint16(b[OffAttrs:], binary.BigEndian.Uint16(b[OffAttrs:])|attrs)
	binary.BigEndian.PutUint64(b[OffProducerID:], 4242)
	binary.BigEndian.PutUint16(b[OffEpoch:], 3)
	binary.BigEndian.PutUint32(b[OffSequence:], 99)
	binary.BigEndian.PutUint32(b[OffCRC:], crc32.Checksum(b[OffAttrs:], CRCTable))
	return b
}

// TestRewriteBatch: only base offset, leader epoch, producer fields and the
// transactional bit change; the CRC is valid again and the compressed
// records are byte for byte the source's.
func TestRewriteBatch(t *testing.T) {
	t.Parallel()
	src := sourceBatch(t, 1000, 4, AttrTransactional)
	b := append([]byte(nil), src...)
	if err := Rewrite(b, 77, 1, 12345, false); err != nil {
		t.Fatal(err)
	}
	h, err := Parse(b) // checks the CRC
	if err != nil {
		t.Fatal(err)
	}
	if h.Base != 0 || h.ProducerID != 77 || h.Transactional() || h.Codec() != 4 || h.Count != 3 {
		t.Fatalf("header %+v", h)
	}
	if e := int32(binary.BigEndian.Uint32(b[OffLeaderEpoch:])); e != -1 {
		t.Fatalf("leader epoch %d", e)
	}
	if e := int16(binary.BigEndian.Uint16(b[OffEpoch:])); e != 1 {
		t.Fatalf("producer epoch %d", e)
	}
	if s := int32(binary.BigEndian.Uint32(b[OffSequence:])); s != 12345 {
		t.Fatalf("sequence %d", s)
	}
	if !bytes.Equal(b[OffLastDelta:OffProducerID], src[OffLastDelta:OffProducerID]) || !bytes.Equal(b[OffCount:], src[OffCount:]) {
		t.Fatal("timestamps, deltas or records changed")
	}
	sameRecords(t, decodeBatch(t, b), testRecords())

	// Inside the slot's transaction (exactly_once) the bit is set, on a
	// source batch that had it or not, and the CRC is valid again.
	for _, attrs := range []uint16{0, AttrTransactional} {
		b := append([]byte(nil), sourceBatch(t, 1000, 4, attrs)...)
		if err := Rewrite(b, 77, 1, 12345, true); err != nil {
			t.Fatal(err)
		}
		h, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if !h.Transactional() || h.Control() || h.Codec() != 4 || h.ProducerID != 77 {
			t.Fatalf("transactional rewrite of a source batch with attributes %#x: header %+v", attrs, h)
		}
		sameRecords(t, decodeBatch(t, b), testRecords())
	}
}

// TestPassReason: every rule that sends a batch to the record path.
func TestPassReason(t *testing.T) {
	t.Parallel()
	h := func(attrs uint16, base int64) Header {
		hh, err := Parse(sourceBatch(t, base, 3, attrs))
		if err != nil {
			t.Fatal(err)
		}
		return hh
	}
	gaps := h(0, 100)
	gaps.Count = 2 // compacted: lastDelta 2, two records left
	for _, c := range []struct {
		name    string
		h       Header
		pos     int64
		aborted map[int64]bool
		want    string
	}{
		{"plain", h(0, 100), 100, nil, ""},
		{"after the position", h(0, 150), 100, nil, ""},
		{"committed transaction", h(AttrTransactional, 100), 100, map[int64]bool{1: true}, ""},
		{"aborted transaction", h(AttrTransactional, 100), 100, map[int64]bool{4242: true}, ReasonAborted},
		{"non-transactional, same producer", h(0, 100), 100, map[int64]bool{4242: true}, ""},
		{"control", h(AttrControl|AttrTransactional, 100), 100, nil, ReasonControl},
		{"straddles", h(0, 100), 101, nil, ReasonStraddle},
		{"compacted", gaps, 100, nil, ReasonGaps},
		{"log append time", h(AttrLogAppendTime, 100), 100, nil, ReasonLogAppendTime},
	} {
		if got := PassReason(c.h, c.pos, c.aborted); got != c.want {
			t.Errorf("%s: reason %q, want %q", c.name, got, c.want)
		}
	}
}

// TestSplitBatches: whole batches are returned, a partial tail is left for
// the next fetch, a corrupt or old-format batch is an error.
func TestSplitBatches(t *testing.T) {
	t.Parallel()
	a, b := sourceBatch(t, 0, 0, 0), sourceBatch(t, 3, 4, 0)
	all := append(append([]byte(nil), a...), b...)
	bs, hs, err := Split(append(all, b[:len(b)/2]...))
	if err != nil || len(bs) != 2 || hs[1].Base != 3 {
		t.Fatalf("got %d batches, err %v", len(bs), err)
	}
	bad := append([]byte(nil), all...)
	bad[len(a)+HeaderLen+2] ^= 0xff // a record byte of the second batch
	if _, _, err := Split(bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("corrupt batch: err %v", err)
	}
	old := append([]byte(nil), a...)
	old[OffMagic] = 1
	if _, _, err := Split(old); !errors.Is(err, ErrMalformed) {
		t.Fatalf("magic 1: err %v", err)
	}
}

// FuzzRewriteBatch: whatever the fetched bytes, splitting and rewriting
// never panics, and every batch it accepts comes out as a well-formed batch
// (length, magic, CRC, same records) that franz-go parses.
func FuzzRewriteBatch(f *testing.F) {
	for codec := int8(0); codec <= 4; codec++ {
		f.Add(sourceBatch(f, 5, codec, 0), false)
	}
	two := append(sourceBatch(f, 0, 0, AttrTransactional), sourceBatch(f, 3, 3, 0)...)
	f.Add(two, true)
	f.Add(two[:len(two)-7], false)
	f.Add([]byte{}, false)
	f.Add(make([]byte, HeaderLen), true)
	f.Fuzz(func(t *testing.T, data []byte, fixCRC bool) {
		in := append([]byte(nil), data...)
		if fixCRC {
			// Random bytes almost never carry a valid CRC: give the
			// header checks behind it a chance too.
			for b := in; len(b) >= HeaderLen; {
				n := int(int32(binary.BigEndian.Uint32(b[OffLength:]))) + 12
				if n < HeaderLen || n > len(b) {
					break
				}
				binary.BigEndian.PutUint32(b[OffCRC:], crc32.Checksum(b[OffAttrs:n], CRCTable))
				b = b[n:]
			}
		}
		bs, hs, err := Split(in)
		if err != nil {
			return
		}
		for i, b := range bs {
			before := append([]byte(nil), b...)
			if err := Rewrite(b, 9, 2, 40, false); err != nil {
				t.Fatalf("rewrite of an accepted batch: %v", err)
			}
			h, err := Parse(b)
			if err != nil {
				t.Fatalf("rewritten batch malformed: %v", err)
			}
			if h.Count != hs[i].Count || h.LastDelta != hs[i].LastDelta || h.ProducerID != 9 || len(b) != len(before) ||
				!bytes.Equal(b[HeaderLen:], before[HeaderLen:]) {
				t.Fatalf("rewrite changed more than the header: %+v vs %+v", h, hs[i])
			}
		}
		// A truncated or corrupt single batch is an error, not a panic.
		if len(data) > 0 {
			_ = Rewrite(append([]byte(nil), data[:len(data)/2]...), 1, 1, 1, false)
			_, _ = Parse(data[:len(data)/2])
		}
	})
}

// TestCRC32CAdjust: the CRC adjusted for a changed header equals the CRC
// computed over the whole changed message, for tails from empty to large.
func TestCRC32CAdjust(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tail := range []int{0, 1, 2, 3, 7, 8, 255, 256, 1000, 4096, 65537, 1 << 20} {
		msg := make([]byte, 40+tail)
		for i := range msg {
			msg[i] = byte(rng.Uint32())
		}
		before := crc32.Checksum(msg, CRCTable)
		delta := make([]byte, 40)
		for i := range delta {
			if rng.IntN(3) == 0 {
				delta[i] = byte(rng.Uint32())
			}
			msg[i] ^= delta[i]
		}
		if got, want := crc32cAdjust(before, delta, tail), crc32.Checksum(msg, CRCTable); got != want {
			t.Errorf("tail %d: adjusted CRC %08x, want %08x", tail, got, want)
		}
	}
}
