package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/internal/httpapi"
)

// BenchmarkStatusPage: the status page's request, a page of 100 topics
// failed first, from a worker with 10,000.
func BenchmarkStatusPage(b *testing.B) {
	ts := make([]connector.TopicStatus, 10_000)
	for i := range ts {
		ts[i] = connector.TopicStatus{SourceTopic: fmt.Sprintf("events.topic-%05d", i), TargetTopic: fmt.Sprintf("east.events.topic-%05d", i),
			Partitions: 1, State: connector.StateMirroring, Lag: new(int64(0))}
		if i%97 == 0 {
			ts[i].State = connector.StateFailed
		}
	}
	h := httpapi.Handler(prometheus.NewRegistry(), statuses{{Name: "a", Topics: ts}}, nil)
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/status?limit=100&order=failed", nil))
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}
