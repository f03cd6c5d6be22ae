package connector

import (
	"time"

	"github.com/kmirror/kmirror/connector/data"
)

// PartitionStatus is one source partition of a topic as this worker copies
// it: the status page's per-topic view (GET /api/v1/mirrors/{mirror}/topics/{topic}).
type PartitionStatus struct {
	Partition int32 `json:"partition"`
	// Here is false when another worker of the mirror's cluster copies
	// the partition (or none yet): the offsets are then unknown here.
	Here bool `json:"here"`
	// SourceEnd is the source's last stable offset as last read; -1 before
	// the first read.
	SourceEnd int64 `json:"source_end"`
	// CopiedTo is the next source offset the target has not acknowledged:
	// every record below it is on the target. -1 before it is known.
	CopiedTo int64 `json:"copied_to"`
	// TargetEnd is the target offset after the last record copied (from
	// the offset index); -1 when none is in memory.
	TargetEnd int64 `json:"target_end"`
	// Lag is SourceEnd minus CopiedTo; null while the source's end could
	// not be read since LagUnknownSince.
	Lag             *int64    `json:"lag"`
	LagUnknownSince time.Time `json:"lag_unknown_since,omitzero"`
	// Copied counts the records the target acknowledged since this worker
	// took the partition.
	Copied int64 `json:"copied"`
	// State is copying, failed (Error says why) or elsewhere (Here false).
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

// TopicPartitions returns the partitions of the selected source topic,
// false when the mirror has no such topic.
func (m *Mirror) TopicPartitions(source string) ([]PartitionStatus, bool) {
	m.mu.Lock()
	ts, ok := m.topics[source]
	var n int32
	if ok {
		n = ts.partitions
	}
	cp := m.copier
	m.mu.Unlock()
	if !ok {
		return nil, false
	}
	out := make([]PartitionStatus, 0, n)
	for p := range n {
		st := PartitionStatus{Partition: p, SourceEnd: -1, CopiedTo: -1, TargetEnd: -1, State: "elsewhere"}
		var ps *data.PartitionState
		if cp != nil {
			ps = cp.Partition(data.TopicPartition{Topic: source, Partition: p})
		}
		if ps != nil {
			st.Here, st.State = true, "copying"
			acked, end, failed := ps.Status()
			st.CopiedTo, st.SourceEnd = acked, end
			if failed != nil {
				st.State, st.Error = "failed", failed.Error()
			}
			lag, unknownSince := ps.Lag()
			if unknownSince.IsZero() {
				st.Lag = &lag
			}
			st.LagUnknownSince = unknownSince
			st.Copied, _ = ps.CopyStats()
			ps.Mu.Lock()
			if ps.Index != nil {
				if last, ok := ps.Index.Last(); ok {
					st.TargetEnd = last.Dst + last.N
				}
			}
			ps.Mu.Unlock()
		}
		out = append(out, st)
	}
	return out, true
}
