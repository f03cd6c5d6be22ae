package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/internal/httpapi"
)

type withChanges struct {
	statuses
	changes []httpapi.Change
}

func (w withChanges) Changes() []httpapi.Change { return w.changes }

func TestStatusPage(t *testing.T) {
	t.Parallel()
	h := httpapi.Protect(httpapi.Handler(prometheus.NewRegistry(), readyStatus(), nil), httpapi.Security{Token: token})
	// The page's files hold no data: a browser opens them without a
	// token, and the page asks for one.
	for path, want := range map[string]string{
		"/":               "text/html",
		"/ui/app.js":      "javascript",
		"/ui/boot.js":     "javascript",
		"/ui/spark.js":    "javascript",
		"/ui/style.css":   "text/css",
		"/ui/favicon.svg": "image/svg+xml",
		// Asked for by a browser on /healthz or /metrics: a 404 there
		// is an error in the console (TestStatusPage10kTopics).
		"/favicon.ico": "image/svg+xml",
	} {
		rec := do(h, "GET", path)
		if rec.Code != 200 || !strings.Contains(rec.Header().Get("Content-Type"), want) {
			t.Errorf("GET %s = %d %q, want 200 %s", path, rec.Code, rec.Header().Get("Content-Type"), want)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	rec := do(h, "GET", "/")
	body := rec.Body.String()
	for _, want := range []string{`src="ui/app.js"`, `src="ui/boot.js"`, `src="ui/spark.js"`, `href="ui/style.css"`, `name="viewport"`} {
		if !strings.Contains(body, want) {
			t.Errorf("index.html lacks %s", want)
		}
	}
	// Nothing from elsewhere: the page works offline.
	for _, path := range []string{"/", "/ui/app.js", "/ui/boot.js", "/ui/spark.js", "/ui/style.css"} {
		if b := do(h, "GET", path).Body.String(); strings.Contains(b, "http://") || strings.Contains(b, "https://") {
			t.Errorf("%s refers to another site", path)
		}
	}
	for _, path := range []string{"/ui/", "/ui/nope.js", "/index.html"} {
		if code := do(h, "GET", path).Code; code != 404 && code != 401 {
			t.Errorf("GET %s = %d, want 404 (or 401)", path, code)
		}
	}
}

func TestChangesEndpoint(t *testing.T) {
	t.Parallel()
	now := time.Now()
	src := withChanges{changes: []httpapi.Change{
		{Time: now, Mirror: "b", Kind: httpapi.ChangeTopicAdded, Name: "orders", Target: "east.orders"},
		{Time: now.Add(-time.Second), Mirror: "a", Kind: httpapi.ChangeGroupRemoved, Name: "billing"},
		{Time: now.Add(-2 * time.Second), Mirror: "a", Kind: httpapi.ChangeInitial, Detail: "3 topics selected at start"},
	}}
	h := httpapi.Handler(prometheus.NewRegistry(), src, nil)
	for query, want := range map[string]string{"": "orders,billing,", "?limit=1": "orders", "?mirror=a": "billing,", "?mirror=a&limit=1": "billing"} {
		code, body := get(t, h, "/api/v1/changes"+query)
		var resp httpapi.ChangesResponse
		if err := json.Unmarshal([]byte(body), &resp); err != nil || code != 200 {
			t.Fatalf("%s: %d %s", query, code, body)
		}
		var names []string
		for _, c := range resp.Changes {
			names = append(names, c.Name)
		}
		if got := strings.Join(names, ","); got != want {
			t.Errorf("/api/v1/changes%s = %q, want %q", query, got, want)
		}
	}
	if code, _ := get(t, h, "/api/v1/changes?limit=0"); code != 400 {
		t.Errorf("limit=0 = %d, want 400", code)
	}
	// A source without a history answers an empty list, not an error.
	if code, body := get(t, httpapi.Handler(prometheus.NewRegistry(), statuses{}, nil), "/api/v1/changes"); code != 200 || !strings.Contains(body, `"changes": []`) {
		t.Errorf("without a history: %d %s", code, body)
	}
}

type withExtensions struct {
	statuses
	ext httpapi.ExtensionsResponse
}

func (w withExtensions) Extensions() httpapi.ExtensionsResponse { return w.ext }

func TestExtensionsEndpoint(t *testing.T) {
	t.Parallel()
	src := withExtensions{ext: httpapi.ExtensionsResponse{
		Plugins:   []httpapi.PluginStatus{{Name: "catalog", Up: true, Pid: 42}},
		Listeners: []httpapi.ListenerStatus{{Name: "hook", Type: "webhook", LastError: "503"}},
	}}
	code, body := get(t, httpapi.Handler(prometheus.NewRegistry(), src, nil), "/api/v1/extensions")
	var resp httpapi.ExtensionsResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil || code != 200 || len(resp.Plugins) != 1 || resp.Plugins[0].Pid != 42 || resp.Listeners[0].LastError != "503" {
		t.Fatalf("/api/v1/extensions = %d %s", code, body)
	}
	if code, body := get(t, httpapi.Handler(prometheus.NewRegistry(), statuses{}, nil), "/api/v1/extensions"); code != 200 || !strings.Contains(body, `"plugins": []`) || !strings.Contains(body, `"listeners": []`) {
		t.Errorf("without extensions: %d %s", code, body)
	}
}

func TestCountersEndpoint(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	records := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kmirror_replication_records_total", Help: "h"}, []string{"mirror"})
	bytes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kmirror_replication_bytes_total", Help: "h"}, []string{"mirror"})
	other := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kmirror_produce_errors_total", Help: "h"}, []string{"mirror"})
	reg.MustRegister(records, bytes, other)
	records.WithLabelValues("a").Add(120)
	bytes.WithLabelValues("a").Add(4096)
	records.WithLabelValues("b").Add(3)
	other.WithLabelValues("a").Add(7)
	code, body := get(t, httpapi.Handler(reg, statuses{}, nil), "/api/v1/counters")
	var resp httpapi.CountersResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil || code != 200 {
		t.Fatalf("/api/v1/counters = %d %s", code, body)
	}
	if resp.Time.IsZero() || len(resp.Mirrors) != 2 || resp.Mirrors["a"] != (httpapi.MirrorCounters{Records: 120, Bytes: 4096}) || resp.Mirrors["b"] != (httpapi.MirrorCounters{Records: 3}) {
		t.Errorf("counters = %+v", resp)
	}
}
