//go:build e2e

package e2e

// Helpers for the plugin, filter and listener tests (plugins_test.go,
// listeners_test.go): building the plugin binaries, rendering configs with
// plugins, filters and listeners, reading kmirror's status and metrics,
// finding plugin processes, and a real Alertmanager.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ---------------------------------------------------------------------------
// Plugin binaries
// ---------------------------------------------------------------------------

// pluginBin is a built plugin binary and its sha256 (hex), as pinned in a
// config.
type pluginBin struct {
	Path   string
	SHA256 string
}

// The plugins the tests run, by name: the two examples and the test's own
// slow listener.
var pluginPackages = map[string]string{
	"catalog-filter": "./plugins/examples/catalog-filter",
	"audit-listener": "./plugins/examples/audit-listener",
	"slowlistener":   "./e2e/testdata/slowlistener",
}

var pluginBuild struct {
	once sync.Once
	dir  string
	bins map[string]pluginBin
	err  error
}

// plugin returns the binary of one of pluginPackages. All of them are built
// once per test binary (with `go build`, into a temp dir removed after the
// tests) on the first call.
func plugin(t testing.TB, name string) pluginBin {
	t.Helper()
	pluginBuild.once.Do(func() {
		pluginBuild.bins, pluginBuild.err = buildPlugins()
	})
	if pluginBuild.err != nil {
		t.Fatalf("building the plugins: %v", pluginBuild.err)
	}
	b, ok := pluginBuild.bins[name]
	if !ok {
		t.Fatalf("no plugin %q (known: %v)", name, slices.Sorted(maps.Keys(pluginPackages)))
	}
	return b
}

func buildPlugins() (map[string]pluginBin, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kmirror-e2e-plugins-")
	if err != nil {
		return nil, err
	}
	registerAtExit(func() { _ = os.RemoveAll(dir) })
	bins := make(map[string]pluginBin, len(pluginPackages))
	for name, pkg := range pluginPackages {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build -o %s %s (in %s): %v\n%s", out, pkg, root, err, b)
		}
		sum, err := fileSHA256(out)
		if err != nil {
			return nil, err
		}
		bins[name] = pluginBin{Path: out, SHA256: sum}
	}
	return bins, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ---------------------------------------------------------------------------
// Configs with plugins, filters and listeners
// ---------------------------------------------------------------------------

// extConfig is what a test adds to a mirrorConfig: the mirror's filters and
// listeners and the top-level plugins and listeners. Values are rendered as
// JSON, which YAML reads as flow collections.
type extConfig struct {
	Filters      []any          // mirrors[0].filters
	Listeners    []string       // mirrors[0].listeners
	Plugins      map[string]any // plugins
	ListenerDefs map[string]any // listeners
	// MirrorRaw is added to the mirror as is (indent it by 4 spaces):
	// for broken configs.
	MirrorRaw string
	// TopRaw is added at the top level as is (no indent).
	TopRaw string
}

// pluginEntry is a plugins.<name> (or, with typ "plugin", a listeners.<name>)
// entry for bin.
func pluginEntry(bin pluginBin, config map[string]string) map[string]any {
	m := map[string]any{"path": bin.Path, "sha256": bin.SHA256}
	if config != nil {
		m["config"] = config
	}
	return m
}

// listenerPluginEntry is a listeners.<name> entry of type plugin.
func listenerPluginEntry(bin pluginBin, config map[string]string) map[string]any {
	m := pluginEntry(bin, config)
	m["type"] = "plugin"
	return m
}

// renderExtConfig renders cfg through testdata/kmirror.yaml.tmpl and adds
// x: the mirror keys go at the end of the (only) mirror, right before the
// top-level http key; the top-level keys at the end.
func renderExtConfig(t testing.TB, cfg mirrorConfig, x extConfig) []byte {
	t.Helper()
	if cfg.Include == nil {
		cfg.Include = []string{}
	}
	if cfg.Exclude == nil {
		cfg.Exclude = []string{}
	}
	var buf bytes.Buffer
	if err := configTmpl.Execute(&buf, cfg); err != nil {
		t.Fatalf("render config: %v", err)
	}
	base := buf.String()
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("render config: %v", err)
		}
		return string(b)
	}
	var mirror, top strings.Builder
	if x.Filters != nil {
		fmt.Fprintf(&mirror, "    filters: %s\n", js(x.Filters))
	}
	if x.Listeners != nil {
		fmt.Fprintf(&mirror, "    listeners: %s\n", js(x.Listeners))
	}
	if x.MirrorRaw != "" {
		mirror.WriteString(strings.TrimRight(x.MirrorRaw, "\n") + "\n")
	}
	if x.Plugins != nil {
		fmt.Fprintf(&top, "plugins: %s\n", js(x.Plugins))
	}
	if x.ListenerDefs != nil {
		fmt.Fprintf(&top, "listeners: %s\n", js(x.ListenerDefs))
	}
	if x.TopRaw != "" {
		top.WriteString(strings.TrimRight(x.TopRaw, "\n") + "\n")
	}
	i := strings.Index(base, "\nhttp:")
	if i < 0 {
		t.Fatalf("render config: no top-level http key after the mirror in testdata/kmirror.yaml.tmpl:\n%s", base)
	}
	out := base[:i+1] + mirror.String() + base[i+1:]
	if !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return []byte(out + top.String())
}

// writeExtConfig renders cfg and x into path (a new file in the test's dir
// when path is ""), atomically, so that a reload never reads half a file.
// It returns the path.
func (e *env) writeExtConfig(path string, cfg mirrorConfig, x extConfig) string {
	e.t.Helper()
	if path == "" {
		f, err := os.CreateTemp(e.dir, "kmirror-*.yaml")
		if err != nil {
			e.t.Fatal(err)
		}
		path = f.Name()
		f.Close()
	}
	writeFileAtomic(e.t, path, renderExtConfig(e.t, cfg, x))
	return path
}

var atomicSeq struct {
	mu sync.Mutex
	n  int
}

// writeFileAtomic replaces path with data (a temp file renamed over it) and
// gives it a modification time later than any earlier write by this
// function, so a reader keyed on (mtime, size) always sees the change.
func writeFileAtomic(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := fmt.Sprintf("%s.tmp-%d", path, time.Now().UnixNano())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	atomicSeq.mu.Lock()
	atomicSeq.n++
	mtime := time.Now().Add(time.Duration(atomicSeq.n) * time.Second)
	atomicSeq.mu.Unlock()
	if err := os.Chtimes(tmp, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// configLineOf returns the 1-based number of the first line of path containing s.
func configLineOf(t testing.TB, path, s string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("%s has no line containing %q", path, s)
	return 0
}

// catalogEntry is an entry of the catalog-filter's catalog.
type catalogEntry struct {
	Name string `json:"name"`
	Team string `json:"team,omitempty"`
}

// writeCatalog writes the catalog-filter's catalog file atomically.
func writeCatalog(t testing.TB, path string, entries ...catalogEntry) {
	t.Helper()
	if entries == nil {
		entries = []catalogEntry{}
	}
	b, err := json.Marshal(map[string]any{"topics": entries})
	if err != nil {
		t.Fatal(err)
	}
	writeFileAtomic(t, path, b)
}

// writeCatalogGroups writes a catalog that lists groups as well as topics.
func writeCatalogGroups(t testing.TB, path string, topics, groups []catalogEntry) {
	t.Helper()
	if topics == nil {
		topics = []catalogEntry{}
	}
	if groups == nil {
		groups = []catalogEntry{}
	}
	b, err := json.Marshal(map[string]any{"topics": topics, "groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	writeFileAtomic(t, path, b)
}

func catalogNames(ns ...string) []catalogEntry {
	out := make([]catalogEntry, len(ns))
	for i, n := range ns {
		out[i] = catalogEntry{Name: n}
	}
	return out
}

// ---------------------------------------------------------------------------
// Status, metrics, reload
// ---------------------------------------------------------------------------

// mirroredTopics returns the source topics /api/v1/status lists for mirror,
// with their state.
func mirroredTopics(addr, mirror string) (map[string]string, error) {
	code, body, err := httpGet(addr, "/api/v1/status")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/status: %d %s", code, body)
	}
	var doc statusDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("decoding /api/v1/status %s: %v", body, err)
	}
	for _, m := range doc.Mirrors {
		if m.Name != mirror {
			continue
		}
		out := make(map[string]string, len(m.Topics))
		for _, tp := range m.Topics {
			out[tp.SourceTopic] = tp.State
		}
		return out, nil
	}
	return nil, fmt.Errorf("mirror %s not in /api/v1/status: %s", mirror, body)
}

func sortedTopicSet(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

func sameTopicSet(got map[string]string, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, w := range want {
		if _, ok := got[w]; !ok {
			return false
		}
	}
	return true
}

// waitMirrored waits until /api/v1/status lists exactly want (source
// topic names) for mirror, and returns how long that took.
func (e *env) waitMirrored(addr, mirror string, timeout time.Duration, want ...string) time.Duration {
	e.t.Helper()
	want = slices.Sorted(slices.Values(want))
	begin := time.Now()
	e.waitFor(timeout, fmt.Sprintf("/api/v1/status to list exactly %v for mirror %s", want, mirror), func() (bool, string) {
		got, err := mirroredTopics(addr, mirror)
		if err != nil {
			return false, err.Error()
		}
		return sameTopicSet(got, want), fmt.Sprintf("lists %v", sortedTopicSet(got))
	})
	return time.Since(begin)
}

// statusWatch samples the worker's HTTP API in the background and
// remembers every sample that broke the watched rule (watchMirrored: the
// mirrored set must not shrink; watchGroups: the group set must not
// change).
type statusWatch struct {
	stopCh chan struct{}
	done   chan struct{}

	mu         sync.Mutex
	samples    int
	violations []string
}

// watchMirrored watches that /api/v1/status keeps listing all of keep.
func watchMirrored(t testing.TB, addr, mirror string, keep ...string) *statusWatch {
	return watchSamples(t, func() (string, bool) {
		got, err := mirroredTopics(addr, mirror)
		if err != nil {
			return "", false // the worker's own liveness is checked elsewhere
		}
		var missing []string
		for _, k := range keep {
			if _, ok := got[k]; !ok {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			return fmt.Sprintf("%v missing (listed: %v)", missing, sortedTopicSet(got)), true
		}
		return "", true
	})
}

// watchSamples calls sample every 50ms in the background until the watch
// is checked or the test ends. sample returns ok=false when it could not
// read (not counted) and a non-empty violation when what it read breaks
// the rule being watched.
func watchSamples(t testing.TB, sample func() (violation string, ok bool)) *statusWatch {
	w := &statusWatch{stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stopCh:
				return
			case <-tick.C:
			}
			v, ok := sample()
			if !ok {
				continue
			}
			w.mu.Lock()
			w.samples++
			if v != "" && len(w.violations) < 10 {
				w.violations = append(w.violations, time.Now().Format("15:04:05.000")+": "+v)
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.halt() })
	return w
}

func (w *statusWatch) halt() {
	select {
	case <-w.stopCh:
	default:
		close(w.stopCh)
	}
	<-w.done
}

// check stops the watch and fails the test if any sample missed a topic.
func (w *statusWatch) check(t testing.TB, phase string) {
	t.Helper()
	w.halt()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.samples == 0 {
		t.Errorf("%s: /api/v1/status was never read while watching", phase)
	}
	if len(w.violations) > 0 {
		t.Errorf("%s: the watched set changed (%d samples); first violations:\n%s",
			phase, w.samples, strings.Join(w.violations, "\n"))
	}
}

var labelRe = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// scrapeMetric returns the sum of the samples of name (Prometheus text format from
// GET /metrics) whose labels include all of labels, and the series count.
func scrapeMetric(addr, name string, labels map[string]string) (float64, int, error) {
	code, body, err := httpGet(addr, "/metrics")
	if err != nil {
		return 0, 0, err
	}
	if code != http.StatusOK {
		return 0, 0, fmt.Errorf("GET /metrics: %d", code)
	}
	var sum float64
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		var lbls string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndex(rest, "}")
			if end < 0 {
				continue
			}
			lbls, rest = rest[1:end], rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // a longer name
		}
		have := map[string]string{}
		for _, m := range labelRe.FindAllStringSubmatch(lbls, -1) {
			have[m[1]] = m[2]
		}
		match := true
		for k, v := range labels {
			if have[k] != v {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum += v
		n++
	}
	return sum, n, nil
}

// mustScrapeMetric is scrapeMetric that fails the test on an error or when no series
// matches.
func mustScrapeMetric(t testing.TB, addr, name string, labels map[string]string) float64 {
	t.Helper()
	v, n, err := scrapeMetric(addr, name, labels)
	if err != nil {
		t.Fatalf("reading %s%v: %v", name, labels, err)
	}
	if n == 0 {
		t.Fatalf("no %s series with labels %v in /metrics", name, labels)
	}
	return v
}

// waitMetric waits until the metric's sum satisfies ok and returns it.
func (e *env) waitMetric(addr, name string, labels map[string]string, timeout time.Duration, desc string, ok func(float64) bool) float64 {
	e.t.Helper()
	var v float64
	e.waitFor(timeout, fmt.Sprintf("%s%v %s", name, labels, desc), func() (bool, string) {
		var n int
		var err error
		v, n, err = scrapeMetric(addr, name, labels)
		if err != nil {
			return false, err.Error()
		}
		if n == 0 {
			return false, "no such series"
		}
		return ok(v), fmt.Sprintf("value %v", v)
	})
	return v
}

// controlPasses returns kmirror_control_passes_total of mirror: the control
// passes started so far (a pass is counted when it starts).
func controlPasses(t testing.TB, addr, mirror string) float64 {
	t.Helper()
	n, err := metricSum(addr, "kmirror_control_passes_total", mirror)
	if err != nil {
		t.Fatalf("reading kmirror_control_passes_total: %v", err)
	}
	return n
}

// waitPasses waits until n control passes of mirror started after the call
// have ended (the next one has started): for checks that something did not
// change "over a few passes", counted in passes rather than slept.
func (e *env) waitPasses(addr, mirror string, n int) {
	e.t.Helper()
	p0 := controlPasses(e.t, addr, mirror)
	e.waitFor(60*time.Second, fmt.Sprintf("%d more control passes of %s", n, mirror), func() (bool, string) {
		p := controlPasses(e.t, addr, mirror)
		return p >= p0+float64(n)+1, fmt.Sprintf("%v passes since", p-p0)
	})
}

// maxPassesToSee bounds how many control passes may start between a change
// the passes act on (p0 read right after the change) and the moment the
// test sees its effect (p1 read right after): the first pass started after
// the change acts on it; its effect may show only at its end or after a
// listener call; the test's polling and reading may take up to two more.
const maxPassesToSee = 4

// checkSeenWithinPasses fails the test if the effect of a change took more
// than maxPassesToSee control passes to be seen. "Within two refresh
// intervals" is counted in passes, not seconds: a loaded machine slows the
// passes as much as anything else, and which pass acts is what matters.
func checkSeenWithinPasses(t testing.TB, what string, p0, p1 float64) {
	t.Helper()
	t.Logf("%s: seen %v control passes after the change (at most %d allowed)", what, p1-p0, maxPassesToSee)
	if p1-p0 > maxPassesToSee {
		t.Errorf("%s: seen only %v control passes after the change; want at most %d (the first pass after a change acts on it)", what, p1-p0, maxPassesToSee)
	}
}

// postReload is POST /api/v1/reload.
func postReload(t testing.TB, addr string) (int, string) {
	t.Helper()
	resp, err := httpClient.Post("http://"+addr+"/api/v1/reload", "application/json", nil)
	if err != nil {
		t.Fatalf("POST /api/v1/reload: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sighup sends SIGHUP (a reload, not a stop) to the worker.
func (w *worker) sighup(t testing.TB) {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatalf("SIGHUP kmirror #%d: %v", w.id, err)
	}
}

// countLog counts the lines of the worker's log containing all of parts
// (logLines is in kafka_cases_test.go).
func (w *worker) countLog(parts ...string) int { return len(w.logLines(parts...)) }

// ---------------------------------------------------------------------------
// Plugin processes
// ---------------------------------------------------------------------------

// childPids returns the live child processes of pid (scanning /proc, so it
// works without CONFIG_PROC_CHILDREN).
func childPids(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, ent := range entries {
		p, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parens.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil && ppid == pid {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// pluginPids returns the child processes of the worker running bin.
func (w *worker) pluginPids(bin pluginBin) []int {
	want, err := filepath.EvalSymlinks(bin.Path)
	if err != nil {
		want = bin.Path
	}
	var out []int
	for _, c := range childPids(w.cmd.Process.Pid) {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", c))
		if err != nil {
			continue
		}
		if strings.TrimSuffix(exe, " (deleted)") == want {
			out = append(out, c)
		}
	}
	return out
}

// waitPluginPid waits until exactly one child of the worker runs bin, other
// than not (0: any), and returns its pid.
func (e *env) waitPluginPid(w *worker, bin pluginBin, not int, timeout time.Duration) int {
	e.t.Helper()
	var pid int
	desc := fmt.Sprintf("one %s process, child of kmirror (pid %d)", filepath.Base(bin.Path), w.cmd.Process.Pid)
	if not != 0 {
		desc += fmt.Sprintf(", other than the killed pid %d", not)
	}
	e.waitFor(timeout, desc, func() (bool, string) {
		pids := w.pluginPids(bin)
		if len(pids) != 1 || pids[0] == not {
			return false, fmt.Sprintf("children running it: %v (all children: %v)", pids, childPids(w.cmd.Process.Pid))
		}
		pid = pids[0]
		return true, ""
	})
	return pid
}

// kill9 sends SIGKILL to pid.
func kill9(t testing.TB, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
}

// ---------------------------------------------------------------------------
// The audit-listener's file
// ---------------------------------------------------------------------------

// auditTopic is a topic in an audit line.
type auditTopic struct {
	Upstream   string            `json:"upstream"`
	Downstream string            `json:"downstream"`
	Partitions int32             `json:"partitions"`
	State      string            `json:"state"`
	Metadata   map[string]string `json:"metadata"`
}

// auditLine is one line of the audit-listener's file (kind "topics").
type auditLine struct {
	Time     time.Time    `json:"time"`
	Kind     string       `json:"kind"`
	Mirror   string       `json:"mirror"`
	Sequence uint64       `json:"sequence"`
	Count    int          `json:"count"`
	Added    []auditTopic `json:"added"`
	Removed  []auditTopic `json:"removed"`
	Changed  []auditTopic `json:"changed"`
}

func (l auditLine) String() string {
	up := func(ts []auditTopic) []string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = t.Upstream
		}
		return out
	}
	return fmt.Sprintf("seq=%d count=%d added=%v removed=%v changed=%v", l.Sequence, l.Count, up(l.Added), up(l.Removed), up(l.Changed))
}

func upstreams(ts []auditTopic) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Upstream
	}
	slices.Sort(out)
	return out
}

// readAudit returns the "topics" lines of mirror in the audit file.
func readAudit(path, mirror string) ([]auditLine, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []auditLine
	for i, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var al auditLine
		if err := json.Unmarshal([]byte(l), &al); err != nil {
			return nil, fmt.Errorf("%s line %d: %v: %s", path, i+1, err, l)
		}
		if al.Kind == "topics" && al.Mirror == mirror {
			out = append(out, al)
		}
	}
	return out, nil
}

func auditDump(ls []auditLine) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString("\n  " + l.String())
	}
	return b.String()
}

// waitAudit waits for the first topics line after the first `after` lines
// that satisfies ok, and returns its index and the lines read.
func (e *env) waitAudit(path, mirror string, after int, timeout time.Duration, desc string, ok func(auditLine) bool) (int, []auditLine) {
	e.t.Helper()
	idx := -1
	var lines []auditLine
	e.waitFor(timeout, "an audit line "+desc, func() (bool, string) {
		var err error
		lines, err = readAudit(path, mirror)
		if err != nil {
			return false, err.Error()
		}
		for i := after; i < len(lines); i++ {
			if ok(lines[i]) {
				idx = i
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d topics lines so far:%s", len(lines), auditDump(lines))
	})
	return idx, lines
}

// checkSequences fails the test unless the lines' sequences are 1, 2, 3...
func checkSequences(t testing.TB, lines []auditLine) {
	t.Helper()
	for i, l := range lines {
		if l.Sequence != uint64(i+1) {
			t.Errorf("audit line %d has sequence %d, want %d (sequences must start at 1 and increase by one):%s", i+1, l.Sequence, i+1, auditDump(lines))
			return
		}
	}
}

// ---------------------------------------------------------------------------
// A real Alertmanager
// ---------------------------------------------------------------------------

// alertmanagerBin finds Alertmanager: $KMIRROR_ALERTMANAGER, Debian's
// prometheus-alertmanager or alertmanager on PATH. Without one the test
// skips, or fails with CI=true.
func alertmanagerBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("KMIRROR_ALERTMANAGER"); p != "" {
		return p
	}
	for _, name := range []string{"prometheus-alertmanager", "alertmanager"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Alertmanager binary (prometheus-alertmanager or alertmanager on PATH, or $KMIRROR_ALERTMANAGER): apt-get install prometheus-alertmanager"
	if inCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// startAlertmanager runs a real Alertmanager on a free loopback port with a
// temp storage path, a null receiver and clustering off, and returns its
// base URL once /-/ready answers. It is killed when the test ends.
func startAlertmanager(t testing.TB) string {
	t.Helper()
	bin := alertmanagerBin(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte("route:\n  receiver: \"null\"\nreceivers:\n  - name: \"null\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for try := 0; try < 3; try++ { // the free port may be taken in between
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		out := &syncBuffer{}
		cmd := exec.Command(bin, "--config.file="+cfg, "--storage.path="+filepath.Join(dir, fmt.Sprintf("data-%d", try)),
			fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port), "--cluster.listen-address=", "--log.level=warn")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", bin, err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop := func() { _ = cmd.Process.Kill(); <-exited }
		ready := false
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !ready; time.Sleep(50 * time.Millisecond) {
			select {
			case <-exited:
				lastErr = fmt.Errorf("alertmanager exited at start:\n%s", out.String())
				deadline = time.Time{}
				continue
			default:
			}
			if resp, err := httpClient.Get(base + "/-/ready"); err == nil {
				resp.Body.Close()
				ready = resp.StatusCode == http.StatusOK
			}
		}
		if ready {
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					t.Logf("alertmanager output:\n%s", out.String())
				}
			})
			return base
		}
		stop()
		if lastErr == nil {
			lastErr = fmt.Errorf("alertmanager not ready on %s within 30s:\n%s", base, out.String())
		}
	}
	t.Fatal(lastErr)
	return ""
}

// amAlert is an alert from Alertmanager's GET /api/v2/alerts.
type amAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      time.Time         `json:"endsAt"`
	Status      struct {
		State string `json:"state"`
	} `json:"status"`
}

// amAlerts returns Alertmanager's alerts with label mirror=mirror.
func amAlerts(base, mirror string) ([]amAlert, error) {
	resp, err := httpClient.Get(base + "/api/v2/alerts?filter=" + url.QueryEscape(`mirror="`+mirror+`"`))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v2/alerts: %d %s", resp.StatusCode, b)
	}
	var as []amAlert
	if err := json.Unmarshal(b, &as); err != nil {
		return nil, fmt.Errorf("decoding alerts %s: %v", b, err)
	}
	return as, nil
}

// ---------------------------------------------------------------------------
// Translated groups (group filter plugins)
// ---------------------------------------------------------------------------

// mirrorGroups returns the groups /api/v1/groups lists for mirror, by name.
func mirrorGroups(addr, mirror string) (map[string]kmGroupStatus, error) {
	all, err := kmGroupsHTTP(addr)
	if err != nil {
		return nil, err
	}
	out := make(map[string]kmGroupStatus, len(all))
	for name, g := range all {
		if g.Mirror == mirror {
			out[name] = g
		}
	}
	return out, nil
}

// watchGroups watches that /api/v1/groups keeps listing exactly want for
// mirror.
func watchGroups(t testing.TB, addr, mirror string, want ...string) *statusWatch {
	want = slices.Sorted(slices.Values(want))
	return watchSamples(t, func() (string, bool) {
		got, err := mirrorGroups(addr, mirror)
		if err != nil {
			return "", false
		}
		if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, want) {
			return fmt.Sprintf("groups %v, want %v", names, want), true
		}
		return "", true
	})
}

// waitGroupSet waits until /api/v1/groups lists exactly the groups of want
// for mirror, each synced, and each of them has exactly want's offsets
// committed on the target (by target topic partition).
func (e *env) waitGroupSet(addr, mirror string, timeout time.Duration, want map[string]map[kmTP]int64) {
	e.t.Helper()
	names := slices.Sorted(maps.Keys(want))
	e.waitFor(timeout, fmt.Sprintf("/api/v1/groups to list exactly %v (synced) for mirror %s, with their translated offsets on the target", names, mirror), func() (bool, string) {
		got, err := mirrorGroups(addr, mirror)
		if err != nil {
			return false, err.Error()
		}
		if listed := slices.Sorted(maps.Keys(got)); !slices.Equal(listed, names) {
			return false, fmt.Sprintf("lists %v", listed)
		}
		for _, g := range names {
			if got[g].State != "synced" {
				return false, fmt.Sprintf("group %s: %+v", g, got[g])
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			committed, err := kmCommitted(ctx, e.dstAdm, g)
			cancel()
			if err != nil {
				return false, fmt.Sprintf("group %s on the target: %v", g, err)
			}
			if !maps.Equal(committed, want[g]) {
				return false, fmt.Sprintf("group %s on the target has %v, want %v", g, committed, want[g])
			}
		}
		return true, ""
	})
}
