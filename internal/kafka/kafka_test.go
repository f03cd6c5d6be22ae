package kafka

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/config"
)

// writeCert writes a self-signed certificate and its key as PEM files.
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestTLSConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	tc, err := tlsConfig(&config.TLS{CAFile: cert, CertFile: cert, KeyFile: key, ServerName: "broker.example"})
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "broker.example" || tc.InsecureSkipVerify {
		t.Fatalf("tls config = %+v", tc)
	}

	// A CA file without certificates is an error that names the field.
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tlsConfig(&config.TLS{CAFile: notPEM}); err == nil || !strings.HasPrefix(err.Error(), "ca_file: no PEM certificate") {
		t.Fatalf("err = %v", err)
	}
	if _, err := tlsConfig(&config.TLS{CertFile: cert, KeyFile: notPEM}); err == nil || !strings.HasPrefix(err.Error(), "cert_file/key_file:") {
		t.Fatalf("err = %v", err)
	}
	_, err = NewCluster("east", &config.Cluster{BootstrapServers: []string{"127.0.0.1:9092"}, ClientID: "k", TLS: &config.TLS{CAFile: notPEM}}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "clusters.east.tls: ca_file:") {
		t.Fatalf("NewCluster err = %v", err)
	}
}

func TestSASLMechanism(t *testing.T) {
	t.Parallel()
	for mech, want := range map[string]string{"PLAIN": "PLAIN", "SCRAM-SHA-256": "SCRAM-SHA-256", "SCRAM-SHA-512": "SCRAM-SHA-512"} {
		m, err := saslMechanism(&config.SASL{Mechanism: mech, Username: "u", Password: "p"})
		if err != nil || m.Name() != want {
			t.Errorf("%s: got %v, %v", mech, m, err)
		}
	}
	if _, err := saslMechanism(&config.SASL{Mechanism: "GSSAPI"}); err == nil {
		t.Error("GSSAPI must be refused")
	}
}
