package data

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/kmirror/kmirror/connector/index"
)

// Reading the progress topic decodes a key and a value per record: with
// encoding/json that was 0.7 s of CPU when a worker restarted on the
// progress of 100,000 partitions, most of the restart's own work. The
// keys and values kmirror writes have one exact shape (EncodeProgress,
// IndexChunkKey: encoding/json's output for the structs below, and topic
// names, which Kafka limits to [a-zA-Z0-9._-], need no escaping), so
// these read that shape directly and leave anything else (another field
// order, spacing, escapes, fields a later version adds) to encoding/json:
// what they accept, encoding/json reads the same (TestProgressFastPath).

// decodeProgressKey decodes a progress topic key.
func decodeProgressKey(key []byte) (progressKey, error) {
	if k, ok := fastProgressKey(key); ok {
		return k, nil
	}
	var k progressKey
	if err := json.Unmarshal(key, &k); err != nil {
		return progressKey{}, fmt.Errorf("progress key %q: %w", key, err)
	}
	return k, nil
}

// decodeProgressValue decodes a progress record's value (unwrapped) for
// partition k.
func decodeProgressValue(k progressKey, value []byte) (Position, error) {
	v, ok := fastProgressValue(value)
	if !ok {
		if err := json.Unmarshal(value, &v); err != nil {
			return Position{}, fmt.Errorf("progress value %q for %s/%d: %w", value, k.Topic, k.Partition, err)
		}
	}
	pos := Position{Next: v.NextOffset, TopicID: v.TopicID, SourceEnd: v.SourceEnd}
	if a := v.MM2Adopted; a != nil {
		pos.Floor = &index.Run{Src: a.Source, Dst: a.Target}
	}
	return pos, nil
}

// fastProgressKey reads `{"topic":"T","partition":P}` and
// `{"topic":"T","partition":P,"chunk":C}`.
func fastProgressKey(b []byte) (progressKey, bool) {
	var k progressKey
	b, ok := bytes.CutPrefix(b, []byte(`{"topic":"`))
	if !ok {
		return k, false
	}
	end := bytes.IndexByte(b, '"')
	if end < 0 || !plainName(b[:end]) {
		return k, false
	}
	k.Topic = string(b[:end])
	if b, ok = bytes.CutPrefix(b[end+1:], []byte(`,"partition":`)); !ok {
		return k, false
	}
	p, b, ok := fastInt(b, 32)
	if !ok {
		return k, false
	}
	k.Partition = int32(p)
	if string(b) == "}" {
		return k, true
	}
	if b, ok = bytes.CutPrefix(b, []byte(`,"chunk":`)); !ok {
		return k, false
	}
	c, b, ok := fastInt(b, 64)
	if !ok || string(b) != "}" {
		return k, false
	}
	k.Chunk = &c
	return k, true
}

// fastProgressValue reads `{"next_offset":N}`, optionally with
// `,"topic_id":"ID"` and then `,"source_end":E` before the brace (an MM2
// adoption takes encoding/json).
func fastProgressValue(b []byte) (progressValue, bool) {
	var v progressValue
	b, ok := bytes.CutPrefix(b, []byte(`{"next_offset":`))
	if !ok {
		return v, false
	}
	n, b, ok := fastInt(b, 64)
	if !ok {
		return v, false
	}
	v.NextOffset = n
	if rest, ok := bytes.CutPrefix(b, []byte(`,"topic_id":"`)); ok {
		end := bytes.IndexByte(rest, '"')
		if end < 0 || !plainName(rest[:end]) {
			return v, false
		}
		v.TopicID, b = string(rest[:end]), rest[end+1:]
	}
	if rest, ok := bytes.CutPrefix(b, []byte(`,"source_end":`)); ok {
		e, rest, ok := fastInt(rest, 64)
		if !ok {
			return v, false
		}
		v.SourceEnd, b = e, rest
	}
	return v, string(b) == "}"
}

// fastInt reads a JSON integer that fits bits from the front of b: an
// optional minus and digits, without a leading zero (JSON's own rule).
func fastInt(b []byte, bits int) (int64, []byte, bool) {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == start || (b[start] == '0' && i-start > 1) {
		return 0, b, false
	}
	n, err := strconv.ParseInt(string(b[:i]), 10, bits)
	if err != nil {
		return 0, b, false
	}
	return n, b[i:], true
}

// plainName reports a string that JSON carries as it is: printable ASCII
// without quotes or backslashes (Kafka topic names, topic IDs).
func plainName(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
