package plugins_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
	"github.com/kmirror/kmirror/plugins"
)

// newHost is a Host closed when the test ends. Unless the test sets one, the
// start timeout is a minute: starting a race-enabled plugin process on a
// loaded machine can take seconds, and a start that times out would be
// restarted (and counted) once more.
func newHost(t *testing.T, opts plugins.HostOptions) *plugins.Host {
	t.Helper()
	if opts.StartTimeout == 0 {
		opts.StartTimeout = time.Minute
	}
	h, err := plugins.NewHost(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func start(t *testing.T, h *plugins.Host, spec plugins.Spec) *plugins.Plugin {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := h.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func writeCatalog(t *testing.T, path, body string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// An explicit mtime: two writes within the file system's timestamp
	// granularity must still look changed.
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func topics(names ...string) []filters.Topic {
	out := make([]filters.Topic, len(names))
	for i, n := range names {
		out[i] = filters.Topic{Name: n, Partitions: 3}
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestCatalogFilterPlugin(t *testing.T) {
	t.Parallel()
	catalogBin, _ := examples(t)
	dir := t.TempDir()
	catalog := filepath.Join(dir, "catalog.json")
	t0 := time.Now().Add(-time.Hour)
	writeCatalog(t, catalog, `{"topics": ["orders", {"name": "payments", "team": "billing"}, {"name": "invoices", "team": "billing"}]}`, t0)

	logs := newRecords()
	h := newHost(t, plugins.HostOptions{Logger: slog.New(logs)})
	p := start(t, h, plugins.Spec{Name: "catalog", Path: catalogBin, SHA256: mustSHA256(t, catalogBin),
		Config: map[string]string{"catalog": catalog}})

	if info := p.Info(); info.Name != "catalog-filter" || info.Version != "1.1.0" ||
		!reflect.DeepEqual(info.Capabilities, []plugins.Capability{plugins.CapabilityTopicFilter, plugins.CapabilityGroupFilter}) {
		t.Errorf("Info = %+v", info)
	}
	f, ok := p.TopicFilter()
	if !ok {
		t.Fatal("catalog-filter has no TopicFilter")
	}
	gf, ok := p.GroupFilter()
	if !ok {
		t.Fatal("catalog-filter has no GroupFilter")
	}
	if _, ok := p.TopicListener(); ok {
		t.Error("catalog-filter has a TopicListener")
	}
	if _, ok := p.GroupListener(); ok {
		t.Error("catalog-filter has a GroupListener")
	}
	if got, ok := h.Get("catalog"); !ok || got != p {
		t.Errorf("Get(catalog) = %v, %v", got, ok)
	}

	ctx := context.Background()
	candidates := topics("orders", "payments", "invoices", "clicks")
	filter := func(props map[string]string) []string {
		t.Helper()
		names, err := f.FilterTopics(ctx, filters.TopicRequest{Mirror: "east-to-west", Properties: props, Topics: candidates})
		if err != nil {
			t.Fatal(err)
		}
		return sorted(names)
	}
	if got, want := filter(nil), []string{"invoices", "orders", "payments"}; !reflect.DeepEqual(got, want) {
		t.Errorf("catalog selects %v, want %v", got, want)
	}
	// Push-down: the mirror's property narrows the selection to one team.
	if got, want := filter(map[string]string{"team": "billing"}), []string{"invoices", "payments"}; !reflect.DeepEqual(got, want) {
		t.Errorf("team=billing selects %v, want %v", got, want)
	}

	// Editing the catalog changes the selection on the next call.
	writeCatalog(t, catalog, `{"topics": ["orders", "clicks"]}`, t0.Add(time.Minute))
	if got, want := filter(nil), []string{"clicks", "orders"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after the edit the catalog selects %v, want %v", got, want)
	}

	// A property can point at another catalog.
	other := filepath.Join(dir, "other.json")
	writeCatalog(t, other, `{"topics": ["invoices"]}`, t0)
	if got, want := filter(map[string]string{"catalog": other}), []string{"invoices"}; !reflect.DeepEqual(got, want) {
		t.Errorf("property catalog selects %v, want %v", got, want)
	}

	// Groups: a catalog without a "groups" key leaves them alone.
	groupCands := []filters.Group{{Name: "orders-app", Topics: []string{"orders"}}, {Name: "billing-app", Topics: []string{"invoices"}}, {Name: "adhoc"}}
	filterGroups := func(props map[string]string) []string {
		t.Helper()
		names, err := gf.FilterGroups(ctx, filters.GroupRequest{Mirror: "east-to-west", Properties: props, Groups: groupCands})
		if err != nil {
			t.Fatal(err)
		}
		return sorted(names)
	}
	if got, want := filterGroups(nil), []string{"adhoc", "billing-app", "orders-app"}; !reflect.DeepEqual(got, want) {
		t.Errorf("a catalog without groups selects the groups %v, want every candidate %v", got, want)
	}
	// With "groups", exactly those (of the property's team).
	writeCatalog(t, catalog, `{"topics": ["orders"], "groups": ["orders-app", {"name": "billing-app", "team": "billing"}, "gone"]}`, t0.Add(90*time.Second))
	if got, want := filterGroups(nil), []string{"billing-app", "orders-app"}; !reflect.DeepEqual(got, want) {
		t.Errorf("catalog groups select %v, want %v", got, want)
	}
	if got, want := filterGroups(map[string]string{"team": "billing"}), []string{"billing-app"}; !reflect.DeepEqual(got, want) {
		t.Errorf("team=billing selects the groups %v, want %v", got, want)
	}
	writeCatalog(t, catalog, `{"topics": ["orders"], "groups": []}`, t0.Add(100*time.Second))
	if got := filterGroups(nil); len(got) != 0 {
		t.Errorf(`"groups": [] selects %v, want no group`, got)
	}

	// A broken catalog is an error (no answer), never an empty selection.
	writeCatalog(t, catalog, `{"topics": [`, t0.Add(2*time.Minute))
	names, err := f.FilterTopics(ctx, filters.TopicRequest{Topics: candidates})
	if err == nil || errors.Is(err, plugins.ErrPluginShutdown) || !strings.Contains(err.Error(), `plugin "catalog": FilterTopics: catalog `) {
		t.Errorf("broken catalog: %v, %v; want the plugin's error", names, err)
	}
	names, err = gf.FilterGroups(ctx, filters.GroupRequest{Groups: groupCands})
	if err == nil || errors.Is(err, plugins.ErrPluginShutdown) || !strings.Contains(err.Error(), `plugin "catalog": FilterGroups: catalog `) {
		t.Errorf("broken catalog: groups %v, %v; want the plugin's error", names, err)
	}

	// The plugin's own log reached ours, with its level, fields and name.
	rec, ok := logs.await("catalog loaded")
	if !ok {
		t.Fatal("the plugin's log line did not reach the host's logger")
	}
	if rec.level != slog.LevelInfo || rec.attrs["plugin"] != "catalog" || rec.attrs["path"] != catalog {
		t.Errorf("bridged record = %+v", rec)
	}
}

func TestAuditListenerPlugin(t *testing.T) {
	t.Parallel()
	_, auditBin := examples(t)
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	h := newHost(t, plugins.HostOptions{})
	p := start(t, h, plugins.Spec{Name: "audit", Path: auditBin, SHA256: mustSHA256(t, auditBin),
		Config: map[string]string{"path": auditFile}})

	tl, ok := p.TopicListener()
	if !ok {
		t.Fatal("audit-listener has no TopicListener")
	}
	gl, ok := p.GroupListener()
	if !ok {
		t.Fatal("audit-listener has no GroupListener")
	}
	if _, ok := p.TopicFilter(); ok {
		t.Error("audit-listener has a TopicFilter")
	}
	orders := listeners.Topic{Upstream: "orders", Downstream: "east.orders", Partitions: 3, State: "mirroring",
		Metadata: map[string]string{"kmirror.source.cluster": "east"}}
	ctx := context.Background()
	if err := tl.TopicsChanged(ctx, listeners.TopicsChange{Mirror: "east-to-west", Sequence: 1,
		Topics: []listeners.Topic{orders}, Added: []listeners.Topic{orders}}); err != nil {
		t.Fatal(err)
	}
	g := listeners.Group{Name: "billing", Topics: []string{"orders"}}
	if err := gl.GroupsChanged(ctx, listeners.GroupsChange{Mirror: "east-to-west", Sequence: 1,
		Groups: []listeners.Group{g}, Added: []listeners.Group{g}}); err != nil {
		t.Fatal(err)
	}

	type line struct {
		Time     time.Time
		Kind     string
		Mirror   string
		Sequence uint64
		Count    int
		Added    []map[string]any
		Removed  []map[string]any
	}
	f, err := os.Open(auditFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []line
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if len(lines) != 2 {
		t.Fatalf("audit file has %d lines, want 2", len(lines))
	}
	if l := lines[0]; l.Kind != "topics" || l.Mirror != "east-to-west" || l.Sequence != 1 || l.Count != 1 ||
		len(l.Added) != 1 || l.Added[0]["upstream"] != "orders" || l.Added[0]["downstream"] != "east.orders" ||
		len(l.Removed) != 0 || l.Time.IsZero() {
		t.Errorf("topics line = %+v", l)
	}
	if l := lines[1]; l.Kind != "groups" || l.Count != 1 || len(l.Added) != 1 || l.Added[0]["name"] != "billing" {
		t.Errorf("groups line = %+v", l)
	}
}

func TestChecksumMismatchIsRefused(t *testing.T) {
	t.Parallel()
	bin, sum := self(t)
	h := newHost(t, plugins.HostOptions{})
	wrong := strings.Repeat("ab", 32)
	_, err := h.Start(context.Background(), plugins.Spec{Name: "evil", Path: bin, SHA256: wrong})
	if !errors.Is(err, plugins.ErrChecksumMismatch) {
		t.Fatalf("Start with a wrong sha256: %v, want ErrChecksumMismatch", err)
	}
	var ce *plugins.ChecksumError
	if !errors.As(err, &ce) || ce.Expected != wrong || ce.Actual != sum || ce.Path != bin {
		t.Errorf("ChecksumError = %+v", ce)
	}
	for _, want := range []string{`plugin "evil"`, "refusing to start", bin, "expected " + wrong, "actual " + sum} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, ok := h.Get("evil"); ok {
		t.Error("a refused plugin is registered")
	}

	bad := map[string]plugins.Spec{
		"no sha256":    {Name: "x", Path: bin},
		"short sha256": {Name: "x", Path: bin, SHA256: "abc"},
		"no path":      {Name: "x", SHA256: sum},
		"no name":      {Path: bin, SHA256: sum},
		"missing file": {Name: "x", Path: filepath.Join(t.TempDir(), "nope"), SHA256: sum},
	}
	for name, spec := range bad {
		if _, err := h.Start(context.Background(), spec); err == nil {
			t.Errorf("%s: Start succeeded", name)
		}
	}
	// Upper-case hex, as some tools print it, is the same pin.
	p, err := h.Start(context.Background(), plugins.Spec{Name: "upper", Path: bin, SHA256: strings.ToUpper(sum)})
	if err != nil {
		t.Fatalf("upper-case sha256: %v", err)
	}
	_ = p.Close()
}

func TestStartFailures(t *testing.T) {
	t.Parallel()
	bin, sum := self(t)
	h := newHost(t, plugins.HostOptions{})
	_, err := h.Start(context.Background(), plugins.Spec{Name: "bad", Path: bin, SHA256: sum,
		Config: map[string]string{"mode": "fail-configure"}})
	if err == nil || !strings.Contains(err.Error(), "refusing to start: mode fail-configure") {
		t.Errorf("Configure failure: %v", err)
	}
	if names := h.Names(); len(names) != 0 {
		t.Errorf("after a failed start the host runs %v", names)
	}
	start(t, h, plugins.Spec{Name: "dup", Path: bin, SHA256: sum})
	if _, err := h.Start(context.Background(), plugins.Spec{Name: "dup", Path: bin, SHA256: sum}); err == nil {
		t.Error("a second plugin with the same name started")
	}
}

func TestCallErrors(t *testing.T) {
	t.Parallel()
	bin, sum := self(t)
	h := newHost(t, plugins.HostOptions{})
	slow := start(t, h, plugins.Spec{Name: "slow", Path: bin, SHA256: sum, Config: map[string]string{"mode": "slow"}})
	failing := start(t, h, plugins.Spec{Name: "failing", Path: bin, SHA256: sum, Config: map[string]string{"mode": "error"}})

	// The caller's deadline ends the call, and says so; the plugin lives on.
	f, _ := slow.TopicFilter()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := f.FilterTopics(ctx, filters.TopicRequest{Topics: topics("a")})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, plugins.ErrPluginShutdown) {
		t.Errorf("slow filter: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("the deadline took %v to end the call", d)
	}
	if slow.Pid() == 0 || slow.Restarts() != 0 {
		t.Errorf("the slow plugin died: pid %d, restarts %d", slow.Pid(), slow.Restarts())
	}

	// A plugin's error is its message, with the plugin and method named.
	gf, _ := failing.GroupFilter()
	_, err = gf.FilterGroups(context.Background(), filters.GroupRequest{})
	if err == nil || err.Error() != `plugin "failing": FilterGroups: catalog unreachable` || errors.Is(err, plugins.ErrPluginShutdown) {
		t.Errorf("failing filter: %v", err)
	}
	tl, _ := failing.TopicListener()
	if err := tl.TopicsChanged(context.Background(), listeners.TopicsChange{}); err == nil {
		t.Error("failing listener: no error")
	}
}

// gather returns kmirror_plugin_restarts_total{plugin=name}.
func restartsMetric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kmirror_plugin_restarts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "plugin" && l.GetValue() == name {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no kmirror_plugin_restarts_total{plugin=%q}", name)
	return 0
}

func TestKilledPluginIsRestarted(t *testing.T) {
	t.Parallel()
	catalogBin, _ := examples(t)
	catalog := filepath.Join(t.TempDir(), "catalog.json")
	writeCatalog(t, catalog, `{"topics": ["orders"]}`, time.Now())
	reg := prometheus.NewRegistry()
	restarted := make(chan string, 10)
	h := newHost(t, plugins.HostOptions{
		Registerer: reg,
		OnRestart:  func(name string) { restarted <- name },
		// The call right after the kill must meet the dead plugin, not
		// an already restarted one, however late the test goroutine runs.
		MinBackoff: 3 * time.Second,
		MaxBackoff: 6 * time.Second,
	})
	p := start(t, h, plugins.Spec{Name: "catalog", Path: catalogBin, SHA256: mustSHA256(t, catalogBin),
		Config: map[string]string{"catalog": catalog}})
	f, _ := p.TopicFilter()
	ctx := context.Background()
	req := filters.TopicRequest{Topics: topics("orders", "clicks")}
	if _, err := f.FilterTopics(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := restartsMetric(t, reg, "catalog"); got != 0 {
		t.Fatalf("restarts before the kill = %v", got)
	}

	pid := p.Pid()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, err := f.FilterTopics(ctx, req)
	if !errors.Is(err, plugins.ErrPluginShutdown) || !strings.Contains(err.Error(), `plugin "catalog"`) {
		t.Fatalf("call right after SIGKILL: %v, want ErrPluginShutdown", err)
	}

	select {
	case name := <-restarted:
		if name != "catalog" {
			t.Errorf("OnRestart(%q)", name)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the plugin was not restarted within 60s")
	}
	names, err := f.FilterTopics(ctx, req)
	if err != nil || !reflect.DeepEqual(names, []string{"orders"}) {
		t.Fatalf("call after the restart: %v, %v", names, err)
	}
	if got := restartsMetric(t, reg, "catalog"); got != 1 {
		t.Errorf("kmirror_plugin_restarts_total = %v, want 1", got)
	}
	if p.Restarts() != 1 || p.Pid() == pid || p.Pid() == 0 {
		t.Errorf("restarts %d, pid %d (was %d)", p.Restarts(), p.Pid(), pid)
	}
}

func TestPluginThatExitsIsRestarted(t *testing.T) {
	t.Parallel()
	bin, sum := self(t)
	restarted := make(chan string, 10)
	h := newHost(t, plugins.HostOptions{OnRestart: func(name string) { restarted <- name }})
	p := start(t, h, plugins.Spec{Name: "exits", Path: bin, SHA256: sum, Config: map[string]string{"mode": "exit"}})
	tl, _ := p.TopicListener()
	if err := tl.TopicsChanged(context.Background(), listeners.TopicsChange{}); !errors.Is(err, plugins.ErrPluginShutdown) {
		t.Fatalf("a plugin exiting mid-call: %v, want ErrPluginShutdown", err)
	}
	select {
	case <-restarted:
	case <-time.After(60 * time.Second):
		t.Fatal("not restarted within 60s")
	}
}

func TestCloseEndsEverything(t *testing.T) {
	// Not parallel: it counts goroutines.
	catalogBin, auditBin := examples(t)
	bin, sum := self(t)
	dir := t.TempDir()
	catalog := filepath.Join(dir, "catalog.json")
	writeCatalog(t, catalog, `{"topics": ["orders"]}`, time.Now())
	before := runtime.NumGoroutine()

	// A restart backoff longer than the test: the killed plugin is surely
	// waiting for its restart when Close comes.
	h, err := plugins.NewHost(plugins.HostOptions{Registerer: prometheus.NewRegistry(), StartTimeout: time.Minute,
		MinBackoff: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cat := start(t, h, plugins.Spec{Name: "catalog", Path: catalogBin, SHA256: mustSHA256(t, catalogBin),
		Config: map[string]string{"catalog": catalog}})
	start(t, h, plugins.Spec{Name: "audit", Path: auditBin, SHA256: mustSHA256(t, auditBin),
		Config: map[string]string{"path": filepath.Join(dir, "audit.jsonl")}})
	dying := start(t, h, plugins.Spec{Name: "dying", Path: bin, SHA256: sum})
	f, _ := cat.TopicFilter()
	if _, err := f.FilterTopics(context.Background(), filters.TopicRequest{Topics: topics("orders")}); err != nil {
		t.Fatal(err)
	}
	// One plugin is dead and waiting for its restart when Close comes.
	pids := []int{cat.Pid(), dying.Pid()}
	_ = syscall.Kill(dying.Pid(), syscall.SIGKILL)

	begin := time.Now()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %v", time.Since(begin))
	if _, err := f.FilterTopics(context.Background(), filters.TopicRequest{}); !errors.Is(err, plugins.ErrPluginShutdown) {
		t.Errorf("call after Close: %v, want ErrPluginShutdown", err)
	}
	if _, err := h.Start(context.Background(), plugins.Spec{Name: "late", Path: bin, SHA256: sum}); !errors.Is(err, plugins.ErrPluginShutdown) {
		t.Errorf("Start after Close: %v", err)
	}
	for _, pid := range pids {
		// Signal 0: does the process still exist (it was reaped)?
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("plugin process %d still exists after Close", pid)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before the host, %d after Close:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

func TestLogBridge(t *testing.T) {
	t.Parallel()
	bin, sum := self(t)
	logs := newRecords()
	h := newHost(t, plugins.HostOptions{Logger: slog.New(logs)})
	start(t, h, plugins.Spec{Name: "chatty", Path: bin, SHA256: sum, Config: map[string]string{"mode": "chatty"}})
	// Both lines travel asynchronously (the SDK logger's over the plugin's
	// stderr pipe, a raw write after Serve over go-plugin's stdio stream).
	rec, ok := logs.await("test plugin configured")
	if !ok || rec.attrs["plugin"] != "chatty" || rec.attrs["mode"] != "chatty" || rec.level != slog.LevelInfo {
		t.Errorf("SDK logger line: %+v, %v", rec, ok)
	}
	rec, ok = logs.await("a raw line on stderr")
	if !ok || rec.attrs["plugin"] != "chatty" || rec.attrs["stream"] != "stderr" {
		t.Errorf("raw stderr line: %+v, %v", rec, ok)
	}
	if rec, ok := logs.find("plugin ready"); !ok || rec.attrs["name"] != "test-plugin" || rec.attrs["plugin"] != "chatty" {
		t.Errorf("host's start line: %+v, %v", rec, ok)
	}
}

func TestMetricsRegisterTwice(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	for range 2 {
		h, err := plugins.NewHost(plugins.HostOptions{Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		_ = h.Close()
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil // no /proc: best effort
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestOrphanedPluginExits kills a host with SIGKILL, so it cannot stop its
// plugin; the plugin notices its parent is gone and exits by itself.
func TestOrphanedPluginExits(t *testing.T) {
	t.Parallel()
	bin, _ := self(t)
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), "KMIRROR_TEST_HOST=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the test host printed no pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 || !alive(pid) {
		t.Fatalf("plugin pid %q: %v", line, err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	// The plugin checks every second; 30s leaves room for a loaded machine.
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("plugin %d outlived its host by 30s", pid)
	}
}

// A plugin stopped by SIGTERM while kmirror runs (someone stopped it
// alone) is restarted; once kmirror is stopping (Host.Stopping, as when
// the SIGTERM went to the whole process group) it is not, and its exit is
// no ERROR or WARN.
func TestSignalledPluginRestartsUnlessStopping(t *testing.T) {
	t.Parallel()
	catalogBin, _ := examples(t)
	catalog := filepath.Join(t.TempDir(), "catalog.json")
	writeCatalog(t, catalog, `{"topics": ["orders"]}`, time.Now())
	logs := newRecords()
	restarted := make(chan string, 10)
	h := newHost(t, plugins.HostOptions{Logger: slog.New(logs), OnRestart: func(name string) { restarted <- name }})
	p := start(t, h, plugins.Spec{Name: "catalog", Path: catalogBin, SHA256: mustSHA256(t, catalogBin),
		Config: map[string]string{"catalog": catalog}})

	if err := syscall.Kill(p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-restarted:
	case <-time.After(60 * time.Second):
		t.Fatal("a plugin stopped by SIGTERM alone was not restarted within 60s")
	}
	if rec, ok := logs.find("plugin process stopped by a signal; restarting"); !ok || rec.level != slog.LevelWarn {
		t.Errorf("restart line: %+v, %v", rec, ok)
	}

	h.Stopping()
	pid := p.Pid()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The supervisor logs this and returns: nothing restarts after it.
	rec, ok := logs.await("plugin process exited while kmirror stops")
	if !ok || rec.level != slog.LevelInfo || rec.attrs["pid"] != strconv.Itoa(pid) {
		t.Fatalf("exit line while stopping: %+v, %v", rec, ok)
	}
	if p.Pid() != 0 || p.Restarts() != 1 {
		t.Errorf("after the stop: pid %d, restarts %d; want 0 and 1", p.Pid(), p.Restarts())
	}
	for _, r := range logs.all() {
		if r.level >= slog.LevelWarn && r.msg != "plugin process stopped by a signal; restarting" {
			t.Errorf("%v line: %s %v", r.level, r.msg, r.attrs)
		}
		if r.attrs["path"] == "" && r.msg == "plugin process exited" {
			t.Errorf("go-plugin's exit line without path=: %v", r.attrs)
		}
	}
}
