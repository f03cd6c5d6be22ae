package plugins_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
	"github.com/kmirror/kmirror/plugins"
	"github.com/kmirror/kmirror/plugins/sdk"
)

// TestMain doubles as a plugin: the host tests start this very test binary
// as a plugin subprocess (go-plugin sets the magic cookie in its
// environment), for behaviours the examples do not have (slow, failing,
// exiting). The examples themselves are built with `go build` on first use.
func TestMain(m *testing.M) {
	if os.Getenv(plugins.Handshake.MagicCookieKey) == plugins.Handshake.MagicCookieValue {
		tp := &testPlugin{}
		sdk.Serve(sdk.WithInfo("test-plugin", "0.0.1"),
			sdk.WithTopicFilter(tp), sdk.WithGroupFilter(tp), sdk.WithTopicListener(tp), sdk.WithGroupListener(tp))
		return
	}
	if os.Getenv("KMIRROR_TEST_HOST") != "" {
		runTestHost()
		return
	}
	// Race-enabled plugin binaries otherwise sleep 1s when they exit.
	if os.Getenv("GORACE") == "" {
		_ = os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// runTestHost is a kmirror stand-in for TestOrphanedPluginExits: it starts
// this binary as a plugin, prints the plugin's pid and waits to be killed.
func runTestHost() {
	bin, err := os.Executable()
	if err == nil {
		var sum string
		if sum, err = sha256File(bin); err == nil {
			var h *plugins.Host
			if h, err = plugins.NewHost(plugins.HostOptions{StartTimeout: time.Minute}); err == nil {
				var p *plugins.Plugin
				if p, err = h.Start(context.Background(), plugins.Spec{Name: "orphan", Path: bin, SHA256: sum}); err == nil {
					fmt.Println(p.Pid())
					select {}
				}
			}
		}
	}
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// testPlugin behaves as its config's "mode" says.
type testPlugin struct {
	mu   sync.Mutex
	mode string
}

func (p *testPlugin) Configure(_ context.Context, config map[string]string) error {
	p.mu.Lock()
	p.mode = config["mode"]
	p.mu.Unlock()
	sdk.Logger().Info("test plugin configured", "mode", config["mode"])
	fmt.Fprintln(os.Stderr, "a raw line on stderr")
	if config["mode"] == "fail-configure" {
		return errors.New("refusing to start: mode fail-configure")
	}
	return nil
}

func (p *testPlugin) behave(ctx context.Context) error {
	p.mu.Lock()
	mode := p.mode
	p.mu.Unlock()
	switch mode {
	case "slow":
		<-ctx.Done()
		return ctx.Err()
	case "error":
		return errors.New("catalog unreachable")
	case "exit":
		os.Exit(3)
	}
	return nil
}

func (p *testPlugin) FilterTopics(ctx context.Context, req filters.TopicRequest) ([]string, error) {
	if err := p.behave(ctx); err != nil {
		return nil, err
	}
	var out []string
	for _, t := range req.Topics {
		out = append(out, t.Name)
	}
	return out, nil
}

func (p *testPlugin) FilterGroups(ctx context.Context, req filters.GroupRequest) ([]string, error) {
	if err := p.behave(ctx); err != nil {
		return nil, err
	}
	var out []string
	for _, g := range req.Groups {
		out = append(out, g.Name)
	}
	return out, nil
}

func (p *testPlugin) TopicsChanged(ctx context.Context, _ listeners.TopicsChange) error {
	return p.behave(ctx)
}

func (p *testPlugin) GroupsChanged(ctx context.Context, _ listeners.GroupsChange) error {
	return p.behave(ctx)
}

// --- helpers ---

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// examples builds the two example plugins (once per test run) and returns
// their paths.
func examples(t testing.TB) (catalogFilter, auditListener string) {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "kmirror-plugin-examples-")
		if buildErr != nil {
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			buildErr = err
			return
		}
		args := []string{"build", "-o", buildDir + string(filepath.Separator)}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "./examples/catalog-filter", "./examples/audit-listener")
		out, err := exec.Command(goBin, args...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "catalog-filter"), filepath.Join(buildDir, "audit-listener")
}

var (
	selfOnce sync.Once
	selfPath string
	selfSum  string
	selfErr  error
)

// self returns this test binary's path and sha256, to run it as a plugin.
func self(t testing.TB) (path, sum string) {
	t.Helper()
	selfOnce.Do(func() {
		selfPath, selfErr = os.Executable()
		if selfErr == nil {
			selfSum, selfErr = sha256File(selfPath)
		}
	})
	if selfErr != nil {
		t.Fatal(selfErr)
	}
	return selfPath, selfSum
}

func sha256File(path string) (string, error) {
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

func mustSHA256(t testing.TB, path string) string {
	t.Helper()
	s, err := sha256File(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// records is a slog.Handler that keeps every record, for asserting on the
// log bridge.
type records struct {
	attrs []slog.Attr // from WithAttrs
	recs  *[]record
	lock  *sync.Mutex
}

type record struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newRecords() *records {
	return &records{recs: new([]record), lock: new(sync.Mutex)}
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }

func (r *records) Handle(_ context.Context, rec slog.Record) error {
	m := map[string]string{}
	for _, a := range r.attrs {
		m[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	r.lock.Lock()
	*r.recs = append(*r.recs, record{rec.Level, rec.Message, m})
	r.lock.Unlock()
	return nil
}

func (r *records) WithAttrs(as []slog.Attr) slog.Handler {
	return &records{attrs: append(slices.Clone(r.attrs), as...), recs: r.recs, lock: r.lock}
}

func (r *records) WithGroup(string) slog.Handler { return r }

// all returns every record so far.
func (r *records) all() []record {
	r.lock.Lock()
	defer r.lock.Unlock()
	return slices.Clone(*r.recs)
}

// find returns the first record with msg, or false.
func (r *records) find(msg string) (record, bool) {
	r.lock.Lock()
	defer r.lock.Unlock()
	for _, rec := range *r.recs {
		if rec.msg == msg {
			return rec, true
		}
	}
	return record{}, false
}

// await is find, retried for up to 30s: plugin log lines arrive
// asynchronously.
func (r *records) await(msg string) (record, bool) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec, ok := r.find(msg)
		if ok || time.Now().After(deadline) {
			return rec, ok
		}
		time.Sleep(10 * time.Millisecond)
	}
}
