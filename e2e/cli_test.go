//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runCLI runs kmirror with args and returns exit code, stdout and stderr.
// It fails the test if the command does not finish within 60s (a process
// start and cluster round trips on a loaded machine).
func runCLI(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kmirrorBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kmirror %s did not finish within 60s; stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("kmirror %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return code, stdout.String(), stderr.String()
}

// errorLine returns the 1-based number of the line of path that carries the
// "# ERROR" marker.
func errorLine(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "# ERROR") {
			return i + 1
		}
	}
	t.Fatalf("%s has no # ERROR marker", path)
	return 0
}

// TestValidate: `kmirror validate` accepts a good config (exit 0) and
// rejects bad ones with exit 1 and an error naming the file and the line.
// It is a static check, so it needs no clusters: the configs point at
// unused loopback ports.
func TestValidate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "validate")

	t.Run("good", func(t *testing.T) {
		path := filepath.Join(dir, "good.yaml")
		code, stdout, stderr := runCLI(t, "validate", "--config", path)
		if code != 0 {
			t.Errorf("kmirror validate %s: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", path, code, stdout, stderr)
		}
	})

	// The config every other e2e test renders must itself be valid, in both
	// policies.
	for _, policy := range []string{"default", "identity"} {
		t.Run("e2e_template_"+policy, func(t *testing.T) {
			cfg := mirrorConfig{
				Name: "m1", Source: "src", Target: "dst",
				SourceAddrs: []string{"127.0.0.1:9092"}, TargetAddrs: []string{"127.0.0.1:9093"},
				Policy: policy, Separator: ".",
				Include: []string{`app\..*`, ".*"}, Exclude: []string{`app\.secret.*`},
				RefreshInterval: time.Second, ProgressInterval: 200 * time.Millisecond, LogLevel: "debug",
			}
			path := writeConfigFile(t, t.TempDir(), cfg)
			code, stdout, stderr := runCLI(t, "validate", "--config", path)
			if code != 0 {
				b, _ := os.ReadFile(path)
				t.Errorf("kmirror validate on the e2e template: exit %d, want 0\nconfig:\n%s\nstdout:\n%s\nstderr:\n%s", code, b, stdout, stderr)
			}
		})
	}

	bad, err := filepath.Glob(filepath.Join(dir, "bad_*.yaml"))
	if err != nil || len(bad) == 0 {
		t.Fatalf("no bad configs in %s: %v", dir, err)
	}
	for _, path := range bad {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			line := errorLine(t, path)
			code, stdout, stderr := runCLI(t, "validate", "--config", path)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if !strings.Contains(stderr, filepath.Base(path)) {
				t.Errorf("stderr does not name the file %s", filepath.Base(path))
			}
			lineRe := regexp.MustCompile(fmt.Sprintf(`(:%d\b|\bline %d\b)`, line, line))
			if !lineRe.MatchString(stderr) {
				t.Errorf("stderr does not name line %d (as %q or %q)", line, fmt.Sprintf("%s:%d", filepath.Base(path), line), fmt.Sprintf("line %d", line))
			}
			if t.Failed() {
				t.Logf("kmirror validate --config %s\nstdout:\n%s\nstderr:\n%s", path, stdout, stderr)
			}
		})
	}

	t.Run("missing_file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nope.yaml")
		code, _, stderr := runCLI(t, "validate", "--config", path)
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		if !strings.Contains(stderr, "nope.yaml") {
			t.Errorf("stderr does not name the missing file:\n%s", stderr)
		}
	})

	t.Run("run_rejects_bad_config", func(t *testing.T) {
		path := filepath.Join(dir, "bad_unknown_cluster.yaml")
		code, _, stderr := runCLI(t, "run", "--config", path)
		if code == 0 {
			t.Errorf("kmirror run with a bad config exited 0, want non-zero; stderr:\n%s", stderr)
		}
	})
}

// TestVersion: `kmirror version` prints something and exits 0.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCLI(t, "version")
	if code != 0 {
		t.Errorf("kmirror version: exit %d, want 0; stderr:\n%s", code, stderr)
	}
	if strings.TrimSpace(stdout+stderr) == "" {
		t.Errorf("kmirror version printed nothing")
	}
}

// TestValidatePlugins: `kmirror validate` checks plugins as run does before
// it starts anything (the real example plugins, started and stopped): a
// wrong sha256 pin is an error (exit 1) and a plugin whose capabilities no
// entry of the config ever calls is a warning naming where it belongs
// (exit 0). No cluster is needed: the bootstrap addresses are never dialled.
func TestValidatePlugins(t *testing.T) {
	audit, catalog := plugin(t, "audit-listener"), plugin(t, "catalog-filter")
	dir := t.TempDir()
	const head = `clusters:
  east: {bootstrap_servers: ["127.0.0.1:1"]}
  west: {bootstrap_servers: ["127.0.0.1:2"]}
mirrors:
  - name: east-to-west
    source: east
    target: west
`
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(head+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	auditOut := filepath.Join(dir, "audit.jsonl")
	cases := []struct {
		name, body string
		code       int
		stderr     []string // each must appear
		noWarning  bool
	}{{
		name: "listener_plugin_under_plugins",
		body: fmt.Sprintf("plugins:\n  audit: {path: %q, sha256: %q, config: {path: %q}}\n", audit.Path, audit.SHA256, auditOut),
		code: 0,
		stderr: []string{"warning: ", "plugins.audit: ", "is a listener plugin (capabilities: [topic_listener group_listener])",
			"belongs under listeners: with type: plugin"},
	}, {
		name: "listener_plugin_wired",
		body: fmt.Sprintf("    listeners: [audit]\nlisteners:\n  audit: {type: plugin, path: %q, sha256: %q, config: {path: %q}}\n", audit.Path, audit.SHA256, auditOut),
		code: 0, noWarning: true,
	}, {
		name:   "filter_plugin_as_listener",
		body:   fmt.Sprintf("    listeners: [catalog]\nlisteners:\n  catalog: {type: plugin, path: %q, sha256: %q}\n", catalog.Path, catalog.SHA256),
		code:   0,
		stderr: []string{"warning: ", "listeners.catalog: ", "listens to neither topics nor groups", "belongs under plugins:"},
	}, {
		name:   "listener_named_by_no_mirror",
		body:   "listeners:\n  changes: {type: log}\n",
		code:   0,
		stderr: []string{"warning: ", "listeners.changes: no mirror names it"},
	}, {
		name:   "wrong_pin",
		body:   fmt.Sprintf("    listeners: [audit]\nlisteners:\n  audit: {type: plugin, path: %q, sha256: %q, config: {path: %q}}\n", audit.Path, catalog.SHA256, auditOut),
		code:   1,
		stderr: []string{`wrong_pin.yaml:10: listeners.audit.sha256: plugin "listener.audit": refusing to start`, "sha256 mismatch", "expected " + catalog.SHA256, "actual " + audit.SHA256, "sha256sum " + audit.Path},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := write(c.name+".yaml", c.body)
			code, stdout, stderr := runCLI(t, "validate", "--config", path)
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			for _, want := range c.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q", want)
				}
			}
			if c.noWarning && strings.Contains(stderr, "warning") {
				t.Errorf("unexpected warning")
			}
			if c.code == 0 && !strings.Contains(stdout, path+": valid") {
				t.Errorf("stdout lacks %q", path+": valid")
			}
			if t.Failed() {
				t.Logf("config:\n%s%s\nstdout:\n%s\nstderr:\n%s", head, c.body, stdout, stderr)
			}
		})
	}

	// -o json: the same verdict as data; warnings are a list, never null.
	t.Run("json", func(t *testing.T) {
		path := write("json.yaml", fmt.Sprintf("plugins:\n  audit: {path: %q, sha256: %q, config: {path: %q}}\n", audit.Path, audit.SHA256, auditOut))
		code, stdout, stderr := runCLI(t, "validate", "--config", path, "-o", "json")
		var got struct {
			Valid    bool      `json:"valid"`
			Errors   []string  `json:"errors"`
			Warnings *[]string `json:"warnings"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("stdout is not JSON: %v\n%s\nstderr:\n%s", err, stdout, stderr)
		}
		if code != 0 || !got.Valid || got.Warnings == nil || len(*got.Warnings) != 1 || !strings.Contains((*got.Warnings)[0], "plugins.audit") {
			t.Errorf("exit %d, got %s", code, stdout)
		}
	})
}
