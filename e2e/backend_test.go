//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Cluster is one running Kafka cluster used as a mirror source or target.
type Cluster interface {
	// Addrs returns the bootstrap addresses (host:port on 127.0.0.1).
	Addrs() []string
	// Close stops the cluster. It is safe to call more than once, and
	// does nothing for a cluster shared between tests.
	Close()
}

// ClusterSpec describes the clusters a test needs. Backends treat it as a
// request: a backend that cannot honour Brokers exactly may round it (the
// kafka backend's clusters have one broker).
type ClusterSpec struct {
	// Brokers is the number of brokers, at least 1.
	Brokers int
}

// Backend provides Kafka clusters. Every e2e test runs against every enabled
// backend with the same assertions, so tests must only rely on behaviour that
// real Apache Kafka has as well.
type Backend interface {
	Name() string
	// Clusters returns a source and a target cluster for one test; their
	// shutdown is registered with t.Cleanup.
	Clusters(t *testing.T, spec ClusterSpec) (src, dst Cluster)
	// Shared reports whether Clusters hands the same clusters to every
	// test (real brokers are slow to start). Tests then keep to their own
	// names: env.topic, env.defaultConfig's mirror name and include
	// pattern.
	Shared() bool
}

// backends are all registered backends, in the order they run.
var backends = []Backend{kfakeBackend{}, kafkaBackend{}}

// selectedBackends returns the backends selected by KMIRROR_E2E_BACKENDS
// (default "kfake", "all" for every registered backend).
func selectedBackends() ([]Backend, error) {
	sel := strings.TrimSpace(os.Getenv("KMIRROR_E2E_BACKENDS"))
	if sel == "" {
		sel = "kfake"
	}
	if sel == "all" {
		return backends, nil
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
			var names []string
			for _, b := range backends {
				names = append(names, b.Name())
			}
			return nil, fmt.Errorf("KMIRROR_E2E_BACKENDS: unknown backend %q (known: %s, all)", name, strings.Join(names, ", "))
		}
	}
	return out, nil
}

func enabledBackends(t testing.TB) []Backend {
	bs, err := selectedBackends()
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// backendEnabled reports whether the backend named name is selected.
func backendEnabled(name string) bool {
	bs, err := selectedBackends()
	if err != nil {
		return false
	}
	for _, b := range bs {
		if b.Name() == name {
			return true
		}
	}
	return false
}

// forEachBackend runs fn as a subtest per enabled backend. Subtests run one
// after the other; callers decide about t.Parallel at the top level.
func forEachBackend(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range enabledBackends(t) {
		t.Run(b.Name(), func(t *testing.T) { fn(t, b) })
	}
}

// inCI reports whether the tests run in CI (CI=true), where a backend that
// cannot run fails instead of skipping.
func inCI() bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv("CI")))
	return v != "" && v != "false" && v != "0"
}

// kfakeBackend runs in-process franz-go kfake clusters on random loopback
// ports, fresh for every test.
type kfakeBackend struct{}

func (kfakeBackend) Name() string { return "kfake" }
func (kfakeBackend) Shared() bool { return false }

func (kfakeBackend) Clusters(t *testing.T, spec ClusterSpec) (Cluster, Cluster) {
	t.Helper()
	return newKfakeCluster(t, spec), newKfakeCluster(t, spec)
}

func newKfakeCluster(t testing.TB, spec ClusterSpec) Cluster {
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
