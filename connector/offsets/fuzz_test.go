package offsets

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecode: no input panics; every error wraps ErrCorrupt and comes with
// no payload; a record without the magic comes back unchanged; a decoded
// payload has the declared size and survives a round trip with its codec.
//
// The seed corpus is testdata/fuzz/FuzzDecode (hand-made edge cases of the
// header and of every codec) plus the records added below. Run with
//
//	go test -run '^$' -fuzz FuzzDecode -fuzztime 60s ./connector/offsets/
func FuzzDecode(f *testing.F) {
	for _, p := range [][]byte{nil, progressPayload(), checkpointPayload(), indexJSONPayload(20), indexBinaryPayload(20)} {
		for _, c := range Codecs() {
			rec, err := Encode(c, p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(rec)
		}
		f.Add(p) // legacy
	}
	f.Fuzz(func(t *testing.T, record []byte) {
		in := bytes.Clone(record)
		payload, c, err := Decode(record)
		if !bytes.Equal(in, record) {
			t.Fatal("Decode modified its input")
		}
		h, herr := ParseHeader(record)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %q does not wrap ErrCorrupt", err)
			}
			if payload != nil || c != CodecNone {
				t.Fatalf("error %q with payload %q, codec %s", err, payload, c)
			}
			if herr == nil && h.Legacy {
				t.Fatalf("legacy record failed: %v", err)
			}
			return
		}
		if herr != nil {
			t.Fatalf("Decode succeeded where ParseHeader failed: %v", herr)
		}
		if len(payload) != h.UncompressedSize || len(payload) > MaxUncompressedSize || c != h.Codec {
			t.Fatalf("payload of %d bytes, codec %s, for header %+v", len(payload), c, h)
		}
		if len(record) < 2 || record[0] != 0x47 || record[1] != 0x79 {
			if !h.Legacy || c != CodecNone || !bytes.Equal(payload, record) {
				t.Fatalf("legacy record %q decoded to %q, %s", record, payload, c)
			}
			return
		}
		again, err := Encode(c, payload)
		if err != nil {
			t.Fatalf("re-encode with %s: %v", c, err)
		}
		back, c2, err := Decode(again)
		if err != nil || c2 != c || !bytes.Equal(back, payload) {
			t.Fatalf("round trip with %s: %v", c, err)
		}
	})
}

// FuzzRoundTrip: every payload comes back from every codec.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte(nil), uint8(CodecZstd))
	f.Add(progressPayload(), uint8(CodecLZ4))
	f.Add(indexBinaryPayload(50), uint8(CodecSnappy))
	f.Add([]byte("Gy"), uint8(CodecNone))
	f.Fuzz(func(t *testing.T, payload []byte, codec uint8) {
		c := Codec(codec % uint8(len(Codecs())))
		rec, err := Encode(c, payload)
		if err != nil {
			t.Fatal(err)
		}
		got, gotc, err := Decode(rec)
		if err != nil || gotc != c || !bytes.Equal(got, payload) {
			t.Fatalf("%s: %v", c, err)
		}
	})
}
