package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/listeners"
)

func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestLogOneLinePerChange(t *testing.T) {
	var buf bytes.Buffer
	l, err := NewLog(LogOptions{Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := sample()
	// A first call, so the listener knows payments' previous version.
	prev := c
	prev.Sequence = 6
	old := c.Changed[0]
	old.Partitions, old.State = 3, "mirroring"
	prev.Topics = []listeners.Topic{old}
	prev.Added, prev.Removed, prev.Changed = []listeners.Topic{old}, nil, nil
	if err := l.TopicsChanged(ctx, prev); err != nil {
		t.Fatal(err)
	}
	if err := l.TopicsChanged(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := l.GroupsChanged(ctx, sampleGroups()); err != nil {
		t.Fatal(err)
	}
	lines := logLines(t, &buf)
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3: %s", len(lines), buf.String())
	}
	got := lines[1]
	want := map[string]any{
		"level": "INFO", "msg": "mirrored topics changed", "kind": "topics", "mirror": "east-to-west",
		"sequence": 7.0, "total": 2.0,
		"added":   []any{"orders->east.orders"},
		"removed": []any{"gone->east.gone"},
		"changed": []any{"payments->east.payments (partitions 3->6, state mirroring->pending)"},
	}
	delete(got, "time")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("topics line:\n got %v\nwant %v", got, want)
	}
	g := lines[2]
	delete(g, "time")
	wantG := map[string]any{
		"level": "INFO", "msg": "mirrored groups changed", "kind": "groups", "mirror": "east-to-west",
		"sequence": 3.0, "total": 1.0,
		"added": []any{"billing"}, "removed": []any{"old-app"}, "changed": []any{},
	}
	if !reflect.DeepEqual(g, wantG) {
		t.Fatalf("groups line:\n got %v\nwant %v", g, wantG)
	}
}

func TestLogConfigureBoundsNames(t *testing.T) {
	var buf bytes.Buffer
	l := &Log{logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if err := l.Configure(context.Background(), map[string]string{"level": "debug", "max_names": "2"}); err != nil {
		t.Fatal(err)
	}
	var c listeners.TopicsChange
	for i := range 5 {
		tp := listeners.Topic{Upstream: fmt.Sprintf("t%d", i), Downstream: fmt.Sprintf("t%d", i)}
		c.Topics = append(c.Topics, tp)
		c.Added = append(c.Added, tp)
	}
	if err := l.TopicsChanged(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	line := logLines(t, &buf)[0]
	if line["level"] != "DEBUG" {
		t.Errorf("level %v, want DEBUG (Configure kept the logger and set the level)", line["level"])
	}
	if got, want := line["added"], []any{"t0", "t1", "+3 more"}; !reflect.DeepEqual(got, want) {
		t.Errorf("added %v, want %v", got, want)
	}
	if got := line["removed"]; !reflect.DeepEqual(got, []any{}) {
		t.Errorf("removed %v, want []", got)
	}
}
