package helm

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestStrimziImportValues: the values `kmirror import-mm2 --helm-values`
// writes from a Strimzi KafkaMirrorMaker2 (each resource of
// internal/mm2import/testdata) pass the chart's schema, render, and the
// config they render validates with the Secrets they mount: the contract
// between the import and the chart.
func TestStrimziImportValues(t *testing.T) {
	bins := buildBinaries(t)
	files, err := filepath.Glob(filepath.Join(repoRoot, "internal/mm2import/testdata/strimzi-*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Strimzi resources in internal/mm2import/testdata: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			valuesFile := filepath.Join(t.TempDir(), "values.yaml")
			cmd := exec.Command(bins.kmirror, "import-mm2", "--output", os.DevNull, "--helm-values", valuesFile, file)
			out, err := cmd.CombinedOutput()
			// Exit 3: converted, with settings it did not map (listed).
			if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 3) {
				t.Fatalf("kmirror import-mm2: %v\n%s", err, out)
			}
			values := string(readFile(t, valuesFile))
			r := render(t, values)
			secrets := secretsNamedBy(t, r.kmirrorConfig(t))
			var v struct {
				SecretMounts []struct{ Name string } `json:"secretMounts"`
			}
			if err := yaml.Unmarshal([]byte(values), &v); err != nil {
				t.Fatal(err)
			}
			for _, m := range v.SecretMounts {
				if _, ok := secrets[m.Name]; !ok {
					secrets[m.Name] = map[string]string{}
				}
			}
			if out, err := validateRendered(t, bins, r, secrets); err != nil {
				t.Fatalf("kmirror validate on the imported values' config: %v\n%s\nvalues:\n%s", err, out, values)
			}
		})
	}
}

var secretFileRE = regexp.MustCompile(`/etc/kmirror/secrets/([^/\s"']+)/([^\s"']+)`)

// secretsNamedBy are Secrets holding every file under /etc/kmirror/secrets
// that cfg names: PEM for certificates and keys, a line for the rest.
func secretsNamedBy(t *testing.T, cfg string) map[string]map[string]string {
	t.Helper()
	crt, key := selfSigned(t, "kafka")
	secrets := map[string]map[string]string{}
	for _, m := range secretFileRE.FindAllStringSubmatch(cfg, -1) {
		name, file := m[1], m[2]
		if secrets[name] == nil {
			secrets[name] = map[string]string{}
		}
		switch {
		case strings.HasSuffix(file, ".key"):
			secrets[name][file] = key
		case strings.HasSuffix(file, ".crt"), strings.HasSuffix(file, ".pem"):
			secrets[name][file] = crt
		default:
			secrets[name][file] = "s3cret\n"
		}
	}
	return secrets
}
