package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/config"
)

const unitFile = "systemd/kmirror.service"

// buildKmirror builds cmd/kmirror into the test's temp dir: the examples are
// checked with the real `kmirror validate`, and systemd-analyze wants the
// unit's binary to exist.
func buildKmirror(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kmirror")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/kmirror")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/kmirror: %v\n%s", err, out)
	}
	return bin
}

var (
	// etcPath is a file under /etc/kmirror the examples name; one followed
	// by "}" is the default of a ${VAR:-default}, a directory.
	etcPath = regexp.MustCompile(`/etc/kmirror/[A-Za-z0-9._/-]+`)
	// credential is a systemd credential an example reads.
	credential = regexp.MustCompile(`\$\{CREDENTIALS_DIRECTORY:-/etc/kmirror/secrets\}/([A-Za-z0-9._-]+)`)
)

// Every example passes `kmirror validate`, with its files (CA bundles,
// secrets) in place: from systemd's credentials directory, as the unit runs
// it, and from /etc/kmirror/secrets, as a run by hand does.
func TestExamplesValidate(t *testing.T) {
	examples, err := filepath.Glob("examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range examples {
		names = append(names, filepath.Base(e))
	}
	if want := []string{"active-active.yaml", "single.yaml", "tls-scram.yaml"}; !slices.Equal(names, want) {
		t.Fatalf("examples = %v, want %v (update this test and deploy/README.md)", names, want)
	}
	bin := buildKmirror(t)
	for _, example := range examples {
		for _, viaSystemd := range []bool{true, false} {
			name := filepath.Base(example)
			if viaSystemd {
				name += "/credentials"
			}
			t.Run(name, func(t *testing.T) {
				data, err := os.ReadFile(example)
				if err != nil {
					t.Fatal(err)
				}
				// /etc/kmirror becomes a temp dir holding every file the
				// example names.
				root := t.TempDir()
				text := string(data)
				var settings []string // the lines that are not comments
				for _, line := range strings.Split(text, "\n") {
					if !strings.HasPrefix(strings.TrimSpace(line), "#") {
						settings = append(settings, line)
					}
				}
				body := strings.Join(settings, "\n")
				for _, loc := range etcPath.FindAllStringIndex(body, -1) {
					if loc[1] < len(body) && body[loc[1]] == '}' {
						continue
					}
					writeFile(t, filepath.Join(root, strings.TrimPrefix(body[loc[0]:loc[1]], "/etc/kmirror/")), "-----BEGIN CERTIFICATE-----\n")
				}
				env := os.Environ()
				creds := filepath.Join(root, "credentials")
				for _, m := range credential.FindAllStringSubmatch(text, -1) {
					if viaSystemd {
						writeFile(t, filepath.Join(creds, m[1]), "secret-"+m[1]+"\n")
					} else {
						writeFile(t, filepath.Join(root, "secrets", m[1]), "secret-"+m[1]+"\n")
					}
				}
				if viaSystemd {
					env = append(env, "CREDENTIALS_DIRECTORY="+creds)
				} else {
					env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "CREDENTIALS_DIRECTORY=") })
				}
				path := filepath.Join(root, "kmirror.yaml")
				writeFile(t, path, strings.ReplaceAll(text, "/etc/kmirror/", root+"/"))
				cmd := exec.Command(bin, "validate", "--config", path)
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				if err != nil || !strings.Contains(string(out), "valid") {
					t.Fatalf("kmirror validate %s: %v\n%s", example, err, out)
				}
				if viaSystemd {
					checkExample(t, filepath.Base(example), path, env)
				}
			})
		}
	}
}

// checkExample checks that an example sets up what deploy/README.md says.
func checkExample(t *testing.T, name, path string, env []string) {
	t.Helper()
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "CREDENTIALS_DIRECTORY="); ok {
			t.Setenv("CREDENTIALS_DIRECTORY", v)
		}
	}
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	switch name {
	case "active-active.yaml":
		if len(cfg.Mirrors) != 2 {
			t.Fatalf("%s: %d mirrors, want 2", name, len(cfg.Mirrors))
		}
		a, b := cfg.Mirrors[0], cfg.Mirrors[1]
		if a.Source != b.Target || a.Target != b.Source || a.ReplicationPolicy.Type != config.PolicyDefault || b.ReplicationPolicy.Type != config.PolicyDefault {
			t.Errorf("%s: want two mirrors in opposite directions with the default policy (cycles are detected by name), got %+v and %+v", name, a, b)
		}
	case "tls-scram.yaml":
		for alias, c := range cfg.Clusters {
			if c.TLS == nil || c.SASL == nil || !strings.HasPrefix(c.SASL.Mechanism, "SCRAM-") || c.SASL.Password.Reveal() != "secret-"+alias+"-password" {
				t.Errorf("%s: cluster %s: want TLS and SCRAM with the password from the credential %s-password", name, alias, alias)
			}
		}
		if h := cfg.HTTP; h.TLS == nil || h.Auth == nil || h.Auth.Token().Reveal() != "secret-http-token" {
			t.Errorf("%s: want HTTPS and a bearer token from the credential http-token, got %+v", name, h)
		}
	case "single.yaml":
		if len(cfg.Mirrors) != 1 || cfg.HTTP.Auth != nil || cfg.HTTP.Listen != "127.0.0.1:9644" {
			t.Errorf("%s: want one mirror and the API on loopback", name)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The unit's hardening and lifecycle, read from the file: these hold
// without systemd.
func TestSystemdUnitContent(t *testing.T) {
	data, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(line, "#") {
			set[k] = append(set[k], v)
		}
	}
	for key, want := range map[string]string{
		"DynamicUser":           "yes",
		"ProtectSystem":         "strict",
		"ProtectHome":           "yes",
		"NoNewPrivileges":       "yes",
		"PrivateTmp":            "yes",
		"Restart":               "on-failure",
		"ExecReload":            "/bin/kill -HUP $MAINPID",
		"ExecStart":             "/usr/local/bin/kmirror run --config /etc/kmirror/kmirror.yaml",
		"ExecStartPre":          "/usr/local/bin/kmirror validate --config /etc/kmirror/kmirror.yaml",
		"KillSignal":            "SIGTERM",
		"CapabilityBoundingSet": "",
	} {
		if !slices.Contains(set[key], want) {
			t.Errorf("%s: %s=%q, want %q", unitFile, key, set[key], want)
		}
	}
}

func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		// .ci/run does not install systemd (a service manager is not a
		// test tool); machines with systemd have it.
		t.Skip("systemd-analyze not found (Debian package systemd): the unit is not verified")
	}
	return p
}

// systemd itself accepts the unit: `systemd-analyze verify` (unknown keys,
// bad values, a missing binary) and `systemd-analyze security` (an exposure
// of at most 2.0 of 10, "OK").
func TestSystemdUnitVerify(t *testing.T) {
	sa := systemdAnalyze(t)
	bin := buildKmirror(t)
	data, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	unit := filepath.Join(dir, "kmirror.service")
	writeFile(t, unit, strings.ReplaceAll(string(data), "/usr/local/bin/kmirror", bin))
	cmd := exec.Command(sa, "verify", unit)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	// verify exits 0 on warnings (an unknown key is "ignoring"): any line
	// about this unit is a failure.
	var about []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "kmirror.service") {
			about = append(about, line)
		}
	}
	if err != nil || len(about) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	cmd = exec.Command(sa, "security", "--offline=true", "--threshold=20", unit)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("systemd-analyze security --threshold=20 (exposure above 2.0): %v\n%s", err, out)
	} else {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Log(lines[len(lines)-1])
	}
}
