package connector

import (
	"cmp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/listeners"

	"github.com/prometheus/client_golang/prometheus"
)

// Source gaps (mirrors[].on_source_gap): records the source deleted before
// they were copied. The copier finds them (data/gap.go) and hands each to
// onSourceGap, which counts it in kmirror_source_gap_records_total, keeps
// the partition's latest gap for the status and the listeners, and logs it
// (the copier does). Under fail the partition stays failed, its position
// before the gap, until the policy is skip (a reload: SetOnSourceGap) or a
// restart with it.

// newSourceGapCounter is kmirror_source_gap_records_total. Unlike the
// replication series, it has a partition label without
// http.metrics_detail: a series exists only for a partition that lost
// records, so it costs nothing until then, and the alert and the operator
// need the partition.
func newSourceGapCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kmirror_source_gap_records_total",
		Help: "Source offsets deleted at the source (retention, DeleteRecords) before kmirror copied them, per partition: the offset range, so on a compacted or transactional topic not every one was a record.",
	}, []string{"mirror", "topic", "partition"})
}

// SourceGapStatus is a partition's latest source gap, in the status.
type SourceGapStatus struct {
	Partition int32 `json:"partition"`
	// From is the next offset kmirror wanted, To the log start it found
	// (exclusive); Records = To - From, the offsets lost.
	From    int64 `json:"from"`
	To      int64 `json:"to"`
	Records int64 `json:"records"`
	// State is "skipped" (copying went on at To) or "failed" (the
	// partition stopped before From: on_source_gap: fail).
	State string    `json:"state"`
	At    time.Time `json:"at"`
	// Total is every offset this partition lost since the worker started.
	Total int64 `json:"total"`
}

// gapLog is a mirror's source gaps, the latest per partition.
type gapLog struct {
	mu  sync.Mutex
	byP map[data.TopicPartition]*SourceGapStatus
}

// onSourceGap records a gap the copier found. A gap found again (a
// partition held by fail fetched again, or skipped after a reload) counts
// only the offsets it did not count yet.
func (m *Mirror) onSourceGap(g data.SourceGap) {
	m.gaps.mu.Lock()
	if m.gaps.byP == nil {
		m.gaps.byP = make(map[data.TopicPartition]*SourceGapStatus)
	}
	e := m.gaps.byP[g.TP]
	add := g.Records()
	switch {
	case e == nil:
		e = &SourceGapStatus{Partition: g.TP.Partition}
		m.gaps.byP[g.TP] = e
	case g.From >= e.From && g.From < e.To:
		add = max(0, g.To-e.To) // the same gap, perhaps grown
		g.From = e.From
	}
	e.From, e.To, e.Records = g.From, max(g.To, e.To), max(g.To, e.To)-g.From
	e.State, e.At, e.Total = "skipped", time.Now(), e.Total+add
	if g.Failed {
		e.State = "failed"
	}
	m.gaps.mu.Unlock()
	if mm := m.metrics; mm != nil && add > 0 {
		mm.sourceGaps.WithLabelValues(g.TP.Topic, strconv.Itoa(int(g.TP.Partition))).Add(float64(add))
	}
}

// sourceGaps returns topic's partitions' latest gaps, by partition, and
// whether one of them holds its partition (failed).
func (m *Mirror) sourceGaps(topic string) (gaps []SourceGapStatus, failed bool) {
	m.gaps.mu.Lock()
	defer m.gaps.mu.Unlock()
	for tp, e := range m.gaps.byP {
		if tp.Topic == topic {
			gaps = append(gaps, *e)
			failed = failed || e.State == "failed"
		}
	}
	slices.SortFunc(gaps, func(a, b SourceGapStatus) int { return cmp.Compare(a.Partition, b.Partition) })
	return gaps, failed
}

// listenerGaps is gaps as the listeners see them.
func listenerGaps(gaps []SourceGapStatus) []listeners.SourceGap {
	if len(gaps) == 0 {
		return nil
	}
	out := make([]listeners.SourceGap, len(gaps))
	for i, g := range gaps {
		out[i] = listeners.SourceGap{Partition: g.Partition, From: g.From, To: g.To, Failed: g.State == "failed"}
	}
	return out
}

// SetOnSourceGap sets what the mirror's partitions do at a source gap (a
// reload): "skip" lets the partitions stopped before one go on from the
// log start.
func (m *Mirror) SetOnSourceGap(policy string) error {
	p, err := data.ParseGapPolicy(policy)
	if err != nil {
		return err
	}
	if old := m.gapPolicy.Load(); old != p {
		m.gapPolicy.Store(p)
		m.log.Info("on_source_gap reconfigured", "on_source_gap", p.String())
	}
	return nil
}

// gapOpts adds the mirror's source gap policy and recorder to a copier's
// options.
func (m *Mirror) gapOpts(o data.CopierOpts) data.CopierOpts {
	o.GapPolicy, o.OnGap = &m.gapPolicy, m.onSourceGap
	return o
}
