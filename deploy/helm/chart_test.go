package helm

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// TestDefaults renders values.yaml's defaults with a minimal config: the
// objects, the image and command of the image contract, the port, probes,
// volumes and the config the chart completes.
func TestDefaults(t *testing.T) {
	r := render(t, minimalValues)
	want := map[string]int{"ConfigMap": 1, "Deployment": 1, "PodDisruptionBudget": 1, "Service": 1}
	if !maps.Equal(r.kinds, want) {
		t.Errorf("rendered %v, want %v (monitoring objects are off by default)", r.kinds, want)
	}
	d := r.deployment(t)
	if d.Name != fullname || d.Namespace != "" {
		t.Errorf("Deployment %s/%s, want name %s and no namespace (helm sets it)", d.Namespace, d.Name, fullname)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("%d containers and %d init containers, want one kmirror container", len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
	if c.Image != "kmirror:0.1.0" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %s (%s), want kmirror:0.1.0 (the chart's appVersion), IfNotPresent", c.Image, c.ImagePullPolicy)
	}
	// The image's entrypoint is /usr/bin/kmirror; the chart passes its Cmd.
	if len(c.Command) != 0 || !slices.Equal(c.Args, []string{"run", "--config", "/etc/kmirror/kmirror.yaml"}) {
		t.Errorf("command %q args %q, want the image's entrypoint with run --config /etc/kmirror/kmirror.yaml", c.Command, c.Args)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 9644 {
		t.Errorf("ports %+v, want http 9644", c.Ports)
	}
	checkProbes(t, c, corev1.URISchemeHTTP)
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the service account token is mounted; kmirror never calls the Kubernetes API")
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("terminationGracePeriodSeconds %v, want 30 (shutdown_timeout's default 10s + 20s)", g)
	}
	mounts := mountsOf(c)
	if m, ok := mounts["/etc/kmirror"]; !ok || !m.ReadOnly || m.SubPath != "" {
		t.Errorf("/etc/kmirror mount %+v, want the config volume read-only, without subPath (so the kubelet updates it)", m)
	} else if v := volume(t, pod, m.Name); v.ConfigMap == nil || v.ConfigMap.Name != fullname {
		t.Errorf("/etc/kmirror is volume %+v, want ConfigMap %s", v, fullname)
	}
	if m, ok := mounts["/tmp"]; !ok || m.ReadOnly {
		t.Errorf("/tmp mount %+v, want a writable emptyDir", m)
	} else if v := volume(t, pod, m.Name); v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.String() != "64Mi" {
		t.Errorf("/tmp is volume %+v, want an emptyDir of 64Mi", v)
	}
	if len(mounts) != 2 {
		t.Errorf("mounts %v, want /etc/kmirror and /tmp only (no secrets, no plugins by default)", slices.Sorted(maps.Keys(mounts)))
	}

	cfg := configMapOf(t, r)
	http, _ := cfg["http"].(map[string]any)
	if http["listen"] != "0.0.0.0:9644" {
		t.Errorf("config http %v, want listen 0.0.0.0:9644 set by the chart", http)
	}

	svc := r.services[0]
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9644 || svc.Spec.Ports[0].TargetPort != intstr.FromString("http") {
		t.Errorf("Service ports %+v, want 9644 to the http port", svc.Spec.Ports)
	}
	podLabels := d.Spec.Template.Labels
	if !selects(svc.Spec.Selector, podLabels) || !selects(d.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("Service selector %v / Deployment selector %v do not select the pods %v", svc.Spec.Selector, d.Spec.Selector.MatchLabels, podLabels)
	}
	pdb := r.pdbs[0]
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || !selects(pdb.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("PodDisruptionBudget %+v, want maxUnavailable 1 over the pods", pdb.Spec)
	}
	if !strings.Contains(r.notes, "no StatefulSet") {
		t.Errorf("NOTES.txt does not explain why the workers are a Deployment:\n%s", r.notes)
	}
}

// TestSecurity checks every container of every value set: non-root
// (65532), read-only root filesystem, no privilege escalation, every
// capability dropped, seccomp RuntimeDefault.
func TestSecurity(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			pod := render(t, vs.values).deployment(t).Spec.Template.Spec
			psc := pod.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
				psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod securityContext %+v, want runAsNonRoot, runAsUser 65532, seccomp RuntimeDefault", psc)
			}
			for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
				sc := c.SecurityContext
				switch {
				case sc == nil:
					t.Errorf("container %s has no securityContext", c.Name)
				case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot, sc.RunAsUser == nil || *sc.RunAsUser != 65532:
					t.Errorf("container %s: runAsNonRoot %v runAsUser %v, want true and 65532", c.Name, sc.RunAsNonRoot, sc.RunAsUser)
				case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
					t.Errorf("container %s: the root filesystem is writable", c.Name)
				case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
					t.Errorf("container %s: privilege escalation is allowed", c.Name)
				case sc.Privileged != nil && *sc.Privileged:
					t.Errorf("container %s is privileged", c.Name)
				case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
					t.Errorf("container %s: capabilities %+v, want drop [ALL] and none added", c.Name, sc.Capabilities)
				case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
					t.Errorf("container %s: seccomp %+v, want RuntimeDefault", c.Name, sc.SeccompProfile)
				}
				// A read-only root needs a writable /tmp: go-plugin's sockets.
				if m, ok := mountsOf(c)["/tmp"]; !ok || m.ReadOnly {
					t.Errorf("container %s has no writable /tmp", c.Name)
				}
			}
		})
	}
}

// TestSecretMounts: each Secret of secretMounts is mounted read-only at
// /etc/kmirror/secrets/<name>, where the config's files are; the config
// passes through with its numbers and durations intact.
func TestSecretMounts(t *testing.T) {
	r := render(t, saslTLSValues)
	pod := r.deployment(t).Spec.Template.Spec
	checkSecretMount(t, pod, "east-scram")
	checkSecretMount(t, pod, "kafka-ca")
	checkSecretMount(t, pod, "west-client")
	if n := len(pod.Volumes); n != 5 {
		t.Errorf("%d volumes, want 5 (config, 3 secrets, tmp)", n)
	}
	cfg := configMapOf(t, r)
	var want map[string]any
	if err := yaml.Unmarshal([]byte(saslTLSValues), &want); err != nil {
		t.Fatal(err)
	}
	wantCfg := want["config"].(map[string]any)
	wantCfg["http"] = map[string]any{"listen": "0.0.0.0:9644"}
	if got, want := toJSON(t, cfg), toJSON(t, wantCfg); got != want {
		t.Errorf("rendered config\n%s\nwant the values' config with http.listen added\n%s", got, want)
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g != 110 {
		t.Errorf("terminationGracePeriodSeconds %v, want 110 (shutdown_timeout 1m30s + 20s)", g)
	}
}

// TestHTTPToken: httpToken mounts its Secret and points
// http.auth.bearer_token_file at its key, keeping the other auth keys; a
// Secret named twice is mounted once.
func TestHTTPToken(t *testing.T) {
	r := render(t, tokenValues+"secretMounts: [{name: kmirror-http}]\n")
	pod := r.deployment(t).Spec.Template.Spec
	checkSecretMount(t, pod, "kmirror-http")
	if n := len(pod.Volumes); n != 3 {
		t.Errorf("%d volumes, want 3 (config, the token's Secret once, tmp)", n)
	}
	auth := configMapOf(t, r)["http"].(map[string]any)["auth"]
	want := map[string]any{"bearer_token_file": "/etc/kmirror/secrets/kmirror-http/token", "metrics": false}
	if toJSON(t, auth) != toJSON(t, want) {
		t.Errorf("http.auth %v, want %v", auth, want)
	}
	// The probes need no token: the paths kmirror leaves open.
	checkProbes(t, pod.Containers[0], corev1.URISchemeHTTP)

	_, err := renderChart(t, minimalValues+"  http: {auth: {bearer_token_env: TOKEN}}\nhttpToken: {secretName: kmirror-http}\n")
	if err == nil || !strings.Contains(err.Error(), "config.http.auth.bearer_token_env") || !strings.Contains(err.Error(), "httpToken.secretName") {
		t.Errorf("a token from both httpToken and bearer_token_env: err %v, want one naming both", err)
	}
}

// TestMonitoring: the ServiceMonitor scrapes the Service's http port over
// HTTPS with the token's Secret, the PrometheusRule holds the rules of
// deploy/prometheus/kmirror-rules.yml, the dashboard ConfigMap the JSON of
// deploy/grafana/kmirror-dashboard.json; the probes use HTTPS.
func TestMonitoring(t *testing.T) {
	r := render(t, monitoringValues)
	if len(r.serviceMonitors) != 1 || len(r.prometheusRules) != 1 || len(r.configMaps) != 2 {
		t.Fatalf("rendered %v, want a ServiceMonitor, a PrometheusRule and two ConfigMaps", r.kinds)
	}
	checkProbes(t, r.deployment(t).Spec.Template.Spec.Containers[0], corev1.URISchemeHTTPS)

	sm := r.serviceMonitors[0]
	if sm.Labels["release"] != "prometheus" || !selects(sm.Spec.Selector.MatchLabels, r.services[0].Labels) {
		t.Errorf("ServiceMonitor labels %v selector %v: want release=prometheus, selecting Service labels %v", sm.Labels, sm.Spec.Selector.MatchLabels, r.services[0].Labels)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != "http" || ep.Path != "/metrics" || ep.Scheme == nil || string(*ep.Scheme) != "https" {
		t.Errorf("endpoint port %q path %q scheme %v, want http /metrics https", ep.Port, ep.Path, ep.Scheme)
	}
	if a := ep.Authorization; a == nil || a.Credentials == nil || a.Credentials.Name != "kmirror-http" || a.Credentials.Key != "api-token" {
		t.Errorf("endpoint authorization %+v, want the token from Secret kmirror-http key api-token (/metrics needs it)", a)
	}
	if ep.TLSConfig == nil || ep.TLSConfig.InsecureSkipVerify == nil || !*ep.TLSConfig.InsecureSkipVerify {
		t.Errorf("endpoint tlsConfig %+v, want the values' tlsConfig", ep.TLSConfig)
	}

	// The rules: the same groups as the file Prometheus users load.
	rulesFile := readFile(t, "../prometheus/kmirror-rules.yml")
	var want struct {
		Groups []map[string]any `json:"groups"`
	}
	if err := yaml.Unmarshal(rulesFile, &want); err != nil {
		t.Fatal(err)
	}
	if got := toJSON(t, r.prometheusRules[0].Spec.Groups); got != toJSON(t, want.Groups) {
		t.Errorf("PrometheusRule groups differ from deploy/prometheus/kmirror-rules.yml:\n%s\nwant\n%s", got, toJSON(t, want.Groups))
	}
	if n := len(r.prometheusRules[0].Spec.Groups[0].Rules); n < 10 {
		t.Errorf("%d rules in the first group; the file has more", n)
	}

	dash := r.configMap(t, fullname+"-dashboard")
	if dash.Labels["grafana_dashboard"] != "1" || dash.Annotations["grafana_folder"] != "Kafka" {
		t.Errorf("dashboard ConfigMap labels %v annotations %v, want grafana_dashboard: \"1\" and the values' annotations", dash.Labels, dash.Annotations)
	}
	if got := dash.Data["kmirror-dashboard.json"]; got != string(readFile(t, "../grafana/kmirror-dashboard.json")) {
		t.Errorf("the dashboard ConfigMap's kmirror-dashboard.json is not deploy/grafana/kmirror-dashboard.json (%d bytes)", len(got))
	}

	// Without metrics auth the scrape sends no token.
	r = render(t, tokenValues+"serviceMonitor: {enabled: true}\n")
	if a := r.serviceMonitors[0].Spec.Endpoints[0].Authorization; a != nil {
		t.Errorf("authorization %+v with http.auth.metrics false, want none", a)
	}
}

// TestPlugins: plugins.volume is mounted read-only at /plugins.
func TestPlugins(t *testing.T) {
	pod := render(t, pluginsValues(strings.Repeat("0", 64))).deployment(t).Spec.Template.Spec
	m, ok := mountsOf(pod.Containers[0])["/plugins"]
	if !ok || !m.ReadOnly {
		t.Fatalf("/plugins mount %+v, want read-only", m)
	}
	if v := volume(t, pod, m.Name); v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "kmirror-plugins" {
		t.Errorf("/plugins is volume %+v, want the values' persistentVolumeClaim", v)
	}
}

// TestReplicas: replicaCount sets the Deployment's replicas (a Deployment:
// the mirror's group shares the work, no pod needs an identity), resources
// pass through.
func TestReplicas(t *testing.T) {
	r := render(t, replicasValues)
	d := r.deployment(t)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas %v, want 3", d.Spec.Replicas)
	}
	res := d.Spec.Template.Spec.Containers[0].Resources
	if res.Requests.Cpu().String() != "500m" || res.Limits.Memory().String() != "1Gi" {
		t.Errorf("resources %+v, want the values'", res)
	}
}

// TestConfigChecksum: the pod template's checksum/config is the rendered
// config's sha256, so a config change (and only that) rolls the pods;
// rollOnConfigChange false leaves it out.
func TestConfigChecksum(t *testing.T) {
	sum := func(values string) string {
		t.Helper()
		r := render(t, values)
		got := r.deployment(t).Spec.Template.Annotations["checksum/config"]
		h := sha256.Sum256([]byte(strings.TrimSuffix(r.kmirrorConfig(t), "\n")))
		if want := hex.EncodeToString(h[:]); got != want {
			t.Errorf("checksum/config %q, want the config's sha256 %s", got, want)
		}
		return got
	}
	base := sum(minimalValues)
	if again := sum(minimalValues + "replicaCount: 5\n"); again != base {
		t.Errorf("checksum changed with replicaCount (%s, %s): only the config should roll the pods", base, again)
	}
	if changed := sum(minimalValues + "  log: {level: debug}\n"); changed == base {
		t.Error("checksum unchanged after a config change")
	}
	if changed := sum(tokenValues); changed == base {
		t.Error("checksum unchanged after httpToken changed the config")
	}
	r := render(t, minimalValues+"rollOnConfigChange: false\npodAnnotations: {team: kafka}\n")
	if a := r.deployment(t).Spec.Template.Annotations; a["checksum/config"] != "" || a["team"] != "kafka" {
		t.Errorf("annotations %v with rollOnConfigChange false, want the podAnnotations without checksum/config", a)
	}
	if !strings.Contains(r.notes, "POST /api/v1/reload") {
		t.Errorf("NOTES.txt does not say how to reload:\n%s", r.notes)
	}
}

// TestGracePeriod: terminationGracePeriodSeconds follows shutdown_timeout,
// and a value at or below it is refused.
func TestGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		values string
		want   int64
	}{
		{minimalValues + "  shutdown_timeout: 45s\n", 65},
		{minimalValues + "  shutdown_timeout: 1m500ms\n", 81},
		{minimalValues + "  shutdown_timeout: 1m\nterminationGracePeriodSeconds: 120\n", 120},
	} {
		g := render(t, tc.values).deployment(t).Spec.Template.Spec.TerminationGracePeriodSeconds
		if g == nil || *g != tc.want {
			t.Errorf("terminationGracePeriodSeconds %v, want %d for\n%s", g, tc.want, tc.values)
		}
	}
	_, err := renderChart(t, minimalValues+"  shutdown_timeout: 1m\nterminationGracePeriodSeconds: 60\n")
	if err == nil || !strings.Contains(err.Error(), "terminationGracePeriodSeconds (60) must be above config.shutdown_timeout (60s)") {
		t.Errorf("grace period equal to shutdown_timeout: err %v, want it refused", err)
	}
}

// TestMutualTLSRefused: http.tls.client_ca_file would fail the kubelet's
// probes (they present no certificate), so the chart refuses it.
func TestMutualTLSRefused(t *testing.T) {
	_, err := renderChart(t, minimalValues+"  http: {tls: {cert_file: /a, key_file: /b, client_ca_file: /c}}\n")
	if err == nil || !strings.Contains(err.Error(), "config.http.tls.client_ca_file") {
		t.Errorf("err %v, want client_ca_file refused by name", err)
	}
}

// checkProbes: liveness /healthz and readiness /readyz on the http port.
func checkProbes(t *testing.T, c corev1.Container, scheme corev1.URIScheme) {
	t.Helper()
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe %+v, want an HTTP GET", p.name, p.probe)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || g.Port != intstr.FromString("http") || g.Scheme != scheme {
			t.Errorf("%s probe GET %s %s %s, want %s http %s", p.name, g.Scheme, g.Port.String(), g.Path, scheme, p.path)
		}
		if p.probe.PeriodSeconds < 1 || p.probe.FailureThreshold < 1 {
			t.Errorf("%s probe timings %+v, want the values'", p.name, p.probe)
		}
	}
}

// checkSecretMount: Secret name is a volume mounted read-only at
// /etc/kmirror/secrets/<name>.
func checkSecretMount(t *testing.T, pod corev1.PodSpec, name string) {
	t.Helper()
	m, ok := mountsOf(pod.Containers[0])["/etc/kmirror/secrets/"+name]
	if !ok || !m.ReadOnly {
		t.Errorf("Secret %s: mount %+v, want read-only at /etc/kmirror/secrets/%s", name, m, name)
		return
	}
	if v := volume(t, pod, m.Name); v.Secret == nil || v.Secret.SecretName != name {
		t.Errorf("/etc/kmirror/secrets/%s is volume %+v, want Secret %s", name, v, name)
	}
}

func mountsOf(c corev1.Container) map[string]corev1.VolumeMount {
	m := map[string]corev1.VolumeMount{}
	for _, vm := range c.VolumeMounts {
		m[vm.MountPath] = vm
	}
	return m
}

func volume(t *testing.T, pod corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range pod.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("a container mounts volume %q, which the pod does not have", name)
	return corev1.Volume{}
}

// selects reports whether selector matches labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// configMapOf is the rendered kmirror.yaml, parsed.
func configMapOf(t *testing.T, r *rendered) map[string]any {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(r.kmirrorConfig(t)), &cfg); err != nil {
		t.Fatalf("rendered kmirror.yaml: %v", err)
	}
	return cfg
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(j)
}
