package httpapi_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/internal/httpapi"
)

const token = "0123456789abcdef-token"

// do sends one request to h with the headers given as "Name: value".
func do(h http.Handler, method, path string, headers ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.Host = "127.0.0.1:9644"
	for _, hd := range headers {
		k, v, _ := strings.Cut(hd, ": ")
		r.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func readyStatus() statuses {
	return statuses{{Name: "a", Ready: true, LastPassAt: time.Now()}}
}

func TestAuthToken(t *testing.T) {
	t.Parallel()
	var reloads atomic.Int32
	inner := httpapi.Handler(prometheus.NewRegistry(), readyStatus(), func(context.Context) ([]string, error) { reloads.Add(1); return nil, nil })
	for _, metricsOpen := range []bool{false, true} {
		h := httpapi.Protect(inner, httpapi.Security{Token: token, MetricsOpen: metricsOpen})
		for _, path := range []string{"/api/v1/status", "/api/v1/topics", "/api/v1/groups", "/metrics", "/nope"} {
			wantNoToken := http.StatusUnauthorized
			if path == "/metrics" && metricsOpen {
				wantNoToken = http.StatusOK
			}
			if rec := do(h, "GET", path); rec.Code != wantNoToken {
				t.Errorf("metricsOpen=%v GET %s without a token = %d, want %d", metricsOpen, path, rec.Code, wantNoToken)
			} else if rec.Code == 401 && rec.Header().Get("WWW-Authenticate") != `Bearer realm="kmirror"` {
				t.Errorf("GET %s: 401 without WWW-Authenticate", path)
			}
			if rec := do(h, "GET", path, "Authorization: Bearer wrong"+token); rec.Code != wantNoToken {
				t.Errorf("metricsOpen=%v GET %s with a wrong token = %d, want %d", metricsOpen, path, rec.Code, wantNoToken)
			}
			if wantNoToken == http.StatusUnauthorized {
				checkUnauthorized(t, h, path)
			}
			wantToken := http.StatusOK
			if path == "/nope" {
				wantToken = http.StatusNotFound
			}
			if rec := do(h, "GET", path, "Authorization: Bearer "+token); rec.Code != wantToken {
				t.Errorf("GET %s with the token = %d, want %d: %s", path, rec.Code, wantToken, rec.Body)
			}
		}
		for _, path := range []string{"/healthz", "/readyz"} {
			if rec := do(h, "GET", path); rec.Code != http.StatusOK {
				t.Errorf("GET %s without a token = %d, want 200 (orchestrators probe it without one)", path, rec.Code)
			}
		}
		if rec := do(h, "POST", "/api/v1/reload"); rec.Code != http.StatusUnauthorized {
			t.Errorf("POST /api/v1/reload without a token = %d, want 401", rec.Code)
		}
		if rec := do(h, "POST", "/api/v1/reload", "Authorization: Bearer "+token[:len(token)-1]); rec.Code != http.StatusUnauthorized {
			t.Errorf("POST /api/v1/reload with a prefix of the token = %d, want 401", rec.Code)
		}
	}
	if n := reloads.Load(); n != 0 {
		t.Fatalf("unauthenticated requests reloaded %d times", n)
	}
	h := httpapi.Protect(inner, httpapi.Security{Token: token})
	// A path that starts like an open one but is not one gets no data
	// without the token (the mux redirects unclean paths; nothing more).
	for _, path := range []string{"/ui/../api/v1/status", "/healthz/../api/v1/status", "//api/v1/status", "/api/v1/status/", "/ui/%2e%2e/api/v1/status"} {
		if rec := do(h, "GET", path); rec.Code == http.StatusOK || strings.Contains(rec.Body.String(), "mirrors") {
			t.Errorf("GET %s without a token = %d %s", path, rec.Code, rec.Body)
		}
	}
	if rec := do(h, "POST", "/api/v1/reload", "Authorization: bearer "+token); rec.Code != http.StatusOK || reloads.Load() != 1 {
		t.Fatalf("POST /api/v1/reload with the token = %d %s (reloads %d)", rec.Code, rec.Body, reloads.Load())
	}
}

// checkUnauthorized: a 401 says whether the token was missing or refused,
// in its message and (RFC 6750) its challenge.
func checkUnauthorized(t *testing.T, h http.Handler, path string) {
	t.Helper()
	for _, c := range []struct {
		headers   []string
		msg, auth string
	}{
		{nil, "a bearer token is required", `Bearer realm="kmirror"`},
		{[]string{"Authorization: Basic dXNlcjpwYXNz"}, "a bearer token is required", `Bearer realm="kmirror"`},
		{[]string{"Authorization: Bearer "}, "a bearer token is required", `Bearer realm="kmirror"`},
		{[]string{"Authorization: Bearer wrong"}, "the bearer token was refused", `Bearer realm="kmirror", error="invalid_token"`},
		{[]string{"Authorization: Bearer " + token[:len(token)-1]}, "the bearer token was refused", `Bearer realm="kmirror", error="invalid_token"`},
	} {
		rec := do(h, "GET", path, c.headers...)
		if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), c.msg) || rec.Header().Get("WWW-Authenticate") != c.auth {
			t.Errorf("GET %s with %q = %d %q %s; want 401 %q, %s", path, c.headers, rec.Code, rec.Header().Get("WWW-Authenticate"), rec.Body, c.auth, c.msg)
		}
	}
}

// A web page must not trigger a reload: without any auth, on loopback, a
// cross-site POST (a form on another site) is refused and no reload runs;
// curl (no Origin, no Sec-Fetch-Site) and the same origin still work.
func TestCrossSiteRefused(t *testing.T) {
	t.Parallel()
	var reloads atomic.Int32
	srv := httptest.NewServer(httpapi.Protect(
		httpapi.Handler(prometheus.NewRegistry(), readyStatus(), func(context.Context) ([]string, error) { reloads.Add(1); return nil, nil }),
		httpapi.Security{LoopbackHosts: true}))
	t.Cleanup(srv.Close)
	post := func(headers ...string) int {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL+"/api/v1/reload", strings.NewReader("a=b"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for _, hd := range headers {
			k, v, _ := strings.Cut(hd, ": ")
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("a response carries CORS headers: %v", resp.Header)
		}
		return resp.StatusCode
	}
	for _, refused := range [][]string{
		{"Origin: https://evil.example"},
		{"Origin: https://evil.example", "Sec-Fetch-Site: cross-site"},
		{"Sec-Fetch-Site: cross-site"},
		{"Sec-Fetch-Site: same-site"},
		{"Origin: null"},
		// DNS rebinding: evil.example resolved to 127.0.0.1, the
		// browser thinks the page and the API share an origin.
		{"Host: evil.example:" + srv.Listener.Addr().(*net.TCPAddr).AddrPort().String()[len("127.0.0.1:"):], "Origin: http://evil.example", "Sec-Fetch-Site: same-origin"},
	} {
		if code := post(refused...); code != http.StatusForbidden {
			t.Errorf("POST %v = %d, want 403", refused, code)
		}
	}
	if n := reloads.Load(); n != 0 {
		t.Fatalf("cross-site requests reloaded %d times", n)
	}
	if code := post(); code != http.StatusOK {
		t.Errorf("POST without Origin (curl) = %d, want 200", code)
	}
	if code := post("Origin: "+srv.URL, "Sec-Fetch-Site: same-origin"); code != http.StatusOK {
		t.Errorf("same-origin POST = %d, want 200", code)
	}
	if n := reloads.Load(); n != 2 {
		t.Errorf("reloads = %d, want 2", n)
	}
	// The preflight a cross-origin fetch would need gets no CORS grant.
	req, _ := http.NewRequest("OPTIONS", srv.URL+"/api/v1/reload", nil)
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Access-Control-Allow-Methods") != "" {
		t.Errorf("preflight answered with CORS headers: %v", resp.Header)
	}
	if code := do(httpapi.Protect(httpapi.Handler(prometheus.NewRegistry(), readyStatus(), nil), httpapi.Security{}), "GET", "/api/v1/reload").Code; code != http.StatusMethodNotAllowed {
		t.Errorf("GET /api/v1/reload = %d, want 405", code)
	}
}

// tlsServer serves h over the TLS config ServerTLS builds from files, as
// kmirror does, and returns its https URL.
func tlsServer(t *testing.T, certFile, keyFile, clientCAFile string, h http.Handler) string {
	t.Helper()
	tc, err := httpapi.ServerTLS(certFile, keyFile, clientCAFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: tc, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(tls.NewListener(ln, tc)) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return "https://" + ln.Addr().String()
}

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := kafkatest.NewCA("kmirror-http-ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := kafkatest.NewCA("someone-else")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := ca.WriteCert(caFile); err != nil {
		t.Fatal(err)
	}
	issue := func(ca *kafkatest.CA, name string, hosts ...string) (string, string) {
		kp, err := ca.Issue(name, hosts...)
		if err != nil {
			t.Fatal(err)
		}
		c, k, _, err := kp.WriteFiles(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	srvCert, srvKey := issue(ca, "server", "127.0.0.1")
	cliCert, cliKey := issue(ca, "operator")
	badCert, badKey := issue(other, "stranger")

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	client := func(certFile, keyFile string) *http.Client {
		tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if certFile != "" {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	}
	h := httpapi.Protect(httpapi.Handler(prometheus.NewRegistry(), readyStatus(), nil), httpapi.Security{Token: token})
	get := func(c *http.Client, url string, withToken bool) (int, error) {
		req, _ := http.NewRequest("GET", url, nil)
		if withToken {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}

	mtls := tlsServer(t, srvCert, srvKey, caFile, h)
	for name, c := range map[string]*http.Client{"no certificate": client("", ""), "a certificate from another CA": client(badCert, badKey)} {
		// Health too: with a client CA nothing answers a client
		// without a certificate.
		for _, path := range []string{"/healthz", "/api/v1/status"} {
			code, err := get(c, mtls+path, true)
			var alert tls.AlertError
			if err == nil || !(errors.As(err, &alert) || strings.Contains(err.Error(), "tls") || strings.Contains(err.Error(), "certificate")) {
				t.Errorf("%s: GET %s = %d, %v; want a TLS handshake failure", name, path, code, err)
			}
		}
	}
	good := client(cliCert, cliKey)
	if code, err := get(good, mtls+"/api/v1/status", true); err != nil || code != 200 {
		t.Errorf("client certificate and token: %d %v, want 200", code, err)
	}
	if code, err := get(good, mtls+"/api/v1/status", false); err != nil || code != 401 {
		t.Errorf("client certificate without the token: %d %v, want 401", code, err)
	}

	// Without a client CA, plain TLS: any client that trusts the server.
	plain := tlsServer(t, srvCert, srvKey, "", h)
	if code, err := get(client("", ""), plain+"/healthz", false); err != nil || code != 200 {
		t.Errorf("TLS without a client CA: %d %v, want 200", code, err)
	}
	if _, err := http.Get("http" + strings.TrimPrefix(plain, "https") + "/healthz"); err == nil {
		// A plain-HTTP request to a TLS port gets Go's 400 "client
		// sent an HTTP request to an HTTPS server" at most, never data.
		resp, _ := http.Get("http" + strings.TrimPrefix(plain, "https") + "/api/v1/status")
		if resp != nil && resp.StatusCode == 200 {
			t.Error("plain HTTP to the TLS listener answered 200")
		}
	}
}

func TestServerTLSErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, _ := kafkatest.NewCA("ca")
	kp, _ := ca.Issue("server", "127.0.0.1")
	c, k, _, err := kp.WriteFiles(dir, "server")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := httpapi.ServerTLS(c, c, ""); err == nil || !strings.Contains(err.Error(), "http.tls.cert_file/key_file") {
		t.Errorf("a certificate as the key: %v", err)
	}
	if _, err := httpapi.ServerTLS(c, k, k); err == nil || !strings.Contains(err.Error(), "http.tls.client_ca_file: no PEM certificate") {
		t.Errorf("a key as the client CA: %v", err)
	}
}
