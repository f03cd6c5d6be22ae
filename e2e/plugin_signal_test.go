//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPluginStopsWithProcessGroup: a SIGTERM to kmirror's whole process
// group (kill -- -PGID, or systemd stopping a unit's cgroup) reaches the
// plugin processes too. kmirror stops cleanly (exit 0), and the plugin's
// exit is neither an ERROR nor followed by a restart; go-plugin's line
// about it names the binary as path=, not as a second plugin=.
func TestPluginStopsWithProcessGroup(t *testing.T) {
	t.Parallel()
	bin := plugin(t, "catalog-filter")
	dir := t.TempDir()
	catalog := filepath.Join(dir, "catalog.json")
	writeCatalog(t, catalog, catalogNames("orders")...)
	// The clusters are unused loopback ports: the plugins start before
	// any cluster is reached.
	cfg := fmt.Sprintf(`clusters:
  east: {bootstrap_servers: [%q]}
  west: {bootstrap_servers: [%q]}
plugins:
  catalog: {path: %q, sha256: %q, config: {catalog: %q}}
mirrors:
  - name: east-to-west
    source: east
    target: west
    filters: [{plugin: catalog}]
http: {listen: "127.0.0.1:0"}
`, closedPort(t), closedPort(t), bin.Path, bin.SHA256, catalog)
	path := filepath.Join(dir, "kmirror.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	log := newOutputFile(t, "kmirror.stderr")
	cmd := exec.Command(kmirrorBin, "run", "--config", path)
	cmd.Stderr, cmd.Stdout = log.f, log.f
	// A process group of its own, as a shell gives a job.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("kmirror's log:\n%s", log.String())
		}
	})
	waitFor(t, 60*time.Second, "the plugin to be ready", func() (bool, string) {
		return strings.Contains(log.String(), `msg="plugin ready" plugin=catalog`), "not yet"
	})
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		exited = true
		if err != nil {
			t.Errorf("kmirror exited with %v after SIGTERM to its process group, want 0", err)
		}
	case <-time.After(stopWait):
		t.Fatalf("kmirror did not exit within %v of SIGTERM to its process group", stopWait)
	}
	var exitLine string
	for _, l := range strings.Split(log.String(), "\n") {
		if !strings.Contains(l, "plugin=catalog") {
			continue
		}
		if strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") || strings.Contains(l, "restart") {
			t.Errorf("the plugin stopped with kmirror, logged as a failure or restarted: %s", l)
		}
		if strings.Count(l, "plugin=") > 1 {
			t.Errorf("key plugin repeated: %s", l)
		}
		if strings.Contains(l, `msg="plugin process exited"`) {
			exitLine = l
		}
	}
	if !strings.Contains(exitLine, "path="+bin.Path) {
		t.Errorf("go-plugin's exit line %q does not name the binary as path=", exitLine)
	}
}
