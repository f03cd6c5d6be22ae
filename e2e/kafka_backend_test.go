//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// kafkaBackend runs real Apache Kafka (e2e/kafkatest): single-node KRaft
// clusters from the Maven Central jars. One source and one target cluster
// are started once per test binary (in the background from TestMain) and
// shared by every test; tests that stop or reconfigure a broker start their
// own with newKafkaCluster.
//
// Both shared clusters also have secure listeners (kafkatest.Security:
// SASL_PLAINTEXT, SSL, SSL with client certificates, SASL_SSL) for the
// security tests.
//
// Without java (or without mvn while the jars are not cached) its subtests
// skip, except with CI=true, where they fail.
type kafkaBackend struct{}

func (kafkaBackend) Name() string { return "kafka" }
func (kafkaBackend) Shared() bool { return true }

func (kafkaBackend) Clusters(t *testing.T, spec ClusterSpec) (Cluster, Cluster) {
	t.Helper()
	k := requireKafka(t)
	return k.src, k.dst
}

// kafkaCluster adapts a kafkatest.Cluster to Cluster.
type kafkaCluster struct {
	*kafkatest.Cluster
	shared bool
}

func (k *kafkaCluster) Close() {
	if !k.shared {
		_ = k.Stop(30 * time.Second)
	}
}

// kafkaShared is the state of the kafka backend in this test binary.
type kafkaShared struct {
	rt       *kafkatest.Runtime
	base     string // every cluster's directory is under it
	src, dst *kafkaCluster
	// srcSec and dstSec are the shared clusters' certificates.
	srcSec, dstSec *kafkatest.SecurityFiles
	// plainUser and plainPassword are the SASL/PLAIN user of both shared
	// clusters.
	plainUser, plainPassword string
	startTook                time.Duration
}

var kafkaState struct {
	once   sync.Once
	k      *kafkaShared
	err    error
	failed atomic.Bool // a kafka test failed: keep the logs
}

// startKafkaShared starts the shared clusters once; every caller gets the
// same result.
func startKafkaShared() (*kafkaShared, error) {
	kafkaState.once.Do(func() {
		kafkaState.k, kafkaState.err = doStartKafkaShared()
	})
	return kafkaState.k, kafkaState.err
}

func doStartKafkaShared() (*kafkaShared, error) {
	rt, err := kafkatest.Find()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := rt.Ensure(ctx, os.Stderr); err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp("", "kmirror-e2e-kafka-")
	if err != nil {
		return nil, err
	}
	k := &kafkaShared{rt: rt, base: base, plainUser: "plain-user", plainPassword: "plain-" + randomHex(8)}
	sec := kafkatest.Security{PlainUsers: map[string]string{k.plainUser: k.plainPassword}}

	begin := time.Now()
	var wg sync.WaitGroup
	var srcErr, dstErr error
	start := func(name string, c **kafkaCluster, files **kafkatest.SecurityFiles, errp *error) {
		defer wg.Done()
		cfg := kafkatest.Config{Name: name, Dir: filepath.Join(base, name)}
		f, err := sec.Apply(&cfg, filepath.Join(base, name, "tls"))
		if err != nil {
			*errp = err
			return
		}
		kc, err := rt.NewCluster(cfg)
		if err != nil {
			*errp = err
			return
		}
		*c, *files = &kafkaCluster{Cluster: kc, shared: true}, f
		*errp = kc.Start(ctx)
	}
	wg.Add(2)
	go start("source", &k.src, &k.srcSec, &srcErr)
	go start("target", &k.dst, &k.dstSec, &dstErr)
	wg.Wait()
	k.startTook = time.Since(begin)
	if err := errors.Join(srcErr, dstErr); err != nil {
		kafkaState.failed.Store(true)
		stopKafkaShared(k)
		return nil, fmt.Errorf("starting the shared source and target clusters (logs under %s): %w", base, err)
	}
	fmt.Fprintf(os.Stderr, "e2e: kafka backend: Apache Kafka %s source %s and target %s started in %v (two clusters in parallel, including format); logs under %s\n",
		kafkatest.Version, k.src.Addr(kafkatest.PLAINTEXT), k.dst.Addr(kafkatest.PLAINTEXT), k.startTook.Round(10*time.Millisecond), base)
	return k, nil
}

func stopKafkaShared(k *kafkaShared) {
	var wg sync.WaitGroup
	for _, c := range []*kafkaCluster{k.src, k.dst} {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Stop(30 * time.Second); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: kafka backend: %v\n", err)
			}
		}()
	}
	wg.Wait()
}

// kafkaMainStart is called by TestMain before the tests: when the kafka
// backend is selected, the shared clusters start in the background while
// the kfake subtests run.
func kafkaMainStart() {
	if backendEnabled("kafka") {
		go func() { _, _ = startKafkaShared() }()
	}
}

// kafkaMainStop is called by TestMain after the tests: it stops the shared
// clusters and removes their directory, unless a test failed.
func kafkaMainStop(code int) {
	if !backendEnabled("kafka") {
		return
	}
	k, err := startKafkaShared() // waits for a start still under way
	if err != nil {
		return
	}
	stopKafkaShared(k)
	if code != 0 || kafkaState.failed.Load() {
		fmt.Fprintf(os.Stderr, "e2e: kafka backend: broker logs and data kept in %s\n", k.base)
		return
	}
	_ = os.RemoveAll(k.base)
}

// requireKafka returns the shared clusters, or skips the test when this
// machine cannot run Kafka (fails it with CI=true). When the test fails,
// the shared brokers' log paths and their last lines are logged.
func requireKafka(t testing.TB) *kafkaShared {
	t.Helper()
	k, err := startKafkaShared()
	if err != nil {
		if errors.Is(err, kafkatest.ErrUnavailable) && !inCI() {
			t.Skipf("kafka backend unavailable, skipping: %v (install Java 17+ and Maven, or select only kfake with KMIRROR_E2E_BACKENDS=kfake; with CI=true this is a failure)", err)
		}
		t.Fatalf("kafka backend: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			kafkaState.failed.Store(true)
			for _, c := range []*kafkaCluster{k.src, k.dst} {
				t.Logf("kafka %s broker log (shared with other tests): %s\n%s", c.Name(), c.LogPath(), c.Tail(25))
			}
		}
	})
	return k
}

// requireKafkaBackend skips tests that only make sense against real Kafka
// when the kafka backend is not selected, then returns it like requireKafka.
func requireKafkaBackend(t testing.TB) *kafkaShared {
	t.Helper()
	if !backendEnabled("kafka") {
		t.Skip("real-Kafka test: the kafka backend is not selected (KMIRROR_E2E_BACKENDS=kafka or all)")
	}
	return requireKafka(t)
}

// newKafkaCluster starts a cluster of the test's own (for tests that stop
// brokers or need broker settings the shared ones lack), stopped when the
// test ends. Its directory is under the shared base directory, so it is
// kept when the test fails.
func newKafkaCluster(t *testing.T, name string, cfg kafkatest.Config) *kafkaCluster {
	t.Helper()
	k := requireKafkaBackend(t)
	cfg.Name = name
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(k.base, safeName(t.Name())+"-"+name)
	}
	c, err := k.rt.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc := &kafkaCluster{Cluster: c}
	begin := time.Now()
	if err := c.Start(ctxTimeout(t, 3*time.Minute)); err != nil {
		kafkaState.failed.Store(true)
		t.Fatalf("starting kafka cluster %s: %v", name, err)
	}
	t.Logf("kafka cluster %s started in %v at %s (log %s)", name, time.Since(begin).Round(10*time.Millisecond), c.Addr(kafkatest.PLAINTEXT), c.LogPath())
	t.Cleanup(func() {
		kc.Close()
		if t.Failed() {
			kafkaState.failed.Store(true)
			t.Logf("kafka %s broker log: %s\n%s", name, c.LogPath(), c.Tail(40))
		}
	})
	return kc
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func safeName(s string) string { return unsafeChars.ReplaceAllString(s, "_") }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
