package connector

import (
	"errors"
	"testing"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
)

// TestTranslationViewReadsOnlyWhenNeeded: the group sync's view answers
// the partitions copied here from their live state without reading the
// progress topic; the first partition copied elsewhere reads it, once,
// and answers from the committed position; a failed read is kept for the
// sync to report, and answers nothing.
func TestTranslationViewReadsOnlyWhenNeeded(t *testing.T) {
	here := data.TopicPartition{Topic: "orders", Partition: 0}
	elsewhere := data.TopicPartition{Topic: "orders", Partition: 1}
	plane := &loadedPlane{copied: map[data.TopicPartition]*data.PartitionState{here: {TP: here, Acked: 7, Index: index.New()}}}
	reads := 0
	view := &storedView{dataPlane: plane, load: func() (data.Loaded, error) {
		reads++
		return data.Loaded{Positions: map[data.TopicPartition]data.Position{elsewhere: {Next: 40}}}, nil
	}}
	if ps := view.Partition(here); ps == nil || ps.Acked != 7 || reads != 0 {
		t.Fatalf("a partition copied here: %+v after %d reads, want its live state and no read", ps, reads)
	}
	for range 2 {
		if ps := view.Partition(elsewhere); ps == nil || ps.Acked != 40 || ps.Committed != 40 {
			t.Fatalf("a partition copied elsewhere: %+v, want its committed position 40", ps)
		}
	}
	if reads != 1 {
		t.Fatalf("%d reads of the progress topic, want 1", reads)
	}

	failed := &storedView{dataPlane: plane, load: func() (data.Loaded, error) { return data.Loaded{}, errors.New("broker down") }}
	if ps := failed.Partition(elsewhere); ps != nil || failed.err == nil {
		t.Fatalf("a failed read: %+v, err %v; want nothing and the error kept", ps, failed.err)
	}
}
