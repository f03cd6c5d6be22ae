package offsets

import (
	"fmt"
	"strings"
)

// Codec names the compression of an envelope's payload. Its value is the
// codec id stored in the envelope's metadata, so the values are part of the
// storage format and never change. The ids of none, gzip, snappy, lz4 and
// zstd are the ones Kafka uses in a record batch's attributes; zlib, which
// Kafka does not have, is 5. The formats differ from Kafka's where Kafka
// frames the data: kmirror stores snappy and lz4 as bare blocks (see the
// constants).
type Codec uint8

// The codecs. Every one of them can be decoded by any standard library for
// its format: the payload is exactly what the named format specifies,
// with nothing kmirror-specific inside it.
const (
	// CodecNone stores the payload as is.
	CodecNone Codec = 0
	// CodecGzip stores a gzip stream (RFC 1952), default level.
	CodecGzip Codec = 1
	// CodecSnappy stores one Snappy block (the block format, not the
	// framing/stream format): a uvarint of the uncompressed length followed
	// by the compressed elements.
	CodecSnappy Codec = 2
	// CodecLZ4 stores one LZ4 block (the block format, not the LZ4 frame
	// format); its uncompressed size is the one in the envelope's metadata.
	CodecLZ4 Codec = 3
	// CodecZstd stores one Zstandard frame (RFC 8878) with its content size
	// and a checksum, default level.
	CodecZstd Codec = 4
	// CodecZlib stores a zlib stream (RFC 1950), default level.
	CodecZlib Codec = 5
)

// DefaultCodec is the codec kmirror writes offset records with unless told
// otherwise (the default of the offsets.compression setting).
const DefaultCodec = CodecZstd

// codecNames is indexed by codec id.
var codecNames = [...]string{
	CodecNone:   "none",
	CodecGzip:   "gzip",
	CodecSnappy: "snappy",
	CodecLZ4:    "lz4",
	CodecZstd:   "zstd",
	CodecZlib:   "zlib",
}

// Codecs returns every codec, in id order.
func Codecs() []Codec {
	cs := make([]Codec, len(codecNames))
	for i := range cs {
		cs[i] = Codec(i)
	}
	return cs
}

// Valid reports whether c is one of the defined codecs.
func (c Codec) Valid() bool { return int(c) < len(codecNames) }

// String returns the codec's name as ParseCodec accepts it ("none", "gzip",
// "zlib", "snappy", "lz4", "zstd"), or "codec(N)" for an undefined id.
func (c Codec) String() string {
	if !c.Valid() {
		return fmt.Sprintf("codec(%d)", uint8(c))
	}
	return codecNames[c]
}

// ParseCodec returns the codec with the given name: "none", "gzip", "zlib",
// "snappy", "lz4" or "zstd", in any letter case. Any other name is an error
// that lists the valid ones.
func ParseCodec(name string) (Codec, error) {
	for i, n := range codecNames {
		if strings.EqualFold(name, n) {
			return Codec(i), nil
		}
	}
	return 0, fmt.Errorf("unknown offset compression codec %q (valid: %s)", name, strings.Join(codecNames[:], ", "))
}

// MarshalText implements encoding.TextMarshaler with the codec's name, so a
// Codec can sit directly in a configuration struct. An undefined codec is an
// error.
func (c Codec) MarshalText() ([]byte, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("undefined offset compression codec id %d", uint8(c))
	}
	return []byte(codecNames[c]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseCodec.
func (c *Codec) UnmarshalText(text []byte) error {
	v, err := ParseCodec(string(text))
	if err != nil {
		return err
	}
	*c = v
	return nil
}
