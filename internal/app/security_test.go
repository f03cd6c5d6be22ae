package app

import (
	"strings"
	"testing"

	"github.com/kmirror/kmirror/config"
)

func TestSecurityWarnings(t *testing.T) {
	t.Setenv("KMIRROR_TEST_HTTP_TOKEN", "t0ken")
	load := func(clusters, http string) *config.Config {
		t.Helper()
		cfg, err := config.Load([]byte("clusters:\n"+clusters+"mirrors: [{name: m, source: a, target: b}]\nhttp: "+http+"\n"), "t.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	const safe = "  a: {bootstrap_servers: [\"h:1\"], tls: {}, sasl: {mechanism: PLAIN, username: u, password: p}}\n  b: {bootstrap_servers: [\"h:2\"], sasl: {mechanism: SCRAM-SHA-512, username: u, password: p}}\n"
	fields := func(ws []warning) string {
		var out []string
		for _, w := range ws {
			out = append(out, w.args[1].(string))
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		clusters, http, want string
	}{
		{safe, `{listen: "127.0.0.1:9644"}`, ""},
		{safe, `{listen: "localhost:9644"}`, ""},
		{safe, `{listen: "[::1]:0"}`, ""},
		{safe, `{listen: "0.0.0.0:9644", auth: {bearer_token_env: KMIRROR_TEST_HTTP_TOKEN}}`, ""},
		{safe, `{listen: ":9644"}`, "http.listen"},
		{safe, `{listen: "10.1.2.3:9644"}`, "http.listen"},
		{safe, `{listen: "kmirror.example:9644"}`, "http.listen"},
		{"  a: {bootstrap_servers: [\"h:1\"], tls: {insecure_skip_verify: true}}\n  b: {bootstrap_servers: [\"h:2\"], sasl: {mechanism: PLAIN, username: u, password: p}}\n", `{listen: ":1"}`,
			"clusters.a.tls.insecure_skip_verify clusters.b.sasl.mechanism http.listen"},
	} {
		if got := fields(securityWarnings(load(tc.clusters, tc.http))); got != tc.want {
			t.Errorf("http %s: warnings for %q, want %q", tc.http, got, tc.want)
		}
	}
}

func TestHTTPSecurity(t *testing.T) {
	t.Setenv("KMIRROR_TEST_HTTP_TOKEN", "t0ken")
	for _, tc := range []struct {
		http             config.HTTP
		token            string
		metricsOpen, lbh bool
	}{
		{config.HTTP{Listen: "127.0.0.1:9644"}, "", false, true},
		{config.HTTP{Listen: ":9644"}, "", false, false},
	} {
		s := httpSecurity(tc.http)
		if s.Token != tc.token || s.MetricsOpen != tc.metricsOpen || s.LoopbackHosts != tc.lbh {
			t.Errorf("httpSecurity(%+v) = %+v", tc.http, s)
		}
	}
	cfg, err := config.Load([]byte(`clusters: {a: {bootstrap_servers: ["h:1"]}, b: {bootstrap_servers: ["h:2"]}}
mirrors: [{name: m, source: a, target: b}]
http: {listen: "127.0.0.1:0", auth: {bearer_token_env: KMIRROR_TEST_HTTP_TOKEN, metrics: false}}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// With a token, the Host check is not needed: a rebound page has no token.
	if s := httpSecurity(cfg.HTTP); s.Token != "t0ken" || !s.MetricsOpen || s.LoopbackHosts {
		t.Errorf("httpSecurity with auth = %+v", s)
	}
}
