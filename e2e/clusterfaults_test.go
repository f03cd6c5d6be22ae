//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest/faultproxy"
)

// silentBroker is a listener that accepts connections and never answers,
// until the test ends.
func silentBroker(t *testing.T) string {
	t.Helper()
	s, err := faultproxy.NewSilent()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.Addr()
}

// closedPort is a loopback address nothing listens at.
func closedPort(t *testing.T) string {
	t.Helper()
	addr, err := faultproxy.ClosedPort()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// silentBound is how long a silent broker may take to be reported with
// request_timeout 1s (two attempts of 1s): an upper bound generous enough
// for a loaded machine; the point is "not franz-go's 30-40 s".
const silentBound = 20 * time.Second

// TestSilentBroker: a target broker that accepts connections and never
// answers, and a source nothing listens at. `kmirror run` logs each once
// with its address and what to check, within the request timeout, and
// says so in /readyz and /api/v1/status (per cluster: the failing broker,
// its error); `kmirror plan` and `kmirror topics` exit 1 with the address
// in their error, within the timeout.
func TestSilentBroker(t *testing.T) {
	t.Parallel()
	silent, refused := silentBroker(t), closedPort(t)
	e := &env{t: t, dir: t.TempDir()}
	path := filepath.Join(e.dir, "kmirror.yaml")
	cfg := fmt.Sprintf(`clusters:
  east: {bootstrap_servers: [%q], dial_timeout: 1s, request_timeout: 1s}
  west: {bootstrap_servers: [%q], dial_timeout: 1s, request_timeout: 1s}
mirrors:
  - {name: east-to-west, source: east, target: west}
http: {listen: "127.0.0.1:0"}
`, refused, silent)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	silentCheck := silent + " accepts connections but did not answer within request_timeout (1s)"
	refusedCheck := "nothing listens at " + refused

	t.Run("run", func(t *testing.T) {
		w := e.startWorker(path)
		addr := w.httpAddr(t)
		var first time.Time
		for _, c := range []struct{ alias, broker, check string }{{"west", silent, silentCheck}, {"east", refused, refusedCheck}} {
			e.waitFor(60*time.Second, "a line reporting cluster "+c.alias+"'s broker "+c.broker, func() (bool, string) {
				ls := w.logLines(`level=ERROR msg="cannot reach a broker of the cluster; retrying" cluster=`+c.alias+" broker="+c.broker, c.check)
				return len(ls) > 0, "no such line yet"
			})
			if c.alias == "west" {
				first = time.Now()
				if took := first.Sub(w.start); took > silentBound {
					t.Errorf("the silent broker was reported %v after the start, want under %v", took, silentBound)
				}
			}
		}
		code, body, err := httpGet(addr, "/readyz")
		if err != nil || code != 503 {
			t.Errorf("/readyz: %d %v, want 503", code, err)
		}
		for _, want := range []string{"cluster west (" + silent + ")", silentCheck, "cluster east (" + refused + ")", refusedCheck} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/readyz says %q, without %q", body, want)
			}
		}
		code, body, err = httpGet(addr, "/api/v1/status")
		if err != nil || code != 200 {
			t.Fatalf("/api/v1/status: %d %v", code, err)
		}
		var st struct {
			Mirrors  []map[string]any `json:"mirrors"`
			Clusters []struct {
				Alias            string   `json:"alias"`
				BootstrapServers []string `json:"bootstrap_servers"`
				Failing          []struct {
					Address, Error, Check string
				} `json:"failing"`
			} `json:"clusters"`
		}
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatalf("/api/v1/status: %v: %s", err, body)
		}
		if len(st.Mirrors) != 1 {
			t.Fatalf("/api/v1/status: %s", body)
		}
		if at, ok := st.Mirrors[0]["last_pass_at"]; ok {
			t.Errorf("last_pass_at = %v before the first pass, want it absent", at)
		}
		failing := map[string]string{}
		for _, c := range st.Clusters {
			for _, f := range c.Failing {
				if f.Error == "" {
					t.Errorf("cluster %s: broker %s failing without an error", c.Alias, f.Address)
				}
				failing[c.Alias+" "+f.Address] = f.Check
			}
		}
		if c := failing["west "+silent]; !strings.HasPrefix(c, silentCheck) {
			t.Errorf("/api/v1/status: west's failing broker %s: check %q; body %s", silent, c, body)
		}
		if c := failing["east "+refused]; !strings.HasPrefix(c, refusedCheck) {
			t.Errorf("/api/v1/status: east's failing broker %s: check %q; body %s", refused, c, body)
		}
		// Each broker failure is one line (a reminder comes after a
		// minute, and a failed startup or pass adds none): checked only
		// while less than a minute has passed, so a slow machine
		// cannot fail it.
		lines := w.logLines("level=ERROR")
		if time.Since(first) < 50*time.Second && len(lines) != 2 {
			t.Errorf("%d ERROR lines, want 2 (one per failing broker):\n%s", len(lines), strings.Join(lines, "\n"))
		}
	})

	for _, cmd := range []string{"plan", "topics"} {
		t.Run(cmd, func(t *testing.T) {
			start := time.Now()
			code, _, stderr := runCLI(t, cmd, "--config", path)
			took := time.Since(start)
			if code != 1 || !strings.Contains(stderr, "cluster west ("+silent+")") || !strings.Contains(stderr, silentCheck) {
				t.Errorf("kmirror %s: exit %d, stderr:\n%s\nwant 1 and an error naming cluster west, %s and what to check", cmd, code, stderr, silent)
			}
			if took > silentBound {
				t.Errorf("kmirror %s took %v with a silent target, want under %v", cmd, took, silentBound)
			}
		})
	}
}

// TestSilentSource: a source broker that accepts connections and never
// answers, with a target that works. `kmirror plan` exits 1 naming the
// source and its address within the timeout; `kmirror run` starts (the
// target is fine) and /readyz says why it is not ready.
func TestSilentSource(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		silent := silentBroker(t)
		cfg := e.defaultConfig()
		cfg.SourceAddrs = []string{silent}
		cfg.RequestTimeout = time.Second
		path := e.writeConfig(cfg)
		want := []string{"cluster src (" + silent + ")", silent + " accepts connections but did not answer within request_timeout (1s)"}

		start := time.Now()
		code, _, stderr := runCLI(t, "plan", "--config", path)
		if took := time.Since(start); took > silentBound {
			t.Errorf("kmirror plan took %v with a silent source, want under %v", took, silentBound)
		}
		for _, s := range want {
			if code != 1 || !strings.Contains(stderr, s) {
				t.Errorf("kmirror plan: exit %d, stderr:\n%s\nwant 1 and %q", code, stderr, s)
			}
		}

		w := e.startWorker(path)
		addr := w.httpAddr(t)
		e.waitFor(60*time.Second, "/readyz to name the silent source", func() (bool, string) {
			code, body, err := httpGet(addr, "/readyz")
			if err != nil {
				return false, err.Error()
			}
			ok := code == 503 && strings.Contains(string(body), "list source topics")
			for _, s := range want {
				ok = ok && strings.Contains(string(body), s)
			}
			return ok, fmt.Sprintf("%d %s", code, body)
		})
	})
}
