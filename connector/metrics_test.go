package connector

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/prometheus/client_golang/prometheus"
)

// TestMirrorMetricsComplete: every series a mirror records to is resolved
// (a field left nil would panic the first time the data path touches it).
func TestMirrorMetricsComplete(t *testing.T) {
	t.Parallel()
	mm := NewMetrics(prometheus.NewRegistry()).forMirror("m")
	v := reflect.ValueOf(mm).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.IsNil() {
			t.Errorf("mirrorMetrics.%s is nil", v.Type().Field(i).Name)
		}
	}
}

// TestDetailSeries: per-topic series by default, per-partition ones when
// asked for, none beyond the mirror's own with "mirror"; read from the
// partitions' state at the scrape. A lag that is unknown has no series
// (audit's partition 1, and so audit's topic lag).
func TestDetailSeries(t *testing.T) {
	t.Parallel()
	parts := []*data.PartitionState{
		{TP: data.TopicPartition{Topic: "orders", Partition: 0}, Acked: 10, End: 15, Copied: 10},
		{TP: data.TopicPartition{Topic: "orders", Partition: 1}, Acked: 4, End: 4, Copied: 3},
		{TP: data.TopicPartition{Topic: "users", Partition: 0}, Acked: -1, End: 7},
		{TP: data.TopicPartition{Topic: "audit", Partition: 0}, Acked: 2, End: 3, Copied: 2},
		{TP: data.TopicPartition{Topic: "audit", Partition: 1}, Acked: 1, End: 1, Copied: 1},
	}
	parts[4].EndUnread(time.Now())
	for _, tc := range []struct {
		detail string
		want   map[string]float64 // series name with its labels -> value
	}{
		{DetailMirror, map[string]float64{}},
		{DetailTopic, map[string]float64{
			`kmirror_topic_records_total{mirror="m",topic="orders"}`: 13,
			`kmirror_topic_lag_records{mirror="m",topic="orders"}`:   5,
			`kmirror_topic_records_total{mirror="m",topic="users"}`:  0,
			`kmirror_topic_lag_records{mirror="m",topic="users"}`:    7,
			`kmirror_topic_records_total{mirror="m",topic="audit"}`:  3,
		}},
		{DetailPartition, map[string]float64{
			`kmirror_topic_records_total{mirror="m",topic="orders"}`:                   13,
			`kmirror_topic_lag_records{mirror="m",topic="orders"}`:                     5,
			`kmirror_topic_records_total{mirror="m",topic="users"}`:                    0,
			`kmirror_topic_lag_records{mirror="m",topic="users"}`:                      7,
			`kmirror_partition_records_total{mirror="m",partition="0",topic="orders"}`: 10,
			`kmirror_partition_lag_records{mirror="m",partition="0",topic="orders"}`:   5,
			`kmirror_partition_records_total{mirror="m",partition="1",topic="orders"}`: 3,
			`kmirror_partition_lag_records{mirror="m",partition="1",topic="orders"}`:   0,
			`kmirror_partition_records_total{mirror="m",partition="0",topic="users"}`:  0,
			`kmirror_partition_lag_records{mirror="m",partition="0",topic="users"}`:    7,
			`kmirror_topic_records_total{mirror="m",topic="audit"}`:                    3,
			`kmirror_partition_records_total{mirror="m",partition="0",topic="audit"}`:  2,
			`kmirror_partition_lag_records{mirror="m",partition="0",topic="audit"}`:    1,
			`kmirror_partition_records_total{mirror="m",partition="1",topic="audit"}`:  1,
		}},
	} {
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg)
		m.SetDetail(tc.detail)
		unwatch := m.watch("m", func() []*data.PartitionState { return parts })
		got := detailSeries(t, reg)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("detail %s: series %v, want %v", tc.detail, got, tc.want)
		}
		unwatch()
		if got := detailSeries(t, reg); len(got) != 0 {
			t.Errorf("detail %s: series %v after the mirror stopped, want none", tc.detail, got)
		}
	}
}

func detailSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]float64)
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "kmirror_topic_") && !strings.HasPrefix(name, "kmirror_partition_") {
			continue
		}
		for _, mt := range mf.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := mt.GetGauge().GetValue() + mt.GetCounter().GetValue()
			out[name+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

// BenchmarkScrape100k: one /metrics scrape of a mirror of 100,000
// partitions (10,000 topics of 10) at the default detail: the per-topic
// series are computed at the scrape, so this is what each scrape costs.
func BenchmarkScrape100k(b *testing.B) {
	var parts []*data.PartitionState
	for i := range 10_000 {
		for p := range int32(10) {
			parts = append(parts, &data.PartitionState{TP: data.TopicPartition{Topic: fmt.Sprintf("topic-%05d", i), Partition: p}, Acked: 100, End: 120, Copied: 100})
		}
	}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.forMirror("m")
	defer m.watch("m", func() []*data.PartitionState { return parts })()
	var series int
	for b.Loop() {
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		series = 0
		for _, mf := range mfs {
			series += len(mf.GetMetric())
		}
	}
	b.ReportMetric(float64(series), "series")
}
