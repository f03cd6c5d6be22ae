package data

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/kmirror/kmirror/connector/index"
)

// TestProgressFastPath: what kmirror writes takes the fast path, and the
// fast path reads it as encoding/json does; any other shape is left to
// encoding/json (and read as it reads it).
func TestProgressFastPath(t *testing.T) {
	tp := TopicPartition{Topic: "orders.eu-1_x", Partition: 7}
	key, value := EncodeProgress(tp, Position{Next: 123456789, TopicID: "AbCdEfGhIjKlMnOpQrStUv", SourceEnd: 123456999})
	if _, ok := fastProgressKey(key); !ok {
		t.Fatalf("kmirror's own key %s missed the fast path", key)
	}
	if v, ok := fastProgressValue(value); !ok || v.SourceEnd != 123456999 {
		t.Fatalf("kmirror's own value %s missed the fast path (%+v)", value, v)
	}
	if _, pos, err := DecodeProgress(key, value); err != nil || pos.SourceEnd != 123456999 || pos.Next != 123456789 {
		t.Fatalf("a position with its source end decodes as %+v %v", pos, err)
	}
	if _, ok := fastProgressKey(IndexChunkKey(tp, 42)); !ok {
		t.Fatalf("kmirror's own chunk key %s missed the fast path", IndexChunkKey(tp, 42))
	}
	_, adopted := EncodeProgress(tp, Position{Next: 5, Floor: &index.Run{Src: 1, Dst: 2}})
	gotTP, pos, err := DecodeProgress(key, adopted)
	if err != nil || gotTP != tp || pos.Floor == nil || *pos.Floor != (index.Run{Src: 1, Dst: 2}) {
		t.Fatalf("an adopted position decodes as %v %+v %v", gotTP, pos, err)
	}
	for _, b := range progressKeyShapes {
		var want progressKey
		werr := json.Unmarshal([]byte(b), &want)
		if got, ok := fastProgressKey([]byte(b)); ok && (werr != nil || !reflect.DeepEqual(got, want)) {
			t.Errorf("key %s: fast path read %+v, encoding/json %+v (%v)", b, got, want, werr)
		}
		got, err := decodeProgressKey([]byte(b))
		if (err != nil) != (werr != nil) || (err == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("key %s: decoded %+v (%v), encoding/json %+v (%v)", b, got, err, want, werr)
		}
	}
	for _, b := range progressValueShapes {
		var want progressValue
		werr := json.Unmarshal([]byte(b), &want)
		if got, ok := fastProgressValue([]byte(b)); ok && (werr != nil || !reflect.DeepEqual(got, want)) {
			t.Errorf("value %s: fast path read %+v, encoding/json %+v (%v)", b, got, want, werr)
		}
	}
}

var progressKeyShapes = []string{
	`{"topic":"a","partition":0}`, `{"topic":"a","partition":3,"chunk":12}`, `{"topic":"","partition":0}`,
	`{"topic":"a","partition":-1}`, `{"topic":"a","partition":2147483648}`, `{"topic":"a","partition":01}`,
	`{"topic":"a","partition":-0}`, `{"topic":"a\"b","partition":1}`, `{"topic":"a\\u0041","partition":1}`,
	`{"partition":1,"topic":"a"}`, `{ "topic":"a","partition":1}`, `{"topic":"a","partition":1 }`,
	`{"topic":"a","partition":1,"chunk":-3}`, `{"topic":"a","partition":1,"chunk":9223372036854775808}`,
	`{"topic":"a","partition":1,"chunk":1,"x":2}`, `{"topic":"a","partition":}`, `{"topic":"a","partition":1`,
	`{"topic":"é","partition":1}`, `{"topic":"a","partition":1.5}`, `garbage`, ``,
}

var progressValueShapes = []string{
	`{"next_offset":0}`, `{"next_offset":-1}`, `{"next_offset":42,"topic_id":"xyz"}`, `{"next_offset":42,"topic_id":""}`,
	`{"next_offset":42,"mm2_adopted":{"source":1,"target":2}}`, `{"topic_id":"x","next_offset":1}`,
	`{"next_offset":1e3}`, `{"next_offset":1,"topic_id":"a\"b"}`, `{"next_offset":007}`, `{"next_offset":1} `,
	`{"next_offset":9223372036854775807}`, `{"next_offset":9223372036854775808}`, `{}`,
	`{"next_offset":4,"source_end":9}`, `{"next_offset":4,"topic_id":"x","source_end":9}`, `{"next_offset":4,"source_end":9,"topic_id":"x"}`,
	`{"next_offset":4,"source_end":}`, `{"next_offset":4,"source_end":-0}`, `{"next_offset":4,"topic_id":"x","source_end":9 }`,
}

// FuzzProgressKey: whatever the fast path accepts, encoding/json reads the
// same.
func FuzzProgressKey(f *testing.F) {
	for _, b := range progressKeyShapes {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := fastProgressKey(b)
		if !ok {
			return
		}
		var want progressKey
		if err := json.Unmarshal(b, &want); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("key %q: fast path read %+v, encoding/json %+v (%v)", b, got, want, err)
		}
	})
}
