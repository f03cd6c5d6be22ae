package config_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/config"
)

func ms(n int) config.Duration { return config.Duration(time.Duration(n) * time.Millisecond) }

// minimal is a valid config that sets only what is required; tests append
// to it or edit it.
const minimal = `clusters:
  east: {bootstrap_servers: ["127.0.0.1:19092"]}
  west: {bootstrap_servers: ["127.0.0.1:29092"]}
mirrors:
  - name: east-to-west
    source: east
    target: west
`

func mustLoad(t *testing.T, yaml string) *config.Config {
	t.Helper()
	c, err := config.Load([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func mustLoadFile(t *testing.T, path string) *config.Config {
	t.Helper()
	c, err := config.LoadFile(path)
	if err != nil {
		t.Fatalf("LoadFile: %v", err)
	}
	return c
}

// assertSame compares configs through their YAML dumps, which show every
// exported field (and no unexported compiled regexps).
func assertSame(t *testing.T, want, got *config.Config) {
	t.Helper()
	if w, g := want.String(), got.String(); w != g {
		t.Errorf("config mismatch\nwant:\n%s\ngot:\n%s", w, g)
	}
}

var defaultSync = config.Sync{
	TopicConfigs: config.TopicConfigSync{
		Enabled: true, Interval: ms(30_000), Include: []string{".*"}, Exclude: config.DefaultConfigExclude,
	},
	ACLs:         config.ACLSync{Interval: ms(60_000)},
	GroupOffsets: config.GroupOffsetSync{Enabled: true, Interval: ms(5000), FollowSourceRewinds: true},
}

// defaultCluster is the cluster block a mirror gets when its config has none.
var defaultCluster = &config.MirrorCluster{Slots: 16, SessionTimeout: ms(10_000), CommitInterval: ms(100)}

func TestLoadFileGood(t *testing.T) {
	t.Parallel()
	got := mustLoadFile(t, "testdata/good.yaml")
	want := &config.Config{
		Clusters: map[string]*config.Cluster{
			"east": {
				BootstrapServers: []string{"10.0.1.1:9092", "10.0.1.2:9092", "[2001:db8::1]:9092"},
				ClientID:         "kmirror-east",
				DialTimeout:      ms(10_000),
				RequestTimeout:   ms(10_000),
			},
			"west": {
				BootstrapServers: []string{"kafka-west-1.example.com:9093"},
				ClientID:         "kmirror-west",
				DialTimeout:      ms(5_000),
				RequestTimeout:   ms(20_000),
			},
		},
		Mirrors: []*config.Mirror{
			{
				Name:              "east-to-west",
				Source:            "east",
				Target:            "west",
				ReplicationPolicy: config.ReplicationPolicy{Type: "default", Separator: "_"},
				Topics: config.Topics{
					Include:         []string{`orders\..*`, "payments"},
					Exclude:         []string{`.*\.tmp`, `orders\.test-.*`},
					RefreshInterval: ms(30_000),
				},
				Groups: config.Groups{
					Include: []string{"billing-.*"},
					Exclude: []string{"billing-debug"},
				},
				StatePartitions:   8,
				ReplicationFactor: 3,
				Producer:          config.Producer{Linger: ms(10), BatchMaxBytes: 4 << 20, Compression: "zstd"},
				Fetch:             config.Fetch{MaxBytes: 16 << 20},
				ProgressInterval:  ms(500),
				OnSourceGap:       "fail",
				RateLimit:         200e6,
				TopicRateLimits:   []*config.TopicRateLimit{{Match: `backfill\..*`, RateLimit: 20e6}},
				Cluster:           defaultCluster,
				Sync: config.Sync{
					TopicConfigs: config.TopicConfigSync{
						Enabled: true, Interval: ms(60_000), Include: []string{".*"},
						Exclude: []string{`min\.insync\.replicas`, `retention\..*`},
					},
					ACLs:         config.ACLSync{Enabled: true, Interval: ms(300_000)},
					GroupOffsets: config.GroupOffsetSync{Enabled: true, Interval: ms(10_000), FollowSourceRewinds: false},
				},
				Labels: []*config.Label{
					{Match: `orders\..*`, Set: map[string]string{"team": "payments", "tier": "1"}},
					{Match: "payments", Set: map[string]string{"team": "payments"}},
				},
				Metadata: config.MirrorMetadata{TrustedUpstreams: []string{"north-to-east"}},
			},
			{
				Name:              "west-to-east",
				Source:            "west",
				Target:            "east",
				ReplicationPolicy: config.ReplicationPolicy{Type: "identity", Separator: "."},
				Topics: config.Topics{
					Include:         []string{".*"},
					Exclude:         []string{},
					RefreshInterval: ms(60_000),
				},
				Groups: config.Groups{
					Include: []string{".*"},
					Exclude: []string{"console-consumer-.*", "connect-.*", "__.*", "test-.*"},
				},
				StatePartitions:   8,
				ReplicationFactor: -1,
				Producer:          config.Producer{Linger: 0, BatchMaxBytes: 1 << 20, Compression: "none"},
				Fetch:             config.Fetch{MaxBytes: 16 << 20},
				ProgressInterval:  ms(2000),
				OnSourceGap:       "skip",
				Cluster:           defaultCluster,
				Sync:              defaultSync,
			},
		},
		HTTP:            config.HTTP{Listen: "0.0.0.0:9644", MetricsDetail: "topic"},
		Log:             config.Log{Level: "debug", Format: "json"},
		Offsets:         config.Offsets{Compression: "lz4", IndexMemory: 256 << 20},
		ShutdownTimeout: config.Duration(10 * time.Second),
	}
	assertSame(t, want, got)
}

func TestLoadMinimalGetsDefaults(t *testing.T) {
	t.Parallel()
	got := mustLoadFile(t, "testdata/minimal.yaml")
	want := &config.Config{
		Clusters: map[string]*config.Cluster{
			"east": {BootstrapServers: []string{"127.0.0.1:19092"}, ClientID: "kmirror", DialTimeout: ms(10_000), RequestTimeout: ms(10_000)},
			"west": {BootstrapServers: []string{"127.0.0.1:29092"}, ClientID: "kmirror", DialTimeout: ms(10_000), RequestTimeout: ms(10_000)},
		},
		Mirrors: []*config.Mirror{{
			Name:              "east-to-west",
			Source:            "east",
			Target:            "west",
			ReplicationPolicy: config.ReplicationPolicy{Type: "default", Separator: "."},
			Topics:            config.Topics{Include: []string{".*"}, Exclude: []string{}, RefreshInterval: ms(10_000)},
			Groups: config.Groups{
				Include: []string{".*"},
				Exclude: []string{"console-consumer-.*", "connect-.*", "__.*"},
			},
			StatePartitions:   8,
			ReplicationFactor: -1,
			Producer:          config.Producer{Linger: ms(5), BatchMaxBytes: 1048576, Compression: "source"},
			Fetch:             config.Fetch{MaxBytes: 16 << 20},
			ProgressInterval:  ms(1000),
			OnSourceGap:       "skip",
			Cluster:           defaultCluster,
			Sync:              defaultSync,
		}},
		HTTP:            config.HTTP{Listen: "127.0.0.1:9644", MetricsDetail: "topic"},
		Log:             config.Log{Level: "info", Format: "text"},
		Offsets:         config.Offsets{Compression: "zstd", IndexMemory: 256 << 20},
		ShutdownTimeout: config.Duration(10 * time.Second),
	}
	assertSame(t, want, got)

	// Spot-check the typed values too, not only their rendering.
	m := got.Mirrors[0]
	if m.Topics.RefreshInterval != config.Duration(10*time.Second) || m.ProgressInterval != config.Duration(time.Second) ||
		m.Producer.Linger != config.Duration(5*time.Millisecond) || m.ReplicationFactor != -1 {
		t.Errorf("defaults: got refresh %v, progress %v, linger %v, rf %d", m.Topics.RefreshInterval, m.ProgressInterval, m.Producer.Linger, m.ReplicationFactor)
	}
}

func TestNullKeepsDefaults(t *testing.T) {
	t.Parallel()
	c := mustLoad(t, minimal+`    topics:
    groups:
      exclude: ~
    producer:
      linger:
http:
log: {level: null}
`)
	m := c.Mirrors[0]
	if !slices.Equal(m.Topics.Include, []string{".*"}) || m.Topics.RefreshInterval != ms(10_000) {
		t.Errorf("topics: got %+v", m.Topics)
	}
	if !slices.Equal(m.Groups.Exclude, []string{"console-consumer-.*", "connect-.*", "__.*"}) {
		t.Errorf("groups.exclude: got %q", m.Groups.Exclude)
	}
	if m.Producer.Linger != ms(5) || c.HTTP.Listen != "127.0.0.1:9644" || c.Log.Level != "info" {
		t.Errorf("got linger %v, listen %q, level %q", m.Producer.Linger, c.HTTP.Listen, c.Log.Level)
	}
}

func TestExplicitValuesOverrideDefaults(t *testing.T) {
	t.Parallel()
	c := mustLoad(t, minimal+`    groups: {include: [], exclude: []}
    producer: {linger: 0}
http: {listen: ":0"}
`)
	m := c.Mirrors[0]
	if len(m.Groups.Include) != 0 || len(m.Groups.Exclude) != 0 {
		t.Errorf("groups: got %+v, want empty lists", m.Groups)
	}
	if m.Producer.Linger != 0 {
		t.Errorf("linger: got %v, want 0", m.Producer.Linger)
	}
	if c.HTTP.Listen != ":0" {
		t.Errorf("http.listen: got %q", c.HTTP.Listen)
	}
}

func TestLoadBad(t *testing.T) {
	t.Parallel()
	if _, set := os.LookupEnv("KMIRROR_TEST_NEVER_SET"); set {
		t.Fatal("KMIRROR_TEST_NEVER_SET must not be set for this test")
	}
	tests := map[string]string{
		"unknown_key":     "11: mirrors[0].topics.inclde: unknown field (known: include, exclude, refresh_interval)",
		"unknown_cluster": `11: mirrors[1].source: unknown cluster "eas" (known: east, west)`,
		"unknown_plugin":  `9: mirrors[0].filters[0].plugin: unknown plugin "catalgo" (known: none)`,
		"plugin_sha256":   `11: plugins.catalog.sha256: want the binary's sha256 as 64 hex digits (sha256sum testdata/bin/fake-plugin), got "abc"`,
		"plugin_missing": `10: plugins.catalog.path: cannot read testdata/bin/no-such-plugin: no such file or directory
testdata/bad_plugin_missing.yaml:11: plugins.catalog.sha256: want the binary's sha256 as 64 hex digits (sha256sum testdata/bin/no-such-plugin), got "abc"`,
		"unknown_listener":       `8: mirrors[0].listeners[0]: unknown listener "pager" (known: log)`,
		"property_condition":     `10: mirrors[0].filters[0].property.conditions[0]: property condition "partitions > > 3": > needs a number, not "> 3"`,
		"listener_type":          `9: listeners.pager.type: unknown listener type "pagerduty" (want log, file, webhook, alertmanager or plugin)`,
		"label_partition":        `10: mirrors[0].labels[0].partition: labels apply to whole topics: kmirror keeps no per-partition metadata (remove partition)`,
		"label_reserved_key":     `10: mirrors[0].labels[0].set.kmirror.source.cluster: label keys starting with "kmirror." are reserved for provenance`,
		"trusted_upstream_name":  `11: mirrors[0].metadata.trusted_upstreams[1]: invalid mirror name "north to east" (want 1-100 characters from A-Z a-z 0-9 . _ -)`,
		"trusted_upstream_self":  `8: mirrors[0].metadata.trusted_upstreams[0]: a mirror's own metadata is on its target, not its source: name the mirror that writes to east`,
		"trusted_upstreams_type": `9: mirrors[0].metadata.trusted_upstreams: expected a list, got "north-to-east"`,
		"config_sync_interval":   `9: mirrors[0].sync.topic_configs.interval: must be greater than 0, got 0s`,
		"sasl_mechanism":         `5: clusters.east.sasl.mechanism: unknown SASL mechanism "GSSAPI" (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)`,
		"sasl_two_passwords":     `10: clusters.west.sasl.password_file: set password or password_file, not both`,
		"sasl_no_password":       `6: clusters.west.sasl.password: required field missing (or set password_file)`,
		"tls_missing_file":       `5: clusters.east.tls.ca_file: cannot read testdata/certs/no-such-ca.pem: no such file or directory`,
		"tls_cert_without_key":   `4: clusters.east.tls: cert_file and key_file go together: set both for client authentication, or neither`,
		"source_equals_target":   `9: mirrors[0].target: must differ from source (both are "east")`,
		"regex":                  "11: mirrors[0].topics.include[2]: invalid regexp \"(\": missing closing ): `(`",
		"group_regex":            "13: mirrors[0].groups.exclude[1]: invalid regexp \"[a-\": missing closing ]: `[a-`",
		"duplicate_mirror":       `13: mirrors[2].name: duplicate mirror name "east-to-west" (first defined at line 7)`,
		"duration":               `11: mirrors[0].topics.refresh_interval: invalid duration "10" (want a number with a unit, such as "10s" or "500ms")`,
		"zero_refresh_interval":  "11: mirrors[0].topics.refresh_interval: must be greater than 0, got 0s",
		"zero_progress_interval": "10: mirrors[0].progress_interval: must be greater than 0, got -1s",
		"negative_linger":        "11: mirrors[0].producer.linger: must not be negative, got -5ms",
		"delivery_timeout":       "11: mirrors[0].producer.delivery_timeout: must not be negative, got -1s",
		"dead_letter_topic":      `11: mirrors[0].dead_letter.topic: invalid topic name "refused records" (want 1-249 characters from A-Z a-z 0-9 . _ -)`,
		"on_source_gap":          `10: mirrors[0].on_source_gap: unknown policy "ignore" (want skip or fail)`,
		"fetch":                  `10: mirrors[0].fetch.max_bytes: must be from 1MiB to 256MiB, got 512KiB`,
		"rate_limit": `12: mirrors[0].topic_rate_limits[0]: name the topics: match (a regexp over source topic names), labels, or both
testdata/bad_rate_limit.yaml:13: mirrors[0].topic_rate_limits[1].match: invalid regexp "orders(": missing closing ): ` + "`orders(`" + `
testdata/bad_rate_limit.yaml:15: mirrors[0].topic_rate_limits[2].rate_limit: required field missing or not positive (bytes per second, e.g. 10MB)`,
		"shutdown_timeout":  "10: shutdown_timeout: must be greater than 0, got 0s",
		"empty_bootstrap":   "3: clusters.east.bootstrap_servers: at least one broker address is required",
		"missing_bootstrap": "2: clusters.east.bootstrap_servers: at least one broker address is required",
		"bootstrap_addr":    `5: clusters.east.bootstrap_servers[1]: invalid broker address "localhost" (want host:port, such as "127.0.0.1:9092")`,
		"bootstrap_port": `3: clusters.east.bootstrap_servers[0]: invalid broker address "127.0.0.1:0" (want host:port, such as "127.0.0.1:9092")
testdata/bad_bootstrap_port.yaml:5: clusters.west.bootstrap_servers[0]: invalid broker address "PLAINTEXT://127.0.0.1:29092" (want host:port, such as "127.0.0.1:9092")`,
		"cluster_alias":   `4: clusters.west/1: invalid cluster alias "west/1" (want 1-100 characters from A-Z a-z 0-9 . _ -)`,
		"empty_client_id": "4: clusters.east.client_id: must not be empty",
		"cluster_timeouts": `4: clusters.east.dial_timeout: must be greater than 0, got 0s
testdata/bad_cluster_timeouts.yaml:7: clusters.west.request_timeout: must be between 100ms and 15m0s, got 50ms`,
		"policy":               `11: mirrors[0].replication_policy.type: unknown replication policy type "foo" (want default or identity)`,
		"separator":            `11: mirrors[0].replication_policy.separator: invalid separator "/" (want one or more characters from A-Z a-z 0-9 . _ -)`,
		"mirror_name":          `7: mirrors[0].name: invalid mirror name "east to west" (want 1-100 characters from A-Z a-z 0-9 . _ -)`,
		"missing_mirror_name":  "7: mirrors[0].name: required field missing",
		"missing_target":       "7: mirrors[0].target: required field missing (known clusters: east, west)",
		"replication_factor":   "10: mirrors[0].replication_factor: invalid replication factor 0 (want -1 for the target broker default, or 1 to 32767)",
		"batch_max_bytes":      "11: mirrors[0].producer.batch_max_bytes: must be from 1 to 67108864 (64 MiB), got 134217728",
		"compression":          `11: mirrors[0].producer.compression: unknown compression "brotli" (want source, none, gzip, snappy, lz4 or zstd)`,
		"empty_topics_include": "11: mirrors[0].topics.include: at least one pattern is required (leave the key out to mirror every topic)",
		"http_listen":          `11: http.listen: invalid listen address "localhost" (want host:port, such as "127.0.0.1:9644"; the host may be empty and the port 0)`,
		"http_auth_no_token":   "11: http.auth.bearer_token_file: required field missing (or set bearer_token_env)",
		"http_auth_two_tokens": "13: http.auth.bearer_token_env: set bearer_token_file or bearer_token_env, not both",
		"http_auth_unset_env":  "12: http.auth.bearer_token_env: environment variable KMIRROR_TEST_NEVER_SET is not set or empty",
		"http_tls_missing_ca":  "14: http.tls.client_ca_file: cannot read testdata/no-such-ca.pem: no such file or directory",
		"http_tls_no_key":      "11: http.tls.key_file: required field missing (the server certificate's PEM key)",
		"unset_env":            "6: clusters.west.client_id: environment variable KMIRROR_TEST_NEVER_SET is not set (use ${KMIRROR_TEST_NEVER_SET:-default} to give a default)",
		"no_mirrors":           "6: mirrors: at least one mirror is required",
		"no_clusters": `2: clusters: at least one cluster is required
testdata/bad_no_clusters.yaml:4: mirrors[0].source: unknown cluster "east" (known: none)
testdata/bad_no_clusters.yaml:5: mirrors[0].target: unknown cluster "west" (known: none)`,
		"log_level":          `11: log.level: unknown log level "verbose" (want debug, info, warn or error)`,
		"log_format":         `11: log.format: unknown log format "xml" (want text or json)`,
		"wrong_type":         `11: mirrors[0].topics.include: expected a list, got "orders.*"`,
		"wrong_type_int":     `10: mirrors[0].replication_factor: expected an integer, got "three"`,
		"wrong_type_mapping": `10: http: expected a mapping, got "127.0.0.1:9644"`,
		"duplicate_key":      "10: mirrors[0].source: duplicate key (first defined at line 8)",
		"empty":              "1: config is empty",
		"syntax":             "7: invalid YAML: did not find expected '-' indicator",
		"two_documents":      "10: unexpected second YAML document (a config file holds exactly one)",
		"many_errors": `3: clusters.east.bootstrap_servers: at least one broker address is required
testdata/bad_many_errors.yaml:9: mirrors[0].target: must differ from source (both are "east")
testdata/bad_many_errors.yaml:11: mirrors[0].topics.include[0]: invalid regexp "(": missing closing ): ` + "`(`" + `
testdata/bad_many_errors.yaml:12: mirrors[0].topics.refresh_interval: must be greater than 0, got 0s
testdata/bad_many_errors.yaml:13: mirrors[1].name: duplicate mirror name "east-to-west" (first defined at line 7)
testdata/bad_many_errors.yaml:14: mirrors[1].source: unknown cluster "north" (known: east, west)
testdata/bad_many_errors.yaml:16: mirrors[1].replication_factor: invalid replication factor -2 (want -1 for the target broker default, or 1 to 32767)
testdata/bad_many_errors.yaml:18: log.level: unknown log level "trace" (want debug, info, warn or error)`,
	}
	for rule, want := range tests {
		t.Run(rule, func(t *testing.T) {
			t.Parallel()
			path := "testdata/bad_" + rule + ".yaml"
			want := path + ":" + want
			c, err := config.LoadFile(path)
			if err == nil {
				t.Fatalf("LoadFile(%s) succeeded, want error:\n%s\ngot config:\n%s", path, want, c)
			}
			if err.Error() != want {
				t.Errorf("LoadFile(%s) error\nwant:\n%s\ngot:\n%s", path, want, err)
			}
		})
	}

	// Every bad_*.yaml fixture has a case above.
	files, err := filepath.Glob("testdata/bad_*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		rule := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "bad_"), ".yaml")
		if _, ok := tests[rule]; !ok {
			t.Errorf("fixture %s has no test case", f)
		}
	}
}

func TestErrorValues(t *testing.T) {
	t.Parallel()
	_, err := config.LoadFile("testdata/bad_unknown_cluster.yaml")
	var e *config.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *config.Error", err, err)
	}
	want := config.Error{File: "testdata/bad_unknown_cluster.yaml", Line: 11, Field: "mirrors[1].source", Msg: `unknown cluster "eas" (known: east, west)`}
	if *e != want {
		t.Errorf("got %+v, want %+v", *e, want)
	}

	// Several problems come joined, each a *config.Error, sorted by line.
	_, err = config.LoadFile("testdata/bad_many_errors.yaml")
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T does not unwrap to a list", err)
	}
	var lines []int
	for _, err := range joined.Unwrap() {
		var e *config.Error
		if !errors.As(err, &e) {
			t.Fatalf("joined error %v (%T) is not a *config.Error", err, err)
		}
		lines = append(lines, e.Line)
	}
	if len(lines) != 8 || !slices.IsSorted(lines) {
		t.Errorf("lines: got %v, want 8 sorted lines", lines)
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		err  config.Error
		want string
	}{
		"full":     {config.Error{File: "k.yaml", Line: 12, Field: "mirrors[1].source", Msg: "bad"}, "k.yaml:12: mirrors[1].source: bad"},
		"no field": {config.Error{File: "k.yaml", Line: 1, Msg: "config is empty"}, "k.yaml:1: config is empty"},
		"no line":  {config.Error{File: "k.yaml", Msg: "invalid YAML: x"}, "k.yaml: invalid YAML: x"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLoadFileMissing(t *testing.T) {
	t.Parallel()
	_, err := config.LoadFile(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v, want fs.ErrNotExist", err)
	}
}

func TestLoadNameInErrors(t *testing.T) {
	t.Parallel()
	_, err := config.Load([]byte("mirrors: []\nclusters: {}\n"), "")
	// An empty file name reads "<config>"; errors are sorted by line, not
	// by the order of the checks.
	want := "<config>:1: mirrors: at least one mirror is required\n<config>:2: clusters: at least one cluster is required"
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
}

func TestByteSizes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"268435456": 256 << 20, "256MiB": 256 << 20, "1GiB": 1 << 30, "2 MiB": 2 << 20, "500MB": 500e6, "2097152B": 2 << 20} {
		c := mustLoad(t, minimal+"offsets: {index_memory: "+in+"}\n")
		if int64(c.Offsets.IndexMemory) != want {
			t.Errorf("index_memory %q = %d, want %d", in, c.Offsets.IndexMemory, want)
		}
	}
	if got := config.ByteSize(256 << 20).String(); got != "256MiB" {
		t.Errorf("String = %q, want 256MiB", got)
	}
}

func TestMoreTypeErrors(t *testing.T) {
	t.Parallel()
	tests := map[string]struct{ yaml, want string }{
		"top level list": {"- a\n- b\n", "t.yaml:1: expected a mapping, got a list"},
		"top level unknown": {minimal + "metrics: {}\n",
			"t.yaml:8: metrics: unknown field (known: clusters, mirrors, http, log, offsets, plugins, listeners, shutdown_timeout)"},
		"list for string": {"clusters: {a: {bootstrap_servers: [\"h:1\"]}}\nmirrors: [{name: [x]}]\n",
			"t.yaml:2: mirrors[0].name: expected a string, got a list"},
		"duplicate in flow": {minimal + "    source: west\n",
			"t.yaml:8: mirrors[0].source: duplicate key (first defined at line 6)"},
		"mapping for list": {minimal + "    topics: {include: {a: b}}\n",
			"t.yaml:8: mirrors[0].topics.include: expected a list, got a mapping"},
		"list item not string": {minimal + "    topics: {include: [[a]]}\n",
			"t.yaml:8: mirrors[0].topics.include[0]: expected a string, got a list"},
		"mirrors mapping": {"clusters: {a: {bootstrap_servers: [\"h:1\"]}}\nmirrors: {name: x}\n",
			"t.yaml:2: mirrors: expected a list, got a mapping"},
		"duration list": {minimal + "    progress_interval: [1s]\n",
			"t.yaml:8: mirrors[0].progress_interval: expected a duration, got a list"},
		"float int": {minimal + "    replication_factor: 1.5\n",
			"t.yaml:8: mirrors[0].replication_factor: expected an integer, got 1.5"},
		"quoted int": {minimal + "    replication_factor: \"3\"\n",
			`t.yaml:8: mirrors[0].replication_factor: expected an integer, got "3"`},
		"int overflow": {minimal + "    producer: {batch_max_bytes: 99999999999999999999}\n",
			"t.yaml:8: mirrors[0].producer.batch_max_bytes: expected an integer, got 99999999999999999999"},
		"unknown key and type error": {minimal + "    topic: {}\n    replication_factor: x\n",
			"t.yaml:8: mirrors[0].topic: unknown field (known: name, source, target, replication_policy, topics, groups, replication_factor, state_partitions, producer, progress_interval, dead_letter, on_source_gap, cluster, exactly_once, sync, labels, rate_limit, topic_rate_limits, fetch, metadata, filters, listeners, mm2)\n" +
				`t.yaml:9: mirrors[0].replication_factor: expected an integer, got "x"`},
		"cluster null": {"clusters:\n  east:\n  west: {bootstrap_servers: [\"h:1\"]}\nmirrors: [{name: m, source: east, target: west}]\n",
			"t.yaml:2: clusters.east.bootstrap_servers: at least one broker address is required"},
		"mirror null": {"clusters:\n  east: {bootstrap_servers: [\"h:1\"]}\nmirrors:\n  -\n",
			"t.yaml:4: mirrors[0].name: required field missing\n" +
				"t.yaml:4: mirrors[0].source: required field missing (known clusters: east)\n" +
				"t.yaml:4: mirrors[0].target: required field missing (known clusters: east)"},
		"complex key": {"clusters:\n  ? [a]\n  : {}\n", "t.yaml:2: clusters: expected a string key, got a list"},
		"size word": {minimal + "offsets: {index_memory: lots}\n",
			`t.yaml:8: offsets.index_memory: invalid size "lots" (want a number of bytes, or one with a unit such as "256MiB" or "1GiB")`},
		"metrics detail": {minimal + "http: {metrics_detail: everything}\n",
			`t.yaml:8: http.metrics_detail: unknown detail "everything" (want mirror, topic or partition)`},
		"size too small": {minimal + "offsets: {index_memory: 64KiB}\n",
			"t.yaml:8: offsets.index_memory: 64KiB is too small (want at least 1MiB)"},
		"state partitions": {minimal + "    state_partitions: 0\n",
			"t.yaml:8: mirrors[0].state_partitions: invalid partition count 0 (want 1 to 1000)"},
		"offset syncs location": {minimal + "    mm2: {offset_syncs_location: both}\n",
			`t.yaml:8: mirrors[0].mm2.offset_syncs_location: unknown location "both" (want source or target, MM2's offset-syncs.topic.location)`},
		"offset syncs topic": {minimal + "    mm2: {offset_syncs_topic: \"a b\"}\n",
			`t.yaml:8: mirrors[0].mm2.offset_syncs_topic: invalid topic name "a b" (want 1-249 characters from A-Z a-z 0-9 . _ -)`},
		"second mirror line": {minimal + "  - name: x\n    source: west\n    target: nowhere\n",
			`t.yaml:10: mirrors[1].target: unknown cluster "nowhere" (known: east, west)`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Load([]byte(tt.yaml), "t.yaml")
			if err == nil || err.Error() != tt.want {
				t.Errorf("got:\n%v\nwant:\n%s", err, tt.want)
			}
		})
	}
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	t.Parallel()
	c := mustLoad(t, `clusters:
  east: {bootstrap_servers: &brokers ["127.0.0.1:19092"]}
  west: {bootstrap_servers: *brokers, client_id: west}
mirrors:
  - &base
    name: east-to-west
    source: east
    target: west
    topics: {include: ["orders.*"], refresh_interval: 5s}
  - <<: *base
    name: west-to-east
    source: west
    target: east
`)
	if got := c.Cluster("west").BootstrapServers; !slices.Equal(got, []string{"127.0.0.1:19092"}) {
		t.Errorf("west bootstrap: got %q", got)
	}
	m := c.Mirror("west-to-east")
	if m == nil || m.Source != "west" || m.Target != "east" || !slices.Equal(m.Topics.Include, []string{"orders.*"}) || m.Topics.RefreshInterval != ms(5000) {
		t.Errorf("merged mirror: got %+v", m)
	}
}

func TestMergeKeyErrors(t *testing.T) {
	t.Parallel()
	_, err := config.Load([]byte(minimal+"    <<: [a]\n"), "t.yaml")
	want := `t.yaml:8: mirrors[0]: merge key (<<) needs a mapping or a list of mappings, got "a"`
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
	// A mapping that merges itself must not hang.
	_, err = config.Load([]byte("http: &h {<<: *h}\n"), "t.yaml")
	want = "t.yaml:1: http: merge key (<<) refers to the mapping that contains it"
	if err == nil || err.Error() != want {
		t.Errorf("self-merge: got:\n%v\nwant:\n%s", err, want)
	}
	// So must a list that contains itself.
	_, err = config.Load([]byte("x: &x [*x]\n"), "t.yaml")
	want = "t.yaml:1: x: unknown field (known: clusters, mirrors, http, log, offsets, plugins, listeners, shutdown_timeout)"
	if err == nil || err.Error() != want {
		t.Errorf("self-alias: got:\n%v\nwant:\n%s", err, want)
	}
}

func TestConfigLookups(t *testing.T) {
	t.Parallel()
	c := mustLoadFile(t, "testdata/good.yaml")
	if m := c.Mirror("west-to-east"); m == nil || m.Source != "west" {
		t.Errorf("Mirror(west-to-east): got %+v", m)
	}
	if m := c.Mirror("nope"); m != nil {
		t.Errorf("Mirror(nope): got %+v, want nil", m)
	}
	if cl := c.Cluster("east"); cl == nil || cl.ClientID != "kmirror-east" {
		t.Errorf("Cluster(east): got %+v", cl)
	}
	if cl := c.Cluster("nope"); cl != nil {
		t.Errorf("Cluster(nope): got %+v, want nil", cl)
	}
}

func TestRegexps(t *testing.T) {
	t.Parallel()
	c := mustLoadFile(t, "testdata/good.yaml")

	tests := []struct {
		name       string
		mirror     string
		topic      string
		included   bool
		excluded   bool
		groupIncl  bool
		groupExcl  bool
		groupCheck string
	}{
		{name: "prefix match", mirror: "east-to-west", topic: "orders.eu", included: true},
		{name: "anchored: no substring match", mirror: "east-to-west", topic: "my-orders.eu"},
		{name: "anchored: whole name", mirror: "east-to-west", topic: "payments2"},
		{name: "exact", mirror: "east-to-west", topic: "payments", included: true},
		{name: "excluded", mirror: "east-to-west", topic: "orders.test-1", included: true, excluded: true},
		{name: "exclude anchored", mirror: "east-to-west", topic: "orders.tmp", included: true, excluded: true},
		{name: "groups", mirror: "east-to-west", groupCheck: "billing-debug", groupIncl: true, groupExcl: true},
		{name: "default groups exclude", mirror: "west-to-east", groupCheck: "console-consumer-4711", groupIncl: true, groupExcl: true},
		{name: "default groups include", mirror: "west-to-east", groupCheck: "payments-app", groupIncl: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := c.Mirror(tt.mirror)
			if tt.topic != "" {
				if got := anyMatch(m.Topics.IncludeRegexps(), tt.topic); got != tt.included {
					t.Errorf("topic %q included: got %v, want %v", tt.topic, got, tt.included)
				}
				if got := anyMatch(m.Topics.ExcludeRegexps(), tt.topic); got != tt.excluded {
					t.Errorf("topic %q excluded: got %v, want %v", tt.topic, got, tt.excluded)
				}
			}
			if tt.groupCheck != "" {
				if got := anyMatch(m.Groups.IncludeRegexps(), tt.groupCheck); got != tt.groupIncl {
					t.Errorf("group %q included: got %v, want %v", tt.groupCheck, got, tt.groupIncl)
				}
				if got := anyMatch(m.Groups.ExcludeRegexps(), tt.groupCheck); got != tt.groupExcl {
					t.Errorf("group %q excluded: got %v, want %v", tt.groupCheck, got, tt.groupExcl)
				}
			}
		})
	}

	// Load compiles once: the same values come back on every call.
	m := c.Mirrors[0]
	if a, b := m.Topics.IncludeRegexps(), m.Topics.IncludeRegexps(); len(a) != 2 || a[0] != b[0] {
		t.Errorf("IncludeRegexps not compiled once: %v vs %v", a, b)
	}
	if got := m.Topics.IncludeRegexps()[0].String(); got != `^(?:orders\..*)$` {
		t.Errorf("anchored pattern: got %q", got)
	}

	// A Topics built by hand compiles on demand.
	hand := config.Topics{Include: []string{"a|b"}}
	if res := hand.IncludeRegexps(); len(res) != 1 || !res[0].MatchString("b") || res[0].MatchString("ab") {
		t.Errorf("hand-built Topics: got %v", res)
	}
	if res := hand.ExcludeRegexps(); len(res) != 0 {
		t.Errorf("hand-built Topics exclude: got %v", res)
	}
}

func anyMatch(res []*regexp.Regexp, name string) bool {
	for _, re := range res {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

func TestStringRoundTrip(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"testdata/good.yaml", "testdata/minimal.yaml"} {
		c := mustLoadFile(t, f)
		again := mustLoad(t, c.String())
		assertSame(t, c, again)
	}
}

// docs/configuration.md shows good.yaml verbatim and documents every key.
func TestDocs(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile("testdata/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```yaml\n"+string(good)+"```\n") {
		t.Error("docs/configuration.md does not contain testdata/good.yaml verbatim")
	}
	keys := yamlKeys(reflect.TypeFor[config.Config]())
	if len(keys) != 119 {
		t.Errorf("found %d keys, want 119: %q (update this test and the docs when adding keys)", len(keys), keys)
	}
	for _, key := range keys {
		if !strings.Contains(string(doc), "| `"+key+"` |") {
			t.Errorf("docs/configuration.md has no table row for key %q", key)
		}
	}
}

// yamlKeys lists the yaml keys of t's fields and of the structs below them.
func yamlKeys(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeFor[config.Duration]() {
		return nil
	}
	var keys []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		keys = append(keys, name)
		keys = append(keys, yamlKeys(f.Type)...)
	}
	return keys
}

func TestTLSAndSASL(t *testing.T) {
	t.Setenv("KMIRROR_TEST_PASSWORD", "from-env")
	c, err := config.LoadFile("testdata/tls_sasl.yaml")
	if err != nil {
		t.Fatal(err)
	}
	east, west := c.Cluster("east"), c.Cluster("west")
	if east.TLS == nil || east.TLS.CAFile != "testdata/good.yaml" || east.TLS.ServerName != "kafka.east.example" {
		t.Errorf("east tls = %+v (ca_file must resolve against the config's directory)", east.TLS)
	}
	if east.SASL.Mechanism != "SCRAM-SHA-512" || east.SASL.Username != "mirror" || east.SASL.Password.Reveal() != "from-env" {
		t.Errorf("east sasl = %+v / %q", east.SASL, east.SASL.Password.Reveal())
	}
	if west.TLS == nil || *west.TLS != (config.TLS{}) {
		t.Errorf("west tls = %+v, want present and empty", west.TLS)
	}
	if west.SASL.Password.Reveal() != "from-a-file" {
		t.Errorf("password_file: got %q", west.SASL.Password.Reveal())
	}
	if s := c.String(); strings.Contains(s, "from-env") || strings.Contains(s, "from-a-file") {
		t.Errorf("String() shows a password:\n%s", s)
	}
}

func TestPluginsFiltersListeners(t *testing.T) {
	t.Parallel()
	c := mustLoadFile(t, "testdata/plugins.yaml")
	m := c.Mirrors[0]
	if len(m.Filters) != 2 || m.Filters[0].Plugin != "catalog" || m.Filters[0].Properties["team"] != "payments" {
		t.Fatalf("filters = %+v", m.Filters)
	}
	if p := m.Filters[1].Property; p.Combine != "any" || len(p.Conditions) != 3 {
		t.Fatalf("property filter = %+v", p)
	}
	if got := c.Plugins["catalog"].Path; got != "testdata/bin/fake-plugin" {
		t.Errorf("plugin path = %q, want it resolved against the config's directory", got)
	}
	if got := c.Listeners["state"].Config["path"]; got != "testdata/state.json" {
		t.Errorf("file listener path = %q, want it resolved against the config's directory", got)
	}
	if c.Listeners["hook"].Timeout != config.Duration(5*time.Second) || c.Listeners["audit"].Path != "testdata/bin/fake-plugin" {
		t.Errorf("listeners = %+v %+v", c.Listeners["hook"], c.Listeners["audit"])
	}
}

func TestHTTPSecurity(t *testing.T) {
	c := mustLoadFile(t, "testdata/http_secure.yaml")
	h := c.HTTP
	if h.TLS == nil || h.TLS.CertFile != "testdata/good.yaml" || h.TLS.KeyFile != "testdata/minimal.yaml" || h.TLS.ClientCAFile != "testdata/tls_sasl.yaml" {
		t.Errorf("http.tls = %+v (paths resolve against the config's directory)", h.TLS)
	}
	if h.Auth == nil || h.Auth.Token().Reveal() != "from-a-file" || h.Auth.Metrics {
		t.Errorf("http.auth = %+v, token %q", h.Auth, h.Auth.Token().Reveal())
	}
	if strings.Contains(c.String(), "from-a-file") {
		t.Errorf("String() shows the token:\n%s", c)
	}

	t.Setenv("KMIRROR_TEST_TOKEN", "s3cret")
	c = mustLoad(t, `clusters: {a: {bootstrap_servers: ["h:1"]}, b: {bootstrap_servers: ["h:2"]}}
mirrors: [{name: m, source: a, target: b}]
http: {auth: {bearer_token_env: KMIRROR_TEST_TOKEN}}
`)
	if a := c.HTTP.Auth; a.Token().Reveal() != "s3cret" || !a.Metrics {
		t.Errorf("http.auth from the environment = %+v, token %q (metrics must default to true)", a, a.Token().Reveal())
	}
	if c := mustLoadFile(t, "testdata/minimal.yaml"); c.HTTP.Auth != nil || c.HTTP.TLS != nil {
		t.Errorf("auth and tls must be off by default: %+v", c.HTTP)
	}
}

// TestMM2SourceConnector: the connector name MM2's positions are keyed by
// is MM2's dedicated mode's (MirrorSourceConnector) unless set (a Connect
// deployment's name=).
func TestMM2SourceConnector(t *testing.T) {
	c := mustLoad(t, minimal+"    mm2: {adopt: true}\n")
	if got := c.Mirrors[0].MM2.SourceConnector; got != "MirrorSourceConnector" {
		t.Errorf("default source_connector %q, want MirrorSourceConnector", got)
	}
	c = mustLoad(t, minimal+"    mm2: {adopt: true, source_connector: mm2-west-to-east}\n")
	if got := c.Mirrors[0].MM2.SourceConnector; got != "mm2-west-to-east" {
		t.Errorf("source_connector %q, want mm2-west-to-east", got)
	}
	_, err := config.Load([]byte(minimal+"    mm2: {source_connector: [a, b]}\n"), "t.yaml")
	if err == nil || !strings.HasPrefix(err.Error(), "t.yaml:8: mirrors[0].mm2.source_connector: ") {
		t.Errorf("a list as source_connector: %v", err)
	}
}

// TestMM2OffsetSyncsDefaults: MM2 names its offset-syncs topic after the
// other cluster of the flow.
func TestMM2OffsetSyncsDefaults(t *testing.T) {
	for loc, want := range map[string]string{"": "mm2-offset-syncs.west.internal", "source": "mm2-offset-syncs.west.internal", "target": "mm2-offset-syncs.A.internal"} {
		c := mustLoad(t, minimal+"    mm2: {source_alias: A, offset_syncs_location: \""+loc+"\"}\n")
		mm := c.Mirrors[0].MM2
		if mm.OffsetSyncsTopic != want || (loc != "" && mm.OffsetSyncsLocation != loc) || (loc == "" && mm.OffsetSyncsLocation != "source") {
			t.Errorf("location %q: topic %q location %q, want %q", loc, mm.OffsetSyncsTopic, mm.OffsetSyncsLocation, want)
		}
	}
	c := mustLoad(t, minimal+"    mm2: {offset_syncs_topic: my-syncs}\n")
	if got := c.Mirrors[0].MM2.OffsetSyncsTopic; got != "my-syncs" {
		t.Errorf("explicit topic: %q", got)
	}
}
