package app

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/internal/httpapi"
)

const reloadBase = `
clusters:
  east: {bootstrap_servers: ["127.0.0.1:19092"]}
  west: {bootstrap_servers: ["127.0.0.1:29092"]}
mirrors:
  - name: east-to-west
    source: east
    target: west
    topics: {include: ["orders.*"]}
    rate_limit: 10MB
  - name: west-to-east
    source: west
    target: east
http: {listen: "127.0.0.1:0"}
`

// syncBuffer is a log sink the mirrors may write to concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// reloadApp is an App started from reloadBase in a file; write replaces
// the file's content (before a Reload).
func reloadApp(t *testing.T) (a *App, write func(string), log *syncBuffer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kmirror.yaml")
	write = func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(reloadBase)
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	log = &syncBuffer{}
	a, err = New(Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(log, nil)), ConfigFile: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a, write, log
}

// reload reloads a and checks the keys it reports.
func reload(t *testing.T, a *App, want ...string) {
	t.Helper()
	got, err := a.Reload(context.Background())
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("restart required = %q, want %q", got, want)
	}
}

// A reload reports, in one warning and in its result, every change it
// cannot apply: a cluster's address, a new listener, a removed mirror, a
// producer setting.
func TestReloadReportsWhatNeedsARestart(t *testing.T) {
	t.Parallel()
	a, write, log := reloadApp(t)
	changed := strings.NewReplacer(
		`["127.0.0.1:29092"]`, `["127.0.0.1:39092"]`,
		"  - name: west-to-east\n    source: west\n    target: east\n", "",
		"    rate_limit: 10MB\n", "    rate_limit: 10MB\n    producer: {linger: 20ms}\n",
	).Replace(reloadBase) + "listeners:\n  pager: {type: log}\n"
	write(changed)
	want := []string{"clusters.west.bootstrap_servers", "mirrors[east-to-west].producer.linger", "mirrors[west-to-east]", "listeners.pager"}
	reload(t, a, want...)
	warnings := 0
	for l := range strings.Lines(log.String()) {
		if strings.Contains(l, "take effect only after a restart") {
			warnings++
			if !strings.Contains(l, strings.Join(want, ", ")) {
				t.Errorf("the warning does not list %q: %s", want, l)
			}
		}
	}
	if warnings != 1 {
		t.Errorf("%d warnings about a restart, want 1:\n%s", warnings, log)
	}
	// Still pending at the next reload: nothing restarted in between.
	reload(t, a, want...)
	write(reloadBase)
	reload(t, a)
}

// What a reload applies is not reported: the selection (topics, groups,
// labels, trusted upstreams, rate limits), on_source_gap, and the mirrors'
// order.
func TestReloadAppliesSelection(t *testing.T) {
	t.Parallel()
	a, write, log := reloadApp(t)
	write(`
clusters:
  east: {bootstrap_servers: ["127.0.0.1:19092"]}
  west: {bootstrap_servers: ["127.0.0.1:29092"]}
mirrors:
  - name: west-to-east
    source: west
    target: east
    groups: {exclude: ["tmp-.*"]}
  - name: east-to-west
    source: east
    target: west
    topics: {include: ["orders.*", "payments"], exclude: ["orders.tmp"]}
    rate_limit: 20MB
    topic_rate_limits: [{match: "payments", rate_limit: 1MB}]
    labels: [{match: "orders.*", set: {team: sales}}]
    sync: {topic_configs: {exclude: ["retention.ms"]}}
    metadata: {trusted_upstreams: ["west-to-east"]}
    on_source_gap: fail
http: {listen: "127.0.0.1:0"}
`)
	reload(t, a)
	if n := strings.Count(log.String(), "selection reconfigured"); n != 2 {
		t.Errorf("%d mirrors reconfigured, want 2:\n%s", n, log)
	}
	if !strings.Contains(log.String(), "on_source_gap reconfigured") {
		t.Errorf("on_source_gap not applied:\n%s", log)
	}
}

// POST /api/v1/reload answers with the keys that wait for a restart.
func TestReloadEndpointListsRestartKeys(t *testing.T) {
	t.Parallel()
	a, write, _ := reloadApp(t)
	write(strings.Replace(reloadBase, "19092", "19093", 1))
	rec := httptest.NewRecorder()
	httpapi.Handler(prometheus.NewRegistry(), a, a.Reload).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/reload", nil))
	var resp httpapi.ReloadResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || rec.Code != http.StatusOK || !slices.Equal(resp.RestartRequired, []string{"clusters.east.bootstrap_servers"}) {
		t.Fatalf("POST /api/v1/reload = %d %s (%v)", rec.Code, rec.Body, err)
	}
}

// restartRequired on what the running App test cannot start: plugin
// listeners (whose binary, pin and config a reload applies, but not their
// timeout or a change of type), http, and a token file's new content.
func TestRestartRequiredKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, content := range map[string]string{"notify": "#!/bin/false\n", "notify2": "#!/bin/false\n", "token": "one\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sum := strings.Repeat("ab", 32)
	load := func(extra string) *config.Config {
		t.Helper()
		cfg, err := config.Load([]byte(reloadBase+extra), filepath.Join(dir, "kmirror.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	base := load(`listeners:
  notify: {type: plugin, path: notify, sha256: "` + sum + `", config: {channel: ops}}
  hook: {type: log}
`)
	for _, c := range []struct {
		name, extra string
		want        []string
	}{
		{"the same", `listeners:
  notify: {type: plugin, path: notify, sha256: "` + sum + `", config: {channel: ops}}
  hook: {type: log}
`, nil},
		{"a plugin listener's binary, pin and config", `listeners:
  notify: {type: plugin, path: notify2, sha256: "` + strings.Repeat("cd", 32) + `", config: {channel: dev}}
  hook: {type: log}
`, nil},
		{"a plugin listener's timeout, a built-in listener's config", `listeners:
  notify: {type: plugin, path: notify, sha256: "` + sum + `", config: {channel: ops}, timeout: 1m}
  hook: {type: log, config: {level: warn}}
`, []string{"listeners.hook.config.level", "listeners.notify.timeout"}},
		{"a listener's type", `listeners:
  notify: {type: log}
  hook: {type: log}
`, []string{"listeners.notify.type", "listeners.notify.path", "listeners.notify.sha256", "listeners.notify.config.channel"}},
		{"http, log and a new plugin", `listeners:
  notify: {type: plugin, path: notify, sha256: "` + sum + `", config: {channel: ops}}
  hook: {type: log}
plugins:
  cat: {path: notify, sha256: "` + sum + `"}
log: {level: debug}
shutdown_timeout: 30s
`, []string{"log.level", "shutdown_timeout"}},
	} {
		if got := restartRequired(base, load(c.extra)); !slices.Equal(got, c.want) {
			t.Errorf("%s: restart required = %q, want %q", c.name, got, c.want)
		}
	}

}

// http changes need a restart, and so does a new token in the same token
// file: the server was set up with the token read at the start.
func TestRestartRequiredHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	load := func(http, tok string) *config.Config {
		t.Helper()
		if err := os.WriteFile(token, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load([]byte(strings.Replace(reloadBase, `http: {listen: "127.0.0.1:0"}`, http, 1)), filepath.Join(dir, "kmirror.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	const auth = `http: {listen: "127.0.0.1:0", auth: {bearer_token_file: token}}`
	base := load(auth, "one")
	for _, c := range []struct {
		name, http, token string
		want              []string
	}{
		{"the same", auth, "one", nil},
		{"a new token in the same file", auth, "two", []string{"http.auth.bearer_token_file"}},
		{"no auth, another address", `http: {listen: "127.0.0.1:9000"}`, "one", []string{"http.listen", "http.auth"}},
		{"metrics open", `http: {listen: "127.0.0.1:0", auth: {bearer_token_file: token, metrics: false}}`, "one", []string{"http.auth.metrics"}},
	} {
		if got := restartRequired(base, load(c.http, c.token)); !slices.Equal(got, c.want) {
			t.Errorf("%s: restart required = %q, want %q", c.name, got, c.want)
		}
	}
}
