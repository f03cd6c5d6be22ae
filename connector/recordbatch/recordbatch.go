// Package recordbatch reads and rewrites Kafka record batches (magic v2)
// without decompressing them: what the batch path needs to forward a
// source batch to the target as it is.
package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Record batches (magic v2), read and rewritten without decompressing them.
//
// Layout of a v2 batch (big endian; KIP-98, DefaultRecordBatch.java):
//
//	 0  int64  base offset          assigned by the broker on append
//	 8  int32  length               bytes after this field
//	12  int32  partition leader epoch  set by the broker on append
//	16  int8   magic                2
//	17  uint32 crc                  CRC-32C of bytes 21..end
//	21  int16  attributes           bits 0-2 codec, 3 LogAppendTime, 4 transactional, 5 control
//	23  int32  last offset delta
//	27  int64  base timestamp
//	35  int64  max timestamp
//	43  int64  producer ID
//	51  int16  producer epoch
//	53  int32  base sequence
//	57  int32  record count
//	61         records (compressed as one block when the codec is not none)
//
// The CRC covers only attributes..end, so base offset, length and leader
// epoch can be changed without recomputing it; the producer fields are
// covered, so setting them means a new CRC (cheap: CRC-32C is hardware
// accelerated, and it never needs the payload decompressed).
const (
	OffBase        = 0
	OffLength      = 8
	OffLeaderEpoch = 12
	OffMagic       = 16
	OffCRC         = 17
	OffAttrs       = 21
	OffLastDelta   = 23
	OffBaseTS      = 27
	OffMaxTS       = 35
	OffProducerID  = 43
	OffEpoch       = 51
	OffSequence    = 53
	OffCount       = 57
	HeaderLen      = 61

	AttrCodecMask     = 0x07
	AttrLogAppendTime = 0x08
	AttrTransactional = 0x10
	AttrControl       = 0x20
)

var CRCTable = crc32.MakeTable(crc32.Castagnoli)

// Header is what kmirror reads from a v2 batch's header.
type Header struct {
	Base       int64
	Attrs      int16
	LastDelta  int32
	MaxTS      int64
	ProducerID int64
	Count      int32
	Size       int // the whole batch, in bytes
}

func (h Header) Codec() int8         { return int8(h.Attrs & AttrCodecMask) }
func (h Header) Control() bool       { return h.Attrs&AttrControl != 0 }
func (h Header) Transactional() bool { return h.Attrs&AttrTransactional != 0 }
func (h Header) LogAppendTime() bool { return h.Attrs&AttrLogAppendTime != 0 }

var ErrMalformed = errors.New("malformed record batch")

// Split cuts a fetch response's record bytes into whole batches. A
// broker may end a response with a partial batch (it cuts at the byte
// limit, KIP-74): that tail is not returned, it is fetched again from its
// offset. Anything that is not a v2 batch with a valid CRC is an error.
func Split(b []byte) ([][]byte, []Header, error) {
	var out [][]byte
	var hs []Header
	for len(b) >= OffMagic+1 {
		length := int64(int32(binary.BigEndian.Uint32(b[OffLength:])))
		if length < HeaderLen-12 {
			return nil, nil, fmt.Errorf("%w: length %d", ErrMalformed, length)
		}
		if b[OffMagic] != 2 {
			return nil, nil, fmt.Errorf("%w: magic %d (only v2 batches pass through)", ErrMalformed, b[OffMagic])
		}
		if int64(len(b)) < 12+length {
			break // partial tail
		}
		batch := b[:12+length]
		h, err := Parse(batch)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, batch)
		hs = append(hs, h)
		b = b[12+length:]
	}
	return out, hs, nil
}

// Parse checks one whole v2 batch (its length field, magic and CRC)
// and returns its header.
func Parse(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	if l := int64(int32(binary.BigEndian.Uint32(b[OffLength:]))); l+12 != int64(len(b)) {
		return Header{}, fmt.Errorf("%w: length field %d for %d bytes", ErrMalformed, l, len(b))
	}
	if b[OffMagic] != 2 {
		return Header{}, fmt.Errorf("%w: magic %d", ErrMalformed, b[OffMagic])
	}
	if crc32.Checksum(b[OffAttrs:], CRCTable) != binary.BigEndian.Uint32(b[OffCRC:]) {
		return Header{}, fmt.Errorf("%w: CRC mismatch", ErrMalformed)
	}
	h := Header{
		Base:       int64(binary.BigEndian.Uint64(b[OffBase:])),
		Attrs:      int16(binary.BigEndian.Uint16(b[OffAttrs:])),
		LastDelta:  int32(binary.BigEndian.Uint32(b[OffLastDelta:])),
		MaxTS:      int64(binary.BigEndian.Uint64(b[OffMaxTS:])),
		ProducerID: int64(binary.BigEndian.Uint64(b[OffProducerID:])),
		Count:      int32(binary.BigEndian.Uint32(b[OffCount:])),
		Size:       len(b),
	}
	if h.Count < 0 || h.LastDelta < 0 || h.Base < 0 {
		return Header{}, fmt.Errorf("%w: record count %d, last offset delta %d, base offset %d", ErrMalformed, h.Count, h.LastDelta, h.Base)
	}
	if h.Count == 0 && !h.Control() {
		return Header{}, fmt.Errorf("%w: no records", ErrMalformed)
	}
	if codec := h.Codec(); codec > 4 {
		return Header{}, fmt.Errorf("%w: unknown codec %d", ErrMalformed, codec)
	}
	return h, nil
}

// Why a batch does not pass through (the label of
// kmirror_passthrough_fallbacks_total, and of the log line).
const (
	ReasonControl       = "control"     // a transaction marker: not copied at all
	ReasonAborted       = "aborted"     // its producer has an aborted transaction in the response
	ReasonStraddle      = "straddle"    // it starts before the copy position
	ReasonGaps          = "offset_gaps" // compacted: its offsets are not contiguous
	ReasonLogAppendTime = "log_append_time"
	ReasonMalformed     = "malformed"      // not a v2 batch with a valid CRC (old message format)
	ReasonRefused       = "target_refused" // the target refused a pass-through batch
)

// PassReason returns why batch h cannot be forwarded as it is, "" if it can.
// pos is the partition's copy position; abortedPIDs the producers the fetch
// response lists with aborted transactions.
//
// The rules, and what the target broker does that makes them necessary
// (Kafka's LogValidator, 4.x):
//   - a control batch is a transaction marker of the source: the target
//     writes its own markers (or none), so it is never copied;
//   - under read_committed the response lists aborted transactions by
//     producer ID and first offset; any transactional batch of such a
//     producer takes the record path, where franz-go's parser drops the
//     aborted ones (keeping it per batch would need the markers' order);
//   - a batch whose base is below pos holds records already copied;
//   - a compacted source batch keeps its last offset delta but loses
//     records. The target broker refuses a v2 batch whose record count is
//     not lastOffsetDelta+1 (LogValidator.validateBatch: "Inconsistent
//     batch offset range", INVALID_RECORD), and it keeps a compressed
//     batch as it is only when the record offsets inside are exactly
//     0..n-1 (validateMessagesAndAssignOffsetsCompressed compares each
//     with a counter and otherwise rebuilds the batch, renumbering).
//     count == lastDelta+1 tells a contiguous batch from a compacted one
//     without decompressing it (the source broker checked the deltas when
//     it appended the batch), so the refusal never has to happen;
//   - a LogAppendTime batch carries the source broker's append time only
//     in its max timestamp; a target topic with CreateTime would take the
//     records' own (producer) timestamps instead, one with LogAppendTime
//     its own clock: neither keeps the source's timestamps.
func PassReason(h Header, pos int64, abortedPIDs map[int64]bool) string {
	switch {
	case h.Control():
		return ReasonControl
	case h.Transactional() && abortedPIDs[h.ProducerID]:
		return ReasonAborted
	case h.Base < pos:
		return ReasonStraddle
	case int64(h.Count) != int64(h.LastDelta)+1:
		return ReasonGaps
	case h.LogAppendTime():
		return ReasonLogAppendTime
	}
	return ""
}

// Rewrite prepares a source batch for an idempotent produce to the
// target, in place: base offset 0 and leader epoch -1 (the broker assigns
// both), the target producer's ID, epoch and the partition's next sequence,
// the transactional bit set when the batch is written inside the slot's
// target transaction (txn, exactly_once) and cleared otherwise (only
// committed source batches get here: the source's bit says nothing about
// the target), and the CRC recomputed. The broker de-duplicates a retried
// batch by producer ID, epoch and sequence range, so a retry must send the
// same values.
func Rewrite(b []byte, pid int64, epoch int16, seq int32, txn bool) error {
	if _, err := parseUnchecked(b); err != nil {
		return err
	}
	var old [HeaderLen - OffAttrs]byte
	copy(old[:], b[OffAttrs:HeaderLen])
	binary.BigEndian.PutUint64(b[OffBase:], 0)
	binary.BigEndian.PutUint32(b[OffLeaderEpoch:], 0xffffffff)
	attrs := binary.BigEndian.Uint16(b[OffAttrs:]) &^ AttrTransactional
	if txn {
		// A transactional batch is held back from read_committed
		// consumers until the coordinator's marker commits it, and
		// dropped if it aborts: without the bit the batch would be
		// visible at once, whatever the transaction did.
		attrs |= AttrTransactional
	}
	binary.BigEndian.PutUint16(b[OffAttrs:], attrs)
	binary.BigEndian.PutUint64(b[OffProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(b[OffEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(b[OffSequence:], uint32(seq))
	// The CRC covers attributes to the end. Only the header changed, so
	// the new CRC is the old one adjusted by the header's difference
	// (crc32cAdjust): no pass over the records. The batch's CRC was valid
	// (Split checked the source's; kmirror's own rewrites and
	// Encode keep it valid), so the result is the CRC of the bytes.
	tail := len(b) - HeaderLen
	var delta [HeaderLen - OffAttrs]byte
	for i := range delta {
		delta[i] = old[i] ^ b[OffAttrs+i]
	}
	crc := binary.BigEndian.Uint32(b[OffCRC:])
	binary.BigEndian.PutUint32(b[OffCRC:], crc32cAdjust(crc, delta[:], tail))
	return nil
}

// crc32cAdjust returns the CRC-32C of a message that differs from one with
// CRC crc only in its first len(delta) bytes, by delta (XORed), followed by
// tail unchanged bytes. CRCs are affine: for messages x and y of one
// length, crc(x) ^ crc(y) is the bare register (no initial or final
// inversion) after x^y, which here is delta followed by tail zero bytes;
// the zeros are applied as a matrix over GF(2), as zlib's crc32_combine
// does, in time logarithmic in tail.
func crc32cAdjust(crc uint32, delta []byte, tail int) uint32 {
	reg := ^crc32.Update(^uint32(0), CRCTable, delta) // the bare register after delta
	for k := 0; tail > 0; k, tail = k+1, tail>>1 {
		if tail&1 != 0 {
			reg = gf2Times(&crc32cZeros[k], reg)
		}
	}
	return crc ^ reg
}

// crc32cZeros[k] is the operator that moves a bare CRC-32C register over
// 2^k zero bytes.
var crc32cZeros = func() (ops [31][32]uint32) {
	// One zero bit: shift right, folding in the (reflected) polynomial.
	var bit [32]uint32
	bit[0] = crc32.Castagnoli
	for i := 1; i < 32; i++ {
		bit[i] = 1 << (i - 1)
	}
	op := bit
	for range 3 { // 1 bit -> 8 bits: square three times
		op = gf2Square(&op)
	}
	for k := range ops {
		ops[k] = op
		op = gf2Square(&op)
	}
	return ops
}()

func gf2Times(m *[32]uint32, v uint32) uint32 {
	var sum uint32
	for i := 0; v != 0; i, v = i+1, v>>1 {
		if v&1 != 0 {
			sum ^= m[i]
		}
	}
	return sum
}

func gf2Square(m *[32]uint32) (sq [32]uint32) {
	for i := range sq {
		sq[i] = gf2Times(m, m[i])
	}
	return sq
}

// parseUnchecked checks the structure of a batch kmirror rewrote
// itself (its CRC no longer matches the source's after a first rewrite).
func parseUnchecked(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	if l := int64(int32(binary.BigEndian.Uint32(b[OffLength:]))); l+12 != int64(len(b)) {
		return Header{}, fmt.Errorf("%w: length field %d for %d bytes", ErrMalformed, l, len(b))
	}
	if b[OffMagic] != 2 {
		return Header{}, fmt.Errorf("%w: magic %d", ErrMalformed, b[OffMagic])
	}
	return Header{Count: int32(binary.BigEndian.Uint32(b[OffCount:]))}, nil
}

// Encode builds a v2 batch of records (the record path of a
// pass-through partition: records decoded from batches that could not be
// forwarded), compressed with codec (a batch attribute, 0 = none) when
// compressor is not nil. Offset deltas are 0..n-1, so the target maps the
// i-th record to its base offset + i. Timestamps are CreateTime, the
// decoded records' own (for a LogAppendTime source batch, its append time).
func Encode(records []*kgo.Record, codec int8, compressor kgo.Compressor) ([]byte, error) {
	if len(records) == 0 {
		return nil, errors.New("Encode: no records")
	}
	baseTS := records[0].Timestamp.UnixMilli()
	maxTS := baseTS
	var body []byte
	var rec []byte
	for i, r := range records {
		ts := r.Timestamp.UnixMilli()
		maxTS = max(maxTS, ts)
		rec = rec[:0]
		rec = append(rec, 0) // attributes
		rec = kbin.AppendVarlong(rec, ts-baseTS)
		rec = kbin.AppendVarint(rec, int32(i))
		rec = kbin.AppendVarintBytes(rec, r.Key)
		rec = kbin.AppendVarintBytes(rec, r.Value)
		rec = kbin.AppendVarint(rec, int32(len(r.Headers)))
		for _, h := range r.Headers {
			rec = kbin.AppendVarintString(rec, h.Key)
			rec = kbin.AppendVarintBytes(rec, h.Value)
		}
		body = kbin.AppendVarint(body, int32(len(rec)))
		body = append(body, rec...)
	}
	attrs := uint16(0)
	if compressor != nil && codec != 0 {
		var buf bytes.Buffer
		out, used := compressor.Compress(&buf, body)
		if out != nil && int8(used) == codec {
			body = append([]byte(nil), out...)
			attrs = uint16(codec)
		}
	}
	b := make([]byte, HeaderLen, HeaderLen+len(body))
	binary.BigEndian.PutUint32(b[OffLength:], uint32(HeaderLen-12+len(body)))
	binary.BigEndian.PutUint32(b[OffLeaderEpoch:], 0xffffffff)
	b[OffMagic] = 2
	binary.BigEndian.PutUint16(b[OffAttrs:], attrs)
	binary.BigEndian.PutUint32(b[OffLastDelta:], uint32(len(records)-1))
	binary.BigEndian.PutUint64(b[OffBaseTS:], uint64(baseTS))
	binary.BigEndian.PutUint64(b[OffMaxTS:], uint64(maxTS))
	binary.BigEndian.PutUint64(b[OffProducerID:], ^uint64(0))
	binary.BigEndian.PutUint16(b[OffEpoch:], 0xffff)
	binary.BigEndian.PutUint32(b[OffSequence:], 0xffffffff)
	binary.BigEndian.PutUint32(b[OffCount:], uint32(len(records)))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[OffCRC:], crc32.Checksum(b[OffAttrs:], CRCTable))
	return b, nil
}

// batchTime is a batch's max timestamp as a time (for latency).
// Time is the batch's max timestamp.
func (h Header) Time() time.Time { return time.UnixMilli(h.MaxTS) }

// Compressors returns franz-go's compressor for each codec a batch can
// carry (1 gzip, 2 snappy, 3 lz4, 4 zstd), for Encode.
func Compressors() map[int8]kgo.Compressor {
	out := make(map[int8]kgo.Compressor)
	for codec, cc := range map[int8]kgo.CompressionCodec{1: kgo.GzipCompression(), 2: kgo.SnappyCompression(), 3: kgo.Lz4Compression(), 4: kgo.ZstdCompression()} {
		if comp, err := kgo.DefaultCompressor(cc); err == nil {
			out[codec] = comp
		}
	}
	return out
}
