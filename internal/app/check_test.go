package app

import (
	"os"
	"path/filepath"
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
	got := wiringWarnings(cfg, infos, "kmirror.yaml")
	want := []string{
		"kmirror.yaml: plugins.audit-misplaced: " + bin + " is a listener plugin (capabilities: [topic_listener]) and plugins: holds filter plugins, so it is never called; a listener plugin belongs under listeners: with type: plugin",
		"kmirror.yaml: plugins.idle: no mirror names it in its filters, so it is never called",
		"kmirror.yaml: listeners.filterlistener: " + bin + " listens to neither topics nor groups (capabilities: [topic_filter]), so it is never called; a filter plugin belongs under plugins:",
		"kmirror.yaml: listeners.unused: no mirror names it in its listeners, so it is never called",
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
