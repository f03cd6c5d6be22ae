package kafkatest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a throwaway certificate authority for TLS tests. Keys are ECDSA
// P-256 in PKCS#8 PEM ("PRIVATE KEY"), which both Go and Kafka's PEM key
// stores (ssl.keystore.type=PEM) read.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM []byte
}

// NewCA creates a self-signed CA valid for a day.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"kmirror e2e"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// KeyPair is a certificate signed by a CA and its key, both PEM.
type KeyPair struct {
	CertPEM []byte // the leaf certificate
	KeyPEM  []byte // PKCS#8
}

// Issue signs a certificate for commonName, usable by servers (with hosts,
// IP addresses or DNS names, as subject alternative names) and by clients.
func (ca *CA) Issue(commonName string, hosts ...string) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"kmirror e2e"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}),
	}, nil
}

// WriteFiles writes the pair as <dir>/<name>.crt, <name>.key and
// <name>.pem (key then certificate: the file Kafka's
// ssl.keystore.location takes with ssl.keystore.type=PEM), and returns
// their paths.
func (kp *KeyPair) WriteFiles(dir, name string) (certFile, keyFile, keystoreFile string, err error) {
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	keystoreFile = filepath.Join(dir, name+".pem")
	if err = os.WriteFile(certFile, kp.CertPEM, 0o644); err != nil {
		return
	}
	if err = os.WriteFile(keyFile, kp.KeyPEM, 0o600); err != nil {
		return
	}
	err = os.WriteFile(keystoreFile, append(append([]byte{}, kp.KeyPEM...), kp.CertPEM...), 0o600)
	return
}

// WriteCert writes the CA certificate to path.
func (ca *CA) WriteCert(path string) error {
	if err := os.WriteFile(path, ca.CertPEM, 0o644); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}
