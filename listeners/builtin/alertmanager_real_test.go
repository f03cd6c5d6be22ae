package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/listeners"
)

// alertmanagerBinary finds a real Alertmanager: $KMIRROR_ALERTMANAGER, or
// Debian's prometheus-alertmanager, or upstream's alertmanager on PATH.
// Without one the test skips, or fails when CI is set.
func alertmanagerBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KMIRROR_ALERTMANAGER"); p != "" {
		return p
	}
	for _, name := range []string{"prometheus-alertmanager", "alertmanager"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Alertmanager binary (prometheus-alertmanager or alertmanager on PATH, or $KMIRROR_ALERTMANAGER): " +
		"apt-get install prometheus-alertmanager (see deploy/REQUIREMENTS)"
	if inCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// inCI reports whether the tests run in CI (CI=true), where a missing
// binary fails instead of skipping.
func inCI() bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv("CI")))
	return v != "" && v != "false" && v != "0"
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startAlertmanager runs a real Alertmanager on a loopback port with a null
// receiver and clustering off, and returns its base URL once it is ready.
func startAlertmanager(t *testing.T) string {
	bin := alertmanagerBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte("route:\n  receiver: \"null\"\nreceivers:\n  - name: \"null\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for try := 0; try < 3; try++ { // the free port may be taken in between
		base, stop, err := runAlertmanager(bin, cfg, filepath.Join(dir, "data"), freeLoopbackPort(t))
		if err == nil {
			t.Cleanup(stop)
			return base
		}
		lastErr = err
	}
	t.Fatal(lastErr)
	return ""
}

func runAlertmanager(bin, cfg, storage string, port int) (base string, stop func(), err error) {
	base = fmt.Sprintf("http://127.0.0.1:%d", port)
	var out bytes.Buffer
	cmd := exec.Command(bin,
		"--config.file="+cfg,
		"--storage.path="+storage,
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--cluster.listen-address=",
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	// A process start on a loaded machine: a generous deadline.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		select {
		case <-exited:
			return "", nil, fmt.Errorf("alertmanager exited: %v\n%s", waitErr, out.String())
		default:
		}
		if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base, stop, nil
			}
		}
	}
	stop()
	return "", nil, fmt.Errorf("alertmanager not ready on %s within 30s\n%s", base, out.String())
}

type gettableAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      time.Time         `json:"endsAt"`
	Status      struct {
		State string `json:"state"`
	} `json:"status"`
}

// TestAlertmanagerReal sends changes through the listener to a real
// Alertmanager and reads the alerts back from its v2 API.
func TestAlertmanagerReal(t *testing.T) {
	base := startAlertmanager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	a, err := New(ctx, KindAlertmanager, map[string]string{
		"url": base, "resolve_after": "2m", "severity": "warning",
		"generator_url": "http://kmirror.test/dashboard", "label.cluster": "test",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	orders := listeners.Topic{Upstream: "orders", Downstream: "east.orders", Partitions: 3, State: "mirroring"}
	// The state at start: no alert.
	if err := a.TopicsChanged(ctx, listeners.TopicsChange{Mirror: "east-to-west", Sequence: 1,
		Topics: []listeners.Topic{orders}, Added: []listeners.Topic{orders}}); err != nil {
		t.Fatal(err)
	}
	// Then a topic is added and a group removed.
	invoices := listeners.Topic{Upstream: "invoices", Downstream: "east.invoices", Partitions: 6, State: "pending"}
	if err := a.TopicsChanged(ctx, listeners.TopicsChange{Mirror: "east-to-west", Sequence: 2,
		Topics: []listeners.Topic{invoices, orders}, Added: []listeners.Topic{invoices}}); err != nil {
		t.Fatal(err)
	}
	if err := a.GroupsChanged(ctx, listeners.GroupsChange{Mirror: "east-to-west", Sequence: 1}); err != nil {
		t.Fatal(err)
	}
	if err := a.GroupsChanged(ctx, listeners.GroupsChange{Mirror: "east-to-west", Sequence: 2,
		Removed: []listeners.Group{{Name: "billing", Topics: []string{"orders"}}}}); err != nil {
		t.Fatal(err)
	}

	get := func() []gettableAlert {
		q := url.Values{"filter": {`mirror="east-to-west"`}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v2/alerts?"+q.Encode(), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET /api/v2/alerts: %v", err)
		}
		defer resp.Body.Close()
		var as []gettableAlert
		if err := json.NewDecoder(resp.Body).Decode(&as); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /api/v2/alerts: %d %v", resp.StatusCode, err)
		}
		return as
	}
	find := func(as []gettableAlert, alertname, key, value string) *gettableAlert {
		for i := range as {
			if as[i].Labels["alertname"] == alertname && as[i].Labels[key] == value {
				return &as[i]
			}
		}
		return nil
	}
	var as []gettableAlert
	for {
		as = get()
		if find(as, AlertTopicSetChanged, "topic", "invoices") != nil && find(as, AlertGroupSetChanged, "group", "billing") != nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the alerts did not show in Alertmanager: %+v", as)
		case <-time.After(50 * time.Millisecond):
		}
	}
	got := find(as, AlertTopicSetChanged, "topic", "invoices")
	want := map[string]string{"alertname": AlertTopicSetChanged, "mirror": "east-to-west", "topic": "invoices",
		"change": "added", "severity": "warning", "cluster": "test"}
	for k, v := range want {
		if got.Labels[k] != v {
			t.Errorf("label %s=%q, want %q (labels %v)", k, got.Labels[k], v, got.Labels)
		}
	}
	if d := got.Annotations["description"]; !strings.Contains(d, "invoices -> east.invoices, 6 partitions, state pending") {
		t.Errorf("description %q", d)
	}
	if got.Status.State != "active" {
		t.Errorf("state %q, want active", got.Status.State)
	}
	if r := got.EndsAt.Sub(got.StartsAt); r < 119*time.Second || r > 121*time.Second {
		t.Errorf("endsAt - startsAt = %v, want 2m (resolve_after)", r)
	}
	if find(as, AlertTopicSetChanged, "topic", "orders") != nil {
		t.Errorf("the initial state raised an alert: %+v", as)
	}
	if g := find(as, AlertGroupSetChanged, "group", "billing"); g.Labels["change"] != "removed" {
		t.Errorf("group alert: %+v", g)
	}
}
