package helm

import (
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"sigs.k8s.io/yaml"
)

// TestLint runs `helm lint`'s rules (Chart.yaml, values and schema,
// templates, dependencies): with a config, nothing above INFO; without
// one, the schema's error that config needs clusters and mirrors.
func TestLint(t *testing.T) {
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	run := func(values string) support.Linter {
		vals := map[string]any{}
		if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
			t.Fatal(err)
		}
		return lint.RunAll(chartDir, vals, namespace, lint.WithKubeVersion(kv))
	}
	for _, vs := range valueSets {
		for _, m := range run(vs.values).Messages {
			if m.Severity > support.InfoSev {
				t.Errorf("%s: %v", vs.name, m)
			}
		}
	}
	l := run("")
	if l.HighestSeverity != support.ErrorSev || !strings.Contains(joinMessages(l), "missing properties 'clusters', 'mirrors'") {
		t.Errorf("lint without a config: %s; want the schema's error", joinMessages(l))
	}
}

func joinMessages(l support.Linter) string {
	var b strings.Builder
	for _, m := range l.Messages {
		b.WriteString(m.Error())
		b.WriteString("\n")
	}
	return b.String()
}
