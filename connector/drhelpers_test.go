package connector

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// drMirror is a mirror of the disaster recovery tests: src to dst under
// the same names, topic orders and group billing, with short intervals.
func drMirror(name string, src, dst *kfake.Cluster) Config {
	return Config{
		Name: name, SourceAlias: "src", TargetAlias: "dst", Policy: policy.Identity{},
		SourceOpts:        []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)},
		TargetOpts:        []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)},
		Filters:           []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll("orders")}},
		GroupFilters:      []filters.GroupFilter{filters.Regex{Include: filters.MustCompileAll("billing")}},
		RefreshInterval:   200 * time.Millisecond,
		ProgressInterval:  100 * time.Millisecond,
		GroupSyncInterval: 100 * time.Millisecond,
		ShutdownTimeout:   5 * time.Second,
		Logger:            kfaketest.Logger(),
	}
}

// runMirror runs a worker of cfg until stop (or the test's end) and
// returns the mirror with stop, which fails the test when Run failed.
func runMirror(t *testing.T, ctx context.Context, cfg Config) (m *Mirror, stop func()) {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s stopped with %v", cfg.Name, err)
		}
	}
	t.Cleanup(stop)
	return m, stop
}
