package offsets

import (
	"bytes"
	"testing"
)

// BenchmarkEncodeDecode encodes and decodes realistic offset records with
// every codec. Besides time it reports:
//
//   - bytes/record: the stored record, envelope included;
//   - x_vs_none: how many times smaller the record is than the same payload
//     stored with CodecNone (below 1: compression made it bigger).
//
// The payloads: one progress value (61 bytes of JSON), one checkpoint
// (110 bytes of JSON), and 1000 offset-index runs as JSON (52 kB) and as
// delta uvarints (5.1 kB); see payloads_test.go.
//
//	go test -run '^$' -bench EncodeDecode -benchmem ./connector/offsets/
func BenchmarkEncodeDecode(b *testing.B) {
	payloads := []struct {
		name    string
		payload []byte
	}{
		{"progress", progressPayload()},
		{"checkpoint", checkpointPayload()},
		{"index-json-1000-runs", indexJSONPayload(1000)},
		{"index-binary-1000-runs", indexBinaryPayload(1000)},
	}
	for _, p := range payloads {
		none, err := Encode(CodecNone, p.payload)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range Codecs() {
			b.Run(p.name+"/"+c.String(), func(b *testing.B) {
				b.SetBytes(int64(len(p.payload)))
				b.ReportAllocs()
				var rec []byte
				for b.Loop() {
					rec, err = Append(rec[:0], c, p.payload)
					if err != nil {
						b.Fatal(err)
					}
					got, _, err := Decode(rec)
					if err != nil || len(got) != len(p.payload) {
						b.Fatal(err)
					}
				}
				if got, _, _ := Decode(rec); !bytes.Equal(got, p.payload) {
					b.Fatal("round trip differs")
				}
				b.ReportMetric(float64(len(rec)), "bytes/record")
				b.ReportMetric(float64(len(none))/float64(len(rec)), "x_vs_none")
			})
		}
	}
}
