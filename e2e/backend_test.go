//go:build e2e

package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Cluster is one running Kafka cluster used as a mirror source or target.
type Cluster interface {
	// Addrs returns the bootstrap addresses (host:port on 127.0.0.1).
	Addrs() []string
	// Close stops the cluster. It is safe to call more than once.
	Close()
}

// ClusterSpec describes the cluster a test needs. Backends treat it as a
// request: a backend that cannot honour Brokers exactly may round it.
type ClusterSpec struct {
	// Brokers is the number of brokers, at least 1.
	Brokers int
}

// Backend starts Kafka clusters. Every e2e test runs against every enabled
// backend with the same assertions, so tests must only rely on behaviour that
// real Apache Kafka has as well.
type Backend interface {
	Name() string
	// NewCluster starts a cluster and registers its shutdown with t.Cleanup.
	NewCluster(t testing.TB, spec ClusterSpec) Cluster
}

// backends are all registered backends, in the order they run.
var backends = []Backend{kfakeBackend{}}

// enabledBackends returns the backends selected by KMIRROR_E2E_BACKENDS
// (default "kfake", "all" for every registered backend).
func enabledBackends(t testing.TB) []Backend {
	sel := strings.TrimSpace(os.Getenv("KMIRROR_E2E_BACKENDS"))
	if sel == "" {
		sel = "kfake"
	}
	if sel == "all" {
		return backends
	}
	var out []Backend
	for _, name := range strings.Split(sel, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, b := range backends {
			if b.Name() == name {
				out = append(out, b)
				found = true
			}
		}
		if !found {
			t.Fatalf("KMIRROR_E2E_BACKENDS: unknown backend %q", name)
		}
	}
	return out
}

// forEachBackend runs fn as a subtest per enabled backend. Subtests run one
// after the other; callers decide about t.Parallel at the top level.
func forEachBackend(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range enabledBackends(t) {
		t.Run(b.Name(), func(t *testing.T) { fn(t, b) })
	}
}

// kfakeBackend runs in-process franz-go kfake clusters on random loopback
// ports.
type kfakeBackend struct{}

func (kfakeBackend) Name() string { return "kfake" }

func (kfakeBackend) NewCluster(t testing.TB, spec ClusterSpec) Cluster {
	t.Helper()
	n := spec.Brokers
	if n < 1 {
		n = 1
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(n))
	if err != nil {
		t.Fatalf("kfake.NewCluster: %v", err)
	}
	kc := &kfakeCluster{c: c}
	t.Cleanup(kc.Close)
	return kc
}

type kfakeCluster struct{ c *kfake.Cluster }

func (k *kfakeCluster) Addrs() []string { return k.c.ListenAddrs() }
func (k *kfakeCluster) Close()          { k.c.Close() }
