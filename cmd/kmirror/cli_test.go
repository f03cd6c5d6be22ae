package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// runIn runs the CLI in process and returns its exit code, stdout and
// stderr.
func runIn(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// The commands, with what each takes: -o on every command that prints a
// result, --timeout on every one that talks to a cluster or a worker.
var commands = []struct {
	name            string
	output, timeout bool
}{
	{"run", false, false}, // bounded by the config's timeouts, it runs until a signal
	{"validate", true, true},
	{"plan", true, true},
	{"topics", true, true},
	{"translate", true, true},
	{"verify", true, true},
	{"status", true, true},
	{"demo", false, false},
	{"version", true, false},
}

// TestCLIStyle: every command's help lists its flags as --flag (-o for the
// one-letter flag) and has the shared flags; a bad -o value is a usage
// error (exit 2) naming the allowed values, on every command.
func TestCLIStyle(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			code, _, help := runIn(c.name, "--help")
			if code != exitOK {
				t.Errorf("--help: exit %d, want 0", code)
			}
			if !strings.Contains(help, "Usage: kmirror "+c.name) {
				t.Errorf("--help prints no usage:\n%s", help)
			}
			for _, line := range strings.Split(help, "\n") {
				if strings.HasPrefix(line, "  -") && !strings.HasPrefix(line, "  --") && !strings.HasPrefix(line, "  -o ") {
					t.Errorf("help shows a long flag with one dash: %q", line)
				}
			}
			if c.name != "version" && c.name != "demo" && !strings.Contains(help, "  --config FILE") {
				t.Errorf("help lacks --config FILE:\n%s", help)
			}
			if has := strings.Contains(help, "  --timeout duration\n") && strings.Contains(help, "(default 30s)"); has != c.timeout {
				t.Errorf("--timeout with the 30s default in help: %v, want %v\n%s", has, c.timeout, help)
			}
			if has := strings.Contains(help, "  -o table|json\n"); has != c.output {
				t.Errorf("-o table|json in help: %v, want %v\n%s", has, c.output, help)
			}
			if !c.output {
				return
			}
			code, stdout, stderr := runIn(c.name, "-o", "yaml")
			if code != exitUsage {
				t.Errorf("-o yaml: exit %d, want 2", code)
			}
			if !strings.Contains(stderr, `invalid value "yaml" for flag -o: want table or json`) || stdout != "" {
				t.Errorf("-o yaml: stdout %q, stderr:\n%s", stdout, stderr)
			}
		})
	}
}

// TestVersion: `kmirror --version` is `kmirror version`; `version --help`
// prints help, not the version; -o json is the same as data.
func TestVersion(t *testing.T) {
	c1, v1, _ := runIn("version")
	c2, v2, _ := runIn("--version")
	if c1 != 0 || c2 != 0 || v1 != v2 || !strings.HasPrefix(v1, "kmirror ") {
		t.Errorf("version: %d %q; --version: %d %q", c1, v1, c2, v2)
	}
	code, stdout, stderr := runIn("version", "--help")
	if code != 0 || stdout != "" || !strings.Contains(stderr, "Usage: kmirror version") {
		t.Errorf("version --help: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runIn("version", "-o", "json")
	var v struct{ Version, Go string }
	if err := json.Unmarshal([]byte(stdout), &v); code != 0 || err != nil || v.Version == "" || v.Go == "" {
		t.Errorf("version -o json: exit %d, %q (%v)", code, stdout, err)
	}
}

// TestHelpCommand: `kmirror help CMD` prints CMD's own help, the same as
// `kmirror CMD --help` but on stdout; `kmirror help` the general one.
func TestHelpCommand(t *testing.T) {
	for name := range commandFuncs {
		code, stdout, stderr := runIn("help", name)
		_, _, want := runIn(name, "--help")
		if code != exitOK || stdout != want || stderr != "" || !strings.Contains(stdout, "Usage: kmirror "+name) {
			t.Errorf("help %s: exit %d, stdout:\n%s\nstderr:\n%s\nwant %s --help's:\n%s", name, code, stdout, stderr, name, want)
		}
	}
	for _, args := range [][]string{{"help"}, {"help", "help"}, {"--help"}} {
		if code, stdout, _ := runIn(args...); code != exitOK || stdout != usage {
			t.Errorf("%v: exit %d, want the general help:\n%s", args, code, stdout)
		}
	}
	if code, _, stderr := runIn("help", "nope"); code != exitUsage || !strings.Contains(stderr, `unknown command "nope"`) {
		t.Errorf("help nope: exit %d, stderr:\n%s", code, stderr)
	}
	if code, _, stderr := runIn("help", "run", "plan"); code != exitUsage || !strings.Contains(stderr, "want one command") {
		t.Errorf("help run plan: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestExitCodes: 2 for usage errors, 1 for errors, with the hint that
// says how to give a config when the default one is missing.
func TestExitCodes(t *testing.T) {
	for _, args := range [][]string{
		{}, {"nosuchcommand"}, {"validate", "--nosuchflag"}, {"validate", "extra"},
		{"translate", "--config", "x.yaml"}, // --group missing
		{"translate", "--group", "g", "--allow-rewind"},
		{"verify", "--since", "-1h"},
	} {
		if code, _, stderr := runIn(args...); code != exitUsage {
			t.Errorf("kmirror %s: exit %d, want 2; stderr:\n%s", strings.Join(args, " "), code, stderr)
		}
	}

	t.Chdir(t.TempDir()) // no kmirror.yaml here
	for _, cmd := range []string{"validate", "plan", "topics", "translate", "verify", "run"} {
		args := []string{cmd}
		if cmd == "translate" {
			args = append(args, "--group", "g")
		}
		code, stdout, stderr := runIn(args...)
		if code != exitError || stdout != "" {
			t.Errorf("%s without a config: exit %d, stdout %q; want 1", cmd, code, stdout)
		}
		if !strings.Contains(stderr, "kmirror.yaml: no such file") || !strings.Contains(stderr, "default config kmirror.yaml in the working directory; give the file with --config FILE") {
			t.Errorf("%s without a config: no hint:\n%s", cmd, stderr)
		}
	}
	code, _, stderr := runIn("validate", "--config", "other.yaml")
	if code != exitError || !strings.Contains(stderr, "other.yaml: no such file") || !strings.Contains(stderr, "give an existing config file with --config FILE") {
		t.Errorf("validate --config other.yaml: exit %d:\n%s", code, stderr)
	}
}

// TestPlanOutput runs plan against an embedded cluster: "text" is accepted
// for table; with nothing to change the exit status is 0 and -o json
// prints empty lists as [], not null; a topic to create is counted in
// the singular when it has one partition, and the exit status is 3 (not 2:
// a bad flag's).
func TestPlanOutput(t *testing.T) {
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	dir := t.TempDir()
	write := func(include string) string {
		path := filepath.Join(dir, include+".yaml")
		body := fmt.Sprintf(`clusters:
  east: {bootstrap_servers: [%q]}
  west: {bootstrap_servers: [%q]}
mirrors:
  - name: m
    source: east
    target: west
    topics: {include: [%q]}
`, src.ListenAddrs()[0], dst.ListenAddrs()[0], include)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	none := write("nothing")
	code, stdout, stderr := runIn("plan", "--config", none, "-o", "json")
	if code != exitOK {
		t.Fatalf("plan -o json: exit %d\n%s", code, stderr)
	}
	if strings.Contains(stdout, "null") || !strings.Contains(stdout, `"create": []`) || !strings.Contains(stdout, `"failed": []`) || !strings.Contains(stdout, `"blocked": []`) {
		t.Errorf("plan -o json with nothing to do:\n%s", stdout)
	}
	code, stdout, stderr = runIn("plan", "--config", none, "-o", "text")
	if code != exitOK || !strings.Contains(stdout, "nothing to change") {
		t.Errorf("plan -o text: exit %d\n%s%s", code, stdout, stderr)
	}

	code, stdout, stderr = runIn("plan", "--config", write("orders"))
	if code != exitNegative || !strings.Contains(stdout, "+ create east.orders (1 partition) from orders") {
		t.Errorf("plan: exit %d, want 3 (changes pending)\n%s%s", code, stdout, stderr)
	}
	if code, _, _ := runIn("plan", "--config", write("orders"), "--nosuchflag"); code != exitUsage {
		t.Errorf("plan with a bad flag: exit %d, want 2", code)
	}
}
