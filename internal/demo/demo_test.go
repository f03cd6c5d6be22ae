package demo

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// watchWriter collects the demo's output and closes found once the output
// matches.
type watchWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	match func(string) bool
	found chan struct{}
	once  sync.Once
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.match(w.buf.String()) {
		w.once.Do(func() { close(w.found) })
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

var pairRE = regexp.MustCompile(`orders/(\d+) (\d+)->(\d+)`)

// mappedPair returns the first "orders/P S->T" of out's group lines whose
// source and target offsets differ.
func mappedPair(out string) string {
	for line := range strings.SplitSeq(out, "\n") {
		if !strings.HasPrefix(line, "group billing ") {
			continue
		}
		for _, m := range pairRE.FindAllStringSubmatch(line, -1) {
			if m[2] != m[3] && m[3] != "0" {
				return m[0]
			}
		}
	}
	return ""
}

// TestDemoTranslatesOffsets runs the demo until its group line shows a
// translated offset that differs from the source offset (orders is
// transactional: the target has no commit markers), then stops it: it
// printed its config first and a closing summary line last, which counts
// the translated partitions.
func TestDemoTranslatesOffsets(t *testing.T) {
	w := &watchWriter{match: func(s string) bool { return mappedPair(s) != "" }, found: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Out: w, Logger: slog.New(slog.DiscardHandler), HTTPListen: "127.0.0.1:0", Version: "test"})
	}()
	select {
	case <-w.found:
	case err := <-done:
		t.Fatalf("demo ended early: %v\n%s", err, w.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("no translated offset pair with source != target within 2m:\n%s", w.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the demo did not stop within 1m of its context ending")
	}
	out := w.String()
	t.Logf("mapped pair: %s", mappedPair(out))
	cfg := strings.Index(out, "the config kmirror runs")
	if cfg < 0 || !strings.Contains(out[cfg:], "  mirrors:\n    - name: east-to-west") {
		t.Errorf("the demo did not print its config:\n%s", out)
	}
	if cfg > strings.Index(out, "SOURCE (east)") {
		t.Errorf("the config is not printed before the tables")
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	m := regexp.MustCompile(`^demo stopped after \S+: \d+ topics mirrored east -> west, \d+ records on the target; (\d+) group partitions translated to a different target offset`).FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("last line is not the closing summary: %q", last)
	}
	if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Errorf("closing summary counts no translated partition: %q", last)
	}
}

// TestDemoHTTPBusy: with --http on a busy port the demo fails at once,
// naming the flag, before it prints anything (no table of pending topics).
func TestDemoHTTPBusy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	var out bytes.Buffer
	err = Run(t.Context(), Options{Out: &out, Logger: slog.New(slog.DiscardHandler), HTTPListen: ln.Addr().String()})
	if err == nil || !strings.HasPrefix(err.Error(), "--http "+ln.Addr().String()+": ") || !strings.Contains(err.Error(), "choose another address with --http") {
		t.Errorf("got error %v, want one naming --http %s", err, ln.Addr())
	}
	if out.Len() > 0 {
		t.Errorf("printed before failing:\n%s", out.String())
	}
}

// TestSummaryTarget: a source topic the demo does not mirror, or not yet,
// has no target end offset to show ("-"), not 0.
func TestSummaryTarget(t *testing.T) {
	t.Parallel()
	dst := map[string]int64{"east.orders": 120}
	for n, want := range map[string][2]string{
		"orders":             {"east.orders", "120"},
		"__consumer_offsets": {"(not mirrored)", "-"},
		"kmirror.x.internal": {"(not mirrored)", "-"},
		"payments":           {"(pending)", "-"},
	} {
		if target, end := summaryTarget(n, dst); target != want[0] || end != want[1] {
			t.Errorf("%s: target %q, end %q; want %q, %q", n, target, end, want[0], want[1])
		}
	}
}
