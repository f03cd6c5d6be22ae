package kafka

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClientLogsLimited: franz-go's warnings and errors reach the log once
// per interval per message, whatever their keyvals; the repeats go to
// debug, and the next line let through counts them. Its info lines are
// debug.
func TestClientLogsLimited(t *testing.T) {
	t.Parallel()
	const every = 500 * time.Millisecond
	var buf bytes.Buffer
	g := newLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), every)
	if g.Level() != kgo.LogLevelWarn {
		t.Fatalf("level at info = %v, want warn", g.Level())
	}
	const produceErr = "produce partition load error, bumping error count on first stored batch"
	for i := range 24 {
		g.Log(kgo.LogLevelWarn, produceErr, "broker", "1", "partition", i%3, "can_fail", true)
		g.Log(kgo.LogLevelError, "fatal InitProducerID error, failing all buffered records", "err", "x")
		g.Log(kgo.LogLevelInfo, "metadata update triggered", "why", "test")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], produceErr) ||
		!strings.Contains(lines[1], "level=ERROR") || strings.Contains(buf.String(), "suppressed") {
		t.Fatalf("24 repeats of two lines gave:\n%s\nwant each once, at its level", buf.String())
	}

	time.Sleep(every + 100*time.Millisecond)
	buf.Reset()
	g.Log(kgo.LogLevelWarn, produceErr, "broker", "1")
	if got := buf.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "suppressed=23") {
		t.Fatalf("after the interval: %q; want the line with suppressed=23", got)
	}

	// At debug, every line is there: the held back ones at debug.
	buf.Reset()
	g = newLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), time.Hour)
	for range 3 {
		g.Log(kgo.LogLevelWarn, produceErr)
	}
	if n, d := strings.Count(buf.String(), produceErr), strings.Count(buf.String(), "level=DEBUG"); n != 3 || d != 2 {
		t.Fatalf("at debug: %d lines, %d at debug; want 3 and 2:\n%s", n, d, buf.String())
	}
}
