package connector

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
	batchOffBase        = 0
	batchOffLength      = 8
	batchOffLeaderEpoch = 12
	batchOffMagic       = 16
	batchOffCRC         = 17
	batchOffAttrs       = 21
	batchOffLastDelta   = 23
	batchOffBaseTS      = 27
	batchOffMaxTS       = 35
	batchOffProducerID  = 43
	batchOffEpoch       = 51
	batchOffSequence    = 53
	batchOffCount       = 57
	batchHeaderLen      = 61

	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// batchHeader is what kmirror reads from a v2 batch's header.
type batchHeader struct {
	base       int64
	attrs      int16
	lastDelta  int32
	maxTS      int64
	producerID int64
	count      int32
	size       int // the whole batch, in bytes
}

func (h batchHeader) codec() int8         { return int8(h.attrs & attrCodecMask) }
func (h batchHeader) control() bool       { return h.attrs&attrControl != 0 }
func (h batchHeader) transactional() bool { return h.attrs&attrTransactional != 0 }
func (h batchHeader) logAppendTime() bool { return h.attrs&attrLogAppendTime != 0 }

var errBatchMalformed = errors.New("malformed record batch")

// splitBatches cuts a fetch response's record bytes into whole batches. A
// broker may end a response with a partial batch (it cuts at the byte
// limit, KIP-74): that tail is not returned, it is fetched again from its
// offset. Anything that is not a v2 batch with a valid CRC is an error.
func splitBatches(b []byte) ([][]byte, []batchHeader, error) {
	var out [][]byte
	var hs []batchHeader
	for len(b) >= batchOffMagic+1 {
		length := int64(int32(binary.BigEndian.Uint32(b[batchOffLength:])))
		if length < batchHeaderLen-12 {
			return nil, nil, fmt.Errorf("%w: length %d", errBatchMalformed, length)
		}
		if b[batchOffMagic] != 2 {
			return nil, nil, fmt.Errorf("%w: magic %d (only v2 batches pass through)", errBatchMalformed, b[batchOffMagic])
		}
		if int64(len(b)) < 12+length {
			break // partial tail
		}
		batch := b[:12+length]
		h, err := parseBatch(batch)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, batch)
		hs = append(hs, h)
		b = b[12+length:]
	}
	return out, hs, nil
}

// parseBatch checks one whole v2 batch (its length field, magic and CRC)
// and returns its header.
func parseBatch(b []byte) (batchHeader, error) {
	if len(b) < batchHeaderLen {
		return batchHeader{}, fmt.Errorf("%w: %d bytes", errBatchMalformed, len(b))
	}
	if l := int64(int32(binary.BigEndian.Uint32(b[batchOffLength:]))); l+12 != int64(len(b)) {
		return batchHeader{}, fmt.Errorf("%w: length field %d for %d bytes", errBatchMalformed, l, len(b))
	}
	if b[batchOffMagic] != 2 {
		return batchHeader{}, fmt.Errorf("%w: magic %d", errBatchMalformed, b[batchOffMagic])
	}
	if crc32.Checksum(b[batchOffAttrs:], crc32c) != binary.BigEndian.Uint32(b[batchOffCRC:]) {
		return batchHeader{}, fmt.Errorf("%w: CRC mismatch", errBatchMalformed)
	}
	h := batchHeader{
		base:       int64(binary.BigEndian.Uint64(b[batchOffBase:])),
		attrs:      int16(binary.BigEndian.Uint16(b[batchOffAttrs:])),
		lastDelta:  int32(binary.BigEndian.Uint32(b[batchOffLastDelta:])),
		maxTS:      int64(binary.BigEndian.Uint64(b[batchOffMaxTS:])),
		producerID: int64(binary.BigEndian.Uint64(b[batchOffProducerID:])),
		count:      int32(binary.BigEndian.Uint32(b[batchOffCount:])),
		size:       len(b),
	}
	if h.count < 0 || h.lastDelta < 0 || h.base < 0 {
		return batchHeader{}, fmt.Errorf("%w: record count %d, last offset delta %d, base offset %d", errBatchMalformed, h.count, h.lastDelta, h.base)
	}
	if h.count == 0 && !h.control() {
		return batchHeader{}, fmt.Errorf("%w: no records", errBatchMalformed)
	}
	if codec := h.codec(); codec > 4 {
		return batchHeader{}, fmt.Errorf("%w: unknown codec %d", errBatchMalformed, codec)
	}
	return h, nil
}

// Why a batch does not pass through (the label of
// kmirror_passthrough_fallbacks_total, and of the log line).
const (
	reasonControl       = "control"     // a transaction marker: not copied at all
	reasonAborted       = "aborted"     // its producer has an aborted transaction in the response
	reasonStraddle      = "straddle"    // it starts before the copy position
	reasonGaps          = "offset_gaps" // compacted: its offsets are not contiguous
	reasonLogAppendTime = "log_append_time"
	reasonMalformed     = "malformed"      // not a v2 batch with a valid CRC (old message format)
	reasonRefused       = "target_refused" // the target refused a pass-through batch
)

// passReason returns why batch h cannot be forwarded as it is, "" if it can.
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
func passReason(h batchHeader, pos int64, abortedPIDs map[int64]bool) string {
	switch {
	case h.control():
		return reasonControl
	case h.transactional() && abortedPIDs[h.producerID]:
		return reasonAborted
	case h.base < pos:
		return reasonStraddle
	case int64(h.count) != int64(h.lastDelta)+1:
		return reasonGaps
	case h.logAppendTime():
		return reasonLogAppendTime
	}
	return ""
}

// rewriteBatch prepares a source batch for an idempotent produce to the
// target, in place: base offset 0 and leader epoch -1 (the broker assigns
// both), the target producer's ID, epoch and the partition's next sequence,
// the transactional bit set when the batch is written inside the slot's
// target transaction (txn, exactly_once) and cleared otherwise (only
// committed source batches get here: the source's bit says nothing about
// the target), and the CRC recomputed. The broker de-duplicates a retried
// batch by producer ID, epoch and sequence range, so a retry must send the
// same values.
func rewriteBatch(b []byte, pid int64, epoch int16, seq int32, txn bool) error {
	if _, err := parseBatchUnchecked(b); err != nil {
		return err
	}
	var old [batchHeaderLen - batchOffAttrs]byte
	copy(old[:], b[batchOffAttrs:batchHeaderLen])
	binary.BigEndian.PutUint64(b[batchOffBase:], 0)
	binary.BigEndian.PutUint32(b[batchOffLeaderEpoch:], 0xffffffff)
	attrs := binary.BigEndian.Uint16(b[batchOffAttrs:]) &^ attrTransactional
	if txn {
		// A transactional batch is held back from read_committed
		// consumers until the coordinator's marker commits it, and
		// dropped if it aborts: without the bit the batch would be
		// visible at once, whatever the transaction did.
		attrs |= attrTransactional
	}
	binary.BigEndian.PutUint16(b[batchOffAttrs:], attrs)
	binary.BigEndian.PutUint64(b[batchOffProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(b[batchOffEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(b[batchOffSequence:], uint32(seq))
	// The CRC covers attributes to the end. Only the header changed, so
	// the new CRC is the old one adjusted by the header's difference
	// (crc32cAdjust): no pass over the records. The batch's CRC was valid
	// (splitBatches checked the source's; kmirror's own rewrites and
	// encodeBatch keep it valid), so the result is the CRC of the bytes.
	tail := len(b) - batchHeaderLen
	var delta [batchHeaderLen - batchOffAttrs]byte
	for i := range delta {
		delta[i] = old[i] ^ b[batchOffAttrs+i]
	}
	crc := binary.BigEndian.Uint32(b[batchOffCRC:])
	binary.BigEndian.PutUint32(b[batchOffCRC:], crc32cAdjust(crc, delta[:], tail))
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
	reg := ^crc32.Update(^uint32(0), crc32c, delta) // the bare register after delta
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

// parseBatchUnchecked checks the structure of a batch kmirror rewrote
// itself (its CRC no longer matches the source's after a first rewrite).
func parseBatchUnchecked(b []byte) (batchHeader, error) {
	if len(b) < batchHeaderLen {
		return batchHeader{}, fmt.Errorf("%w: %d bytes", errBatchMalformed, len(b))
	}
	if l := int64(int32(binary.BigEndian.Uint32(b[batchOffLength:]))); l+12 != int64(len(b)) {
		return batchHeader{}, fmt.Errorf("%w: length field %d for %d bytes", errBatchMalformed, l, len(b))
	}
	if b[batchOffMagic] != 2 {
		return batchHeader{}, fmt.Errorf("%w: magic %d", errBatchMalformed, b[batchOffMagic])
	}
	return batchHeader{count: int32(binary.BigEndian.Uint32(b[batchOffCount:]))}, nil
}

// encodeBatch builds a v2 batch of records (the record path of a
// pass-through partition: records decoded from batches that could not be
// forwarded), compressed with codec (a batch attribute, 0 = none) when
// compressor is not nil. Offset deltas are 0..n-1, so the target maps the
// i-th record to its base offset + i. Timestamps are CreateTime, the
// decoded records' own (for a LogAppendTime source batch, its append time).
func encodeBatch(records []*kgo.Record, codec int8, compressor kgo.Compressor) ([]byte, error) {
	if len(records) == 0 {
		return nil, errors.New("encodeBatch: no records")
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
	b := make([]byte, batchHeaderLen, batchHeaderLen+len(body))
	binary.BigEndian.PutUint32(b[batchOffLength:], uint32(batchHeaderLen-12+len(body)))
	binary.BigEndian.PutUint32(b[batchOffLeaderEpoch:], 0xffffffff)
	b[batchOffMagic] = 2
	binary.BigEndian.PutUint16(b[batchOffAttrs:], attrs)
	binary.BigEndian.PutUint32(b[batchOffLastDelta:], uint32(len(records)-1))
	binary.BigEndian.PutUint64(b[batchOffBaseTS:], uint64(baseTS))
	binary.BigEndian.PutUint64(b[batchOffMaxTS:], uint64(maxTS))
	binary.BigEndian.PutUint64(b[batchOffProducerID:], ^uint64(0))
	binary.BigEndian.PutUint16(b[batchOffEpoch:], 0xffff)
	binary.BigEndian.PutUint32(b[batchOffSequence:], 0xffffffff)
	binary.BigEndian.PutUint32(b[batchOffCount:], uint32(len(records)))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[batchOffCRC:], crc32.Checksum(b[batchOffAttrs:], crc32c))
	return b, nil
}

// batchTime is a batch's max timestamp as a time (for latency).
func batchTime(h batchHeader) time.Time { return time.UnixMilli(h.maxTS) }
