package config_test

import (
	"os"
	"slices"
	"testing"

	"github.com/kmirror/kmirror/config"
)

// The env tests use t.Setenv, so they cannot run in parallel.

func TestEnvExpansion(t *testing.T) {
	t.Setenv("KMIRROR_TEST_CLIENT", "from-env")
	t.Setenv("KMIRROR_TEST_EMPTY", "")
	t.Setenv("KMIRROR_TEST_RF", "3")
	t.Setenv("KMIRROR_TEST_BROKER", "10.0.0.7:9092")
	t.Setenv("KMIRROR_TEST_NESTED", "${KMIRROR_TEST_NEVER_SET}")
	if _, set := os.LookupEnv("KMIRROR_TEST_NEVER_SET"); set {
		t.Fatal("KMIRROR_TEST_NEVER_SET must not be set for this test")
	}

	clientID := func(c *config.Config) any { return c.Cluster("west").ClientID }
	withClientID := func(v string) string {
		return "clusters:\n  east: {bootstrap_servers: [\"127.0.0.1:19092\"]}\n  west:\n    bootstrap_servers: [\"127.0.0.1:29092\"]\n    client_id: " + v +
			"\nmirrors: [{name: m, source: east, target: west}]\n"
	}
	mirror := func(c *config.Config) *config.Mirror { return c.Mirrors[0] }

	tests := map[string]struct {
		yaml string
		get  func(*config.Config) any
		want any
	}{
		"set":                       {withClientID("${KMIRROR_TEST_CLIENT}"), clientID, "from-env"},
		"set, quoted":               {withClientID(`"${KMIRROR_TEST_CLIENT}"`), clientID, "from-env"},
		"inside text":               {withClientID("kmirror-${KMIRROR_TEST_CLIENT}-1"), clientID, "kmirror-from-env-1"},
		"two references":            {withClientID("${KMIRROR_TEST_CLIENT}.${KMIRROR_TEST_RF}"), clientID, "from-env.3"},
		"default when unset":        {withClientID("${KMIRROR_TEST_NEVER_SET:-fallback}"), clientID, "fallback"},
		"default when empty":        {withClientID("${KMIRROR_TEST_EMPTY:-fallback}"), clientID, "fallback"},
		"value beats default":       {withClientID("${KMIRROR_TEST_CLIENT:-fallback}"), clientID, "from-env"},
		"default with colons":       {withClientID(`"${KMIRROR_TEST_NEVER_SET:-a:b-c}"`), clientID, "a:b-c"},
		"empty set value":           {withClientID(`"x${KMIRROR_TEST_EMPTY}y"`), clientID, "xy"},
		"empty plain value is null": {withClientID("${KMIRROR_TEST_NEVER_SET:-}"), clientID, "kmirror"},
		"escape":                    {withClientID(`"a$$b"`), clientID, "a$b"},
		"escaped reference":         {withClientID(`"$${KMIRROR_TEST_CLIENT}"`), clientID, "${KMIRROR_TEST_CLIENT}"},
		"lone dollar kept":          {withClientID(`"cost$5 $"`), clientID, "cost$5 $"},
		"not expanded twice":        {withClientID("${KMIRROR_TEST_NESTED}"), clientID, "${KMIRROR_TEST_NEVER_SET}"},
		"comments are not expanded": {
			"# ${KMIRROR_TEST_NEVER_SET}\n" + withClientID("x # ${KMIRROR_TEST_NEVER_SET}"), clientID, "x",
		},
		"integer from env": {
			minimal + "    replication_factor: ${KMIRROR_TEST_RF}\n",
			func(c *config.Config) any { return mirror(c).ReplicationFactor }, 3,
		},
		"duration from default": {
			minimal + "    progress_interval: ${KMIRROR_TEST_NEVER_SET:-250ms}\n",
			func(c *config.Config) any { return mirror(c).ProgressInterval }, ms(250),
		},
		"list item": {
			"clusters:\n  east: {bootstrap_servers: [\"${KMIRROR_TEST_BROKER}\", \"h2:9092\"]}\n  west: {bootstrap_servers: [\"h:1\"]}\nmirrors: [{name: m, source: east, target: west}]\n",
			func(c *config.Config) any { return slices.Clone(c.Cluster("east").BootstrapServers) },
			[]string{"10.0.0.7:9092", "h2:9092"},
		},
		"regexp dollar anchor": {
			minimal + "    topics: {include: [\"orders$\"]}\n",
			func(c *config.Config) any { return slices.Clone(mirror(c).Topics.Include) }, []string{"orders$"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := mustLoad(t, tt.yaml)
			got := tt.get(c)
			if gs, ok := got.([]string); ok {
				if !slices.Equal(gs, tt.want.([]string)) {
					t.Errorf("got %q, want %q", gs, tt.want)
				}
				return
			}
			if got != tt.want {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestEnvExpansionErrors(t *testing.T) {
	t.Setenv("KMIRROR_TEST_RF", "3")
	if _, set := os.LookupEnv("KMIRROR_TEST_NEVER_SET"); set {
		t.Fatal("KMIRROR_TEST_NEVER_SET must not be set for this test")
	}
	tests := map[string]struct{ yaml, want string }{
		"unset": {minimal + "    progress_interval: ${KMIRROR_TEST_NEVER_SET}\n",
			"t.yaml:8: mirrors[0].progress_interval: environment variable KMIRROR_TEST_NEVER_SET is not set (use ${KMIRROR_TEST_NEVER_SET:-default} to give a default)"},
		"unset in mirror": {"clusters: {a: {bootstrap_servers: [\"h:1\"]}}\nmirrors:\n  - name: m\n    source: \"${KMIRROR_TEST_NEVER_SET}\"\n",
			"t.yaml:4: mirrors[0].source: environment variable KMIRROR_TEST_NEVER_SET is not set (use ${KMIRROR_TEST_NEVER_SET:-default} to give a default)"},
		"unset in list": {"clusters: {a: {bootstrap_servers: [\"h:1\", \"${KMIRROR_TEST_NEVER_SET}\"]}}\nmirrors: []\n",
			"t.yaml:1: clusters.a.bootstrap_servers[1]: environment variable KMIRROR_TEST_NEVER_SET is not set (use ${KMIRROR_TEST_NEVER_SET:-default} to give a default)"},
		"invalid name": {minimal + "    producer: {compression: \"${1X}\"}\n",
			`t.yaml:8: mirrors[0].producer.compression: invalid variable reference "${1X}" (want ${NAME} or ${NAME:-default}; write a literal $ as $$)`},
		"empty name": {minimal + "    producer: {compression: \"${}\"}\n",
			`t.yaml:8: mirrors[0].producer.compression: invalid variable reference "${}" (want ${NAME} or ${NAME:-default}; write a literal $ as $$)`},
		"unterminated": {minimal + "    producer: {compression: \"${KMIRROR_TEST_RF\"}\n",
			`t.yaml:8: mirrors[0].producer.compression: unterminated variable reference "${KMIRROR_TEST_RF" (write a literal $ as $$)`},
		"quoted stays a string": {minimal + "    replication_factor: \"${KMIRROR_TEST_RF}\"\n",
			`t.yaml:8: mirrors[0].replication_factor: expected an integer, got "3"`},
		"keys are not expanded": {minimal + "    ${KMIRROR_TEST_RF}: x\n",
			"t.yaml:8: mirrors[0].${KMIRROR_TEST_RF}: unknown field (known: name, source, target, replication_policy, topics, groups, replication_factor, state_partitions, producer, progress_interval, dead_letter, on_source_gap, cluster, exactly_once, sync, labels, rate_limit, topic_rate_limits, fetch, metadata, filters, listeners, mm2)"},
		"expanded value is validated": {minimal + "    replication_factor: ${KMIRROR_TEST_NEVER_SET:-0}\n",
			"t.yaml:8: mirrors[0].replication_factor: invalid replication factor 0 (want -1 for the target broker default, or 1 to 32767)"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := config.Load([]byte(tt.yaml), "t.yaml")
			if err == nil || err.Error() != tt.want {
				t.Errorf("got:\n%v\nwant:\n%s", err, tt.want)
			}
		})
	}
}
