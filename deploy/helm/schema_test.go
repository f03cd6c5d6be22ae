package helm

import (
	"strings"
	"testing"
)

// TestSchemaRejects: values.schema.json makes Helm's own validation (the
// one helm install, upgrade, template and lint run) refuse wrong values,
// and the message names the field.
func TestSchemaRejects(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		// want are substrings of Helm's message: the field's path and
		// what is wrong with it.
		want []string
	}{
		{"replicaCount not an integer", minimalValues + "replicaCount: two\n", []string{"'/replicaCount'", "want integer"}},
		{"replicaCount a fraction", minimalValues + "replicaCount: 1.5\n", []string{"'/replicaCount'", "want integer"}},
		{"replicaCount negative", minimalValues + "replicaCount: -1\n", []string{"'/replicaCount'", "minimum"}},
		{"unknown top-level key", minimalValues + "replicas: 3\n", []string{"additional properties 'replicas' not allowed"}},
		{"image.pullPolicy", minimalValues + "image: {pullPolicy: Sometimes}\n", []string{"'/image/pullPolicy'", "'Always', 'IfNotPresent', 'Never'"}},
		{"no config", "replicaCount: 1\n", []string{"'/config'", "missing properties 'clusters', 'mirrors'"}},
		{"config without mirrors", "config: {clusters: {east: {bootstrap_servers: [a:1]}}}\n", []string{"'/config'", "missing property 'mirrors'"}},
		{"config with no clusters", "config: {clusters: {}, mirrors: [{name: m}]}\n", []string{"'/config/clusters'", "minProperties"}},
		{"http.listen on another port", minimalValues + "  http: {listen: \"0.0.0.0:8080\"}\n", []string{"'/config/http/listen'", ":9644$"}},
		{"shutdown_timeout not a duration", minimalValues + "  shutdown_timeout: 10\n", []string{"'/config/shutdown_timeout'", "want string"}},
		{"secret name", minimalValues + "secretMounts: [{name: East_SCRAM}]\n", []string{"'/secretMounts/0/name'", "does not match pattern"}},
		{"secretMounts key typo", minimalValues + "secretMounts: [{secret: east}]\n", []string{"'/secretMounts/0'", "missing property 'name'"}},
		{"httpToken unknown key", minimalValues + "httpToken: {secret: x}\n", []string{"'/httpToken'", "additional properties 'secret' not allowed"}},
		{"probe timing", minimalValues + "livenessProbe: {periodSeconds: 0}\n", []string{"'/livenessProbe/periodSeconds'", "minimum"}},
		{"grace period", minimalValues + "terminationGracePeriodSeconds: 30s\n", []string{"'/terminationGracePeriodSeconds'", "want null or integer"}},
		{"pdb maxUnavailable", minimalValues + "podDisruptionBudget: {maxUnavailable: half}\n", []string{"'/podDisruptionBudget/maxUnavailable'"}},
		{"serviceMonitor interval", minimalValues + "serviceMonitor: {enabled: true, interval: 30}\n", []string{"'/serviceMonitor/interval'", "want string"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChart(t, tc.values)
			if err == nil {
				t.Fatalf("rendered; want the schema to refuse\n%s", tc.values)
			}
			msg := err.Error()
			if !strings.Contains(msg, "values don't meet the specifications of the schema") {
				t.Errorf("error is not Helm's schema validation: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message does not contain %q:\n%s", w, msg)
				}
			}
		})
	}
}

// TestSchemaAccepts: every value set of the tests, and values.yaml's own
// keys, pass the schema (a schema stricter than the chart would refuse a
// documented setting).
func TestSchemaAccepts(t *testing.T) {
	for _, vs := range valueSets {
		if _, err := renderChart(t, vs.values); err != nil {
			t.Errorf("%s: %v", vs.name, err)
		}
	}
	all := minimalValues + `
imagePullSecrets: [{name: regcred}]
env: [{name: TZ, value: UTC}]
terminationGracePeriodSeconds: 60
tmp: {sizeLimit: 128Mi}
podAnnotations: {a: b}
podLabels: {team: kafka}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: kafka, effect: NoSchedule}]
affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 100, podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app.kubernetes.io/name: kmirror}}}}]}}
topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app.kubernetes.io/name: kmirror}}}]
priorityClassName: high
service: {type: ClusterIP, annotations: {a: b}}
podDisruptionBudget: {enabled: true, maxUnavailable: 50%}
plugins: {volume: {image: {reference: registry.example/kmirror-plugins:1.0, pullPolicy: IfNotPresent}}}
`
	r := render(t, all)
	pod := r.deployment(t).Spec.Template.Spec
	if pod.Affinity == nil || len(pod.Tolerations) != 1 || len(pod.TopologySpreadConstraints) != 1 || pod.PriorityClassName != "high" ||
		len(pod.ImagePullSecrets) != 1 || len(pod.Containers[0].Env) != 1 || pod.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("pod spec misses a value: %+v", pod)
	}
	if m, ok := mountsOf(pod.Containers[0])["/plugins"]; !ok || volume(t, pod, m.Name).Image == nil {
		t.Errorf("plugins from an image volume: /plugins mount %+v", m)
	}
}
