package kafkatest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// These tests need no JVM; the e2e suite (go test -tags e2e ./e2e/ with
// KMIRROR_E2E_BACKENDS=kafka) runs the real thing.

func TestNewClusterID(t *testing.T) {
	for range 1000 {
		id := newClusterID()
		if len(id) != 22 || strings.HasPrefix(id, "-") {
			t.Fatalf("cluster ID %q: want 22 characters, not starting with '-'", id)
		}
		b, err := base64.RawURLEncoding.DecodeString(id)
		if err != nil || len(b) != 16 {
			t.Fatalf("cluster ID %q does not decode to 16 bytes: %v", id, err)
		}
	}
}

func TestServerProperties(t *testing.T) {
	rt := &Runtime{Home: t.TempDir(), Java: "java"}
	c, err := rt.NewCluster(Config{
		Name:       "x",
		Dir:        filepath.Join(t.TempDir(), "x"),
		Listeners:  []Listener{{Name: "SASL", Protocol: ProtocolSASLPlaintext}},
		Properties: map[string]string{"num.io.threads": "2", "custom.jaas": "a \"b\";\nc"},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(c.Dir(), "server.properties"))
	if err != nil {
		t.Fatal(err)
	}
	props := string(b)
	for _, want := range []string{
		"process.roles=broker,controller\n",
		"controller.quorum.bootstrap.servers=" + c.Addr(CONTROLLER) + "\n",
		"listeners=PLAINTEXT://" + c.Addr(PLAINTEXT) + ",CONTROLLER://" + c.Addr(CONTROLLER) + ",SASL://" + c.Addr("SASL") + "\n",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL:SASL_PLAINTEXT\n",
		"auto.create.topics.enable=false\n",
		"offsets.topic.replication.factor=1\n",
		"group.initial.rebalance.delay.ms=0\n",
		"num.io.threads=2\n",
		`custom.jaas=a "b";\nc` + "\n",
	} {
		if !strings.Contains(props, want) {
			t.Errorf("server.properties lacks %q:\n%s", want, props)
		}
	}
	if strings.Count(props, "num.io.threads=") != 1 {
		t.Errorf("an overridden default is written twice:\n%s", props)
	}
	if strings.Contains(props, "controller.quorum.voters") {
		t.Errorf("controller.quorum.voters must stay unset for format --standalone:\n%s", props)
	}
	seen := map[string]bool{}
	for _, l := range []string{PLAINTEXT, CONTROLLER, "SASL"} {
		a := c.Addr(l)
		if !strings.HasPrefix(a, "127.0.0.1:") || seen[a] {
			t.Errorf("listener %s address %q: want a distinct loopback port", l, a)
		}
		seen[a] = true
	}
}

func TestSecurityCertificates(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Name: "s"}
	files, err := Security{PlainUsers: map[string]string{"alice": "alice-secret"}}.Apply(&cfg, dir)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(files.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA file holds no certificate")
	}
	// The broker's PEM key store is key then certificate, as Kafka reads it.
	ks, err := os.ReadFile(files.BrokerKeystore)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(ks), "-----BEGIN PRIVATE KEY-----") || !strings.Contains(string(ks), "-----BEGIN CERTIFICATE-----") {
		t.Errorf("broker key store is not a PKCS#8 key followed by a certificate")
	}
	broker, err := tls.X509KeyPair(ks, ks)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(broker.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("broker certificate for %s: %v", host, err)
		}
	}
	if _, err := tls.LoadX509KeyPair(files.ClientCertFile, files.ClientKeyFile); err != nil {
		t.Errorf("client key pair: %v", err)
	}
	var names []string
	for _, l := range cfg.Listeners {
		names = append(names, l.Name+":"+l.Protocol)
	}
	if got := strings.Join(names, ","); got != "SASL:SASL_PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL" {
		t.Errorf("listeners: %s", got)
	}
	if got := cfg.Properties["listener.name.sasl.plain.sasl.jaas.config"]; !strings.Contains(got, `user_alice="alice-secret"`) {
		t.Errorf("PLAIN JAAS config: %s", got)
	}
	if cfg.Properties["listener.name.mtls.ssl.client.auth"] != "required" {
		t.Errorf("MTLS does not require client certificates")
	}
}

// TestClusterLifecycle starts a real broker when this machine can (java and
// the jars cached by `make kafka-jars`; it skips otherwise): a port taken
// before the first start is replaced, and Stop then Start brings the same
// cluster back at the same address with its data.
func TestClusterLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JVM")
	}
	c, err := CachedRuntime(t).NewCluster(Config{Name: "lifecycle", Dir: filepath.Join(t.TempDir(), "lifecycle")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(30 * time.Second)

	// Someone else binds the PLAINTEXT port first.
	taken := c.Addr(PLAINTEXT)
	ln, err := net.Listen("tcp", taken)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	begin := time.Now()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Logf("started in %v at %s (port %s was taken)", time.Since(begin).Round(time.Millisecond), c.Addr(PLAINTEXT), taken)
	if c.Addr(PLAINTEXT) == taken {
		t.Fatalf("the broker reports the taken address %s", taken)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr(PLAINTEXT)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "kept"); err != nil {
		t.Fatal(err)
	}
	addr := c.Addr(PLAINTEXT)
	if err := c.Stop(30 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if c.Running() {
		t.Fatal("running after Stop")
	}
	begin = time.Now()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start again: %v", err)
	}
	t.Logf("started again in %v", time.Since(begin).Round(time.Millisecond))
	if c.Addr(PLAINTEXT) != addr {
		t.Errorf("address changed across a restart: %s, then %s", addr, c.Addr(PLAINTEXT))
	}
	topics, err := adm.ListTopics(ctx, "kept")
	if err != nil || !topics.Has("kept") {
		t.Errorf("topic created before the restart is gone: %v %v", topics, err)
	}
	if err := c.Stop(30 * time.Second); err != nil {
		t.Errorf("stop: %v", err)
	}
}
