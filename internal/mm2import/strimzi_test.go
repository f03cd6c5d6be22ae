package mm2import

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/kmirror/kmirror/config"
)

// convertStrimzi converts a file of testdata, failing the test on an error.
func convertStrimzi(t *testing.T, name string) *StrimziResult {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if !IsStrimzi(data) {
		t.Fatalf("%s is not recognised as a Strimzi resource", name)
	}
	res, err := ConvertStrimzi(data, name, "")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// chartValues is the chart's values contract; decoding is strict, so a
// key outside it fails.
type chartValues struct {
	ReplicaCount int            `yaml:"replicaCount"`
	Config       map[string]any `yaml:"config"`
	SecretMounts []struct {
		Name string `yaml:"name"`
	} `yaml:"secretMounts"`
	Resources map[string]any `yaml:"resources"`
}

func decodeValues(t *testing.T, res *StrimziResult) chartValues {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(res.Values))
	dec.KnownFields(true)
	var v chartValues
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("values: %v\n%s", err, res.Values)
	}
	return v
}

// noteAt returns the reason of the note on path, and its line.
func noteAt(notes []Note, path string) (string, int) {
	for _, n := range notes {
		if n.Key == path {
			return n.Reason, n.Line
		}
	}
	return "", 0
}

// Every example converts into a config that loads and validates, the
// values hold that same config, and every file the config reads is in a
// mounted Secret, each mount used.
func TestStrimziExamples(t *testing.T) {
	files, err := filepath.Glob("testdata/strimzi-*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			res := convertStrimzi(t, filepath.Base(file))
			cfg := load(t, &res.Result)
			if len(cfg.Mirrors) == 0 {
				t.Fatal("no mirror")
			}
			v := decodeValues(t, res)
			var fromConfig map[string]any
			if err := yaml.Unmarshal(res.YAML, &fromConfig); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v.Config, fromConfig) {
				t.Errorf("values' config differs from the config:\n%s\n---\n%s", res.Values, res.YAML)
			}
			var mounts []string
			for _, m := range v.SecretMounts {
				mounts = append(mounts, m.Name)
			}
			if !slices.Equal(mounts, res.SecretMounts) {
				t.Errorf("secretMounts %v, want %v", mounts, res.SecretMounts)
			}
			used := map[string]bool{}
			for _, m := range fileKeys.FindAllStringSubmatch(string(res.YAML), -1) {
				rest, ok := strings.CutPrefix(m[2], SecretsDir+"/")
				secret, _, _ := strings.Cut(rest, "/")
				if !ok || !slices.Contains(mounts, secret) {
					t.Errorf("%s %s is in no mounted Secret (%v)", m[1], m[2], mounts)
				}
				used[secret] = true
			}
			for _, m := range mounts {
				if !used[m] {
					t.Errorf("Secret %s is mounted but not read", m)
				}
			}
			for _, n := range append(res.Unmapped, res.Ignored...) {
				if !strings.HasPrefix(n.Key, "spec") || n.Line == 0 {
					t.Errorf("note without its path and line in the resource: %+v", n)
				}
			}
		})
	}
}

// The v1beta2 layout (connectCluster, clusters, sourceCluster/targetCluster)
// with SCRAM over TLS, a heartbeat connector, the deprecated blacklist
// pattern and the Connect cluster's own offsets topic.
func TestStrimziV1beta2(t *testing.T) {
	res := convertStrimzi(t, "strimzi-v1beta2-scram.yaml")
	cfg := load(t, &res.Result)
	a := cfg.Cluster("cluster-a")
	if a == nil || a.SASL == nil || a.TLS == nil {
		t.Fatalf("cluster-a: %+v", a)
	}
	if a.SASL.Mechanism != "SCRAM-SHA-512" || a.SASL.Username != "cluster-a-user" || !strings.HasSuffix(a.SASL.PasswordFile, "/etc/kmirror/secrets/cluster-a-user/password") {
		t.Errorf("cluster-a sasl: %+v", a.SASL)
	}
	if !strings.HasSuffix(a.TLS.CAFile, "/etc/kmirror/secrets/cluster-a-cluster-ca-cert/ca.crt") {
		t.Errorf("cluster-a ca_file %q", a.TLS.CAFile)
	}
	m := cfg.Mirrors[0]
	if m.Source != "cluster-a" || m.Target != "cluster-b" || m.MM2 == nil {
		t.Fatalf("mirror: %+v", m)
	}
	if !slices.Contains(m.Topics.Include, "orders.*") || !slices.Contains(m.Topics.Include, "payments") || !slices.Equal(m.Topics.Exclude, []string{`.*\.tmp`}) {
		t.Errorf("topics: %+v", m.Topics)
	}
	if !slices.Equal(m.Groups.Exclude, []string{"console-consumer-.*"}) {
		t.Errorf("groups.exclude %v: the blacklist pattern stands in for the absent exclude one", m.Groups.Exclude)
	}
	if m.MM2.OffsetsTopic != "mm2-offsets" || m.MM2.SourceConnector != "cluster-a->cluster-b.MirrorSourceConnector" || !m.MM2.Heartbeats || !m.MM2.Checkpoints {
		t.Errorf("mm2: %+v", m.MM2)
	}
	if m.Producer.Compression != "zstd" || m.ReplicationFactor != -1 {
		t.Errorf("producer %+v, replication factor %d", m.Producer, m.ReplicationFactor)
	}
	for path, want := range map[string]string{
		"spec.mirrors[0].sourceConnector.config.transforms":   "no single message transforms",
		"spec.clusters[0].config.consumer.fetch.max.bytes":    "fetch.max.bytes",
		"spec.clusters[0].tls.trustedCertificates[0].pattern": "ca.crt",
		"spec.logging":       "log.level",
		"spec.metricsConfig": "Prometheus",
		"spec.template":      "chart",
		"spec.mirrors[0].sourceConnector.config.offset.lag.max":                         "",
		"spec.mirrors[0].checkpointConnector.tasksMax":                                  "",
		"spec.clusters[1].config.config.storage.replication.factor":                     "",
		"spec.mirrors[0].heartbeatConnector.config.heartbeats.topic.replication.factor": "",
	} {
		reason, line := noteAt(res.Unmapped, path)
		if want == "" {
			reason, line = noteAt(res.Ignored, path)
		}
		if line == 0 || !strings.Contains(reason, want) {
			t.Errorf("%s: note %q at line %d, want one saying %q", path, reason, line, want)
		}
	}
	// Line numbers are the file's: spec.jvmOptions is where the file has it.
	data, _ := os.ReadFile("testdata/strimzi-v1beta2-scram.yaml")
	_, line := noteAt(res.Ignored, "spec.jvmOptions")
	if lines := strings.Split(string(data), "\n"); line == 0 || strings.TrimSpace(lines[line-1]) != "jvmOptions:" {
		t.Errorf("spec.jvmOptions noted at line %d", line)
	}
	v := decodeValues(t, res)
	if v.ReplicaCount != 1 || v.Resources["limits"] == nil || len(v.SecretMounts) != 4 {
		t.Errorf("values: %+v", v)
	}
}

// The v1 layout (target, mirrors[].source): two sources into one target,
// PLAIN and SCRAM-SHA-256, the offsets topic from target.offsetStorageTopic,
// and a mirror without a checkpoint connector.
func TestStrimziV1(t *testing.T) {
	res := convertStrimzi(t, "strimzi-v1-plain.yaml")
	if res.APIVersion != "kafka.strimzi.io/v1" || res.Name != "dr-mirror" {
		t.Errorf("resource %s %s", res.APIVersion, res.Name)
	}
	cfg := load(t, &res.Result)
	if len(cfg.Mirrors) != 2 {
		t.Fatalf("%d mirrors", len(cfg.Mirrors))
	}
	east, west := cfg.Mirrors[0], cfg.Mirrors[1]
	if east.Source != "east" || east.Target != "dr" || west.Source != "west" || west.Target != "dr" {
		t.Fatalf("mirrors %s->%s, %s->%s", east.Source, east.Target, west.Source, west.Target)
	}
	if e := cfg.Cluster("east"); e.SASL == nil || e.SASL.Mechanism != "PLAIN" || e.TLS != nil {
		t.Errorf("east: %+v", e)
	}
	if d := cfg.Cluster("dr"); d.SASL == nil || d.SASL.Mechanism != "SCRAM-SHA-256" || d.TLS == nil || !strings.HasSuffix(d.TLS.CAFile, "/dr-cluster-ca-cert/ca.crt") {
		t.Errorf("dr: %+v", d)
	}
	for _, m := range cfg.Mirrors {
		if m.ReplicationPolicy.Type != "identity" || m.MM2.OffsetsTopic != "dr-mirror-offsets" || m.MM2.Heartbeats || !m.ExactlyOnce {
			t.Errorf("%s: policy %+v, mm2 %+v, exactly once %v", m.Name, m.ReplicationPolicy, m.MM2, m.ExactlyOnce)
		}
	}
	if !east.MM2.Checkpoints || east.MM2.CheckpointsInterval.String() != "30s" || !east.Sync.GroupOffsets.Enabled {
		t.Errorf("east checkpoints: %+v, group offsets %+v", east.MM2, east.Sync.GroupOffsets)
	}
	if west.MM2.Checkpoints || west.Sync.GroupOffsets.Enabled {
		t.Errorf("west has no checkpoint connector: mm2 %+v, group offsets %+v", west.MM2, west.Sync.GroupOffsets)
	}
	if !slices.Contains(west.Topics.Include, `west\..*`) || slices.Contains(west.Topics.Include, "ignored.*") {
		t.Errorf("west topics %v: topicsPattern wins over the connector's topics", west.Topics.Include)
	}
	for path, want := range map[string]string{
		"spec.mirrors[1].sourceConnector.state":         "paused",
		"spec.mirrors[1].sourceConnector.config.topics": "topicsPattern",
		"spec.livenessProbe":                            "/healthz",
		"spec.rack":                                     "client.rack",
		"spec.tracing":                                  "tracing",
	} {
		if reason, _ := noteAt(res.Unmapped, path); !strings.Contains(reason, want) {
			t.Errorf("%s: not mapped %q, want it to say %q", path, reason, want)
		}
	}
	if reason, _ := noteAt(res.Ignored, "spec.image"); reason == "" {
		t.Error("spec.image is not noted")
	}
	v := decodeValues(t, res)
	if v.ReplicaCount != 2 || v.Resources["requests"] == nil {
		t.Errorf("values: %+v", v)
	}
}

// Strimzi's v1 TLS example runs no source connector: the mirror is kept
// and that is listed; client certificates become cert_file and key_file.
func TestStrimziV1TLSAuth(t *testing.T) {
	res := convertStrimzi(t, "strimzi-v1-tls-auth.yaml")
	cfg := load(t, &res.Result)
	for _, alias := range []string{"cluster-a", "cluster-b"} {
		c := cfg.Cluster(alias)
		if c.TLS == nil || !strings.HasSuffix(c.TLS.CertFile, "/"+alias+"-user/user.crt") || !strings.HasSuffix(c.TLS.KeyFile, "/"+alias+"-user/user.key") {
			t.Errorf("%s tls: %+v", alias, c.TLS)
		}
	}
	if reason, _ := noteAt(res.Unmapped, "spec.mirrors[0].sourceConnector"); !strings.Contains(reason, "copies no records") {
		t.Errorf("missing sourceConnector: %q", reason)
	}
	if m := cfg.Mirrors[0].MM2; m.OffsetsTopic != "my-mirror-maker-2-offset" || m.Heartbeats {
		t.Errorf("mm2: %+v", m)
	}
}

// A v1beta2 resource without offset.storage.topic uses Strimzi's default
// offsets topic; unused clusters are noted, not written.
func TestStrimziV1beta2Defaults(t *testing.T) {
	res := convertStrimzi(t, "strimzi-v1beta2-basic.yaml")
	cfg := load(t, &res.Result)
	m := cfg.Mirrors[0]
	if m.MM2.OffsetsTopic != "mirrormaker2-cluster-offsets" || m.MM2.Heartbeats || !m.MM2.Checkpoints {
		t.Errorf("mm2: %+v", m.MM2)
	}
	if len(res.Unmapped) != 0 {
		t.Errorf("not mapped: %+v", res.Unmapped)
	}
}

func TestStrimziInputErrors(t *testing.T) {
	const mm2 = "apiVersion: kafka.strimzi.io/v1\nkind: KafkaMirrorMaker2\nmetadata:\n  name: %s\nspec:\n  replicas: 1\n" +
		"  target: {alias: b, bootstrapServers: 'b:9092', groupId: g, configStorageTopic: c, statusStorageTopic: s, offsetStorageTopic: o}\n" +
		"  mirrors:\n  - source: {alias: a, bootstrapServers: 'a:9092'}\n    sourceConnector: {}\n"
	one := func(name string) string { return strings.Replace(mm2, "%s", name, 1) }
	for _, tc := range []struct {
		name, text, key string
		line            int
		msg             string
	}{
		{"wrong kind", "apiVersion: kafka.strimzi.io/v1\nkind: Kafka\nmetadata:\n  name: k\n", "kind", 2, "no KafkaMirrorMaker2 resource in the file (it holds Kafka k)"},
		{"old apiVersion", strings.Replace(one("m"), "/v1\n", "/v1beta1\n", 1), "apiVersion", 1, `"kafka.strimzi.io/v1beta1": import-mm2 reads`},
		{"other group", strings.Replace(one("m"), "kafka.strimzi.io", "example.com", 1), "apiVersion", 1, "import-mm2 reads"},
		{"two resources", one("first") + "---\n" + one("second"), "kind", 12, "2 KafkaMirrorMaker2 resources (first (line 1), second (line 12)): choose one with --name"},
		{"v1 with connectCluster", strings.Replace(one("m"), "  replicas: 1\n", "  connectCluster: b\n", 1), "spec.connectCluster", 6, "not in the v1 API"},
		{"no offsets topic", strings.Replace(one("m"), ", offsetStorageTopic: o", "", 1), "spec.target.offsetStorageTopic", 7, "missing"},
		{"same alias", strings.Replace(one("m"), "alias: a,", "alias: b,", 1), "spec.mirrors[0].source.alias", 9, "target's alias too"},
		{"bad bootstrap", strings.Replace(one("m"), "'a:9092'", "'a'", 1), "spec.mirrors[0].source.bootstrapServers", 9, "not host:port"},
		{"bad secret", strings.Replace(one("m"), "{alias: a, bootstrapServers: 'a:9092'}", "{alias: a, bootstrapServers: 'a:9092', authentication: {type: plain, username: u, passwordSecret: {secretName: 'A/B', password: p}}}", 1),
			"spec.mirrors[0].source.authentication.passwordSecret.secretName", 9, "not a Secret's name"},
		{"v1beta2 target not the connect cluster", "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker2\nmetadata: {name: m}\nspec:\n  connectCluster: b\n  clusters:\n  - {alias: a, bootstrapServers: 'a:9092'}\n  - {alias: b, bootstrapServers: 'b:9092'}\n  - {alias: c, bootstrapServers: 'c:9092'}\n  mirrors:\n  - {sourceCluster: a, targetCluster: c}\n",
			"spec.mirrors[0].targetCluster", 11, "is not spec.connectCluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConvertStrimzi([]byte(tc.text), "mm2.yaml", "")
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error %v, want an *InputError", err)
			}
			if ie.Key != tc.key || ie.Line != tc.line || !strings.Contains(ie.Msg, tc.msg) {
				t.Errorf("error at line %d %s: %s; want line %d %s: ...%s...", ie.Line, ie.Key, ie.Msg, tc.line, tc.key, tc.msg)
			}
		})
	}
}

// A YAML syntax error is config's file:line error.
func TestStrimziSyntaxError(t *testing.T) {
	text := "apiVersion: kafka.strimzi.io/v1\nkind: KafkaMirrorMaker2\nspec:\n  mirrors: [a\n  target: b\n"
	_, err := ConvertStrimzi([]byte(text), "mm2.yaml", "")
	var ce *config.Error
	if !errors.As(err, &ce) || ce.File != "mm2.yaml" || ce.Line == 0 || !strings.HasPrefix(err.Error(), "mm2.yaml:") {
		t.Fatalf("error %v, want a config.Error with the file and line", err)
	}
}

// --name picks one of several resources; other kinds are skipped.
func TestStrimziPickByName(t *testing.T) {
	data, err := os.ReadFile("testdata/strimzi-v1-plain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	second := strings.Replace(string(data), "name: dr-mirror", "name: other", 1)
	text := "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n---\n" + string(data) + "---\n" + second
	res, err := ConvertStrimzi([]byte(text), "all.yaml", "other")
	if err != nil {
		t.Fatal(err)
	}
	if res.Name != "other" {
		t.Errorf("converted %s", res.Name)
	}
	// Lines count from the top of the file, past the other documents.
	if _, line := noteAt(res.Ignored, "spec.image"); line != 4+strings.Count(string(data), "\n")+1+11 {
		t.Errorf("spec.image at line %d", line)
	}
	_, err = ConvertStrimzi([]byte(text), "all.yaml", "nope")
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(ie.Msg, `no KafkaMirrorMaker2 named "nope"`) {
		t.Errorf("unknown name: %v", err)
	}
}

func TestIsStrimzi(t *testing.T) {
	for text, want := range map[string]bool{
		"apiVersion: kafka.strimzi.io/v1\nkind: KafkaMirrorMaker2\n":         true,
		"kind: \"KafkaMirrorMaker2\" # the resource\r\n":                     true,
		"---\nkind: Kafka\n---\nkind: KafkaMirrorMaker2\n":                   true,
		"clusters = A, B\n# kind: KafkaMirrorMaker2\n":                       false,
		"kind: KafkaMirrorMaker2x\n":                                         false,
		"apiVersion: v1\nkind: List\nitems:\n- kind: KafkaMirrorMaker2\n":    true,
		`{"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaMirrorMaker2"}`: true,
	} {
		if got := IsStrimzi([]byte(text)); got != want {
			t.Errorf("IsStrimzi(%q) = %v", text, got)
		}
	}
}

// kubectl's JSON for a List of resources converts as the YAML resource
// does.
func TestStrimziKubectlJSONList(t *testing.T) {
	data, err := os.ReadFile("testdata/strimzi-v1-plain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var resource map[string]any
	if err := yaml.Unmarshal(data, &resource); err != nil {
		t.Fatal(err)
	}
	list, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": []any{
		map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "east-mirror-user"}},
		resource,
	}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !IsStrimzi(list) {
		t.Fatal("kubectl's JSON is not recognised")
	}
	fromJSON, err := ConvertStrimzi(list, "list.json", "")
	if err != nil {
		t.Fatal(err)
	}
	fromYAML := convertStrimzi(t, "strimzi-v1-plain.yaml")
	var a, b map[string]any
	if err := yaml.Unmarshal(fromJSON.YAML, &a); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(fromYAML.YAML, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("from JSON:\n%s\nfrom YAML:\n%s", fromJSON.YAML, fromYAML.YAML)
	}
	if len(fromJSON.Unmapped) != len(fromYAML.Unmapped) {
		t.Errorf("not mapped: %d from JSON, %d from YAML", len(fromJSON.Unmapped), len(fromYAML.Unmapped))
	}
}

// A client certificate without tls is not used, and its Secret is not
// mounted; tls without trustedCertificates uses the system's roots.
func TestStrimziTLSEdges(t *testing.T) {
	text := "apiVersion: kafka.strimzi.io/v1\nkind: KafkaMirrorMaker2\nmetadata: {name: m}\nspec:\n  replicas: 1\n" +
		"  target: {alias: b, bootstrapServers: 'b:9093', groupId: g, configStorageTopic: c, statusStorageTopic: s, offsetStorageTopic: o, tls: {}}\n" +
		"  mirrors:\n  - source:\n      alias: a\n      bootstrapServers: 'a:9092'\n" +
		"      authentication: {type: tls, certificateAndKey: {secretName: a-user, certificate: user.crt, key: user.key}}\n    sourceConnector: {}\n"
	res, err := ConvertStrimzi([]byte(text), "m.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := load(t, &res.Result)
	if b := cfg.Cluster("b"); b.TLS == nil || b.TLS.CAFile != "" {
		t.Errorf("b tls: %+v", b.TLS)
	}
	if a := cfg.Cluster("a"); a.TLS != nil {
		t.Errorf("a tls: %+v", a.TLS)
	}
	if reason, line := noteAt(res.Ignored, "spec.mirrors[0].source.authentication"); line != 11 || !strings.Contains(reason, "without TLS") {
		t.Errorf("note %q at line %d", reason, line)
	}
	if len(res.SecretMounts) != 0 {
		t.Errorf("mounts %v", res.SecretMounts)
	}
}

// In v1beta2 a mirror's targetCluster may be another alias of the Connect
// cluster (the same bootstrapServers): Strimzi names the connector after it.
func TestStrimziTargetAlias(t *testing.T) {
	text := "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker2\nmetadata: {name: m}\nspec:\n  connectCluster: b\n  clusters:\n" +
		"  - {alias: a, bootstrapServers: 'a:9092'}\n  - {alias: b, bootstrapServers: 'b:9092'}\n  - {alias: b2, bootstrapServers: 'b:9092'}\n" +
		"  mirrors:\n  - {sourceCluster: a, targetCluster: b2, sourceConnector: {}, heartbeatConnector: {}}\n"
	res, err := ConvertStrimzi([]byte(text), "m.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, &res.Result).Mirrors[0]
	if m.Target != "b2" || m.MM2.SourceConnector != "a->b2.MirrorSourceConnector" || m.MM2.OffsetsTopic != "mirrormaker2-cluster-offsets" || !m.MM2.Heartbeats || m.MM2.Checkpoints {
		t.Errorf("mirror to %s, mm2 %+v", m.Target, m.MM2)
	}
}
