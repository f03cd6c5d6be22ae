package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
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
	var restart []string
	ok := httpapi.Handler(prometheus.NewRegistry(), statuses{}, func(context.Context) ([]string, error) { calls++; return restart, nil })
	reloaded := func(want ...string) {
		t.Helper()
		code, body := post(ok)
		var resp httpapi.ReloadResponse
		if err := json.Unmarshal([]byte(body), &resp); err != nil || code != 200 || resp.Status != "reloaded" || resp.RestartRequired == nil || !slices.Equal(resp.RestartRequired, want) {
			t.Fatalf("reload = %d %s (%v), want restart_required %q", code, body, err, want)
		}
	}
	// restart_required is always there, [] when nothing waits for a
	// restart, so a client need not tell null from empty.
	reloaded()
	restart = []string{"clusters.west.bootstrap_servers", "listeners.pager"}
	reloaded(restart...)
	if calls != 2 {
		t.Fatalf("calls = %d, want 2", calls)
	}
	bad := httpapi.Handler(prometheus.NewRegistry(), statuses{}, func(context.Context) ([]string, error) {
		return nil, errors.New("kmirror.yaml:3: mirrors[0].source: unknown cluster")
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

// TestStatusQuery: /api/v1/status filtered by mirror, topic and state, and
// read a page at a time; the pages together hold every matching topic
// once, in source-name order.
func TestStatusQuery(t *testing.T) {
	t.Parallel()
	var a []connector.TopicStatus
	for _, name := range []string{"orders", "clicks", "audit", "payments", "orders-dlq", "zeta"} {
		ts := connector.TopicStatus{SourceTopic: name, TargetTopic: "east." + name, State: connector.StateMirroring}
		if strings.HasPrefix(name, "orders") || name == "zeta" {
			ts.State = connector.StateFailed
		}
		a = append(a, ts)
	}
	src := statuses{
		{Name: "a", Ready: false, Topics: a},
		{Name: "b", Ready: true, Topics: []connector.TopicStatus{{SourceTopic: "orders", TargetTopic: "west.orders", State: connector.StatePending}}},
	}
	h := httpapi.Handler(prometheus.NewRegistry(), src, nil)
	query := func(q string) httpapi.StatusResponse {
		t.Helper()
		code, body := get(t, h, "/api/v1/status"+q)
		var resp httpapi.StatusResponse
		if err := json.Unmarshal([]byte(body), &resp); err != nil || code != 200 {
			t.Fatalf("%s: %d %s %v", q, code, body, err)
		}
		if resp.Ready {
			t.Errorf("%s: ready, want the whole worker's readiness (mirror a is not ready)", q)
		}
		return resp
	}
	names := func(st connector.Status) string {
		var out []string
		for _, t := range st.Topics {
			out = append(out, t.SourceTopic)
		}
		return strings.Join(out, ",")
	}
	for q, want := range map[string]string{
		"":                                   "a:audit,clicks,orders,orders-dlq,payments,zeta(6) b:orders(1)",
		"?mirror=b":                          "b:orders(1)",
		"?mirror=nobody":                     "",
		"?state=failed":                      "a:orders,orders-dlq,zeta(3) b:(0)",
		"?state=pending,failed&mirror=b":     "b:orders(1)",
		"?state=pending&state=failed":        "a:orders,orders-dlq,zeta(3) b:orders(1)",
		"?topic=orders&mirror=a":             "a:orders,orders-dlq(2)",
		"?topic=east.pay":                    "a:payments(1) b:(0)",
		"?mirror=a&limit=2":                  "a:audit,clicks(6)>clicks",
		"?mirror=a&limit=2&after=clicks":     "a:orders,orders-dlq(6)>orders-dlq",
		"?mirror=a&limit=2&after=orders-dlq": "a:payments,zeta(6)",
		"?mirror=a&after=zeta":               "a:(6)",
		"?mirror=a&after=b":                  "a:clicks,orders,orders-dlq,payments,zeta(6)",
		// Pages by number (the status page), failed first.
		"?mirror=a&limit=2&offset=2":              "a:orders,orders-dlq(6)>orders-dlq",
		"?mirror=a&offset=9":                      "a:(6)",
		"?mirror=a&order=failed":                  "a:orders,orders-dlq,zeta,audit,clicks,payments(6)",
		"?mirror=a&order=failed&limit=2&offset=2": "a:zeta,audit(6)",
		"?order=failed&topic=orders":              "a:orders,orders-dlq(2) b:orders(1)",
	} {
		var got []string
		for _, st := range query(q).Mirrors {
			s := fmt.Sprintf("%s:%s(%d)", st.Name, names(st), st.TopicsTotal)
			if st.NextAfter != "" {
				s += ">" + st.NextAfter
			}
			got = append(got, s)
		}
		if g := strings.Join(got, " "); g != want {
			t.Errorf("%s: got %q, want %q", q, g, want)
		}
	}
	// Every page, followed by its next_after, covers the topics once.
	var seen []string
	after := ""
	for range 10 {
		st := query("?mirror=a&state=mirroring,failed&limit=4&after=" + after).Mirrors[0]
		for _, t := range st.Topics {
			seen = append(seen, t.SourceTopic)
		}
		if after = st.NextAfter; after == "" {
			break
		}
	}
	if got := strings.Join(seen, ","); got != "audit,clicks,orders,orders-dlq,payments,zeta" {
		t.Errorf("pages: %s", got)
	}
	// state_counts count the topics matching ?topic in each state,
	// whatever ?state keeps: the page's filter buttons.
	for q, want := range map[string]string{
		"?mirror=a&state=pending": "map[failed:3 mirroring:3]",
		"?mirror=a&topic=orders":  "map[failed:2]",
		"?mirror=b&limit=1":       "map[pending:1]",
	} {
		if got := fmt.Sprint(query(q).Mirrors[0].StateCounts); got != want {
			t.Errorf("%s: state_counts %s, want %s", q, got, want)
		}
	}
	for _, q := range []string{"?limit=0", "?limit=x", "?state=stuck", "?state=failed,", "?offset=-1", "?order=size", "?order=failed&after=x"} {
		code, body := get(t, h, "/api/v1/status"+q)
		if code != 400 || !strings.Contains(body, strings.Split(strings.TrimPrefix(q, "?"), "=")[0]) {
			t.Errorf("%s: %d %s, want a 400 naming the parameter", q, code, body)
		}
	}
}
