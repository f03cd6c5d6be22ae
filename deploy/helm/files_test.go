package helm

import (
	"bytes"
	"os"
	"testing"
)

// TestChartFilesAreCopies: a chart reads only its own files, so it carries
// copies of the alert rules and the dashboard; they must stay the files
// Prometheus and Grafana users load (`make helm-files` refreshes them).
func TestChartFilesAreCopies(t *testing.T) {
	for copyPath, source := range map[string]string{
		"kmirror/files/kmirror-rules.yml":      "../prometheus/kmirror-rules.yml",
		"kmirror/files/kmirror-dashboard.json": "../grafana/kmirror-dashboard.json",
	} {
		if !bytes.Equal(readFile(t, copyPath), readFile(t, source)) {
			t.Errorf("deploy/helm/%s differs from deploy/%s: run `make helm-files`", copyPath, source[3:])
		}
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
