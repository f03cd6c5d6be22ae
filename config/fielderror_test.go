package config_test

import (
	"testing"

	"github.com/kmirror/kmirror/config"
)

// TestFieldError: a problem found after Load (a plugin that does not start)
// names the file, the line of its field or of the nearest parent present
// in the file, and the field, as Load's errors do.
func TestFieldError(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load([]byte(`clusters:
  a: {bootstrap_servers: ["127.0.0.1:19092"]}
  b: {bootstrap_servers: ["127.0.0.1:29092"]}
mirrors:
  - name: m
    source: a
    target: b
listeners:
  notify: {type: log}
`), "kmirror.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{
		"mirrors[0].target":       "kmirror.yaml:7: mirrors[0].target: refused",
		"listeners.notify":        "kmirror.yaml:9: listeners.notify: refused",
		"listeners.notify.sha256": "kmirror.yaml:9: listeners.notify.sha256: refused", // absent: its parent's line
	} {
		if got := cfg.FieldError(field, "refused").Error(); got != want {
			t.Errorf("FieldError(%q) = %q, want %q", field, got, want)
		}
	}
	// A config built in code has no file: named as Load names one.
	if got := (&config.Config{}).FieldError("plugins.p", "refused").Error(); got != "<config>: plugins.p: refused" {
		t.Errorf("FieldError of a config built in code = %q", got)
	}
}
