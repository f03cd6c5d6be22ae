package helm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "kmirror"
	releaseName = "mirror"
	namespace   = "kafka"
	// kubeVersion is the cluster `helm template` pretends to talk to.
	kubeVersion = "v1.33.0"
)

// rendered is one release of the chart: every manifest decoded into its
// Kubernetes API type, and the notes.
type rendered struct {
	deployments     []*appsv1.Deployment
	configMaps      []*corev1.ConfigMap
	services        []*corev1.Service
	pdbs            []*policyv1.PodDisruptionBudget
	serviceMonitors []*monitoringv1.ServiceMonitor
	prometheusRules []*monitoringv1.PrometheusRule
	notes           string
	// kinds counts the manifests by kind.
	kinds map[string]int
}

// loadChart loads the chart from its directory, as `helm install ./kmirror`.
func loadChart(t *testing.T) *chartv2.Chart {
	t.Helper()
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatalf("load chart %s: %v", chartDir, err)
	}
	return ch
}

// renderChart renders the chart with values (YAML, as a -f file) the way
// `helm template` does: client only, values coalesced with values.yaml and
// checked against values.schema.json, templates rendered, manifests sorted.
func renderChart(t *testing.T, values string) (*release.Release, error) {
	t.Helper()
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
		t.Fatalf("test values are not YAML: %v\n%s", err, values)
	}
	install := action.NewInstall(action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil))))
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true // no release store to check the name against
	install.ReleaseName = releaseName
	install.Namespace = namespace
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	install.KubeVersion = kv
	rel, err := install.Run(loadChart(t), vals)
	if err != nil {
		return nil, err
	}
	r, ok := rel.(*release.Release)
	if !ok {
		t.Fatalf("install returned a %T, want a *release.Release", rel)
	}
	return r, nil
}

// render renders values and decodes every manifest strictly; any error
// fails the test.
func render(t *testing.T, values string) *rendered {
	t.Helper()
	rel, err := renderChart(t, values)
	if err != nil {
		t.Fatalf("render: %v\nvalues:\n%s", err, values)
	}
	if len(rel.Hooks) > 0 {
		t.Errorf("the chart has %d hooks; it should have none", len(rel.Hooks))
	}
	r, err := decodeManifests(rel.Manifest)
	if err != nil {
		t.Fatalf("%v\nmanifest:\n%s", err, rel.Manifest)
	}
	r.notes = rel.Info.Notes
	return r
}

// decodeManifests decodes each YAML document of manifest into the API type
// its apiVersion and kind name, refusing unknown and duplicate fields
// (yaml.UnmarshalStrict): a field the API does not have is a typo that a
// cluster would drop or refuse.
func decodeManifests(manifest string) (*rendered, error) {
	r := &rendered{kinds: map[string]int{}}
	for i, doc := range strings.Split(manifest, "\n---\n") {
		doc = strings.TrimPrefix(doc, "---\n")
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("manifest %d is not YAML: %w", i, err)
		}
		gvk := head.APIVersion + " " + head.Kind
		var obj any
		switch gvk {
		case "apps/v1 Deployment":
			obj = add(&r.deployments)
		case "v1 ConfigMap":
			obj = add(&r.configMaps)
		case "v1 Service":
			obj = add(&r.services)
		case "policy/v1 PodDisruptionBudget":
			obj = add(&r.pdbs)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			obj = add(&r.serviceMonitors)
		case "monitoring.coreos.com/v1 PrometheusRule":
			obj = add(&r.prometheusRules)
		default:
			return nil, fmt.Errorf("manifest %d: unexpected %q (the tests decode only the kinds the chart makes)\n%s", i, gvk, doc)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("manifest %d (%s): %w\n%s", i, gvk, err, doc)
		}
		r.kinds[head.Kind]++
	}
	if len(r.kinds) == 0 {
		return nil, errors.New("no manifests rendered")
	}
	return r, nil
}

// add appends a new object to list and returns it, to be decoded into.
func add[T any](list *[]*T) any {
	o := new(T)
	*list = append(*list, o)
	return o
}

// stripComments drops the "# Source: ..." lines Helm puts before each
// manifest, to tell an empty document.
func stripComments(doc string) string {
	var b bytes.Buffer
	for l := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// deployment is the one Deployment r must have.
func (r *rendered) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	if len(r.deployments) != 1 {
		t.Fatalf("%d Deployments rendered, want 1", len(r.deployments))
	}
	return r.deployments[0]
}

// configMap is the ConfigMap named name.
func (r *rendered) configMap(t *testing.T, name string) *corev1.ConfigMap {
	t.Helper()
	for _, cm := range r.configMaps {
		if cm.Name == name {
			return cm
		}
	}
	t.Fatalf("no ConfigMap %q rendered", name)
	return nil
}

// kmirrorConfig is the kmirror.yaml the chart's ConfigMap holds.
func (r *rendered) kmirrorConfig(t *testing.T) string {
	t.Helper()
	cfg, ok := r.configMap(t, fullname).Data["kmirror.yaml"]
	if !ok {
		t.Fatalf("ConfigMap %s has no key kmirror.yaml", fullname)
	}
	return cfg
}

// fullname is the name the chart gives its objects for releaseName.
const fullname = releaseName + "-kmirror"
