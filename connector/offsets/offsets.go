// Package offsets is the envelope of every offset record kmirror stores
// (progress, offset index, checkpoints): an optionally compressed payload
// behind a small header, after the compressed ManagedCursorInfo of Apache
// Pulsar. docs/offsets.md is the reference for the format; in short, an
// envelope is
//
//	offset  size      field
//	0       2         magic 0x47 0x79 (0x4779 big endian)
//	2       1..10     metadata size M, uvarint
//	2+m     M         metadata:
//	                    1 byte   codec id (see Codec)
//	                    1..10    uncompressed payload size, uvarint
//	                    rest     reserved for future fields, skipped by readers
//	2+m+M   the rest  payload, compressed with the codec
//
// where m is the length of the metadata size's uvarint (1 byte for every
// envelope written today).
//
// A record that does not start with the magic is the legacy form, written
// before the envelope existed: the whole record is the uncompressed payload,
// and Decode returns it unchanged. No legacy kmirror record can start with
// the magic: legacy records are JSON objects, which start with '{' (0x7b),
// and 0x47 0x79 ("Gy") cannot start any JSON text. New records are always
// written as envelopes, CodecNone included, so any payload is unambiguous.
//
// Decode never panics on any input. It allocates the payload once, at its
// declared size, after checking that size against MaxUncompressedSize and
// against the most the compressed bytes could expand to in their format, so
// a short corrupt record cannot make it allocate megabytes.
//
// Encode and Decode are safe for concurrent use; they reuse compressors and
// decompressors across calls.
package offsets

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Magic is the first two bytes of every envelope, big endian: 0x47 0x79.
const Magic uint16 = 0x4779

// MaxUncompressedSize is the largest payload an envelope may hold (64 MiB).
// Encode refuses larger payloads; Decode treats a larger declared size as
// corruption, before allocating anything.
const MaxUncompressedSize = 64 << 20

const (
	magic0 = byte(Magic >> 8)
	magic1 = byte(Magic & 0xff)
)

// ErrCorrupt is wrapped by every error Decode and ParseHeader return: the
// record starts with the magic but is not a valid envelope. Test with
// errors.Is; the message says what is wrong.
var ErrCorrupt = errors.New("corrupt offset record")

// ErrTooLarge is wrapped by the error Encode and Append return for a payload
// larger than MaxUncompressedSize.
var ErrTooLarge = errors.New("offset record payload too large")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// Header is what an envelope's header says, read without decompressing the
// payload.
type Header struct {
	// Legacy is true for a record without the magic: the whole record is the
	// uncompressed payload, Codec is CodecNone, UncompressedSize is the
	// record's length and PayloadOffset is 0.
	Legacy bool
	// Codec is the payload's compression.
	Codec Codec
	// UncompressedSize is the payload's size once decompressed, at most
	// MaxUncompressedSize.
	UncompressedSize int
	// MetadataSize is the metadata's length in bytes, including the reserved
	// fields this version does not know (0 for a legacy record).
	MetadataSize int
	// PayloadOffset is where the (compressed) payload starts in the record;
	// it runs to the record's end.
	PayloadOffset int
}

// ParseHeader reads the header of record without decompressing it. A record
// that does not start with the magic (including one shorter than 2 bytes) is
// legacy and is never an error. For an envelope it checks the header itself:
// that the metadata size and the metadata's fields fit in the record, that
// the codec is known and that the uncompressed size is at most
// MaxUncompressedSize. Metadata bytes after the uncompressed size are
// skipped. Errors wrap ErrCorrupt.
func ParseHeader(record []byte) (Header, error) {
	if len(record) < 2 || record[0] != magic0 || record[1] != magic1 {
		return Header{Legacy: true, Codec: CodecNone, UncompressedSize: len(record)}, nil
	}
	rest := record[2:]
	msize, n := binary.Uvarint(rest)
	switch {
	case n == 0:
		return Header{}, corruptf("truncated after the magic: no metadata size")
	case n < 0:
		return Header{}, corruptf("metadata size is not a valid uvarint")
	}
	rest = rest[n:]
	if msize > uint64(len(rest)) {
		return Header{}, corruptf("metadata size %d exceeds the %d bytes after it", msize, len(rest))
	}
	meta := rest[:msize]
	if len(meta) == 0 {
		return Header{}, corruptf("empty metadata: no codec")
	}
	c := Codec(meta[0])
	if !c.Valid() {
		return Header{}, corruptf("unknown codec id %d (known: 0-%d)", meta[0], len(codecNames)-1)
	}
	size, k := binary.Uvarint(meta[1:])
	switch {
	case k == 0:
		return Header{}, corruptf("metadata of %d bytes ends before the uncompressed size", len(meta))
	case k < 0:
		return Header{}, corruptf("uncompressed size is not a valid uvarint")
	}
	if size > MaxUncompressedSize {
		return Header{}, corruptf("uncompressed size %d exceeds the limit of %d bytes", size, MaxUncompressedSize)
	}
	// meta[1+k:] is reserved for future fields: skipped.
	return Header{
		Codec:            c,
		UncompressedSize: int(size),
		MetadataSize:     int(msize),
		PayloadOffset:    2 + n + int(msize),
	}, nil
}

// Encode returns payload in an envelope compressed with c. It is
// Append(nil, c, payload).
func Encode(c Codec, payload []byte) ([]byte, error) {
	return Append(nil, c, payload)
}

// Append appends the envelope of payload compressed with c to dst and
// returns the extended slice. The codec is always c, even when compression
// makes the payload bigger (as it does for payloads of a few dozen bytes);
// choose CodecNone for those if the bytes matter. It is an error if c is not
// a defined codec or payload is larger than MaxUncompressedSize (wrapping
// ErrTooLarge); on error dst is returned unchanged (its spare capacity may
// have been written). payload and dst must not overlap.
func Append(dst []byte, c Codec, payload []byte) ([]byte, error) {
	if !c.Valid() {
		return dst, fmt.Errorf("encode offset record: undefined codec id %d", uint8(c))
	}
	if len(payload) > MaxUncompressedSize {
		return dst, fmt.Errorf("encode offset record: %w: %d bytes, the limit is %d", ErrTooLarge, len(payload), MaxUncompressedSize)
	}
	orig := len(dst)
	var meta [1 + binary.MaxVarintLen64]byte
	meta[0] = byte(c)
	mlen := 1 + binary.PutUvarint(meta[1:], uint64(len(payload)))
	dst = append(dst, magic0, magic1)
	dst = binary.AppendUvarint(dst, uint64(mlen))
	dst = append(dst, meta[:mlen]...)
	out, err := codecs[c].compress(dst, payload)
	if err != nil {
		return dst[:orig], fmt.Errorf("encode offset record with %s: %w", c, err)
	}
	return out, nil
}

// Decode returns the payload of record and the codec it was stored with.
//
// A record that does not start with the magic is legacy: Decode returns the
// record itself and CodecNone (nil or empty records included). For an
// envelope it checks the header as ParseHeader does, then decompresses the
// payload and checks that it is exactly the declared size; for CodecNone the
// returned payload is a subslice of record, as it is for a legacy record, so
// the caller must not modify one without the other. Every error wraps
// ErrCorrupt, and comes with a nil payload and CodecNone.
func Decode(record []byte) (payload []byte, c Codec, err error) {
	h, err := ParseHeader(record)
	if err != nil {
		return nil, CodecNone, err
	}
	if h.Legacy {
		return record, CodecNone, nil
	}
	src := record[h.PayloadOffset:]
	impl := &codecs[h.Codec]
	if uint64(h.UncompressedSize) > uint64(impl.maxRatio)*uint64(len(src)) {
		return nil, CodecNone, corruptf("%s payload of %d bytes cannot decompress to the declared %d bytes", h.Codec, len(src), h.UncompressedSize)
	}
	payload, err = impl.decompress(src, h.UncompressedSize)
	if err != nil {
		return nil, CodecNone, corruptf("%s payload of %d bytes, declared %d bytes uncompressed: %v", h.Codec, len(src), h.UncompressedSize, err)
	}
	if len(payload) != h.UncompressedSize {
		// Every decompressor checks this already; kept so a mismatch can
		// never be returned as a payload.
		return nil, CodecNone, corruptf("%s payload decompressed to %d bytes, declared %d", h.Codec, len(payload), h.UncompressedSize)
	}
	return payload, h.Codec, nil
}
