package connector

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// levelCounter counts log records by level.
type levelCounter struct {
	mu sync.Mutex
	n  map[slog.Level]int
}

func (c *levelCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *levelCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[r.Level]++
	return nil
}
func (c *levelCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *levelCounter) WithGroup(string) slog.Handler      { return c }

func (c *levelCounter) count(l slog.Level) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[l]
}

type loggedErr struct{ error }

func (loggedErr) Logged() bool { return true }

// A job failing on every pass (every 5 s for 10 minutes, by a fake clock)
// is logged at 0, 1, 3 and 7 minutes, not 120 times; its recovery once; a
// failure whose cause was logged where it happened (a broker down) not at
// all.
func TestFailureLogBackoff(t *testing.T) {
	t.Parallel()
	lc := &levelCounter{n: map[slog.Level]int{}}
	log := slog.New(lc)
	f := newFailureLog()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.now = func() time.Time { return now }
	for range 120 {
		f.failed(log, "control pass failed", errors.New("list source topics: TOPIC_AUTHORIZATION_FAILED"))
		now = now.Add(5 * time.Second)
	}
	if n := lc.count(slog.LevelError); n != 4 {
		t.Errorf("%d ERROR lines for 120 failed passes in 10 minutes, want 4", n)
	}
	f.succeeded(log, "control pass succeeded again")
	f.succeeded(log, "control pass succeeded again")
	if n := lc.count(slog.LevelInfo); n != 1 {
		t.Errorf("%d INFO lines for one recovery, want 1", n)
	}
	// A new run of failures is logged at once.
	f.failed(log, "control pass failed", errors.New("again"))
	if n := lc.count(slog.LevelError); n != 5 {
		t.Errorf("%d ERROR lines after a new failure, want 5", n)
	}

	g := newFailureLog()
	g.now = f.now
	for range 120 {
		g.failed(log, "group offset sync failed", loggedErr{errors.New("cluster east: connection refused")})
	}
	g.succeeded(log, "group offset sync succeeded again")
	if n := lc.count(slog.LevelError) + lc.count(slog.LevelInfo); n != 6 {
		t.Errorf("failures logged by the cluster's tracker were logged again: %d lines, want 6", n)
	}
}
