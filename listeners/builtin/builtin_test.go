package builtin

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/listeners"
)

func TestNewEveryKind(t *testing.T) {
	ctx := context.Background()
	configs := map[string]map[string]string{
		KindLog:          {"level": "debug", "max_names": "5"},
		KindFile:         {"path": filepath.Join(t.TempDir(), "set.json"), "mode": "0600"},
		KindWebhook:      {"url": "http://127.0.0.1:1/hook", "header.Authorization": "Bearer x", "timeout": "2s", "retry_budget": "0"},
		KindAlertmanager: {"url": "http://127.0.0.1:1", "resolve_after": "10m", "severity": "warning", "generator_url": "http://grafana/d/kmirror", "label.cluster": "eu1", "initial_alerts": "true"},
	}
	for _, kind := range Kinds() {
		l, err := New(ctx, kind, configs[kind], nil)
		if err != nil {
			t.Fatalf("New(%s): %v", kind, err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("%s: Close: %v", kind, err)
		}
	}
	if _, err := New(ctx, "carrier-pigeon", nil, nil); err == nil || !strings.Contains(err.Error(), "alertmanager, file, log, webhook") {
		t.Fatalf("unknown kind: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		kind   string
		config map[string]string
		want   string
	}{
		{KindLog, map[string]string{"levle": "debug"}, `unknown key "levle" (known: level, max_names)`},
		{KindLog, map[string]string{"level": "loud"}, "level"},
		{KindLog, map[string]string{"max_names": "0"}, "max_names"},
		{KindFile, nil, "path: required"},
		{KindFile, map[string]string{"path": "x.json", "mode": "rw"}, "mode"},
		{KindWebhook, map[string]string{}, "url: required"},
		{KindWebhook, map[string]string{"url": "ftp://x/y"}, "not an http(s) URL"},
		{KindWebhook, map[string]string{"url": "http://x", "timeout": "soon"}, "timeout"},
		{KindWebhook, map[string]string{"url": "http://x", "retry_budget": "-1s"}, "negative"},
		{KindWebhook, map[string]string{"url": "http://x", "header.": "v"}, "empty name"},
		{KindWebhook, map[string]string{"url": "http://x", "header.Bad Name": "v"}, "invalid header"},
		{KindAlertmanager, map[string]string{"url": "http://x", "label.mirror": "m"}, "set by kmirror"},
		{KindAlertmanager, map[string]string{"url": "http://x", "label.bad-name": "m"}, "not a valid label name"},
		{KindAlertmanager, map[string]string{"url": "http://x", "resolve_after": "0s"}, "resolve_after"},
		{KindAlertmanager, map[string]string{"url": "http://x", "initial_alerts": "maybe"}, "initial_alerts"},
		{KindAlertmanager, map[string]string{"url": "http://x", "severity_level": "x"}, "unknown key"},
	} {
		_, err := New(ctx, tc.kind, tc.config, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: got %v, want an error containing %q", tc.kind, tc.config, err, tc.want)
		}
	}
}

func TestParseOptions(t *testing.T) {
	o, err := ParseWebhookOptions(map[string]string{"url": "https://h/x", "header.X-Token": "t", "timeout": "3s", "retry_budget": "0"})
	if err != nil {
		t.Fatal(err)
	}
	if o.URL != "https://h/x" || o.Headers["X-Token"] != "t" || o.Timeout != 3*time.Second || o.RetryBudget >= 0 {
		t.Fatalf("webhook options: %+v", o)
	}
	a, err := ParseAlertmanagerOptions(map[string]string{"url": "http://am:9093", "resolve_after": "1h", "label.team": "data"})
	if err != nil {
		t.Fatal(err)
	}
	if a.ResolveAfter != time.Hour || a.Labels["team"] != "data" || a.Severity != "" || a.InitialAlerts {
		t.Fatalf("alertmanager options: %+v", a)
	}
}

// Unconfigured zero values fail their calls instead of panicking.
func TestZeroValuesFail(t *testing.T) {
	ctx := context.Background()
	for _, l := range []Listener{&File{}, &Webhook{}, &Alertmanager{}} {
		if err := l.TopicsChanged(ctx, listeners.TopicsChange{Mirror: "m", Sequence: 1}); err == nil {
			t.Errorf("%T: TopicsChanged without config succeeded", l)
		}
		if err := l.Close(); err != nil {
			t.Errorf("%T: Close: %v", l, err)
		}
	}
	if err := (&Log{}).TopicsChanged(ctx, listeners.TopicsChange{Mirror: "m"}); err != nil {
		t.Errorf("zero Log: %v", err)
	}
}

// sample is a change with one topic of each kind.
func sample() listeners.TopicsChange {
	orders := listeners.Topic{Upstream: "orders", Downstream: "east.orders", Partitions: 3, State: "mirroring", Metadata: map[string]string{"kmirror.source.cluster": "east"}}
	payments := listeners.Topic{Upstream: "payments", Downstream: "east.payments", Partitions: 6, State: "pending"}
	gone := listeners.Topic{Upstream: "gone", Downstream: "east.gone", Partitions: 1, State: "mirroring"}
	return listeners.TopicsChange{
		Mirror:   "east-to-west",
		Sequence: 7,
		Topics:   []listeners.Topic{orders, payments},
		Added:    []listeners.Topic{orders},
		Removed:  []listeners.Topic{gone},
		Changed:  []listeners.Topic{payments},
	}
}

func sampleGroups() listeners.GroupsChange {
	billing := listeners.Group{Name: "billing", Topics: []string{"orders", "payments"}}
	return listeners.GroupsChange{
		Mirror:   "east-to-west",
		Sequence: 3,
		Groups:   []listeners.Group{billing},
		Added:    []listeners.Group{billing},
		Removed:  []listeners.Group{{Name: "old-app"}},
	}
}
