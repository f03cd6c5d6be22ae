package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/internal/httpapi"
)

type statuses []connector.Status

func (s statuses) Statuses() []connector.Status { return s }

func (s statuses) Topics() []connector.TopicMetadata { return nil }

func (s statuses) Groups() []connector.GroupStatus {
	return []connector.GroupStatus{{Mirror: "a", Group: "billing", State: connector.GroupSynced,
		Partitions: []connector.GroupPartition{{SourceTopic: "orders", TargetTopic: "east.orders", SourceOffset: 10, TargetOffset: 7}}}}
}

type topics []connector.TopicMetadata

func (topics) Statuses() []connector.Status        { return nil }
func (t topics) Topics() []connector.TopicMetadata { return t }
func (topics) Groups() []connector.GroupStatus     { return nil }

func TestTopicsEndpoint(t *testing.T) {
	t.Parallel()
	src := topics{
		{Mirror: "a", SourceTopic: "orders", TargetTopic: "east.orders", Metadata: map[string]string{"team": "payments", "tier": "1"}},
		{Mirror: "a", SourceTopic: "clicks", TargetTopic: "east.clicks", Metadata: map[string]string{"team": "web"}},
		{Mirror: "b", SourceTopic: "orders", TargetTopic: "west.orders", Metadata: map[string]string{"team": "payments"}},
	}
	h := httpapi.Handler(prometheus.NewRegistry(), src, nil)
	for query, want := range map[string][]string{
		"":                                  {"east.orders", "east.clicks", "west.orders"},
		"?label=team=payments":              {"east.orders", "west.orders"},
		"?label=team=payments&label=tier=1": {"east.orders"},
		"?label=tier":                       {"east.orders"},
		"?mirror=b":                         {"west.orders"},
		"?label=team=nobody":                {},
	} {
		code, body := get(t, h, "/api/v1/topics"+query)
		var resp httpapi.TopicsResponse
		if err := json.Unmarshal([]byte(body), &resp); err != nil || code != 200 {
			t.Fatalf("%s: %d %s %v", query, code, body, err)
		}
		got := []string{}
		for _, tm := range resp.Topics {
			got = append(got, tm.TargetTopic)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: got %v, want %v", query, got, want)
		}
	}
	if code, _ := get(t, h, "/api/v1/topics?label==x"); code != 400 {
		t.Errorf("a label with no key must be a 400, got %d", code)
	}
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

func TestEndpoints(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "kmirror_test_total", Help: "test"}))
	ready := connector.Status{Name: "a", Ready: true, LastPassAt: time.Now(), Topics: []connector.TopicStatus{
		{SourceTopic: "orders", TargetTopic: "east.orders", Partitions: 3, State: connector.StateMirroring},
	}}
	failing := connector.Status{Name: "b", LastPassAt: time.Now(), Topics: []connector.TopicStatus{
		{SourceTopic: "bad", TargetTopic: "east.bad", State: connector.StateFailed, Error: "INVALID_CONFIG"},
	}}

	h := httpapi.Handler(reg, statuses{ready}, nil)
	code, body := get(t, h, "/api/v1/groups")
	var groups httpapi.GroupsResponse
	if err := json.Unmarshal([]byte(body), &groups); err != nil || code != 200 || len(groups.Groups) != 1 || groups.Groups[0].Partitions[0].TargetOffset != 7 {
		t.Fatalf("/api/v1/groups = %d %s", code, body)
	}
	if _, body := get(t, h, "/api/v1/groups?mirror=other"); !strings.Contains(body, `"groups": []`) {
		t.Fatalf("/api/v1/groups?mirror=other = %s", body)
	}
	if code, body := get(t, h, "/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if code, _ := get(t, h, "/readyz"); code != 200 {
		t.Fatalf("/readyz = %d, want 200", code)
	}
	code, body = get(t, h, "/api/v1/status")
	var resp httpapi.StatusResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil || code != 200 {
		t.Fatalf("/api/v1/status = %d %s: %v", code, body, err)
	}
	if !resp.Ready || len(resp.Mirrors) != 1 || resp.Mirrors[0].Topics[0].TargetTopic != "east.orders" {
		t.Fatalf("status = %+v", resp)
	}
	if code, body := get(t, h, "/metrics"); code != 200 || !strings.Contains(body, "kmirror_test_total 0") {
		t.Fatalf("/metrics = %d %q", code, body)
	}

	h = httpapi.Handler(reg, statuses{ready, failing}, nil)
	code, body = get(t, h, "/readyz")
	if code != 503 || body != "not ready: mirror b: topic bad is failed (INVALID_CONFIG)\n" {
		t.Fatalf("/readyz = %d %q", code, body)
	}
	_, body = get(t, h, "/api/v1/status")
	if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Ready {
		t.Fatalf("status with a failed mirror: ready=%v err=%v", resp.Ready, err)
	}
	if code, _ := get(t, httpapi.Handler(reg, statuses{{Name: "c"}}, nil), "/readyz"); code != 503 {
		t.Fatalf("a mirror that has not run a pass must not be ready, got %d", code)
	}
}

func TestReloadEndpoint(t *testing.T) {
	t.Parallel()
	post := func(h http.Handler) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/reload", nil))
		return rec.Code, rec.Body.String()
	}
	calls := 0
	ok := httpapi.Handler(prometheus.NewRegistry(), statuses{}, func(context.Context) error { calls++; return nil })
	if code, body := post(ok); code != 200 || !strings.Contains(body, "reloaded") || calls != 1 {
		t.Fatalf("reload = %d %s (calls %d)", code, body, calls)
	}
	bad := httpapi.Handler(prometheus.NewRegistry(), statuses{}, func(context.Context) error {
		return errors.New("kmirror.yaml:3: mirrors[0].source: unknown cluster")
	})
	if code, body := post(bad); code != 400 || !strings.Contains(body, "kmirror.yaml:3") {
		t.Fatalf("rejected reload = %d %s", code, body)
	}
	if code, _ := post(httpapi.Handler(prometheus.NewRegistry(), statuses{}, nil)); code != 501 {
		t.Fatalf("reload without a reloader = %d", code)
	}
	if code, _ := get(t, ok, "/api/v1/reload"); code != 405 {
		t.Fatalf("GET /api/v1/reload = %d, want 405", code)
	}
}

// withClusters is a StatusSource that watches its clusters' brokers.
type withClusters struct{ statuses }

func (withClusters) Clusters() []httpapi.ClusterStatus {
	return []httpapi.ClusterStatus{{Alias: "west", BootstrapServers: []string{"10.0.0.1:9092"},
		Failing: []httpapi.BrokerFault{{Address: "10.0.0.1:9092", Error: "i/o timeout", Check: "accepts connections but did not answer", Failures: 2}}}}
}

// /api/v1/status lists the clusters with their failing brokers, and a
// mirror without a pass yet has no last_pass_at (not 0001-01-01).
func TestStatusClusters(t *testing.T) {
	t.Parallel()
	src := withClusters{statuses{{Name: "a", LastPassError: "starting: cluster west (10.0.0.1:9092): i/o timeout"}}}
	_, body := get(t, httpapi.Handler(prometheus.NewRegistry(), src, nil), "/api/v1/status")
	if strings.Contains(body, "last_pass_at") {
		t.Errorf("last_pass_at before the first pass: %s", body)
	}
	var resp httpapi.StatusResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Clusters) != 1 || len(resp.Clusters[0].Failing) != 1 || resp.Clusters[0].Failing[0].Address != "10.0.0.1:9092" || resp.Ready {
		t.Errorf("status = %s", body)
	}
	_, body = get(t, httpapi.Handler(prometheus.NewRegistry(), statuses{{Name: "a", LastPassAt: time.Now()}}, nil), "/api/v1/status")
	if !strings.Contains(body, `"last_pass_at"`) || strings.Contains(body, `"clusters"`) {
		t.Errorf("status without ClusterSource = %s", body)
	}
}
