package mm2import

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/config"
)

// convert parses and converts text, failing the test on an error.
func convert(t *testing.T, text string) *Result {
	t.Helper()
	props, err := ParseProperties([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert(props, "mm2.properties")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// load validates a converted config with config.Load, after setting the
// variables it reads and creating the files it names (absolute paths are
// moved under a temporary directory).
func load(t *testing.T, res *Result) *config.Config {
	t.Helper()
	dir := t.TempDir()
	for _, e := range res.Env {
		t.Setenv(e.Name, "value-of-"+e.Name)
	}
	text := string(res.YAML)
	for _, m := range fileKeys.FindAllStringSubmatch(text, -1) {
		name := strings.Trim(m[2], `'"`)
		moved := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(name, "/")))
		text = strings.ReplaceAll(text, name, moved)
		if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(moved, []byte("pem"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load([]byte(text), filepath.Join(dir, "kmirror.yaml"))
	if err != nil {
		t.Fatalf("converted config does not load: %v\n%s", err, text)
	}
	return cfg
}

var fileKeys = regexp.MustCompile(`(ca_file|cert_file|key_file|password_file): (\S+)`)

func reasons(notes []Note, key string) string {
	var out []string
	for _, n := range notes {
		if n.Key == key {
			out = append(out, n.Reason)
		}
	}
	return strings.Join(out, " | ")
}

const base = `clusters = A, B
A.bootstrap.servers = a1:9092, SASL_SSL://a2:9093
B.bootstrap.servers = b1:9092
A->B.enabled = true
B->A.emit.heartbeats.enabled = false
`

func TestConvertDefaults(t *testing.T) {
	res := convert(t, base)
	if len(res.Unmapped) != 0 {
		t.Errorf("unmapped: %+v", res.Unmapped)
	}
	cfg := load(t, res)
	m := cfg.Mirror("A-to-B")
	if m == nil || m.Source != "A" || m.Target != "B" {
		t.Fatalf("mirror A-to-B: %+v", m)
	}
	if got := cfg.Clusters["A"].BootstrapServers; strings.Join(got, ",") != "a1:9092,a2:9093" {
		t.Errorf("A's brokers: %v", got)
	}
	// MM2's defaults where kmirror's differ.
	if strings.Join(m.Topics.Exclude, " ") != strings.Join(mm2TopicsExclude, " ") {
		t.Errorf("topics.exclude %q, want MM2's default", m.Topics.Exclude)
	}
	if m.ReplicationFactor != 2 || !m.Sync.ACLs.Enabled || m.Sync.GroupOffsets.Enabled || !m.Sync.TopicConfigs.Enabled {
		t.Errorf("rf %d, acls %t, group offsets %t, configs %t: want MM2's 2, true, false, true",
			m.ReplicationFactor, m.Sync.ACLs.Enabled, m.Sync.GroupOffsets.Enabled, m.Sync.TopicConfigs.Enabled)
	}
	mm := m.MM2
	if mm == nil || !mm.Adopt || mm.SourceAlias != "A" || mm.OffsetsTopic != "mm2-offsets.A.internal" || mm.OffsetSyncsLocation != "source" || mm.OffsetSyncsTopic != "mm2-offset-syncs.B.internal" || !mm.Heartbeats || !mm.Checkpoints {
		t.Errorf("mm2 block %+v: want adopt, alias A, offsets in mm2-offsets.A.internal, heartbeats and checkpoints", mm)
	}
	if mm.SourceConnector != "MirrorSourceConnector" || !strings.Contains(string(res.YAML), "source_connector: MirrorSourceConnector") {
		t.Errorf("source_connector %q, want MM2's dedicated mode's MirrorSourceConnector written out:\n%s", mm.SourceConnector, res.YAML)
	}
}

// TestConvertConnectorName: a name= given to MM2's dedicated mode does not
// rename its connectors (the herder names each by its class), so the
// positions stay keyed by MirrorSourceConnector; the note says where the
// name goes when it matters.
func TestConvertConnectorName(t *testing.T) {
	res := convert(t, base+"A->B.name = mm2-a-to-b\n")
	if got := load(t, res).Mirror("A-to-B").MM2.SourceConnector; got != "MirrorSourceConnector" {
		t.Errorf("source_connector %q, want MirrorSourceConnector", got)
	}
	if r := reasons(res.Ignored, "A->B.name"); !strings.Contains(r, "mm2.source_connector") {
		t.Errorf("A->B.name: %q, want a note naming mm2.source_connector", r)
	}
}

func TestConvertFlowSettings(t *testing.T) {
	res := convert(t, base+`
topics = orders.*, payments
A->B.topics.exclude = .*\\.tmp
A->B.groups = app-.*
groups.exclude =
replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy
replication.factor = 3
sync.topic.configs.interval.seconds = 120
sync.topic.acls.enabled = false
A->B.sync.group.offsets.enabled = true
A->B.sync.group.offsets.interval.seconds = 15
emit.checkpoints.interval.seconds = 30
emit.heartbeats.enabled = false
refresh.topics.interval.seconds = 300
config.properties.exclude = retention\\..*
offset.storage.topic = my-offsets
A->B.offset-syncs.topic.location = target
B.producer.compression.type = zstd
B.producer.linger.ms = 20
A->B.producer.override.linger.ms = 50
B.producer.max.request.size = 2097152
B.exactly.once.source.support = enabled
A.consumer.isolation.level = read_committed
tasks.max = 8
`)
	if len(res.Unmapped) != 0 {
		t.Errorf("unmapped: %+v", res.Unmapped)
	}
	m := load(t, res).Mirror("A-to-B")
	check := func(what string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("topics.include", strings.Join(m.Topics.Include, " "), `orders.* payments (?:.+\.)?heartbeats`)
	check("topics.exclude", strings.Join(m.Topics.Exclude, " "), `.*\.tmp`)
	check("groups.include", strings.Join(m.Groups.Include, " "), "app-.*")
	check("groups.exclude", len(m.Groups.Exclude), 0)
	check("policy", m.ReplicationPolicy.Type, "identity")
	check("replication_factor", m.ReplicationFactor, 3)
	check("config sync interval", m.Sync.TopicConfigs.Interval.String(), "2m0s")
	check("config exclude", strings.Join(m.Sync.TopicConfigs.Exclude, " "), `retention\..*`)
	check("acls", m.Sync.ACLs.Enabled, false)
	check("group offsets", m.Sync.GroupOffsets.Enabled, true)
	check("group offsets interval", m.Sync.GroupOffsets.Interval.String(), "15s")
	check("refresh", m.Topics.RefreshInterval.String(), "5m0s")
	check("checkpoints interval", m.MM2.CheckpointsInterval.String(), "30s")
	check("heartbeats", m.MM2.Heartbeats, false)
	check("offsets topic", m.MM2.OffsetsTopic, "my-offsets")
	check("offset syncs location", m.MM2.OffsetSyncsLocation, "target")
	check("offset syncs topic (MM2's name on the target)", m.MM2.OffsetSyncsTopic, "mm2-offset-syncs.A.internal")
	check("compression", m.Producer.Compression, "zstd")
	check("linger (flow override wins)", m.Producer.Linger.String(), "50ms")
	check("batch_max_bytes", m.Producer.BatchMaxBytes, 2097152)
	check("exactly_once", m.ExactlyOnce, true)
	if !strings.Contains(reasons(res.Ignored, "tasks.max"), "concurrently") {
		t.Errorf("tasks.max not listed as not needed: %+v", res.Ignored)
	}
}

func TestConvertSecurity(t *testing.T) {
	const password = "s3cr3t-Pa55"
	res := convert(t, base+`
security.protocol = SASL_SSL
sasl.mechanism = SCRAM-SHA-512
sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="mirror" password="`+password+`";
ssl.truststore.type = PEM
ssl.truststore.location = /etc/kafka/ca.pem
ssl.truststore.password = `+password+`
B.security.protocol = SSL
B.ssl.truststore.location = /etc/kafka/b-truststore.p12
B.ssl.truststore.type = PKCS12
B.ssl.keystore.location = /etc/kafka/b.jks
B.ssl.keystore.password = `+password+`
B.ssl.key.password = `+password+`
B.ssl.endpoint.identification.algorithm =
`)
	all := string(res.YAML)
	for _, n := range append(res.Unmapped, res.Ignored...) {
		all += n.Reason
	}
	for _, e := range res.Env {
		all += e.Name + e.What
	}
	if strings.Contains(all, password) {
		t.Fatalf("the password appears in the output:\n%s", all)
	}
	cfg := load(t, res)
	a, b := cfg.Clusters["A"], cfg.Clusters["B"]
	if a.SASL == nil || a.SASL.Mechanism != "SCRAM-SHA-512" || a.SASL.Username != "mirror" || a.SASL.Password.Reveal() != "value-of-KMIRROR_A_SASL_PASSWORD" {
		t.Errorf("A's sasl: %+v", a.SASL)
	}
	if a.TLS == nil || !strings.HasSuffix(a.TLS.CAFile, "/etc/kafka/ca.pem") {
		t.Errorf("A's tls: %+v", a.TLS)
	}
	if b.SASL != nil || b.TLS == nil || !strings.HasSuffix(b.TLS.CAFile, "b-truststore.pem") ||
		!strings.HasSuffix(b.TLS.CertFile, "b-cert.pem") || !strings.HasSuffix(b.TLS.KeyFile, "b-key.pem") {
		t.Errorf("B's tls %+v, sasl %+v", b.TLS, b.SASL)
	}
	for key, want := range map[string]string{
		"B.ssl.truststore.location":               "keytool -list -rfc -keystore /etc/kafka/b-truststore.p12",
		"B.ssl.keystore.location":                 "openssl pkcs12 -in /etc/kafka/b.p12 -nocerts -nodes -out /etc/kafka/b-key.pem",
		"B.ssl.endpoint.identification.algorithm": "host name verification is off",
	} {
		if got := reasons(res.Unmapped, key); !strings.Contains(got, want) {
			t.Errorf("%s: reason %q lacks %q", key, got, want)
		}
	}
	if len(res.Env) != 1 || res.Env[0].Name != "KMIRROR_A_SASL_PASSWORD" {
		t.Errorf("env: %+v", res.Env)
	}
}

func TestConvertUnmapped(t *testing.T) {
	res := convert(t, base+`
A->B.topics = (?!tmp).*
A->B.groups.exclude = [a-z&&[^x]]+
A->B.config.properties.exclude = x{1,3}
A->B.transforms = drop
A.consumer.isolation.level = read_uncommitted
B.producer.batch.size = 16384
A->B.replication.policy.class = com.example.MyPolicy
A->B.topic.filter.class = com.example.Filter
emit.heartbeat.enabled = false
C->A.enabled = true
`)
	for key, want := range map[string]string{
		"A->B.topics":                    "Go's RE2 cannot compile",
		"A->B.groups.exclude":            "intersection",
		"A->B.config.properties.exclude": "splits the pattern",
		"A->B.transforms":                "unchanged",
		"A.consumer.isolation.level":     "read_committed",
		"B.producer.batch.size":          "single record",
		"A->B.replication.policy.class":  "custom replication policy",
		"A->B.topic.filter.class":        "filter plugin",
		"emit.heartbeat.enabled":         "typo",
		"C->A.enabled":                   "not both in clusters",
	} {
		if got := reasons(res.Unmapped, key); !strings.Contains(got, want) {
			t.Errorf("%s: reason %q lacks %q", key, got, want)
		}
	}
}

// Values are written so that kmirror's ${VAR} expansion gives them back
// unchanged, and flows enabled with "true " stay disabled as in MM2.
func TestConvertLiteralDollarsAndUntrimmedEnabled(t *testing.T) {
	res := convert(t, base+"A->B.topics = a${b}, c$$, d$\nB->A.enabled = true \n")
	m := load(t, res).Mirror("A-to-B")
	if got := strings.Join(m.Topics.Include[:3], " "); got != "a${b} c$$ d$" {
		t.Errorf("topics.include %q, want the patterns as written", got)
	}
	if got := reasons(res.Unmapped, "B->A.enabled"); !strings.Contains(got, "disabled") {
		t.Errorf("B->A.enabled: %q", got)
	}
	if len(load(t, res).Mirrors) != 1 {
		t.Errorf("B->A converted although MM2 reads it as disabled")
	}
}

func TestConvertInputErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"A.bootstrap.servers = a:1\n", "clusters: missing"},
		{"clusters = A, A\n", "listed twice"},
		{"clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n", "no replication flow is enabled"},
		{"clusters = A, B\nA.bootstrap.servers = a:1\nb.bootstrap.servers = b:1\nA->B.enabled = true\n", "B.bootstrap.servers: missing"},
		{"clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = ...\nA->B.enabled = true\n", "not host:port"},
	} {
		props, err := ParseProperties([]byte(tc.text))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Convert(props, "f")
		var ie *InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an input error with %q", tc.text, err, tc.want)
		}
	}
}

// TestExamples converts the MM2 files of Kafka's docs and distribution
// (testdata, origins in each file's header): the ones MM2 accepts convert to
// a config that config.Load accepts; the ones MM2 refuses are refused.
func TestExamples(t *testing.T) {
	for file, want := range map[string]struct {
		mirrors     int
		exactlyOnce bool
		unmapped    []string // keys expected among the unmapped
		err         string
	}{
		"connect-mirror-maker.properties":      {mirrors: 2},
		"docs-overview.properties":             {mirrors: 1, unmapped: []string{"primary->secondary.enabled"}},
		"docs-config-syntax.properties":        {mirrors: 1, unmapped: []string{"clusters", "topics", "us-west->us.east.topics"}},
		"docs-clients.properties":              {mirrors: 1, exactlyOnce: true, unmapped: []string{"us-west.admin.bootstrap.servers", "us-east.producer.buffer.memory"}},
		"docs-flows.properties":                {mirrors: 1, unmapped: []string{"us-west->us-east.emit.heartbeats"}},
		"docs-security.properties":             {mirrors: 1, unmapped: []string{"us-east.ssl.truststore.location", "us-east.ssl.keystore.location"}},
		"docs-active-passive.properties":       {err: "clusters: missing"},
		"docs-active-passive-fixed.properties": {mirrors: 1, unmapped: []string{"primary->secondary.topics"}},
		"docs-active-active.properties":        {err: "Us-east.bootstrap.servers: aliases are case-sensitive"},
		"docs-active-active-fixed.properties":  {mirrors: 2},
		"docs-multi-cluster.properties":        {mirrors: 12},
		"bench-mm2-eos.properties":             {mirrors: 1, exactlyOnce: true, unmapped: []string{"dst.producer.batch.size", "src.consumer.fetch.max.bytes"}},
	} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			props, err := ParseProperties(data)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Convert(props, file)
			if want.err != "" {
				if err == nil || !strings.Contains(err.Error(), want.err) {
					t.Fatalf("got %v, want an error with %q", err, want.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range want.unmapped {
				if reasons(res.Unmapped, k) == "" {
					t.Errorf("%s is not among the unmapped: %+v", k, res.Unmapped)
				}
			}
			if want.unmapped == nil && len(res.Unmapped) > 0 {
				t.Errorf("unmapped: %+v", res.Unmapped)
			}
			cfg := load(t, res)
			if len(cfg.Mirrors) != want.mirrors {
				t.Errorf("%d mirrors, want %d", len(cfg.Mirrors), want.mirrors)
			}
			for _, m := range cfg.Mirrors {
				if m.ExactlyOnce != want.exactlyOnce {
					t.Errorf("mirror %s: exactly_once %t", m.Name, m.ExactlyOnce)
				}
				if m.MM2 == nil || !m.MM2.Adopt || m.MM2.SourceAlias != m.Source {
					t.Errorf("mirror %s: mm2 %+v, want adopt from alias %s", m.Name, m.MM2, m.Source)
				}
			}
		})
	}
}

// security.protocol SSL without a truststore is tls: {} (the system's
// roots), not plaintext.
func TestConvertTLSWithSystemRoots(t *testing.T) {
	cfg := load(t, convert(t, base+"B.security.protocol = ssl\n"))
	if cfg.Clusters["B"].TLS == nil || cfg.Clusters["A"].TLS != nil {
		t.Errorf("tls: A %+v, B %+v; want B only", cfg.Clusters["A"].TLS, cfg.Clusters["B"].TLS)
	}
}

// TestConvertOffsetSyncsLocation: a location MM2 would refuse is noted as
// not mapped; the output keeps the default.
func TestConvertOffsetSyncsLocation(t *testing.T) {
	res := convert(t, base+"offset-syncs.topic.location = upstream\n")
	if !strings.Contains(reasons(res.Unmapped, "offset-syncs.topic.location"), "not source or target") {
		t.Errorf("unmapped: %+v", res.Unmapped)
	}
	if mm := load(t, res).Mirror("A-to-B").MM2; mm.OffsetSyncsLocation != "source" || mm.OffsetSyncsTopic != "mm2-offset-syncs.B.internal" {
		t.Errorf("mm2 block %+v: want the offset syncs on the source", mm)
	}
}
