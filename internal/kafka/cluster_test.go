package kafka

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/config"
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

func newTestCluster(t *testing.T, addr string) *Cluster {
	t.Helper()
	c, err := NewCluster("west", &config.Cluster{BootstrapServers: []string{addr}, ClientID: "k",
		DialTimeout: config.Duration(time.Second), RequestTimeout: config.Duration(300 * time.Millisecond)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// listTopics lists the cluster's topics with a client of its options and
// returns the explained error, and how long it took.
func listTopics(t *testing.T, c *Cluster) (error, time.Duration) {
	t.Helper()
	cl, err := kgo.NewClient(c.Opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The request timeout must end the request, not this context.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err = kadm.NewClient(cl).ListTopics(ctx)
	return c.Explain(err), time.Since(start)
}

// A broker that accepts connections and never answers is reported after
// the request timeout (not franz-go's 30 s), with its address and what to
// check, and is listed among the cluster's faults.
func TestSilentBroker(t *testing.T) {
	t.Parallel()
	addr := silentBroker(t)
	c := newTestCluster(t, addr)
	err, took := listTopics(t, c)
	if err == nil {
		t.Fatal("listing topics of a silent broker succeeded")
	}
	// Two attempts of 300ms; the bound only says "not franz-go's 30s".
	if took > 15*time.Second {
		t.Errorf("took %v", took)
	}
	msg := err.Error()
	for _, want := range []string{"cluster west (" + addr + ")", addr + " accepts connections but did not answer within request_timeout (300ms)", "clusters.west.tls"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	var ce *Error
	if !errors.As(err, &ce) || !ce.Unreachable() || ce.Logged() {
		t.Errorf("error %#v: want unreachable, not logged (Report was not called)", ce)
	}
	fs := c.Faults()
	if len(fs) != 1 || fs[0].Address != addr || !strings.Contains(fs[0].Check, "accepts connections") || fs[0].Failures < 1 {
		t.Errorf("faults = %+v", fs)
	}
}

// A closed port is reported at once, with "nothing listens".
func TestRefusedBroker(t *testing.T) {
	t.Parallel()
	addr := closedPort(t)
	c := newTestCluster(t, addr)
	err, _ := listTopics(t, c)
	if err == nil || !strings.Contains(err.Error(), "nothing listens at "+addr+": is the broker running, and is the address right (clusters.west.bootstrap_servers)?") {
		t.Fatalf("err = %v", err)
	}
	// Explaining twice does not wrap twice.
	if again := c.Explain(err); again != err {
		t.Errorf("explained again: %v", again)
	}
}

// A request that timed out as a whole is explained by the broker failing
// at the moment; an answer of the cluster gets its name and no advice.
func TestExplainTimeoutAndAnswer(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, "127.0.0.1:9")
	opErr := &net.OpError{Op: "read", Net: "tcp", Addr: fakeAddr("127.0.0.1:9"), Err: timeoutErr{}}
	c.failed("127.0.0.1:9", opErr)
	err := c.Explain(context.DeadlineExceeded)
	var ce *Error
	if !errors.As(err, &ce) || ce.Cause != opErr || !strings.Contains(err.Error(), "127.0.0.1:9 accepts connections") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
	answer := errors.New("TOPIC_AUTHORIZATION_FAILED")
	if err := c.Explain(answer); !errors.As(err, &ce) || ce.Unreachable() || err.Error() != "cluster west (127.0.0.1:9): TOPIC_AUTHORIZATION_FAILED" {
		t.Errorf("err = %v", err)
	}
}

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// records collects log records.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) count(level slog.Level) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.recs {
		if rec.Level == level {
			n++
		}
	}
	return n
}

// A broker that keeps failing is logged once, then with a growing backoff,
// not on every attempt; its recovery once; another broker on its own.
// Driven by a fake clock: an attempt every 5 s for 10 minutes.
func TestFailureLogBackoff(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, "127.0.0.1:9")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	rec := &records{}
	c.Report(slog.New(rec))
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: fakeAddr("127.0.0.1:9"), Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	for range 120 { // 10 minutes
		c.failed("127.0.0.1:9", refused)
		now = now.Add(5 * time.Second)
	}
	// At 0, then after 1, 2 and 4 more minutes: 0, 1m, 3m, 7m.
	if n := rec.count(slog.LevelError); n != 4 {
		t.Errorf("%d ERROR lines over 120 failures in 10 minutes, want 4", n)
	}
	if err := c.Explain(refused); !err.(*Error).Logged() {
		t.Error("an error of a broker failure already logged must say so")
	}
	c.failed("127.0.0.1:10", refused)
	if n := rec.count(slog.LevelError); n != 5 {
		t.Errorf("a second broker failing: %d ERROR lines, want 5", n)
	}
	c.ok("127.0.0.1:9")
	c.ok("127.0.0.1:9")
	if n := rec.count(slog.LevelInfo); n != 1 {
		t.Errorf("%d INFO lines for one recovery, want 1", n)
	}
	if fs := c.Faults(); len(fs) != 1 || fs[0].Address != "127.0.0.1:10" {
		t.Errorf("faults = %+v", fs)
	}
}
