package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/config"
)

const cliPassword = "Pl41n-pa55word"

func writeProps(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mm2.properties")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestImportMM2ExitCodes(t *testing.T) {
	const flow = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\nB->A.emit.heartbeats.enabled = false\n"
	secured := flow + "A.security.protocol = SASL_PLAINTEXT\nA.sasl.mechanism = PLAIN\n" +
		"A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"mm2\" password=\"" + cliPassword + "\";\n" +
		"B.security.protocol = SSL\nB.ssl.truststore.location = /etc/b.jks\nB.ssl.truststore.password = " + cliPassword + "\n"
	for _, tc := range []struct {
		name, text string
		code       int
		stderr     []string
	}{
		{"all mapped", flow, 0, nil},
		{"something not mapped", secured, exitNegative, []string{
			"mm2.properties:10: B.ssl.truststore.location: not mapped: a JKS truststore",
			"set KMIRROR_A_SASL_PASSWORD to cluster A's SASL password",
			"1 setting(s) not mapped",
		}},
		{"syntax error", flow + "x = \\u12\n", 1, []string{"mm2.properties:6: malformed \\uxxxx escape"}},
		{"invalid file", "A.bootstrap.servers = a:1\n", 1, []string{"clusters: missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeProps(t, tc.text)
			var stdout, stderr bytes.Buffer
			code := run([]string{"import-mm2", path}, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
			if out := stdout.String() + stderr.String(); strings.Contains(out, cliPassword) {
				t.Errorf("the password appears in the output:\n%s", out)
			}
			if code == 1 && stdout.Len() > 0 {
				t.Errorf("stdout on error: %s", stdout.String())
			}
			if code != 1 && !strings.Contains(stdout.String(), "adopt: true") {
				t.Errorf("stdout is not the config:\n%s", stdout.String())
			}
		})
	}
}

// A bad command line is a usage error (2, as for every command), with the
// usage on stderr and no YAML; a file that cannot be read is an error (1).
func TestImportMM2Usage(t *testing.T) {
	for _, args := range [][]string{{}, {"--nope", "f"}, {"f", "--nope"}, {"a", "b"}} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"import-mm2"}, args...), &stdout, &stderr); code != exitUsage || stdout.Len() > 0 || !strings.Contains(stderr.String(), "Usage: kmirror import-mm2") {
			t.Errorf("%q: exit %d, want %d with the usage; stdout %q", args, code, exitUsage, stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"import-mm2", "/nonexistent/mm2.properties"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "no such file") {
		t.Errorf("missing file: exit %d, stderr %q", code, stderr.String())
	}
}

// The YAML written with --output passes validate once the variable it
// names is set and the PEM file it names exists.
func TestImportMM2OutputValidates(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "b.pem")
	if err := os.WriteFile(ca, []byte("pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeProps(t, "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"+
		"A.security.protocol = SASL_SSL\nA.sasl.mechanism = SCRAM-SHA-256\n"+
		"A.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username=\"mm2\" password=\""+cliPassword+"\";\n"+
		"B.security.protocol = SSL\nB.ssl.truststore.type = PEM\nB.ssl.truststore.location = "+ca+"\n")
	out := filepath.Join(dir, "kmirror.yaml")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"import-mm2", path, "--output", out}, &stdout, &stderr); code != exitNegative { // the heartbeat-only flow B->A
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout with --output: %s", stdout.String())
	}
	t.Setenv("KMIRROR_A_SASL_PASSWORD", cliPassword)
	stdout.Reset()
	if code := run([]string{"validate", "--config", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("validate exit %d: %s", code, stderr.String())
	}
	cfg, err := config.LoadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Clusters["A"].SASL; s == nil || s.Password.Reveal() != cliPassword || s.Mechanism != "SCRAM-SHA-256" {
		t.Errorf("A's sasl: %+v", s)
	}
	if data, _ := os.ReadFile(out); bytes.Contains(data, []byte(cliPassword)) {
		t.Errorf("the password is in the YAML")
	}
}

// A Strimzi resource: the config and the chart's values are written, the
// settings not mapped are listed with file:line and their path in the
// resource, and the exit status says something was not mapped.
func TestImportStrimzi(t *testing.T) {
	dir := t.TempDir()
	out, values := filepath.Join(dir, "kmirror.yaml"), filepath.Join(dir, "values.yaml")
	in := "../../internal/mm2import/testdata/strimzi-v1beta2-scram.yaml"
	var stdout, stderr bytes.Buffer
	if code := run([]string{"import-mm2", "--output", out, "--helm-values", values, in}, &stdout, &stderr); code != exitNegative {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout with --output: %s", stdout.String())
	}
	for _, want := range []string{
		in + ":190: spec.mirrors[0].sourceConnector.config.transforms: not mapped: ",
		in + ":181: spec.mirrors[0].sourceConnector.tasksMax: not needed: ",
		in + ":213: spec.jvmOptions: not needed: ",
		"7 setting(s) not mapped",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	cfg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	v, err := os.ReadFile(values)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"replicaCount: 1\n", "\nconfig:\n  clusters:\n", "\nsecretMounts:\n  - name: cluster-b-cluster-ca-cert\n", "\nresources:\n"} {
		if !strings.Contains(string(v), want) {
			t.Errorf("values lack %q:\n%s", want, v)
		}
	}
	if !strings.Contains(string(cfg), "password_file: /etc/kmirror/secrets/cluster-a-user/password") {
		t.Errorf("config:\n%s", cfg)
	}
}

// Bad Strimzi input is an error (1) naming the file and line; the
// Strimzi-only flags on a properties file are a usage error (2).
func TestImportStrimziErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	syntax := write("syntax.yaml", "apiVersion: kafka.strimzi.io/v1\nkind: KafkaMirrorMaker2\nspec:\n  mirrors: [a\n  target: b\n")
	kafka := write("kafka.yaml", "apiVersion: kafka.strimzi.io/v1\nkind: Kafka\nmetadata:\n  name: k\n")
	props := writeProps(t, "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{syntax}, exitError, syntax + ":"},
		{[]string{"--strimzi", kafka}, exitError, kafka + ":2: kind: no KafkaMirrorMaker2 resource in the file (it holds Kafka k)"},
		{[]string{"--helm-values", filepath.Join(dir, "v.yaml"), props}, exitUsage, "--helm-values and --name are for a Strimzi KafkaMirrorMaker2 resource"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"import-mm2"}, tc.args...), &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) || stdout.Len() > 0 {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}
