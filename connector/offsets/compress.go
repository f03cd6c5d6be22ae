package offsets

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// codecImpl is one codec's compressor and decompressor.
type codecImpl struct {
	// compress appends src compressed to dst.
	compress func(dst, src []byte) ([]byte, error)
	// decompress returns src decompressed, which must be exactly size bytes
	// (size <= MaxUncompressedSize, checked by the caller). It allocates
	// the size bytes once and never more.
	decompress func(src []byte, size int) ([]byte, error)
	// maxRatio bounds the uncompressed size the format can produce from
	// n compressed bytes (maxRatio*n): Decode rejects a larger declared
	// size before allocating. The bounds are the formats' own, with margin:
	// a Snappy element of 3 bytes yields at most 64 (21:1), an LZ4 sequence
	// at most ~255 bytes per byte, Deflate at most 1032:1, and a Zstandard
	// RLE block 128 KiB from 4 bytes (32768:1).
	maxRatio int
}

var codecs = [...]codecImpl{
	CodecNone:   {compress: appendNone, decompress: decompressNone, maxRatio: 1},
	CodecGzip:   {compress: compressGzip, decompress: decompressGzip, maxRatio: 1040},
	CodecSnappy: {compress: compressSnappy, decompress: decompressSnappy, maxRatio: 32},
	CodecLZ4:    {compress: compressLZ4, decompress: decompressLZ4, maxRatio: 256},
	CodecZstd:   {compress: compressZstd, decompress: decompressZstd, maxRatio: 32768},
	CodecZlib:   {compress: compressZlib, decompress: decompressZlib, maxRatio: 1040},
}

// --- none

func appendNone(dst, src []byte) ([]byte, error) { return append(dst, src...), nil }

func decompressNone(src []byte, size int) ([]byte, error) {
	if len(src) != size {
		return nil, fmt.Errorf("uncompressed payload is %d bytes", len(src))
	}
	return src, nil
}

// --- gzip and zlib: pooled writers and readers over in-memory buffers.

// appendWriter is an io.Writer appending to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

type gzipEncoder struct {
	w   *gzip.Writer
	out appendWriter
}

var gzipEncoders = sync.Pool{New: func() any {
	e := new(gzipEncoder)
	e.w = gzip.NewWriter(&e.out) // default level: cannot fail
	return e
}}

func compressGzip(dst, src []byte) ([]byte, error) {
	e := gzipEncoders.Get().(*gzipEncoder)
	defer func() { e.out.b = nil; gzipEncoders.Put(e) }()
	e.out.b = dst
	e.w.Reset(&e.out)
	// MTIME 0, "no time stamp" (RFC 1952); the zero time.Time would be
	// written as a meaningless date.
	e.w.ModTime = time.Unix(0, 0)
	if _, err := e.w.Write(src); err != nil {
		return nil, err
	}
	if err := e.w.Close(); err != nil {
		return nil, err
	}
	return e.out.b, nil
}

type zlibEncoder struct {
	w   *zlib.Writer
	out appendWriter
}

var zlibEncoders = sync.Pool{New: func() any {
	e := new(zlibEncoder)
	e.w = zlib.NewWriter(&e.out)
	return e
}}

func compressZlib(dst, src []byte) ([]byte, error) {
	e := zlibEncoders.Get().(*zlibEncoder)
	defer func() { e.out.b = nil; zlibEncoders.Put(e) }()
	e.out.b = dst
	e.w.Reset(&e.out)
	if _, err := e.w.Write(src); err != nil {
		return nil, err
	}
	if err := e.w.Close(); err != nil {
		return nil, err
	}
	return e.out.b, nil
}

type gzipDecoder struct {
	r  gzip.Reader
	in bytes.Reader
}

var gzipDecoders = sync.Pool{New: func() any { return new(gzipDecoder) }}

func decompressGzip(src []byte, size int) ([]byte, error) {
	d := gzipDecoders.Get().(*gzipDecoder)
	defer func() { d.in.Reset(nil); gzipDecoders.Put(d) }()
	d.in.Reset(src)
	if err := d.r.Reset(&d.in); err != nil {
		return nil, err
	}
	return readExactly(&d.r, &d.in, size)
}

type zlibDecoder struct {
	r  io.ReadCloser // also a zlib.Resetter
	in bytes.Reader
}

var zlibDecoders sync.Pool // of *zlibDecoder; zlib can only make a reader from a valid header

func decompressZlib(src []byte, size int) ([]byte, error) {
	d, _ := zlibDecoders.Get().(*zlibDecoder)
	if d == nil {
		d = new(zlibDecoder)
		d.in.Reset(src)
		r, err := zlib.NewReader(&d.in)
		if err != nil {
			return nil, err
		}
		d.r = r
	} else {
		d.in.Reset(src)
		if err := d.r.(zlib.Resetter).Reset(&d.in, nil); err != nil {
			zlibDecoders.Put(d)
			return nil, err
		}
	}
	defer func() { d.in.Reset(nil); zlibDecoders.Put(d) }()
	return readExactly(d.r, &d.in, size)
}

// readExactly reads r, a decompressor over in, to its end: it must yield
// exactly size bytes (read into one allocation of size bytes, never more)
// and consume all of in. Reading to the end is what makes gzip and zlib
// verify their checksums.
func readExactly(r io.Reader, in *bytes.Reader, size int) ([]byte, error) {
	out := make([]byte, size)
	if n, err := io.ReadFull(r, out); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("decompressed to %d bytes", n)
		}
		return nil, err
	}
	var extra [1]byte
	switch n, err := io.ReadFull(r, extra[:]); {
	case n > 0:
		return nil, errors.New("decompresses to more bytes than declared")
	case err != io.EOF:
		return nil, err
	}
	if in.Len() > 0 {
		return nil, fmt.Errorf("%d bytes after the end of the compressed stream", in.Len())
	}
	return out, nil
}

// --- snappy: one block.

func compressSnappy(dst, src []byte) ([]byte, error) {
	n := len(dst)
	bound := snappy.MaxEncodedLen(len(src))
	if bound < 0 {
		return nil, ErrTooLarge
	}
	dst = slices.Grow(dst, bound)
	enc := snappy.Encode(dst[n:n+bound], src)
	return dst[:n+len(enc)], nil
}

func decompressSnappy(src []byte, size int) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n != size {
		return nil, fmt.Errorf("snappy block says %d bytes uncompressed", n)
	}
	// DecodeStrict accepts exactly standard Snappy (not s2's extensions), so
	// whatever kmirror reads, any Snappy library reads too.
	return snappy.DecodeStrict(make([]byte, size), src)
}

// --- lz4: one block.

var lz4Compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}

func compressLZ4(dst, src []byte) ([]byte, error) {
	if len(src) == 0 {
		// The block of nothing: one token with no literals and no match.
		return append(dst, 0), nil
	}
	n := len(dst)
	bound := lz4.CompressBlockBound(len(src))
	dst = slices.Grow(dst, bound)
	c := lz4Compressors.Get().(*lz4.Compressor)
	k, err := c.CompressBlock(src, dst[n:n+bound])
	lz4Compressors.Put(c)
	if err != nil {
		return nil, err
	}
	if k == 0 { // cannot happen with a CompressBlockBound-sized destination
		return nil, errors.New("lz4 block compression produced nothing")
	}
	return dst[:n+k], nil
}

func decompressLZ4(src []byte, size int) ([]byte, error) {
	out := make([]byte, size)
	n, err := lz4.UncompressBlock(src, out)
	if err != nil {
		return nil, err
	}
	if n != size {
		return nil, fmt.Errorf("decompressed to %d bytes", n)
	}
	return out, nil
}

// --- zstd: one package-wide encoder and decoder, made on first use. Both are
// safe for concurrent EncodeAll/DecodeAll and keep zstdConcurrency
// (de)compressors for reuse; more concurrent calls wait for one. Each
// default-level encoder holds about 1.3 MB of match tables, so the pool is
// capped instead of growing with GOMAXPROCS: offset records are a trickle
// next to the data, and four encoders compress hundreds of MB/s of them.

var zstdConcurrency = min(runtime.GOMAXPROCS(0), 4)

var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(zstdConcurrency),
		zstd.WithEncoderCRC(true),
		zstd.WithZeroFrames(true), // an empty payload is still a valid frame
	)
})

var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(zstdConcurrency),
		zstd.WithDecoderMaxMemory(MaxUncompressedSize),
		zstd.WithDecoderMaxWindow(MaxUncompressedSize),
		// Decode into the declared size and never more: a frame that says or
		// turns out to be larger fails without allocating.
		zstd.WithDecodeAllCapLimit(true),
	)
})

func compressZstd(dst, src []byte) ([]byte, error) {
	enc, err := zstdEncoder()
	if err != nil {
		return nil, err
	}
	return enc.EncodeAll(src, dst), nil
}

func decompressZstd(src []byte, size int) ([]byte, error) {
	dec, err := zstdDecoder()
	if err != nil {
		return nil, err
	}
	out, err := dec.DecodeAll(src, make([]byte, 0, size))
	if err != nil {
		return nil, err
	}
	if len(out) != size {
		return nil, fmt.Errorf("decompressed to %d bytes", len(out))
	}
	return out, nil
}
