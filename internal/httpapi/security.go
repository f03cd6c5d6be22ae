package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
)

// Security says how Protect guards the endpoints.
type Security struct {
	// Token, when not empty, must come as "Authorization: Bearer <token>"
	// on every request but the open ones (health, readiness, the status
	// page's static files, and /metrics with MetricsOpen).
	Token string
	// MetricsOpen serves /metrics without the token.
	MetricsOpen bool
	// LoopbackHosts refuses requests whose Host header is not a loopback
	// name or address. Set it for a loopback listener without a token: a
	// web page cannot then reach the API through a DNS name rebound to
	// 127.0.0.1, where the browser would treat it as same-origin.
	LoopbackHosts bool
}

// openPaths never need the token: orchestrators probe them without one.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true}

// Protect wraps the API handler: it refuses cross-origin browser requests
// that could change something (any method but GET, HEAD and OPTIONS; the
// Origin or Sec-Fetch-Site headers tell them apart) whatever the token
// setting, then checks the bearer token. It never adds CORS headers, so a
// page from another origin cannot read a response either.
func Protect(h http.Handler, s Security) http.Handler {
	want := sha256.Sum256([]byte(s.Token))
	authed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.LoopbackHosts && !loopbackHost(r.Host) {
			http.Error(w, "forbidden: this worker listens on loopback and answers only to a loopback Host (localhost, 127.0.0.1, [::1])", http.StatusForbidden)
			return
		}
		if s.Token != "" && !openPaths[r.URL.Path] && !(s.MetricsOpen && r.URL.Path == "/metrics") && !isStatic(r.URL.Path) {
			got, ok := bearer(r)
			if !ok || got == "" {
				unauthorized(w, `Bearer realm="kmirror"`, "a bearer token is required (Authorization: Bearer <token>; http.auth)")
				return
			}
			// Comparing digests keeps the comparison constant-time
			// whatever the lengths.
			sum := sha256.Sum256([]byte(got))
			if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				// A client told "required" when it sent one would
				// look for a missing setting, not at its token.
				unauthorized(w, `Bearer realm="kmirror", error="invalid_token"`, "the bearer token was refused: it is not the worker's http.auth token")
				return
			}
		}
		h.ServeHTTP(w, r)
	})
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "cross-origin request refused"})
	}))
	return cop.Handler(authed)
}

// unauthorized answers 401 with the challenge (RFC 6750) and msg.
func unauthorized(w http.ResponseWriter, challenge, msg string) {
	w.Header().Set("WWW-Authenticate", challenge)
	writeJSON(w, http.StatusUnauthorized, map[string]string{"error": msg})
}

func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ServerTLS is the server's TLS config: its certificate and, when
// clientCAFile is set, mutual TLS (every client must present a certificate
// that chains to one of those CAs).
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("http.tls.cert_file/key_file: %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("http.tls.client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("http.tls.client_ca_file: no PEM certificate in %s", clientCAFile)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// isStatic reports whether path is one of the status page's static files,
// which hold no data and so need no token: a browser cannot send one when
// it opens the page, which then asks for it and sends it with its API
// calls.
func isStatic(path string) bool {
	return path == "/" || path == "/favicon.ico" || strings.HasPrefix(path, "/ui/")
}
