package app

import (
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/internal/httpapi"
)

// httpSecurity turns the http section into the server's guard.
func httpSecurity(hc config.HTTP) httpapi.Security {
	var s httpapi.Security
	if hc.Auth != nil {
		s.Token = hc.Auth.Token().Reveal()
		s.MetricsOpen = !hc.Auth.Metrics
	} else {
		s.LoopbackHosts = loopbackListen(hc.Listen)
	}
	return s
}

// loopbackListen reports whether listen accepts connections from this
// host only.
func loopbackListen(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type warning struct {
	msg  string
	args []any
}

// securityWarnings are the settings that are valid but unsafe in
// production; Run logs each once at start.
func securityWarnings(cfg *config.Config) []warning {
	var out []warning
	for _, alias := range slices.Sorted(maps.Keys(cfg.Clusters)) {
		c := cfg.Clusters[alias]
		if c.TLS != nil && c.TLS.InsecureSkipVerify {
			out = append(out, warning{"insecure_skip_verify accepts any broker certificate: anyone in the middle can read and change what kmirror copies", []any{"field", "clusters." + alias + ".tls.insecure_skip_verify"}})
		}
		if c.SASL != nil && c.SASL.Mechanism == "PLAIN" && c.TLS == nil {
			out = append(out, warning{"SASL PLAIN without TLS sends the password in clear text", []any{"field", "clusters." + alias + ".sasl.mechanism"}})
		}
	}
	if cfg.HTTP.Auth == nil && !loopbackListen(cfg.HTTP.Listen) {
		out = append(out, warning{"the HTTP API listens beyond loopback without authentication: anyone who reaches the port reads every topic and group and can reload the config; set http.auth", []any{"field", "http.listen", "listen", cfg.HTTP.Listen}})
	}
	return out
}
