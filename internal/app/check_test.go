package app

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/plugins"
)

// TestWiringWarnings: each plugin or listener that no entry of the config
// calls gets one warning naming its field and where it belongs; wired ones
// get none.
func TestWiringWarnings(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "p")
	if err := os.WriteFile(bin, []byte("#!/bin/false\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pin := strings.Repeat("ab", 32)
	cfg, err := config.Load([]byte(`
clusters:
  a: {bootstrap_servers: ["127.0.0.1:19092"]}
  b: {bootstrap_servers: ["127.0.0.1:29092"]}
mirrors:
  - name: m
    source: a
    target: b
    filters: [{plugin: used}]
    listeners: [audit, filterlistener, log]
plugins:
  used: {path: `+bin+`, sha256: "`+pin+`"}
  audit-misplaced: {path: `+bin+`, sha256: "`+pin+`"}
  idle: {path: `+bin+`, sha256: "`+pin+`"}
listeners:
  audit: {type: plugin, path: `+bin+`, sha256: "`+pin+`"}
  filterlistener: {type: plugin, path: `+bin+`, sha256: "`+pin+`"}
  log: {type: log}
  unused: {type: log}
`), "kmirror.yaml")
	if err != nil {
		t.Fatal(err)
	}
	listener := plugins.Info{Capabilities: []plugins.Capability{plugins.CapabilityTopicListener}}
	filter := plugins.Info{Capabilities: []plugins.Capability{plugins.CapabilityTopicFilter}}
	infos := map[string]plugins.Info{
		"used":                               filter,
		"audit-misplaced":                    listener,
		"idle":                               filter,
		listenerPluginName("audit"):          listener,
		listenerPluginName("filterlistener"): filter,
	}
	got := wiringWarnings(cfg, infos)
	want := []string{
		"kmirror.yaml:13: plugins.audit-misplaced: " + bin + " is a listener plugin (capabilities: [topic_listener]) and plugins: holds filter plugins, so it is never called; a listener plugin belongs under listeners: with type: plugin",
		"kmirror.yaml:14: plugins.idle: no mirror names it in its filters, so it is never called",
		"kmirror.yaml:17: listeners.filterlistener: " + bin + " listens to neither topics nor groups (capabilities: [topic_filter]), so it is never called; a filter plugin belongs under plugins:",
		"kmirror.yaml:19: listeners.unused: no mirror names it in its listeners, so it is never called",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d warnings, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("warning %d:\n got %s\nwant %s...", i, got[i], want[i])
		}
	}
}

// TestTrustWarnings: trusting a mirror of this config that writes to
// another cluster than the source does nothing, and says so; trusting the
// mirror that writes to the source, or one of another config, does not.
func TestTrustWarnings(t *testing.T) {
	cfg, err := config.Load([]byte(`
clusters:
  a: {bootstrap_servers: ["127.0.0.1:19092"]}
  b: {bootstrap_servers: ["127.0.0.1:29092"]}
  c: {bootstrap_servers: ["127.0.0.1:39092"]}
mirrors:
  - name: a-to-b
    source: a
    target: b
    metadata: {trusted_upstreams: [b-to-c, elsewhere]}
  - name: b-to-c
    source: b
    target: c
    metadata: {trusted_upstreams: [a-to-b]}
`), "kmirror.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := trustWarnings(cfg)
	want := []string{"kmirror.yaml:10: mirrors[0].metadata.trusted_upstreams[0]: mirror b-to-c writes to c, not to this mirror's source a, so its metadata is never read here (trust the mirror whose target is a)"}
	if !slices.Equal(got, want) {
		t.Errorf("trustWarnings =\n%q\nwant\n%q", got, want)
	}
}

// TestCheckPinErrorsNameTheLine: a plugin whose binary does not match its
// pin is refused with the file, line and field of the pin, a listener
// plugin's as much as a filter plugin's (the host knows the listener as
// "listener.notify"; the field says which key that is).
func TestCheckPinErrorsNameTheLine(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "p")
	if err := os.WriteFile(bin, []byte("#!/bin/false\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	wrong := strings.Repeat("ab", 32)
	cfg, err := config.Load([]byte(`clusters:
  a: {bootstrap_servers: ["127.0.0.1:19092"]}
  b: {bootstrap_servers: ["127.0.0.1:29092"]}
mirrors:
  - name: m
    source: a
    target: b
    filters: [{plugin: cat}]
    listeners: [notify]
plugins:
  cat: {path: `+bin+`, sha256: "`+wrong+`"}
listeners:
  notify:
    type: plugin
    path: `+bin+`
    sha256: "`+wrong+`"
`), "kmirror.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Check(t.Context(), cfg, slog.New(slog.DiscardHandler))
	for _, want := range []string{
		`kmirror.yaml:11: plugins.cat.sha256: plugin "cat": refusing to start ` + bin + `: sha256 mismatch`,
		`kmirror.yaml:16: listeners.notify.sha256: plugin "listener.notify": refusing to start ` + bin + `: sha256 mismatch`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check = %v\nwant it to say %q", err, want)
		}
	}
}
