package sdk

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoHeavyDependencies keeps the SDK cheap for plugin authors: it must
// not pull in franz-go or Prometheus (package plugins, the host, does).
func TestNoHeavyDependencies(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/twmb/franz-go", "github.com/prometheus/"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("plugins/sdk depends on %s", dep)
			}
		}
		if dep == "github.com/kmirror/kmirror/plugins" {
			t.Errorf("plugins/sdk imports the host package")
		}
	}
}
