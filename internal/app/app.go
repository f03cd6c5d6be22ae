// Package app wires a loaded config into running parts: Kafka client
// options, one connector.Mirror per configured mirror, metrics and the HTTP
// server. It handles no signals (main does), so tests and the demo can embed
// it.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"slices"
	"time"

	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/connector/offsets"
	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/internal/httpapi"
	"github.com/kmirror/kmirror/internal/kafka"
)

// Options are Run's inputs. Config and Logger are required.
type Options struct {
	Config *config.Config
	Logger *slog.Logger
	// Version is reported by kmirror_build_info.
	Version string
	// Registry receives every metric; a fresh one when nil. Metrics are
	// never registered globally, so several apps can run in one process.
	Registry *prometheus.Registry
	// Ready, when set, is called with the HTTP address once the server
	// listens (the demo prints it; tests read it).
	Ready func(httpAddr string)
}

// App is a running set of mirrors.
type App struct {
	opts    Options
	mirrors []*connector.Mirror
}

// Statuses implements httpapi.StatusSource.
func (a *App) Statuses() []connector.Status {
	out := make([]connector.Status, 0, len(a.mirrors))
	for _, m := range a.mirrors {
		out = append(out, m.Status())
	}
	return out
}

// Topics implements httpapi.StatusSource: every mirror's topic metadata.
func (a *App) Topics() []connector.TopicMetadata {
	var out []connector.TopicMetadata
	for _, m := range a.mirrors {
		out = append(out, m.Topics()...)
	}
	return out
}

// Groups implements httpapi.StatusSource: every mirror's translated groups.
func (a *App) Groups() []connector.GroupStatus {
	var out []connector.GroupStatus
	for _, m := range a.mirrors {
		out = append(out, m.Groups()...)
	}
	return out
}

// Mirrors returns the configured mirrors, in config order.
func (a *App) Mirrors() []*connector.Mirror { return a.mirrors }

// ReadTopics reads the stored topic metadata of the named mirrors (every
// mirror when names is empty) from their target clusters, without running
// them: what `kmirror topics` shows.
func ReadTopics(ctx context.Context, cfg *config.Config, names []string, log *slog.Logger) ([]connector.TopicMetadata, error) {
	var out []connector.TopicMetadata
	for _, mc := range cfg.Mirrors {
		if len(names) > 0 && !slices.Contains(names, mc.Name) {
			continue
		}
		opts, err := kafka.ClientOpts(mc.Target, cfg.Cluster(mc.Target), log)
		if err != nil {
			return nil, err
		}
		tms, err := connector.ReadTopicMetadata(ctx, mc.Name, opts)
		if err != nil {
			return nil, fmt.Errorf("mirror %s: %w", mc.Name, err)
		}
		out = append(out, tms...)
	}
	return out, nil
}

// New builds every mirror from the config; it connects to nothing.
func New(opts Options) (*App, error) {
	if opts.Config == nil || opts.Logger == nil {
		return nil, errors.New("app: Config and Logger are required")
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	reg := opts.Registry
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kmirror_build_info",
		Help: "A constant 1 labelled with kmirror's version and the Go version that built it.",
	}, []string{"version", "goversion"})
	buildInfo.WithLabelValues(opts.Version, runtime.Version()).Set(1)
	reg.MustRegister(buildInfo)
	metrics := connector.NewMetrics(reg)

	a := &App{opts: opts}
	cfg := opts.Config
	for _, mc := range cfg.Mirrors {
		m, err := newMirror(cfg, mc, opts.Logger, metrics)
		if err != nil {
			return nil, fmt.Errorf("mirror %s: %w", mc.Name, err)
		}
		a.mirrors = append(a.mirrors, m)
	}
	return a, nil
}

func newMirror(cfg *config.Config, mc *config.Mirror, log *slog.Logger, metrics *connector.Metrics) (*connector.Mirror, error) {
	pol, err := policy.New(mc.ReplicationPolicy.Type, mc.ReplicationPolicy.Separator)
	if err != nil {
		return nil, err
	}
	codec, err := compression(mc.Producer.Compression)
	if err != nil {
		return nil, err
	}
	offsetCodec, err := offsets.ParseCodec(cfg.Offsets.Compression)
	if err != nil {
		return nil, fmt.Errorf("offsets.compression: %w", err)
	}
	src, dst := cfg.Cluster(mc.Source), cfg.Cluster(mc.Target)
	if src == nil || dst == nil {
		return nil, fmt.Errorf("unknown cluster %q or %q", mc.Source, mc.Target)
	}
	srcOpts, err := kafka.ClientOpts(mc.Source, src, log)
	if err != nil {
		return nil, err
	}
	dstOpts, err := kafka.ClientOpts(mc.Target, dst, log)
	if err != nil {
		return nil, err
	}
	return connector.New(connector.Config{
		Name:        mc.Name,
		SourceAlias: mc.Source,
		TargetAlias: mc.Target,
		SourceOpts:  srcOpts,
		TargetOpts:  dstOpts,
		Policy:      pol,
		Filters: []filters.TopicFilter{filters.Regex{
			Include: mc.Topics.IncludeRegexps(),
			Exclude: mc.Topics.ExcludeRegexps(),
		}},
		ConfigFilters: []filters.ConfigPropertyFilter{filters.Regex{
			Include: mc.Sync.TopicConfigs.IncludeRegexps(),
			Exclude: mc.Sync.TopicConfigs.ExcludeRegexps(),
		}},
		Labels:             labels(mc.Labels),
		ConfigSyncInterval: enabledInterval(mc.Sync.TopicConfigs.Enabled, mc.Sync.TopicConfigs.Interval),
		ACLSyncInterval:    enabledInterval(mc.Sync.ACLs.Enabled, mc.Sync.ACLs.Interval),
		GroupFilters: []filters.GroupFilter{filters.Regex{
			Include: mc.Groups.IncludeRegexps(),
			Exclude: mc.Groups.ExcludeRegexps(),
		}},
		GroupSyncInterval:   enabledInterval(mc.Sync.GroupOffsets.Enabled, mc.Sync.GroupOffsets.Interval),
		FollowSourceRewinds: mc.Sync.GroupOffsets.FollowSourceRewinds,
		RefreshInterval:     time.Duration(mc.Topics.RefreshInterval),
		ProgressInterval:    time.Duration(mc.ProgressInterval),
		ReplicationFactor:   int16(mc.ReplicationFactor),
		Linger:              time.Duration(mc.Producer.Linger),
		BatchMaxBytes:       int32(mc.Producer.BatchMaxBytes),
		Compression:         codec,
		OffsetCodec:         offsetCodec,
		Logger:              log,
		Metrics:             metrics,
	})
}

func labels(ls []*config.Label) []connector.Label {
	out := make([]connector.Label, 0, len(ls))
	for _, l := range ls {
		out = append(out, connector.Label{Match: l.Regexp(), Set: l.Set})
	}
	return out
}

// enabledInterval is the connector's convention for an optional periodic
// job: its interval, or 0 when it is off.
func enabledInterval(enabled bool, d config.Duration) time.Duration {
	if !enabled {
		return 0
	}
	return time.Duration(d)
}

func compression(name string) ([]kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return []kgo.CompressionCodec{kgo.NoCompression()}, nil
	case "gzip":
		return []kgo.CompressionCodec{kgo.GzipCompression()}, nil
	case "snappy":
		return []kgo.CompressionCodec{kgo.SnappyCompression()}, nil
	case "lz4":
		return []kgo.CompressionCodec{kgo.Lz4Compression()}, nil
	case "zstd":
		return []kgo.CompressionCodec{kgo.ZstdCompression()}, nil
	default:
		return nil, fmt.Errorf("unknown compression %q", name)
	}
}

// Run serves HTTP and runs every mirror until ctx is cancelled, then stops
// the mirrors (each flushes and persists its progress) and the server.
func (a *App) Run(ctx context.Context) error {
	log := a.opts.Logger
	ln, err := net.Listen("tcp", a.opts.Config.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("http: listen on %s (http.listen): %w", a.opts.Config.HTTP.Listen, err)
	}
	srv := &http.Server{
		Handler:           httpapi.Handler(a.opts.Registry, a),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Info("http server listening", "addr", ln.Addr().String())
	if a.opts.Ready != nil {
		a.opts.Ready(ln.Addr().String())
	}

	var g run.Group
	// The mirrors stop together when ctx ends; each returns only after
	// it has flushed and persisted, and only then does the server stop,
	// so /metrics stays scrapeable through a shutdown.
	mirrorsCtx, stopMirrors := context.WithCancel(ctx)
	mirrorsDone := make(chan struct{})
	g.Add(func() error {
		defer close(mirrorsDone)
		errs := make(chan error, len(a.mirrors))
		for _, m := range a.mirrors {
			go func() { errs <- m.Run(mirrorsCtx) }()
		}
		var all []error
		for range a.mirrors {
			if err := <-errs; err != nil {
				all = append(all, err)
				stopMirrors()
			}
		}
		return errors.Join(all...)
	}, func(error) { stopMirrors() })
	g.Add(func() error {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("http: %w", err)
	}, func(error) {
		stopMirrors()
		<-mirrorsDone
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	g.Add(func() error {
		<-ctx.Done()
		return nil
	}, func(error) {})
	return g.Run()
}
