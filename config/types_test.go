package config_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kmirror/kmirror/config"
)

const hunter2 = "hunter2-do-not-print"

// withSecret stands in for a config struct with a credential, such as the
// SASL settings a later issue adds to Cluster.
type withSecret struct {
	Username string        `yaml:"username" json:"username"`
	Password config.Secret `yaml:"password" json:"password"`
}

func TestSecretIsMasked(t *testing.T) {
	t.Parallel()
	s := withSecret{Username: "u", Password: config.Secret(hunter2)}

	var logText, logJSON bytes.Buffer
	slog.New(slog.NewTextHandler(&logText, nil)).Info("login", "password", s.Password, "creds", s)
	slog.New(slog.NewJSONHandler(&logJSON, nil)).Info("login", "password", s.Password, "creds", s)

	y, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var jback map[string]string
	if err := json.Unmarshal(j, &jback); err != nil {
		t.Fatal(err)
	}
	txt, err := s.Password.MarshalText()
	if err != nil {
		t.Fatal(err)
	}

	outputs := map[string]string{
		"String":      s.Password.String(),
		"%v":          fmt.Sprintf("%v", s.Password),
		"%s":          fmt.Sprintf("%s", s.Password),
		"%q":          fmt.Sprintf("%q", s.Password),
		"%x":          fmt.Sprintf("%x", s.Password),
		"%d":          fmt.Sprintf("%d", s.Password),
		"%#v":         fmt.Sprintf("%#v", s.Password),
		"struct %v":   fmt.Sprintf("%v", s),
		"struct %+v":  fmt.Sprintf("%+v", s),
		"struct %#v":  fmt.Sprintf("%#v", s),
		"pointer %+v": fmt.Sprintf("%+v", &s),
		"yaml":        string(y),
		"json":        jback["password"],
		"text":        string(txt),
		"slog text":   logText.String(),
		"slog json":   logJSON.String(),
	}
	for name, out := range outputs {
		if strings.Contains(out, "hunter2") || !strings.Contains(out, "<secret>") {
			t.Errorf("%s: %q leaks the secret or does not mask it", name, out)
		}
	}
	if got := string(y); got != "username: u\npassword: <secret>\n" {
		t.Errorf("yaml: got %q", got)
	}
	if got := string(j); got != `{"username":"u","password":"\u003csecret\u003e"}` {
		t.Errorf("json: got %q", got) // encoding/json escapes < and >
	}
	if got := s.Password.Reveal(); got != hunter2 {
		t.Errorf("Reveal: got %q, want %q", got, hunter2)
	}

	// A Secret decodes from YAML like a string.
	var back withSecret
	if err := yaml.Unmarshal([]byte("username: u\npassword: "+hunter2+"\n"), &back); err != nil {
		t.Fatal(err)
	}
	if back.Password.Reveal() != hunter2 {
		t.Errorf("decoded secret: got %q", back.Password.Reveal())
	}
}

func TestConfigString(t *testing.T) {
	t.Parallel()
	c := mustLoadFile(t, "testdata/minimal.yaml")
	s := c.String()
	for _, want := range []string{
		"clusters:\n  east:\n    bootstrap_servers:\n      - 127.0.0.1:19092\n    client_id: kmirror\n",
		"    progress_interval: 1s\n",
		"      refresh_interval: 10s\n",
		"      linger: 5ms\n",
		"http:\n  listen: 127.0.0.1:9644\n  metrics_detail: topic\nlog:\n  level: info\n  format: text\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("String() lacks %q; got:\n%s", want, s)
		}
	}
}

func TestDuration(t *testing.T) {
	t.Parallel()
	d := config.Duration(1500 * time.Millisecond)
	if got := d.String(); got != "1.5s" {
		t.Errorf("String: got %q", got)
	}
	j, err := json.Marshal(struct{ D config.Duration }{d})
	if err != nil || string(j) != `{"D":"1.5s"}` {
		t.Errorf("json: got %s, %v", j, err)
	}
	y, err := yaml.Marshal(struct {
		D config.Duration `yaml:"d"`
	}{d})
	if err != nil || string(y) != "d: 1.5s\n" {
		t.Errorf("yaml: got %q, %v", y, err)
	}

	var back config.Duration
	if err := back.UnmarshalText([]byte("250ms")); err != nil || back != config.Duration(250*time.Millisecond) {
		t.Errorf("UnmarshalText(250ms): got %v, %v", back, err)
	}
	err = back.UnmarshalText([]byte("soon"))
	if want := `invalid duration "soon" (want a number with a unit, such as "10s" or "500ms")`; err == nil || err.Error() != want {
		t.Errorf("UnmarshalText(soon): got %v, want %s", err, want)
	}
}
