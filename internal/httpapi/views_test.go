package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/internal/history"
	"github.com/kmirror/kmirror/internal/httpapi"
)

// viewSource is a worker with partitions, a sampler fed twice and a
// process description.
type viewSource struct {
	statuses
	sampler *history.Sampler
	started time.Time
}

func (v viewSource) TopicPartitions(mirror, topic string) ([]connector.PartitionStatus, bool) {
	if mirror != "a" || topic != "orders" {
		return nil, false
	}
	return []connector.PartitionStatus{
		{Partition: 0, Here: true, SourceEnd: 120, CopiedTo: 100, TargetEnd: 97, Lag: new(int64(20)), State: "copying"},
		{Partition: 1, SourceEnd: -1, CopiedTo: -1, TargetEnd: -1, State: "elsewhere"},
	}, true
}

func (v viewSource) History() httpapi.History { return v.sampler }

func (v viewSource) Worker() httpapi.WorkerInfo {
	return httpapi.WorkerInfo{Version: "v1.2.3", GoVersion: "go1.26", StartedAt: v.started, Config: "http:\n  listen: :8080\n"}
}

func newViewSource() viewSource {
	src := viewSource{
		statuses: statuses{{Name: "a", Lag: new(int64(20)), Topics: []connector.TopicStatus{
			{SourceTopic: "orders", TargetTopic: "east.orders", Partitions: 2, State: connector.StateMirroring, Lag: new(int64(20))},
		}}},
		sampler: history.NewSampler(history.Options{Interval: 10 * time.Second, TopicEvery: 1}),
		started: time.Now().Add(-90 * time.Minute),
	}
	t0 := time.Now().Add(-20 * time.Second)
	src.sampler.Sample(t0, src.statuses)
	src.statuses[0].Topics[0].Copied = 500
	src.sampler.Sample(t0.Add(10*time.Second), src.statuses)
	return src
}

func decode[T any](t *testing.T, code int, body string, wantCode int) T {
	t.Helper()
	var v T
	if code != wantCode {
		t.Fatalf("status %d, want %d: %s", code, wantCode, body)
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return v
}

// TestTopicDetail: one topic's status, its partitions (offsets on both
// sides, lag, state) and its history; an unknown topic or mirror is a 404
// naming it.
func TestTopicDetail(t *testing.T) {
	t.Parallel()
	h := httpapi.Handler(prometheus.NewRegistry(), newViewSource(), nil)
	code, body := get(t, h, "/api/v1/mirrors/a/topics/orders")
	d := decode[httpapi.TopicDetail](t, code, body, 200)
	if d.Mirror != "a" || d.Topic.TargetTopic != "east.orders" || len(d.Partitions) != 2 {
		t.Fatalf("detail %+v", d)
	}
	if p := d.Partitions[0]; !p.Here || p.SourceEnd != 120 || p.CopiedTo != 100 || p.TargetEnd != 97 || *p.Lag != 20 {
		t.Errorf("partition 0: %+v", p)
	}
	if p := d.Partitions[1]; p.Here || p.State != "elsewhere" || p.Lag != nil {
		t.Errorf("partition 1: %+v", p)
	}
	if d.History == nil || len(d.History.Points) != 1 || d.History.Points[0].RecordsPerSecond != 50 || *d.History.Points[0].Lag != 20 {
		t.Errorf("history %+v, want one point at 50 records/s, lag 20", d.History)
	}
	for _, path := range []string{"/api/v1/mirrors/a/topics/nope", "/api/v1/mirrors/b/topics/orders"} {
		code, body := get(t, h, path)
		if code != 404 || !strings.Contains(body, "has no topic") {
			t.Errorf("%s: %d %s, want a 404 naming the topic", path, code, body)
		}
	}
	// A source without partitions or history still shows the topic.
	h = httpapi.Handler(prometheus.NewRegistry(), newViewSource().statuses, nil)
	code, body = get(t, h, "/api/v1/mirrors/a/topics/orders")
	if d := decode[httpapi.TopicDetail](t, code, body, 200); len(d.Partitions) != 0 || d.History != nil || d.Topic.SourceTopic != "orders" {
		t.Errorf("detail without partitions: %+v", d)
	}
}

// TestHistoryEndpoint: each mirror's samples, one mirror's with ?mirror,
// none from a source that samples nothing.
func TestHistoryEndpoint(t *testing.T) {
	t.Parallel()
	h := httpapi.Handler(prometheus.NewRegistry(), newViewSource(), nil)
	code, body := get(t, h, "/api/v1/history")
	resp := decode[httpapi.HistoryResponse](t, code, body, 200)
	s, ok := resp.Mirrors["a"]
	if !ok || s.IntervalSeconds != 10 || len(s.Points) != 1 || s.Points[0].RecordsPerSecond != 50 {
		t.Errorf("history %+v, want mirror a's one point at 50 records/s", resp)
	}
	code, body = get(t, h, "/api/v1/history?mirror=nobody")
	if resp := decode[httpapi.HistoryResponse](t, code, body, 200); len(resp.Mirrors) != 0 {
		t.Errorf("?mirror=nobody: %+v", resp)
	}
	h = httpapi.Handler(prometheus.NewRegistry(), newViewSource().statuses, nil)
	code, body = get(t, h, "/api/v1/history")
	if resp := decode[httpapi.HistoryResponse](t, code, body, 200); len(resp.Mirrors) != 0 {
		t.Errorf("a source without history: %+v", resp)
	}
}

// TestWorkerEndpoint: the version, the uptime computed from the start and
// the config; a source that does not describe its process is a 501.
func TestWorkerEndpoint(t *testing.T) {
	t.Parallel()
	h := httpapi.Handler(prometheus.NewRegistry(), newViewSource(), nil)
	code, body := get(t, h, "/api/v1/worker")
	w := decode[httpapi.WorkerInfo](t, code, body, 200)
	if w.Version != "v1.2.3" || w.UptimeSeconds < 90*60 || w.UptimeSeconds > 100*60 || !strings.Contains(w.Config, "listen") {
		t.Errorf("worker %+v", w)
	}
	h = httpapi.Handler(prometheus.NewRegistry(), newViewSource().statuses, nil)
	if code, _ := get(t, h, "/api/v1/worker"); code != 501 {
		t.Errorf("a source without a worker: %d, want 501", code)
	}
}
