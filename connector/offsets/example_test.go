package offsets_test

import (
	"encoding/hex"
	"fmt"

	"github.com/kmirror/kmirror/connector/offsets"
)

func Example() {
	value := []byte(`{"next_offset":42}`)

	rec, err := offsets.Encode(offsets.CodecNone, value)
	if err != nil {
		panic(err)
	}
	fmt.Print(hex.Dump(rec))

	payload, codec, err := offsets.Decode(rec)
	fmt.Printf("%s %s %v\n", payload, codec, err)

	// A record written before the envelope existed reads back as is.
	payload, codec, err = offsets.Decode(value)
	fmt.Printf("%s %s %v\n", payload, codec, err)

	// Output:
	// 00000000  47 79 02 00 12 7b 22 6e  65 78 74 5f 6f 66 66 73  |Gy...{"next_offs|
	// 00000010  65 74 22 3a 34 32 7d                              |et":42}|
	// {"next_offset":42} none <nil>
	// {"next_offset":42} none <nil>
}

func ExampleParseCodec() {
	c, err := offsets.ParseCodec("zstd")
	fmt.Println(c, uint8(c), err)
	_, err = offsets.ParseCodec("brotli")
	fmt.Println(err)
	// Output:
	// zstd 4 <nil>
	// unknown offset compression codec "brotli" (valid: none, gzip, snappy, lz4, zstd, zlib)
}

func ExampleParseHeader() {
	rec, _ := offsets.Encode(offsets.CodecZstd, []byte(`{"next_offset":42}`))
	h, err := offsets.ParseHeader(rec)
	fmt.Printf("%+v %v\n", h, err)
	// Output:
	// {Legacy:false Codec:zstd UncompressedSize:18 MetadataSize:2 PayloadOffset:5} <nil>
}
