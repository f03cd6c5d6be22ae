package app

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/config"
)

func TestExtensions(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load([]byte(`clusters: {a: {bootstrap_servers: ["h:1"]}, b: {bootstrap_servers: ["h:2"]}}
listeners:
  audit: {type: log}
  quiet: {type: log}
mirrors:
  - {name: m, source: a, target: b, listeners: [audit]}
  - {name: n, source: b, target: a, listeners: [audit, quiet]}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	t0 := time.Now()
	a.listenerHealth.onCall("audit", nil, t0)
	a.listenerHealth.onCall("audit", errors.New("connection refused"), t0.Add(time.Second))
	ext := a.Extensions()
	if len(ext.Plugins) != 0 || len(ext.Listeners) != 2 {
		t.Fatalf("extensions = %+v", ext)
	}
	audit, quiet := ext.Listeners[0], ext.Listeners[1]
	if audit.Name != "audit" || audit.Type != "log" || audit.Healthy || audit.Calls != 2 || audit.Errors != 1 ||
		audit.LastError != "connection refused" || !audit.LastErrorAt.Equal(t0.Add(time.Second)) || len(audit.Mirrors) != 2 {
		t.Errorf("audit = %+v", audit)
	}
	if quiet.Name != "quiet" || !quiet.Healthy || quiet.Calls != 0 || len(quiet.Mirrors) != 1 || quiet.Mirrors[0] != "n" {
		t.Errorf("quiet (never called) = %+v", quiet)
	}
	// In the API, a time at which nothing happened is absent, not year 1.
	for _, l := range ext.Listeners {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "0001-01-01") || strings.Contains(string(b), "last_error_at") != (l.Errors > 0) {
			t.Errorf("%s in the API: %s; want last_error_at only after a failure, no zero time", l.Name, b)
		}
	}
	a.listenerHealth.onCall("audit", nil, t0.Add(2*time.Second))
	if audit := a.Extensions().Listeners[0]; !audit.Healthy || audit.LastError != "connection refused" {
		t.Errorf("after a good call: %+v (healthy again, the last error kept)", audit)
	}
}
