package offsets

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

func testPayloads() map[string][]byte {
	random := make([]byte, 256<<10)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	return map[string][]byte{
		"nil":            nil,
		"empty":          {},
		"one byte":       {'x'},
		"magic prefix":   []byte("Gy looks like an envelope"),
		"progress":       progressPayload(),
		"checkpoint":     checkpointPayload(),
		"index json 1k":  indexJSONPayload(1000),
		"index bin 1k":   indexBinaryPayload(1000),
		"index json 50k": indexJSONPayload(50_000), // ~2.7 MB
		"random 256k":    random,
		"zeros 8M":       make([]byte, 8<<20),
	}
}

func TestRoundTrip(t *testing.T) {
	for name, payload := range testPayloads() {
		for _, c := range Codecs() {
			t.Run(name+"/"+c.String(), func(t *testing.T) {
				rec, err := Encode(c, payload)
				if err != nil {
					t.Fatalf("Encode: %v", err)
				}
				if len(rec) < 5 || rec[0] != 0x47 || rec[1] != 0x79 {
					t.Fatalf("record does not start with the magic: % x", rec[:min(len(rec), 8)])
				}
				h, err := ParseHeader(rec)
				if err != nil {
					t.Fatalf("ParseHeader: %v", err)
				}
				if h.Legacy || h.Codec != c || h.UncompressedSize != len(payload) || h.PayloadOffset > len(rec) {
					t.Fatalf("header %+v for %d bytes of %s", h, len(payload), c)
				}
				got, gotc, err := Decode(rec)
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if gotc != c {
					t.Errorf("codec %s, want %s", gotc, c)
				}
				if !bytes.Equal(got, payload) {
					t.Fatalf("payload of %d bytes differs from the %d encoded", len(got), len(payload))
				}
			})
		}
	}
}

func TestAppendKeepsPrefix(t *testing.T) {
	payload := indexJSONPayload(100)
	for _, c := range Codecs() {
		prefix := []byte("prefix")
		dst := append(make([]byte, 0, 8), prefix...)
		out, err := Append(dst, c, payload)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if !bytes.HasPrefix(out, prefix) {
			t.Fatalf("%s: prefix lost", c)
		}
		alone, _ := Encode(c, payload)
		if !bytes.Equal(out[len(prefix):], alone) {
			t.Errorf("%s: Append after a prefix differs from Encode", c)
		}
	}
}

func TestEncodeDeterministic(t *testing.T) {
	payload := indexJSONPayload(1000)
	for _, c := range Codecs() {
		a, _ := Encode(c, payload)
		b, _ := Encode(c, payload)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two encodings of the same payload differ", c)
		}
	}
}

func TestLegacy(t *testing.T) {
	for _, rec := range [][]byte{
		progressPayload(),
		[]byte(`{"next_offset":0}`),
		nil,
		{},
		{0x47},       // too short to hold the magic
		{0x47, 0x78}, // Pulsar's ManagedLedgerInfo magic, not ours
		{0x79, 0x47}, // the magic's bytes swapped
	} {
		got, c, err := Decode(rec)
		if err != nil || c != CodecNone {
			t.Fatalf("Decode(%q) = %v, %v", rec, c, err)
		}
		if !bytes.Equal(got, rec) || len(rec) > 0 && &got[0] != &rec[0] {
			t.Fatalf("Decode(%q) = %q, want the record itself", rec, got)
		}
		h, err := ParseHeader(rec)
		if err != nil || !h.Legacy || h.Codec != CodecNone || h.UncompressedSize != len(rec) || h.PayloadOffset != 0 {
			t.Fatalf("ParseHeader(%q) = %+v, %v", rec, h, err)
		}
	}
}

// TestGolden pins the format: records written by the first version of this
// package must decode the same way forever, whatever the compression
// libraries do to their output later.
func TestGolden(t *testing.T) {
	for _, g := range goldenRecords {
		rec, err := hex.DecodeString(g.hex)
		if err != nil {
			t.Fatal(err)
		}
		got, c, err := Decode(rec)
		if err != nil {
			t.Fatalf("%s: %v", g.codec, err)
		}
		if c != g.codec || string(got) != g.payload {
			t.Errorf("%s: decoded %s %q", g.codec, c, got)
		}
	}
}

const (
	goldenProgress = `{"next_offset":123456789,"topic_id":"q7BJcmFbT4mYtZ0Xl2pHkA"}`
	goldenIndex    = `{"topic":"orders","partition":17,"runs":[{"source":123456789,"target":118734021,"count":254},{"source":123457043,"target":118734275,"count":257},{"source":123457300,"target":118734532,"count":147},{"source":123457448,"target":118734679,"count":200},{"source":123457648,"target":118734879,"count":126},{"source":123457774,"target":118735005,"count":233},{"source":123458007,"target":118735238,"count":289},{"source":123460278,"target":118735527,"count":257}]}`
)

// goldenRecords were written by the first version of this package (see
// TestGolden). The first none and zstd ones are in docs/offsets.md.
var goldenRecords = []struct {
	codec   Codec
	payload string
	hex     string
}{
	{CodecNone, goldenProgress, "477902003d7b226e6578745f6f6666736574223a3132333435363738392c22746f7069635f6964223a227137424a636d466254346d59745a30586c3270486b41227d"},
	{CodecGzip, goldenProgress, "477902013d1f8b08000000000000ff003d00c2ff7b226e6578745f6f6666736574223a3132333435363738392c22746f7069635f6964223a227137424a636d466254346d59745a30586c3270486b41227d0300c59ac3513d000000"},
	{CodecSnappy, goldenProgress, "477902023d3df03c7b226e6578745f6f6666736574223a3132333435363738392c22746f7069635f6964223a227137424a636d466254346d59745a30586c3270486b41227d"},
	{CodecLZ4, goldenProgress, "477902033df02e7b226e6578745f6f6666736574223a3132333435363738392c22746f7069635f6964223a227137424a636d466254346d59745a30586c3270486b41227d"},
	{CodecZstd, goldenProgress, "477902043d28b52ffd0400e901007b226e6578745f6f6666736574223a3132333435363738392c22746f7069635f6964223a227137424a636d466254346d59745a30586c3270486b41227d5e566584"},
	{CodecZlib, goldenProgress, "477902053d789c003d00c2ff7b226e6578745f6f6666736574223a3132333435363738392c22746f7069635f6964223a227137424a636d466254346d59745a30586c3270486b41227d0300631b1384"},
	{CodecNone, goldenIndex, "47790300ca037b22746f706963223a226f7264657273222c22706172746974696f6e223a31372c2272756e73223a5b7b22736f75726365223a3132333435363738392c22746172676574223a3131383733343032312c22636f756e74223a3235347d2c7b22736f75726365223a3132333435373034332c22746172676574223a3131383733343237352c22636f756e74223a3235377d2c7b22736f75726365223a3132333435373330302c22746172676574223a3131383733343533322c22636f756e74223a3134377d2c7b22736f75726365223a3132333435373434382c22746172676574223a3131383733343637392c22636f756e74223a3230307d2c7b22736f75726365223a3132333435373634382c22746172676574223a3131383733343837392c22636f756e74223a3132367d2c7b22736f75726365223a3132333435373737342c22746172676574223a3131383733353030352c22636f756e74223a3233337d2c7b22736f75726365223a3132333435383030372c22746172676574223a3131383733353233382c22636f756e74223a3238397d2c7b22736f75726365223a3132333436303237382c22746172676574223a3131383733353532372c22636f756e74223a3235377d5d7d"},
	{CodecGzip, goldenIndex, "47790301ca031f8b08000000000000ff6ccf3d6e843010c5f1bb4ced623c1f1ee3ab44295604453478654c85b87bba80c67b809fdefb9fd0eb7b9da1406d3f4bdb21c0fbd5fadad7ba418916a01ddb0ee5eb84bd1e6d5ea04462d164790ad05fed77e95062ccc6821403ccf5d83a1452b9823386c2de90e9c3d86818d11b65fa37513e1891ec4db2e9de411c4d1a4d7e9848693466e28c223e7a98079311cd1be27c9b3c799390cc7f5325bb8ddaf57dfd0d0063c681cbca010000"},
	{CodecSnappy, goldenIndex, "47790302ca03ca03f05c7b22746f706963223a226f7264657273222c22706172746974696f6e223a31372c2272756e73223a5b7b22736f75726365223a3132333435363738392c22746172676574223a3131383733343032312c22636f756e74223a3235347d2c3a34000c373034333e3400083237351d340037463400083330303e34000835333215340431344a3400083434383e340008363739153408323030463400003646340000381d3408313236463400083737343a3400083530301dd00433334234000c383030373e34000832333819340438393e34000c363032373e9c000c3535323719341035377d5d7d"},
	{CodecLZ4, goldenIndex, "47790303ca03fb4e7b22746f706963223a226f7264657273222c22706172746974696f6e223a31372c2272756e73223a5b7b22736f75726365223a3132333435363738392c22746172676574223a3131383733343032312c22636f756e74223a3235347d2c34004c3730343334003732373534001e3734003c33303034003535333234002f31343400003c34343834003536373934003e32303068001e363400173834003e31323634003b3737346800463530303568002d3333d0004b383030370401463532333834002c383934004c36303237d00040353532373400b0756e74223a3235377d5d7d"},
	{CodecZstd, goldenIndex, "47790304ca0328b52ffd4400ca00ed0400b2091d198015b8015a4b58555a403438ce8814db929b92a22c5006563a4bc0c2cbb8cd6827e84e64b3cec4355b653e787dcc30e0d3aa7a986b96bc8ca9c666d145f4652469b839344dee3bf4450c2861dd04cd6735f1d089412509b902808e1889bae1433752b18aa584e3e6882204543afa501c695d091520c03307db4034c2b781903934b21b7e8cf358ef0a87b8d4160e717a71678c5b84badb1133de9e1c8a"},
	{CodecZlib, goldenIndex, "47790305ca03789c6ccf3d6e843010c5f1bb4ced623c1f1ee3ab44295604453478654c85b87bba80c67b809fdefb9fd0eb7b9da1406d3f4bdb21c0fbd5fadad7ba418916a01ddb0ee5eb84bd1e6d5ea04462d164790ad05fed77e95062ccc6821403ccf5d83a1452b9823386c2de90e9c3d86818d11b65fa37513e1891ec4db2e9de411c4d1a4d7e9848693466e28c223e7a98079311cd1be27c9b3c799390cc7f5325bb8ddaf57dfd0d008a458228"},
}

// TestFutureMetadata: a record from a future version, with metadata fields
// after the uncompressed size, is read by skipping them.
func TestFutureMetadata(t *testing.T) {
	payload := progressPayload()
	for _, c := range Codecs() {
		rec, _ := Encode(c, payload)
		h, _ := ParseHeader(rec)
		// Rebuild the record with 3 extra metadata bytes.
		meta := rec[h.PayloadOffset-h.MetadataSize : h.PayloadOffset]
		var future []byte
		future = append(future, 0x47, 0x79, byte(len(meta)+3))
		future = append(future, meta...)
		future = append(future, 0xde, 0xad, 0xbe)
		future = append(future, rec[h.PayloadOffset:]...)
		got, gotc, err := Decode(future)
		if err != nil || gotc != c || !bytes.Equal(got, payload) {
			t.Errorf("%s with future metadata: %q, %s, %v", c, got, gotc, err)
		}
	}
	// A metadata size written in more bytes than needed (a non-minimal
	// uvarint) is still a metadata size.
	rec := []byte{0x47, 0x79, 0x82, 0x00, 0x00, 0x02, 'h', 'i'}
	if got, _, err := Decode(rec); err != nil || string(got) != "hi" {
		t.Errorf("non-minimal metadata size: %q, %v", got, err)
	}
}

func mustEncode(t testing.TB, c Codec, payload []byte) []byte {
	t.Helper()
	rec, err := Encode(c, payload)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// withPayload replaces the payload of rec and keeps its header.
func withPayload(t testing.TB, rec, payload []byte) []byte {
	t.Helper()
	h, err := ParseHeader(rec)
	if err != nil {
		t.Fatal(err)
	}
	return append(bytes.Clone(rec[:h.PayloadOffset]), payload...)
}

// withSize rewrites rec's declared uncompressed size.
func withSize(t testing.TB, rec []byte, size uint64) []byte {
	t.Helper()
	h, err := ParseHeader(rec)
	if err != nil {
		t.Fatal(err)
	}
	return envelope(Codec(rec[h.PayloadOffset-h.MetadataSize]), size, rec[h.PayloadOffset:])
}

// envelope builds a record by hand.
func envelope(c Codec, size uint64, payload []byte) []byte {
	meta := append([]byte{byte(c)}, uvarint(size)...)
	rec := append([]byte{0x47, 0x79}, uvarint(uint64(len(meta)))...)
	rec = append(rec, meta...)
	return append(rec, payload...)
}

func uvarint(v uint64) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	if i < 0 {
		i += len(b)
	}
	b[i] ^= 0x55
	return b
}

func TestCorrupt(t *testing.T) {
	small := progressPayload()
	big := indexJSONPayload(1000)
	rec := map[Codec][]byte{}
	bigRec := map[Codec][]byte{}
	for _, c := range Codecs() {
		rec[c] = mustEncode(t, c, small)
		bigRec[c] = mustEncode(t, c, big)
	}
	payloadOf := func(r []byte) []byte {
		h, _ := ParseHeader(r)
		return r[h.PayloadOffset:]
	}
	cases := []struct {
		name   string
		record []byte
		want   string // in the error message
	}{
		// The header.
		{"magic only", []byte{0x47, 0x79}, "no metadata size"},
		{"metadata size overflows", []byte{0x47, 0x79, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "metadata size is not a valid uvarint"},
		{"metadata size unterminated", []byte{0x47, 0x79, 0x80}, "no metadata size"},
		{"metadata size beyond the record", []byte{0x47, 0x79, 0x05, 0x00, 0x00}, "metadata size 5 exceeds the 2 bytes after it"},
		{"huge metadata size", append([]byte{0x47, 0x79}, uvarint(1<<62)...), "exceeds the 0 bytes after it"},
		{"empty metadata", []byte{0x47, 0x79, 0x00, 'x'}, "empty metadata: no codec"},
		{"metadata without size", []byte{0x47, 0x79, 0x01, 0x00, 'x'}, "metadata of 1 bytes ends before the uncompressed size"},
		{"size cut by metadata size", []byte{0x47, 0x79, 0x02, 0x00, 0x80, 0x01}, "ends before the uncompressed size"},
		{"size overflows", append([]byte{0x47, 0x79, 0x0c, 0x00}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), "uncompressed size is not a valid uvarint"},
		{"unknown codec", []byte{0x47, 0x79, 0x02, 0x06, 0x00}, "unknown codec id 6"},
		{"unknown codec 255", []byte{0x47, 0x79, 0x02, 0xff, 0x00}, "unknown codec id 255"},
		{"absurd size", envelope(CodecZstd, 1<<40, payloadOf(rec[CodecZstd])), "uncompressed size 1099511627776 exceeds the limit of 67108864 bytes"},
		{"one past the limit", envelope(CodecNone, MaxUncompressedSize+1, nil), "exceeds the limit"},

		// none.
		{"none shorter than declared", withSize(t, rec[CodecNone], uint64(len(small)+1)), "cannot decompress to the declared"},
		{"none longer than declared", withSize(t, rec[CodecNone], uint64(len(small)-1)), "uncompressed payload is 61 bytes"},
		{"none truncated", rec[CodecNone][:len(rec[CodecNone])-1], "cannot decompress to the declared"},

		// Implausible sizes, rejected before allocating.
		{"gzip size impossible", withSize(t, rec[CodecGzip], MaxUncompressedSize), "cannot decompress to the declared 67108864 bytes"},
		{"zlib size impossible", withSize(t, rec[CodecZlib], MaxUncompressedSize), "cannot decompress to the declared"},
		{"snappy size impossible", withSize(t, rec[CodecSnappy], 1<<20), "cannot decompress to the declared"},
		{"lz4 size impossible", withSize(t, rec[CodecLZ4], 1<<20), "cannot decompress to the declared"},
		{"zstd size impossible", withSize(t, rec[CodecZstd], MaxUncompressedSize), "cannot decompress to the declared"},
		{"empty gzip payload", envelope(CodecGzip, 1, nil), "cannot decompress to the declared 1 bytes"},

		// gzip.
		{"gzip truncated", bigRec[CodecGzip][:len(bigRec[CodecGzip])-5], "gzip payload"},
		{"gzip header only", withPayload(t, rec[CodecGzip], payloadOf(rec[CodecGzip])[:10]), "gzip payload"},
		{"gzip bad magic", withPayload(t, rec[CodecGzip], flip(payloadOf(rec[CodecGzip]), 0)), "invalid header"},
		{"gzip bad crc", flip(bigRec[CodecGzip], -5), "checksum"},
		{"gzip bad isize", flip(bigRec[CodecGzip], -1), "checksum"},
		{"gzip trailing garbage", append(bytes.Clone(bigRec[CodecGzip]), "junk"...), "gzip payload"},
		{"gzip trailing header", append(bytes.Clone(bigRec[CodecGzip]), "0123456789"...), "invalid header"},
		{"gzip declared too small", withSize(t, bigRec[CodecGzip], uint64(len(big)-1)), "decompresses to more bytes than declared"},
		{"gzip declared too large", withSize(t, bigRec[CodecGzip], uint64(len(big)+1)), fmt.Sprintf("decompressed to %d bytes", len(big))},
		{"gzip corrupt stream", flip(bigRec[CodecGzip], len(bigRec[CodecGzip])/2), "gzip payload"},

		// zlib.
		{"zlib truncated", bigRec[CodecZlib][:len(bigRec[CodecZlib])-3], "zlib payload"},
		{"zlib bad header", withPayload(t, rec[CodecZlib], flip(payloadOf(rec[CodecZlib]), 0)), "invalid header"},
		{"zlib bad adler", flip(bigRec[CodecZlib], -1), "checksum"},
		{"zlib trailing bytes", append(bytes.Clone(bigRec[CodecZlib]), 0), "1 bytes after the end of the compressed stream"},
		{"zlib declared too small", withSize(t, bigRec[CodecZlib], uint64(len(big)-1)), "decompresses to more bytes than declared"},
		{"zlib declared too large", withSize(t, bigRec[CodecZlib], uint64(len(big)+1)), "decompressed to"},

		// snappy.
		{"snappy declared differs from block", withSize(t, bigRec[CodecSnappy], uint64(len(big)-1)), fmt.Sprintf("snappy block says %d bytes", len(big))},
		{"snappy truncated", bigRec[CodecSnappy][:len(bigRec[CodecSnappy])-3], "snappy payload"},
		{"snappy bad first tag", withPayload(t, bigRec[CodecSnappy], flip(payloadOf(bigRec[CodecSnappy]), 3)), "snappy payload"},
		{"snappy bad length varint", withPayload(t, rec[CodecSnappy], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), "snappy payload"},
		{"snappy empty payload", envelope(CodecSnappy, 0, nil), "snappy payload"},

		// lz4.
		{"lz4 truncated", bigRec[CodecLZ4][:len(bigRec[CodecLZ4])-3], "lz4 payload"},
		{"lz4 declared too small", withSize(t, bigRec[CodecLZ4], uint64(len(big)-1)), "lz4 payload"},
		{"lz4 declared too large", withSize(t, bigRec[CodecLZ4], uint64(len(big)+1)), "lz4 payload"},
		{"lz4 garbage", withPayload(t, bigRec[CodecLZ4], bytes.Repeat([]byte{0xff}, 100)), "lz4 payload"},

		// zstd.
		{"zstd truncated", bigRec[CodecZstd][:len(bigRec[CodecZstd])-3], "zstd payload"},
		{"zstd bad checksum", flip(bigRec[CodecZstd], -1), "zstd payload"},
		{"zstd bad magic", withPayload(t, rec[CodecZstd], flip(payloadOf(rec[CodecZstd]), 0)), "zstd payload"},
		{"zstd declared too small", withSize(t, bigRec[CodecZstd], uint64(len(big)-1)), "zstd payload"},
		{"zstd declared too large", withSize(t, bigRec[CodecZstd], uint64(len(big)+1)), fmt.Sprintf("decompressed to %d bytes", len(big))},
		{"zstd trailing garbage", append(bytes.Clone(bigRec[CodecZstd]), "junk"...), "zstd payload"},
		{"zstd corrupt", flip(bigRec[CodecZstd], len(bigRec[CodecZstd])/2), "zstd payload"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, c, err := Decode(tc.record)
			if err == nil {
				t.Fatalf("Decode(% x) = %q, %s, no error", tc.record[:min(len(tc.record), 32)], got[:min(len(got), 32)], c)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("error %q does not wrap ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
			if got != nil || c != CodecNone {
				t.Errorf("got %q, %s with the error", got, c)
			}
		})
	}
}

// TestDecodeAllocationBound: a small record declaring a huge payload is
// rejected without allocating anything near the declared size.
func TestDecodeAllocationBound(t *testing.T) {
	var records [][]byte
	for _, c := range Codecs() {
		rec := mustEncode(t, c, progressPayload())
		records = append(records, withSize(t, rec, MaxUncompressedSize))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, rec := range records {
		if _, _, err := Decode(rec); err == nil {
			t.Fatalf("% x decoded", rec)
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Errorf("rejecting %d small records allocated %d bytes", len(records), d)
	}
}

func TestEncodeErrors(t *testing.T) {
	if _, err := Encode(Codec(6), nil); err == nil || !strings.Contains(err.Error(), "undefined codec id 6") {
		t.Errorf("Encode with codec 6: %v", err)
	}
	dst := []byte("keep")
	out, err := Append(dst, CodecZstd, make([]byte, MaxUncompressedSize+1))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("Encode of MaxUncompressedSize+1 bytes: %v", err)
	}
	if string(out) != "keep" {
		t.Errorf("Append returned %q on error", out)
	}
}

func TestMaxSize(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB payload")
	}
	payload := make([]byte, MaxUncompressedSize)
	for _, c := range []Codec{CodecNone, CodecZstd, CodecGzip, CodecSnappy, CodecLZ4, CodecZlib} {
		rec := mustEncode(t, c, payload)
		got, _, err := Decode(rec)
		if err != nil || len(got) != MaxUncompressedSize {
			t.Errorf("%s: %d bytes, %v", c, len(got), err)
		}
	}
}

func TestCodecNames(t *testing.T) {
	// The ids are the storage format: they never change.
	want := map[Codec]string{0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd", 5: "zlib"}
	if cs := Codecs(); len(cs) != len(want) {
		t.Fatalf("Codecs() = %v", cs)
	}
	for c, name := range want {
		if c.String() != name || !c.Valid() {
			t.Errorf("Codec(%d) = %s", c, c)
		}
		for _, n := range []string{name, strings.ToUpper(name)} {
			if got, err := ParseCodec(n); err != nil || got != c {
				t.Errorf("ParseCodec(%q) = %v, %v", n, got, err)
			}
		}
		text, err := c.MarshalText()
		if err != nil || string(text) != name {
			t.Errorf("%d.MarshalText() = %q, %v", c, text, err)
		}
		var u Codec
		if err := u.UnmarshalText([]byte(name)); err != nil || u != c {
			t.Errorf("UnmarshalText(%q) = %v, %v", name, u, err)
		}
	}
	if DefaultCodec != CodecZstd {
		t.Errorf("DefaultCodec = %s", DefaultCodec)
	}
	if s := Codec(9).String(); s != "codec(9)" {
		t.Errorf("Codec(9).String() = %q", s)
	}
	if Codec(6).Valid() {
		t.Error("Codec(6) is valid")
	}
	if _, err := Codec(6).MarshalText(); err == nil {
		t.Error("Codec(6).MarshalText() succeeded")
	}
	for _, bad := range []string{"", "lzma", "zstd ", "snappy-framed"} {
		_, err := ParseCodec(bad)
		if err == nil || !strings.Contains(err.Error(), "valid: none, gzip, snappy, lz4, zstd, zlib") {
			t.Errorf("ParseCodec(%q): %v", bad, err)
		}
	}
	var u Codec = CodecLZ4
	if err := u.UnmarshalText([]byte("brotli")); err == nil || u != CodecLZ4 {
		t.Errorf("UnmarshalText(brotli) = %v, %v", u, err)
	}
}

// TestConcurrent runs every codec from many goroutines at once (for -race,
// and for the pooled compressors).
func TestConcurrent(t *testing.T) {
	payloads := [][]byte{nil, progressPayload(), indexJSONPayload(300), indexBinaryPayload(300)}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 60 {
				c := Codecs()[(g+i)%len(Codecs())]
				p := payloads[i%len(payloads)]
				rec, err := Encode(c, p)
				if err != nil {
					t.Error(err)
					return
				}
				got, gotc, err := Decode(rec)
				if err != nil || gotc != c || !bytes.Equal(got, p) {
					t.Errorf("%s: %v", c, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestOtherWriters: payloads written by other encoders of the same formats
// decode, and snappy's s2 extension (not standard Snappy) is refused.
func TestOtherWriters(t *testing.T) {
	p := progressPayload()
	var gz bytes.Buffer
	for _, part := range [][]byte{p[:20], p[20:]} {
		zw := gzip.NewWriter(&gz)
		zw.Write(part)
		zw.Close()
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	twoFrames := enc.EncodeAll(p[30:], enc.EncodeAll(p[:30], nil))
	var stream bytes.Buffer
	sw, _ := zstd.NewWriter(&stream) // streaming: no content size in the frame
	sw.Write(p)
	sw.Close()
	for name, rec := range map[string][]byte{
		"gzip two members":     envelope(CodecGzip, uint64(len(p)), gz.Bytes()),
		"zstd two frames":      envelope(CodecZstd, uint64(len(p)), twoFrames),
		"zstd no content size": envelope(CodecZstd, uint64(len(p)), stream.Bytes()),
	} {
		got, _, err := Decode(rec)
		if err != nil || !bytes.Equal(got, p) {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	// A literal "ab", then a copy with offset 0: s2's "repeat last offset",
	// which standard Snappy decoders reject.
	s2repeat := envelope(CodecSnappy, 3, []byte{0x06, 0x04, 'a', 'b', 0x01, 0x00})
	if got, _, err := Decode(s2repeat); err == nil {
		t.Errorf("snappy block with an s2 repeat decoded to %q", got)
	}
}
