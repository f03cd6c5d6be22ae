package kafkatest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Secure listener names added by Security.
const (
	// SASL is SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.
	SASL = "SASL"
	// SSL is TLS without client certificates.
	SSL = "SSL"
	// MTLS is TLS that requires a client certificate signed by the CA.
	MTLS = "MTLS"
	// SASLSSL is SASL_SSL with the same mechanisms as SASL.
	SASLSSL = "SASL_SSL"
)

// SecurityFiles are the PEM files of a secured cluster.
type SecurityFiles struct {
	// CAFile is the CA that signs the broker's and the client's
	// certificates (what a client passes as its CA bundle).
	CAFile string
	// ClientCertFile and ClientKeyFile are a client certificate for MTLS.
	ClientCertFile, ClientKeyFile string
	// BrokerKeystore is the broker's key and certificate (PEM key store).
	BrokerKeystore string
}

// Security describes the secure listeners to add to a cluster.
type Security struct {
	// PlainUsers are the SASL/PLAIN users and passwords (PLAIN users live
	// in the broker's JAAS config). SCRAM users are created at run time
	// through the Admin API (AlterUserScramCredentials) over PLAINTEXT.
	PlainUsers map[string]string
}

// Apply generates a CA, a broker certificate for 127.0.0.1 and localhost
// and a client certificate into dir, and adds the listeners SASL
// (SASL_PLAINTEXT), SSL, MTLS (SSL with ssl.client.auth=required) and
// SASL_SSL to cfg, with PEM key and trust stores. PLAINTEXT stays for the
// tests' own clients and inter-broker traffic, so no SCRAM user needs to be
// bootstrapped at format time.
func (s Security) Apply(cfg *Config, dir string) (*SecurityFiles, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	ca, err := NewCA("kmirror e2e CA " + cfg.Name)
	if err != nil {
		return nil, err
	}
	files := &SecurityFiles{CAFile: filepath.Join(dir, "ca.crt")}
	if err := ca.WriteCert(files.CAFile); err != nil {
		return nil, err
	}
	broker, err := ca.Issue("broker "+cfg.Name, "127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	if _, _, files.BrokerKeystore, err = broker.WriteFiles(dir, "broker"); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	client, err := ca.Issue("kmirror-client")
	if err != nil {
		return nil, err
	}
	if files.ClientCertFile, files.ClientKeyFile, _, err = client.WriteFiles(dir, "client"); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}

	cfg.Listeners = append(cfg.Listeners,
		Listener{Name: SASL, Protocol: ProtocolSASLPlaintext},
		Listener{Name: SSL, Protocol: ProtocolSSL},
		Listener{Name: MTLS, Protocol: ProtocolSSL},
		Listener{Name: SASLSSL, Protocol: ProtocolSASLSSL},
	)
	if cfg.Properties == nil {
		cfg.Properties = map[string]string{}
	}
	p := cfg.Properties
	// Key and trust stores for every TLS listener: PEM files, no passwords.
	p["ssl.keystore.type"] = "PEM"
	p["ssl.keystore.location"] = files.BrokerKeystore
	p["ssl.truststore.type"] = "PEM"
	p["ssl.truststore.location"] = files.CAFile
	p["listener.name.mtls.ssl.client.auth"] = "required"

	users := make([]string, 0, len(s.PlainUsers))
	for u := range s.PlainUsers {
		users = append(users, u)
	}
	sort.Strings(users)
	var plain strings.Builder
	plain.WriteString("org.apache.kafka.common.security.plain.PlainLoginModule required")
	for _, u := range users {
		fmt.Fprintf(&plain, " user_%s=%q", u, s.PlainUsers[u])
	}
	plain.WriteString(";")
	const scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
	for _, l := range []string{"sasl", "sasl_ssl"} {
		pre := "listener.name." + l + "."
		p[pre+"sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
		p[pre+"plain.sasl.jaas.config"] = plain.String()
		p[pre+"scram-sha-256.sasl.jaas.config"] = scram
		p[pre+"scram-sha-512.sasl.jaas.config"] = scram
	}
	return files, nil
}
