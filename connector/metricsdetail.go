package connector

import (
	"strconv"
	"sync"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/prometheus/client_golang/prometheus"
)

// Per-topic (and, opted in, per-partition) replication series.
//
// They are not kept as counters on the data path, where a label lookup per
// record would cost more than the copy: each scrape reads them from the
// partitions' own state (records acknowledged since start, the lag), so an
// idle worker pays nothing between scrapes, whatever the partition count.

// Values of http.metrics_detail.
const (
	DetailMirror    = "mirror"    // the mirror-wide series only
	DetailTopic     = "topic"     // also records and lag per topic: the default
	DetailPartition = "partition" // also per partition
)

// detailCollector exposes the per-topic and per-partition series of the
// mirrors that run (watch).
type detailCollector struct {
	mu      sync.Mutex // guards detail
	detail  string
	sources byMirror[func() []*data.PartitionState]

	topicRecords, topicLag *prometheus.Desc
	partRecords, partLag   *prometheus.Desc
}

func newDetailCollector() *detailCollector {
	return &detailCollector{
		detail: DetailTopic,
		topicRecords: prometheus.NewDesc("kmirror_topic_records_total",
			"Records of a source topic copied to the target and acknowledged by it since the worker started (http.metrics_detail: topic or partition).",
			[]string{"mirror", "topic"}, nil),
		topicLag: prometheus.NewDesc("kmirror_topic_lag_records",
			"Records committed in a source topic and not yet acknowledged by the target, summed over the partitions copied here (http.metrics_detail: topic or partition).",
			[]string{"mirror", "topic"}, nil),
		partRecords: prometheus.NewDesc("kmirror_partition_records_total",
			"Records of a source partition copied to the target and acknowledged by it since the worker started (http.metrics_detail: partition).",
			[]string{"mirror", "topic", "partition"}, nil),
		partLag: prometheus.NewDesc("kmirror_partition_lag_records",
			"Records committed in a source partition and not yet acknowledged by the target (http.metrics_detail: partition).",
			[]string{"mirror", "topic", "partition"}, nil),
	}
}

// SetDetail sets how finely the replication series are broken down: one
// of DetailMirror, DetailTopic (the default) or DetailPartition.
func (m *Metrics) SetDetail(detail string) {
	if m == nil {
		return
	}
	m.detail.mu.Lock()
	m.detail.detail = detail
	m.detail.mu.Unlock()
}

// watch adds a running mirror's partitions to the detailed series, until
// the returned function is called.
func (m *Metrics) watch(mirror string, partitions func() []*data.PartitionState) (unwatch func()) {
	if m == nil {
		return func() {}
	}
	return m.detail.sources.add(mirror, partitions)
}

func (d *detailCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- d.topicRecords
	ch <- d.topicLag
	ch <- d.partRecords
	ch <- d.partLag
}

func (d *detailCollector) Collect(ch chan<- prometheus.Metric) {
	d.mu.Lock()
	detail := d.detail
	d.mu.Unlock()
	sources := d.sources.snapshot()
	if detail != DetailTopic && detail != DetailPartition {
		return
	}
	// A lag that is unknown has no series (absent, not 0): a topic's
	// when any of its partitions' is.
	type sums struct {
		records int64
		lag     lagSum
	}
	for mirror, partitions := range sources {
		byTopic := make(map[string]*sums)
		for _, ps := range partitions() {
			records, _ := ps.CopyStats()
			l, unknownSince := ps.Lag()
			s := byTopic[ps.TP.Topic]
			if s == nil {
				s = &sums{}
				byTopic[ps.TP.Topic] = s
			}
			s.records += records
			s.lag.add(l, unknownSince)
			if detail == DetailPartition {
				p := strconv.Itoa(int(ps.TP.Partition))
				ch <- prometheus.MustNewConstMetric(d.partRecords, prometheus.CounterValue, float64(records), mirror, ps.TP.Topic, p)
				if unknownSince.IsZero() {
					ch <- prometheus.MustNewConstMetric(d.partLag, prometheus.GaugeValue, float64(l), mirror, ps.TP.Topic, p)
				}
			}
		}
		for topic, s := range byTopic {
			ch <- prometheus.MustNewConstMetric(d.topicRecords, prometheus.CounterValue, float64(s.records), mirror, topic)
			if l := s.lag.known(); l != nil {
				ch <- prometheus.MustNewConstMetric(d.topicLag, prometheus.GaugeValue, float64(*l), mirror, topic)
			}
		}
	}
}
