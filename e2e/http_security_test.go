//go:build e2e

package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// TestHTTPSecurity: a worker with http.tls (a client CA: mutual TLS) and
// http.auth (a token file, /metrics open) refuses a client without a
// certificate, answers health without the token and the API only with it,
// refuses a cross-site reload even with the token, and `kmirror status`
// reaches it with the config's token and the client certificate. The HTTP
// server does not depend on the Kafka backend, so kfake only.
func TestHTTPSecurity(t *testing.T) {
	t.Parallel()
	e := newEnv(t, kfakeBackend{}, ClusterSpec{Brokers: 1})
	orders := e.topic("orders")
	createTopic(t, e.srcCl, orders, 2, nil)

	ca, err := kafkatest.NewCA("kmirror-http")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(e.dir, "http-ca.crt")
	if err := ca.WriteCert(caFile); err != nil {
		t.Fatal(err)
	}
	issue := func(name string, hosts ...string) (string, string) {
		kp, err := ca.Issue(name, hosts...)
		if err != nil {
			t.Fatal(err)
		}
		c, k, _, err := kp.WriteFiles(e.dir, name)
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	srvCert, srvKey := issue("http-server", "127.0.0.1")
	cliCert, cliKey := issue("operator")
	const token = "e2e-http-token-0123456789"
	if err := os.WriteFile(filepath.Join(e.dir, "http.token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := e.writeConfig(e.defaultConfig())
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const plainHTTP = `http: {listen: "127.0.0.1:0"}`
	if !strings.Contains(string(b), plainHTTP) {
		t.Fatalf("the config template changed: no %q in\n%s", plainHTTP, b)
	}
	secured := fmt.Sprintf(`http:
  listen: "127.0.0.1:0"
  tls: {cert_file: %q, key_file: %q, client_ca_file: %q}
  auth: {bearer_token_file: http.token, metrics: false}`, srvCert, srvKey, caFile)
	writeFileAtomic(t, path, []byte(strings.Replace(string(b), plainHTTP, secured, 1)))

	w := e.startWorker(path)
	addr := w.httpAddr(t)
	base := "https://" + addr

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	clientCert, err := tls.LoadX509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	withCert := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS12}}}
	noCert := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	do := func(c *http.Client, method, path string, headers ...string) (int, string, error) {
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			return 0, "", err
		}
		for _, h := range headers {
			k, v, _ := strings.Cut(h, ": ")
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	auth := "Authorization: Bearer " + token

	e.waitFor(30*time.Second, "/healthz to answer 200 over mutual TLS without a token", func() (bool, string) {
		code, body, err := do(withCert, "GET", "/healthz")
		if err != nil {
			return false, err.Error()
		}
		return code == 200, fmt.Sprintf("status %d: %s", code, body)
	})
	for _, path := range []string{"/healthz", "/api/v1/status"} {
		if code, _, err := do(noCert, "GET", path, auth); err == nil {
			t.Errorf("GET %s without a client certificate answered %d; want the TLS handshake refused", path, code)
		}
	}
	if _, err := httpClient.Get("http://" + addr + "/api/v1/status"); err == nil {
		// Go answers plain HTTP on a TLS port with a 400; never data.
		resp, _ := httpClient.Get("http://" + addr + "/api/v1/status")
		if resp != nil && resp.StatusCode == 200 {
			t.Errorf("plain HTTP to the TLS listener answered 200")
		}
	}
	for path, want := range map[string]int{"/api/v1/status": 401, "/api/v1/topics": 401, "/api/v1/groups": 401, "/metrics": 200} {
		if code, body, err := do(withCert, "GET", path); err != nil || code != want {
			t.Errorf("GET %s without the token = %d %v, want %d: %s", path, code, err, want, body)
		}
	}
	e.waitFor(60*time.Second, "/api/v1/status with the token to show src."+orders, func() (bool, string) {
		code, body, err := do(withCert, "GET", "/api/v1/status", auth)
		if err != nil {
			return false, err.Error()
		}
		var doc statusDoc
		if err := json.Unmarshal([]byte(body), &doc); err != nil || code != 200 {
			return false, fmt.Sprintf("status %d: %s", code, body)
		}
		return strings.Contains(body, `"src.`+orders+`"`), body
	})
	if code, body, err := do(withCert, "POST", "/api/v1/reload", auth, "Origin: https://evil.example", "Sec-Fetch-Site: cross-site"); err != nil || code != 403 {
		t.Errorf("cross-site POST /api/v1/reload with the token = %d %v, want 403: %s", code, err, body)
	}
	if code, body, err := do(withCert, "POST", "/api/v1/reload"); err != nil || code != 401 {
		t.Errorf("POST /api/v1/reload without the token = %d %v, want 401: %s", code, err, body)
	}
	if code, body, err := do(withCert, "POST", "/api/v1/reload", auth); err != nil || code != 200 || !strings.Contains(body, `"restart_required": []`) {
		t.Errorf("POST /api/v1/reload with the token = %d %v, want 200 and nothing to restart for: %s", code, err, body)
	}
	// A wrong token is refused as such, not as a missing one.
	if code, body, err := do(withCert, "GET", "/api/v1/status", "Authorization: Bearer not-"+token); err != nil || code != 401 || !strings.Contains(body, "the bearer token was refused") {
		t.Errorf("GET /api/v1/status with a wrong token = %d %v, want 401 and the token refused: %s", code, err, body)
	}
	wrong := filepath.Join(e.dir, "wrong.token")
	if err := os.WriteFile(wrong, []byte("not-"+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "status", "--url", base, "--token-file", wrong, "--ca-file", caFile, "--cert-file", cliCert, "--key-file", cliKey); code != 1 || !strings.Contains(errOut, "the worker refused the token in "+wrong) {
		t.Errorf("kmirror status --token-file with a wrong token: exit %d, want 1 and the token refused: %s", code, errOut)
	}
	code, out, errOut := runCLI(t, "status", "--config", path, "--url", addr, "--ca-file", caFile, "--cert-file", cliCert, "--key-file", cliKey)
	if (code != 0 && code != 3) || !strings.Contains(out, "src."+orders) { // 3: not ready, not this test's matter
		t.Errorf("kmirror status --config over mutual TLS with the config's token: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "status", "--config", path, "--url", addr, "--ca-file", caFile); code != 1 {
		t.Errorf("kmirror status without a client certificate: exit %d, want 1: %s", code, errOut)
	}
	if strings.Contains(w.log.String(), token) {
		t.Errorf("the worker's log shows the token")
	}
	if strings.Contains(w.log.String(), "level=WARN msg=\"the HTTP API listens beyond loopback") {
		t.Errorf("a loopback listener with auth must not be warned about")
	}
}
