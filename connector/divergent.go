package connector

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/kmirror/kmirror/connector/fence"
	"github.com/kmirror/kmirror/listeners"

	"github.com/prometheus/client_golang/prometheus"
)

// Divergent tails: a mirror prepared by kmirror failback to copy back
// after a failover finds, per partition, the records of its target (the
// former source) that never reached the former target, the data the
// failover lost, and keeps them in its fence record (failback.go). A
// worker reads them with the fence (awaitUnfenced, readFence) and shows
// them as kmirror_divergent_records, in the status and to the listeners
// (Topic.Divergent). They stay where they are on the target, below what
// is copied back; the next fence record without them (a later failback)
// clears them.

// newDivergentGauge is kmirror_divergent_records. Like the source gap
// counter it has a partition label whatever http.metrics_detail says: a
// series exists only for a partition with a divergent tail.
func newDivergentGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kmirror_divergent_records",
		Help: "Per partition of a mirror copying back after a failover (kmirror failback), its divergent tail: the target's offsets that never reached the former target (the data the failover lost), as the mirror's fence record says.",
	}, []string{"mirror", "topic", "partition"})
}

// DivergentStatus is a partition's divergent tail, in the status.
type DivergentStatus struct {
	Partition int32 `json:"partition"`
	// From..To (exclusive) are the target's offsets the former target
	// never got; Records = To - From.
	From    int64 `json:"from"`
	To      int64 `json:"to"`
	Records int64 `json:"records"`
}

// setReverse keeps what the fence record st says of the mirror's reverse:
// the mirror it copies back for and the divergent tails, and sets
// kmirror_divergent_records to them (the series of tails it no longer
// has are deleted).
func (m *Mirror) setReverse(st fence.State) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.divergent
	m.reverseOf, m.divergent = st.ReverseOf, st.Divergent
	if m.metrics == nil {
		return
	}
	key := func(d fence.Divergent) []string { return []string{d.Topic, strconv.Itoa(int(d.Partition))} }
	for _, d := range old {
		if !slices.ContainsFunc(st.Divergent, func(n fence.Divergent) bool { return n.Topic == d.Topic && n.Partition == d.Partition }) {
			m.metrics.divergent.DeleteLabelValues(key(d)...)
		}
	}
	for _, d := range st.Divergent {
		m.metrics.divergent.WithLabelValues(key(d)...).Set(float64(d.To - d.From))
	}
}

// divergentOf returns the divergent tails of the target topic, by
// partition. The caller holds m.mu.
func (m *Mirror) divergentOf(target string) []DivergentStatus {
	var out []DivergentStatus
	for _, d := range m.divergent {
		if d.Topic == target {
			out = append(out, DivergentStatus{Partition: d.Partition, From: d.From, To: d.To, Records: d.To - d.From})
		}
	}
	slices.SortFunc(out, func(a, b DivergentStatus) int { return cmp.Compare(a.Partition, b.Partition) })
	return out
}

// listenerDivergent is tails as the listeners see them.
func listenerDivergent(tails []DivergentStatus) []listeners.DivergentTail {
	if len(tails) == 0 {
		return nil
	}
	out := make([]listeners.DivergentTail, len(tails))
	for i, d := range tails {
		out[i] = listeners.DivergentTail{Partition: d.Partition, From: d.From, To: d.To}
	}
	return out
}
