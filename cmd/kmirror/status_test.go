package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/internal/httpapi"
)

// statusSource serves fixed statuses through the real HTTP API.
type statusSource []connector.Status

func (s statusSource) Statuses() []connector.Status      { return s }
func (s statusSource) Topics() []connector.TopicMetadata { return nil }
func (s statusSource) Groups() []connector.GroupStatus   { return nil }

// clusterStatus is not ready (a failed topic): status exits 3 on it.
var clusterStatus = statusSource{{
	Name: "east-to-west", Source: "east", Target: "west", Ready: false,
	LastPassAt: time.Now().Add(-3 * time.Second), Lag: new(int64(42)),
	Topics: []connector.TopicStatus{
		{SourceTopic: "orders", TargetTopic: "east.orders", Partitions: 8, State: connector.StateMirroring, Lag: new(int64(40))},
		{SourceTopic: "audit", TargetTopic: "east.audit", Partitions: 1, State: connector.StateFailed, Lag: new(int64(2)), Error: "TOPIC_AUTHORIZATION_FAILED"},
	},
	Cluster: &connector.ClusterStatus{
		Member: "kmirror-a", Slots: 8, Owned: []int32{0, 1, 2, 3, 6}, ControlPlane: true,
		SlotLag: map[int32]*int64{0: new(int64(10)), 1: new(int64(0)), 2: new(int64(30)), 3: new(int64(0)), 6: new(int64(0))},
		Workers: []connector.WorkerStatus{
			{Member: "kmirror-a", ClientID: "kmirror", Host: "/10.0.0.1", Slots: []int32{0, 1, 2, 3, 6}, ControlPlane: true},
			{Member: "kmirror-b", ClientID: "kmirror", Host: "/10.0.0.2", Slots: []int32{4, 5, 7}},
		},
	},
}}

func statusServer(t *testing.T, src statusSource) string {
	t.Helper()
	srv := httptest.NewServer(httpapi.Handler(prometheus.NewRegistry(), src, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestStatusTable(t *testing.T) {
	// "3s ago" counts from now, not from the package's start (other tests
	// of the package run first and take seconds).
	src := slices.Clone(clusterStatus)
	src[0].LastPassAt = time.Now().Add(-3 * time.Second)
	url := statusServer(t, src)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"status", "--url", url}, &stdout, &stderr); code != exitNegative {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"MIRROR east-to-west (east -> west): not ready, lag 42 records, last pass 3s ago",
		"orders", "east.orders", "mirroring",
		"audit", "failed", "TOPIC_AUTHORIZATION_FAILED",
		"CLUSTER: 8 slots; this worker kmirror-a owns [0-3 6], control plane: yes",
		"kmirror-b", "[4-5 7]", "/10.0.0.2",
		"lag of this worker's slots (slot:records): 0:10 1:0 2:30 3:0 6:0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The worker running the control plane is marked, the other is not.
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "kmirror-b") && strings.Contains(line, "yes") {
			t.Errorf("kmirror-b is shown running the control plane: %q", line)
		}
	}
}

// TestStatusLagUnknown: a lag the worker does not know (null, with since
// when) is printed as unknown, for how long, never as 0.
func TestStatusLagUnknown(t *testing.T) {
	src := slices.Clone(clusterStatus)
	since := time.Now().Add(-90 * time.Second)
	m := src[0]
	m.Lag, m.LagUnknownSince = nil, since
	m.Topics = slices.Clone(m.Topics)
	m.Topics[0].Lag, m.Topics[0].LagUnknownSince = nil, since
	cl := *m.Cluster
	cl.SlotLag = map[int32]*int64{0: nil, 1: new(int64(0))}
	m.Cluster = &cl
	src[0] = m
	var stdout, stderr bytes.Buffer
	if code := run([]string{"status", "--url", statusServer(t, src)}, &stdout, &stderr); code != exitNegative {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"not ready, lag unknown for 1m30s (the source's end offsets could not be read), last pass",
		"(slot:records): 0:? 1:0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) < 5:
		case f[0] == "orders" && !strings.Contains(line, "mirroring  unknown for 1m30s"):
			t.Errorf("orders row %q: want its lag unknown for 1m30s", line)
		case f[0] == "audit" && f[4] != "2":
			t.Errorf("audit row %q: want its lag, 2", line)
		}
	}
}

// TestStatusFilters: --state, --topic and --mirror ask the worker for
// those topics only; a bad state is the worker's 400, exit 1.
func TestStatusFilters(t *testing.T) {
	url := statusServer(t, clusterStatus)
	for _, tc := range []struct {
		args       []string
		want, lack string
	}{
		{[]string{"--state", "failed"}, "east.audit", "east.orders"},
		{[]string{"--topic", "ord"}, "east.orders", "east.audit"},
		{[]string{"--mirror", "east-to-west"}, "east.orders", "no mirrors"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"status", "--url", url}, tc.args...), &stdout, &stderr); code != exitNegative {
			t.Fatalf("%v: exit %d: %s", tc.args, code, stderr.String())
		}
		if out := stdout.String(); !strings.Contains(out, tc.want) || strings.Contains(out, tc.lack) {
			t.Errorf("%v: want %q and not %q in:\n%s", tc.args, tc.want, tc.lack, out)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"status", "--url", url, "--state", "stuck"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "state must be one of") {
		t.Errorf("--state stuck: exit %d, stderr %q", code, stderr.String())
	}
}

// TestStatusExitCodes: 0 when the worker is ready (with --mirror, that
// mirror), 3 when not, naming the mirrors not ready; 1 for a mirror the
// worker does not run and for a worker that does not answer.
func TestStatusExitCodes(t *testing.T) {
	ready := connector.Status{Name: "west-to-east", Source: "west", Target: "east", Ready: true, LastPassAt: time.Now()}
	url := statusServer(t, append(slices.Clone(clusterStatus), ready))
	for _, tc := range []struct {
		args      []string
		code      int
		stderr    string
		stdoutHas string
	}{
		{nil, exitNegative, "status: not ready: east-to-west\n", "MIRROR west-to-east"},
		{[]string{"-o", "json"}, exitNegative, "status: not ready: east-to-west\n", `"ready": false`},
		{[]string{"--mirror", "east-to-west"}, exitNegative, "status: not ready: east-to-west\n", "MIRROR east-to-west"},
		{[]string{"--mirror", "west-to-east"}, exitOK, "", "MIRROR west-to-east"},
		{[]string{"--mirror", "nope"}, exitError, `status: --mirror: the worker runs no mirror named "nope"` + "\n", ""},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"status", "--url", url}, tc.args...), &stdout, &stderr)
		if code != tc.code || stderr.String() != tc.stderr || !strings.Contains(stdout.String(), tc.stdoutHas) {
			t.Errorf("status %v: exit %d, stderr %q, stdout:\n%s\nwant exit %d, stderr %q, stdout with %q", tc.args, code, stderr.String(), stdout.String(), tc.code, tc.stderr, tc.stdoutHas)
		}
	}
	if code := run([]string{"status", "--url", statusServer(t, statusSource{ready})}, io.Discard, io.Discard); code != exitOK {
		t.Errorf("a ready worker: exit %d, want 0", code)
	}
	srv := httptest.NewServer(nil)
	srv.Close() // nothing listens there now
	var stderr bytes.Buffer
	if code := run([]string{"status", "--url", srv.URL}, io.Discard, &stderr); code != exitError || !strings.Contains(stderr.String(), "is a worker running?") {
		t.Errorf("no worker: exit %d, stderr %q; want 1", code, stderr.String())
	}
}

func TestStatusJSON(t *testing.T) {
	url := statusServer(t, clusterStatus)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"status", "--url", strings.TrimPrefix(url, "http://"), "-o", "json"}, &stdout, &stderr); code != exitNegative {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var got httpapi.StatusResponse
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout.String())
	}
	if len(got.Mirrors) != 1 || got.Mirrors[0].Cluster == nil || len(got.Mirrors[0].Cluster.Workers) != 2 || got.Ready {
		t.Fatalf("status = %+v", got)
	}
}

func TestStatusFromConfig(t *testing.T) {
	url := statusServer(t, clusterStatus)
	dir := t.TempDir()
	path := writeStatusConfig(t, dir, `{listen: "`+strings.TrimPrefix(url, "http://")+`"}`)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"status", "--config", path}, &stdout, &stderr); code != exitNegative {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "MIRROR east-to-west") {
		t.Fatalf("output:\n%s", stdout.String())
	}
}

func TestStatusErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"nobody listens", []string{"status", "--url", "127.0.0.1:1", "--timeout", "2s"}, 1, "is a worker running?"},
		{"bad output", []string{"status", "--url", "127.0.0.1:1", "-o", "yaml"}, 2, "-o"},
		{"missing config", []string{"status", "--config", filepath.Join(t.TempDir(), "none.yaml")}, 1, "none.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tc.code, stderr.String(), tc.want)
			}
		})
	}
}

func TestStatusURL(t *testing.T) {
	for listen, want := range map[string]string{
		"127.0.0.1:9644": "http://127.0.0.1:9644",
		":9644":          "http://127.0.0.1:9644",
		"0.0.0.0:9644":   "http://127.0.0.1:9644",
		"[::]:9644":      "http://[::1]:9644",
		"host.lan:80":    "http://host.lan:80",
	} {
		if got, err := statusURL(listen, false); err != nil || got != want {
			t.Errorf("statusURL(%q) = %q, %v; want %q", listen, got, err, want)
		}
	}
	if got, err := statusURL("127.0.0.1:9644", true); err != nil || got != "https://127.0.0.1:9644" {
		t.Errorf("statusURL with TLS = %q, %v", got, err)
	}
	if _, err := statusURL("127.0.0.1:0", false); err == nil || !strings.Contains(err.Error(), "--url") {
		t.Errorf("port 0: %v, want a hint to --url", err)
	}
}

// A worker with http.auth: status takes the token from --token-file or from
// the worker's config.
func TestStatusToken(t *testing.T) {
	srv := httptest.NewServer(httpapi.Protect(httpapi.Handler(prometheus.NewRegistry(), clusterStatus, nil), httpapi.Security{Token: "s3cret-token"}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"status", "--url", srv.URL}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "--token-file") {
		t.Fatalf("without a token: exit %d, stderr %q; want 1 and a hint to --token-file", code, stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"status", "--url", srv.URL, "--token-file", tokenFile}, &stdout, &stderr); code != exitNegative || !strings.Contains(stdout.String(), "MIRROR east-to-west") {
		t.Fatalf("--token-file: exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	path := writeStatusConfig(t, dir, `{listen: "`+strings.TrimPrefix(srv.URL, "http://")+`", auth: {bearer_token_file: token}}`)
	stdout.Reset()
	if code := run([]string{"status", "--config", path}, &stdout, &stderr); code != exitNegative || !strings.Contains(stdout.String(), "MIRROR east-to-west") {
		t.Fatalf("--config with http.auth: exit %d: %s%s", code, stdout.String(), stderr.String())
	}

	// A wrong token is refused, and said so: no hint to pass one.
	wrong := filepath.Join(dir, "wrong.token")
	if err := os.WriteFile(wrong, []byte("old-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := run([]string{"status", "--url", srv.URL, "--token-file", wrong}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "the worker refused the token in "+wrong+": ") ||
		!strings.Contains(stderr.String(), "the bearer token was refused") || strings.Contains(stderr.String(), "pass --token-file") {
		t.Fatalf("a wrong --token-file: exit %d, stderr %q; want 1, the token refused", code, stderr.String())
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("old-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := run([]string{"status", "--config", path}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "the worker refused the token in "+filepath.Join(dir, "token")+" (http.auth.bearer_token_file of "+path+")") {
		t.Fatalf("a wrong token in the config's file: exit %d, stderr %q", code, stderr.String())
	}
}

// writeStatusConfig writes dir/kmirror.yaml: one mirror east-to-west, the
// given http section.
func writeStatusConfig(t *testing.T, dir, http string) string {
	t.Helper()
	path := filepath.Join(dir, "kmirror.yaml")
	cfg := `clusters:
  east: {bootstrap_servers: ["127.0.0.1:9092"]}
  west: {bootstrap_servers: ["127.0.0.1:9093"]}
mirrors:
  - {name: east-to-west, source: east, target: west}
http: ` + http + "\n"
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// failingClusters is statusSource that also reports a failing broker.
type failingClusters struct{ statusSource }

func (failingClusters) Clusters() []httpapi.ClusterStatus {
	return []httpapi.ClusterStatus{{Alias: "west", BootstrapServers: []string{"10.0.0.9:9092"}, Failing: []httpapi.BrokerFault{{
		Address: "10.0.0.9:9092", Error: "i/o timeout", Check: "10.0.0.9:9092 accepts connections but did not answer", Since: time.Now().Add(-time.Minute), Failures: 3}}}}
}

// kmirror status shows the brokers a worker cannot reach, with what to
// check.
func TestStatusFailingBroker(t *testing.T) {
	srv := httptest.NewServer(httpapi.Handler(prometheus.NewRegistry(), failingClusters{clusterStatus}, nil))
	t.Cleanup(srv.Close)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"status", "--url", srv.URL}, &stdout, &stderr); code != exitNegative {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"CLUSTER west: broker 10.0.0.9:9092 failing for 1m", "s (3 failures): i/o timeout\n  10.0.0.9:9092 accepts connections but did not answer\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("status:\n%s\nwant it to contain\n%s", stdout.String(), want)
		}
	}
}

// TestStatusTableGroupNotSettling: slots without an owner and a group that
// does not settle are shown, not only the workers as last described.
func TestStatusTableGroupNotSettling(t *testing.T) {
	src := slices.Clone(clusterStatus)
	c := *src[0].Cluster
	c.Unowned = []int32{4, 5, 7}
	since := time.Date(2026, 12, 2, 13, 16, 15, 0, time.UTC)
	c.Rebalance = &connector.RebalanceStatus{Since: since, WaitingFor: "JoinGroup: the coordinator to complete the rebalance (every member to rejoin)", Error: "i/o timeout", NotSettling: true}
	src[0].Cluster = &c
	var stdout, stderr bytes.Buffer
	if code := run([]string{"status", "--url", statusServer(t, src)}, &stdout, &stderr); code != exitNegative {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{
		"GROUP NOT SETTLING: in a rebalance since 2026-12-02T13:16:15Z, waiting for JoinGroup: the coordinator to complete the rebalance (every member to rejoin); last error: i/o timeout",
		"SLOTS WITHOUT AN OWNER: [4-5 7] (not copied)",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
}
