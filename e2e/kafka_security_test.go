//go:build e2e

package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// The security tests run kmirror against the secure listeners of the
// shared real-Kafka clusters (kafkatest.Security): SASL_PLAINTEXT and
// SASL_SSL with PLAIN and SCRAM, SSL, and SSL that requires a client
// certificate. The tests' own clients use the PLAINTEXT listener, which is
// also how SCRAM users are created (AlterUserScramCredentials). kfake is not
// used here: the point is Kafka's own authentication.

// newKafkaEnv is an env on the shared real-Kafka clusters.
func newKafkaEnv(t *testing.T) (*env, *kafkaShared) {
	t.Helper()
	k := requireKafkaBackend(t)
	return newEnvWith(t, k.src, k.dst, true), k
}

// createSCRAMUser creates (or updates) a SCRAM user through the Admin API.
func createSCRAMUser(t testing.TB, cl *kgo.Client, user, password string, mech kadm.ScramMechanism) {
	t.Helper()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctxTimeout(t, 30*time.Second), nil,
		[]kadm.UpsertSCRAM{{User: user, Mechanism: mech, Iterations: 4096, Password: password}})
	if err != nil {
		t.Fatalf("create SCRAM user %s (%v): %v", user, mech, err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create SCRAM user %s (%v): %v %s", r.User, mech, r.Err, r.ErrMessage)
		}
	}
}

// mirrorRoundTrip creates a topic of the test at the source with records,
// starts kmirror with cfg and waits until the target has exactly those
// records. It returns the worker.
func (e *env) mirrorRoundTrip(cfg mirrorConfig, workerEnv ...string) *worker {
	e.t.Helper()
	topic := e.topic("secure")
	createTopic(e.t, e.srcCl, topic, 2, nil)
	recs, want := seqRecords(topic, "s", 2, 50)
	produce(e.t, e.srcCl, recs...)
	w := e.startWorkerEnv(e.writeConfig(cfg), workerEnv...)
	e.waitTargetValues(60*time.Second, "src."+topic, want)
	// And records written while it runs.
	more, wantMore := seqRecords(topic, "t", 2, 20)
	produce(e.t, e.srcCl, more...)
	e.waitTargetValues(30*time.Second, "src."+topic, appendWant(want, wantMore))
	return w
}

// stopAndCheckSecrets stops the worker with SIGTERM (exit code 0 expected)
// and fails the test if any secret appears in its output.
func stopAndCheckSecrets(t *testing.T, w *worker, secrets ...string) {
	t.Helper()
	if code, _ := w.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("kmirror exited with code %d after SIGTERM, want 0", code)
	}
	checkNoSecrets(t, w, secrets...)
}

func checkNoSecrets(t *testing.T, w *worker, secrets ...string) {
	t.Helper()
	out := w.log.String() + w.out.String()
	for _, s := range secrets {
		if s == "" {
			continue
		}
		if i := strings.Index(out, s); i >= 0 {
			lineStart := strings.LastIndex(out[:i], "\n") + 1
			lineEnd := strings.Index(out[i:], "\n")
			if lineEnd < 0 {
				lineEnd = len(out) - i
			}
			t.Errorf("a password appears in kmirror's output (it must never be logged):\n%s", out[lineStart:i+lineEnd])
		}
	}
}

// TestKafkaSASLSCRAM: kmirror reads the source and writes the target over
// SASL_PLAINTEXT with SCRAM-SHA-256 and SCRAM-SHA-512, as users the test
// creates through the Admin API; the source password comes from ${ENV},
// the target's from password_file. No password reaches the logs (at debug
// level).
func TestKafkaSASLSCRAM(t *testing.T) {
	t.Parallel()
	for _, mech := range []struct {
		name string
		m    kadm.ScramMechanism
	}{{"SCRAM-SHA-256", kadm.ScramSha256}, {"SCRAM-SHA-512", kadm.ScramSha512}} {
		t.Run(mech.name, func(t *testing.T) {
			e, k := newKafkaEnv(t)
			user := "kmirror-" + e.id
			srcPass, dstPass := "src-secret-"+randomHex(12), "dst-secret-"+randomHex(12)
			createSCRAMUser(t, e.srcCl, user, srcPass, mech.m)
			createSCRAMUser(t, e.dstCl, user, dstPass, mech.m)
			pwFile := filepath.Join(e.dir, "target-password")
			if err := os.WriteFile(pwFile, []byte(dstPass+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}

			cfg := e.defaultConfig()
			cfg.SourceAddrs = []string{k.src.Addr(kafkatest.SASL)}
			cfg.SourceSASL = &saslConfig{Mechanism: mech.name, Username: user, Password: "${E2E_SOURCE_PASSWORD}"}
			cfg.TargetAddrs = []string{k.dst.Addr(kafkatest.SASL)}
			cfg.TargetSASL = &saslConfig{Mechanism: mech.name, Username: user, PasswordFile: pwFile}
			w := e.mirrorRoundTrip(cfg, "E2E_SOURCE_PASSWORD="+srcPass)
			stopAndCheckSecrets(t, w, srcPass, dstPass)
		})
	}
}

// TestKafkaSASLPlain: SASL/PLAIN (users from the brokers' JAAS config),
// on SASL_PLAINTEXT at the source and on SASL_SSL (with the test's CA) at
// the target.
func TestKafkaSASLPlain(t *testing.T) {
	t.Parallel()
	e, k := newKafkaEnv(t)
	cfg := e.defaultConfig()
	cfg.SourceAddrs = []string{k.src.Addr(kafkatest.SASL)}
	cfg.SourceSASL = &saslConfig{Mechanism: "PLAIN", Username: k.plainUser, Password: "${E2E_PLAIN_PASSWORD}"}
	cfg.TargetAddrs = []string{k.dst.Addr(kafkatest.SASLSSL)}
	cfg.TargetTLS = &tlsConfig{CAFile: k.dstSec.CAFile}
	cfg.TargetSASL = &saslConfig{Mechanism: "PLAIN", Username: k.plainUser, Password: "${E2E_PLAIN_PASSWORD}"}
	w := e.mirrorRoundTrip(cfg, "E2E_PLAIN_PASSWORD="+k.plainPassword)
	stopAndCheckSecrets(t, w, k.plainPassword)
}

// TestKafkaTLS: the source over SSL, verified against the test's CA with
// server_name localhost (the broker certificate names 127.0.0.1 and
// localhost), and the target over mutual TLS with a client certificate.
// A client without a certificate is refused by the mTLS listener, so the
// certificate is really what lets kmirror in.
func TestKafkaTLS(t *testing.T) {
	t.Parallel()
	e, k := newKafkaEnv(t)

	// The mTLS listener refuses a client without a certificate.
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(k.dstSec.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(caPEM)
	noCert, err := kgo.NewClient(kgo.SeedBrokers(k.dst.Addr(kafkatest.MTLS)),
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}), kgo.RetryTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(noCert).BrokerMetadata(ctxTimeout(t, 10*time.Second)); err == nil {
		t.Errorf("the MTLS listener %s accepted a client without a certificate; the test would prove nothing", k.dst.Addr(kafkatest.MTLS))
	} else {
		t.Logf("as expected, the MTLS listener refuses a client without a certificate: %v", err)
	}
	noCert.Close()

	cfg := e.defaultConfig()
	cfg.SourceAddrs = []string{k.src.Addr(kafkatest.SSL)}
	cfg.SourceTLS = &tlsConfig{CAFile: k.srcSec.CAFile, ServerName: "localhost"}
	cfg.TargetAddrs = []string{k.dst.Addr(kafkatest.MTLS)}
	cfg.TargetTLS = &tlsConfig{CAFile: k.dstSec.CAFile, CertFile: k.dstSec.ClientCertFile, KeyFile: k.dstSec.ClientKeyFile}
	w := e.mirrorRoundTrip(cfg)
	stopAndCheckSecrets(t, w)
}

// authFailureRe matches what a log line says about a refused login.
var authFailureRe = regexp.MustCompile(`(?i)(SASL_AUTHENTICATION_FAILED|authentication failed|invalid credentials)`)

// TestKafkaSASLWrongPassword: with a wrong SCRAM password for the source
// or the target, kmirror logs an error (or warning) that says that
// authentication failed, mirrors nothing, is not ready, keeps running, and
// logs neither the wrong nor the right password.
func TestKafkaSASLWrongPassword(t *testing.T) {
	t.Parallel()
	for _, side := range []string{"source", "target"} {
		t.Run(side, func(t *testing.T) {
			e, k := newKafkaEnv(t)
			user := "kmirror-" + e.id
			right, wrong := "right-secret-"+randomHex(12), "wrong-secret-"+randomHex(12)
			createSCRAMUser(t, e.srcCl, user, right, kadm.ScramSha512)
			createSCRAMUser(t, e.dstCl, user, right, kadm.ScramSha512)
			topic := e.topic("locked")
			createTopic(t, e.srcCl, topic, 1, nil)
			recs, _ := seqRecords(topic, "l", 1, 10)
			produce(t, e.srcCl, recs...)

			srcPW, dstPW := "${E2E_RIGHT}", "${E2E_RIGHT}"
			if side == "source" {
				srcPW = "${E2E_WRONG}"
			} else {
				dstPW = "${E2E_WRONG}"
			}
			cfg := e.defaultConfig()
			cfg.SourceAddrs = []string{k.src.Addr(kafkatest.SASL)}
			cfg.SourceSASL = &saslConfig{Mechanism: "SCRAM-SHA-512", Username: user, Password: srcPW}
			cfg.TargetAddrs = []string{k.dst.Addr(kafkatest.SASL)}
			cfg.TargetSASL = &saslConfig{Mechanism: "SCRAM-SHA-512", Username: user, Password: dstPW}
			w := e.startWorkerEnv(e.writeConfig(cfg), "E2E_RIGHT="+right, "E2E_WRONG="+wrong)
			addr := w.httpAddr(t)

			// kmirror's own report of the failing broker (one line
			// for every mirror and client of the cluster), not only
			// the Kafka client's, must say what is wrong and what to
			// check.
			alias := map[string]string{"source": "src", "target": "dst"}[side]
			var line string
			e.waitFor(30*time.Second, "kmirror to log an error saying that authentication failed, naming clusters."+alias+".sasl", func() (bool, string) {
				for _, l := range w.logLines(`msg="cannot reach a broker of the cluster; retrying"`, "cluster="+alias, "clusters."+alias+".sasl") {
					if authFailureRe.MatchString(l) && strings.Contains(l, "level=ERROR") {
						line = l
						return true, ""
					}
				}
				return false, "no such line yet"
			})
			t.Logf("kmirror says: %s", line)

			// Still running, not ready, and nothing mirrored.
			time.Sleep(2 * time.Second)
			w.checkAlive(t)
			if code, body, err := httpGet(addr, "/readyz"); err != nil || code == 200 {
				t.Errorf("/readyz with a wrong %s password: status %d, err %v, body %s; want 503", side, code, err, body)
			}
			if n, err := partitionCount(ctxTimeout(t, 10*time.Second), e.dstCl, "src."+topic); err == nil {
				t.Errorf("target topic src.%s exists (%d partitions) although kmirror could not log in to the %s", topic, n, side)
			}
			stopAndCheckSecrets(t, w, right, wrong)
		})
	}
}
