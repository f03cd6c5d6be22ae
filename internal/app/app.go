// Package app wires a loaded config into running parts: Kafka client
// options, one connector.Mirror per configured mirror, metrics and the HTTP
// server. It handles no signals (main does), so tests and the demo can embed
// it.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
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
	"github.com/kmirror/kmirror/internal/history"
	"github.com/kmirror/kmirror/internal/httpapi"
	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/listeners"
	"github.com/kmirror/kmirror/plugins"
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
	// ConfigFile is re-read by Reload (SIGHUP, POST /api/v1/reload);
	// empty disables reloading.
	ConfigFile string
}

// App is a running set of mirrors.
type App struct {
	opts    Options
	mirrors []*connector.Mirror
	// clusters are the configured clusters as kmirror connects to them,
	// by alias, shared by every mirror (one report per failing broker).
	clusters   map[string]*kafka.Cluster
	host       *plugins.Host
	lookup     pluginLookup // filter plugins, in host
	coalescer  *coalescer
	extMetrics *extensionMetrics
	// listenerImpls are the configured listeners, one instance each,
	// shared by every mirror that names them; dispatchers has one per
	// mirror, in mirror order.
	listenerImpls map[string]listenerImpl
	dispatchers   []*listeners.Dispatcher
	// changes is the recent history of every mirror's replicated set,
	// for the status page.
	changes *changeLog
	// listenerHealth is the outcome of the calls to each listener.
	listenerHealth *listenerHealth
	// sampler keeps the last hour of throughput and lag (the status
	// page's sparklines); started is when New ran (the page's uptime).
	sampler *history.Sampler
	started time.Time

	mu       sync.Mutex
	cfg      *config.Config          // the config in force (a reload swaps it)
	specs    map[string]plugins.Spec // the plugins running, by name
	reloadMu sync.Mutex              // one reload at a time
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

// Changes implements httpapi.ChangeSource: the recent changes to the
// replicated sets, newest first.
func (a *App) Changes() []httpapi.Change { return a.changes.Changes() }

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
		target, err := kafka.NewCluster(mc.Target, cfg.Cluster(mc.Target), log)
		if err != nil {
			return nil, err
		}
		tms, err := connector.ReadTopicMetadata(ctx, mc.Name, target.Opts())
		if err != nil {
			return nil, fmt.Errorf("mirror %s: %w", mc.Name, target.Explain(err))
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
	metrics.SetDetail(opts.Config.HTTP.MetricsDetail)

	a := &App{
		opts:           opts,
		cfg:            opts.Config,
		coalescer:      newCoalescer(time.Second),
		extMetrics:     newExtensionMetrics(reg),
		listenerImpls:  make(map[string]listenerImpl),
		specs:          make(map[string]plugins.Spec),
		changes:        newChangeLog(maxChanges),
		listenerHealth: newListenerHealth(),
		sampler:        history.NewSampler(history.Options{}),
		started:        time.Now(),
	}
	host, err := plugins.NewHost(plugins.HostOptions{Logger: opts.Logger, Registerer: reg, OnRestart: a.onPluginRestart})
	if err != nil {
		return nil, err
	}
	a.host = host
	a.lookup = hostLookup(host)
	cfg := opts.Config
	a.clusters = make(map[string]*kafka.Cluster, len(cfg.Clusters))
	for alias, c := range cfg.Clusters {
		if a.clusters[alias], err = kafka.NewCluster(alias, c, opts.Logger); err != nil {
			a.closeExtensions()
			return nil, err
		}
	}
	if err := a.buildListeners(context.Background(), cfg); err != nil {
		a.closeExtensions()
		return nil, err
	}
	for _, mc := range cfg.Mirrors {
		d := a.dispatcherFor(mc, cfg, opts.Logger)
		sel, err := a.selection(mc)
		if err != nil {
			a.closeExtensions()
			return nil, err
		}
		rec := &recordingNotifier{next: d, log: a.changes, mirror: mc.Name}
		m, err := newMirror(cfg, mc, a.clusters, opts.Logger, metrics, sel, rec)
		if err != nil {
			a.closeExtensions()
			return nil, fmt.Errorf("mirror %s: %w", mc.Name, err)
		}
		a.mirrors = append(a.mirrors, m)
		a.dispatchers = append(a.dispatchers, d)
	}
	return a, nil
}

// StartPlugins starts the configured plugins. Run calls it; one-shot
// commands that run passes (plan) call it themselves, then Close.
func (a *App) StartPlugins(ctx context.Context) error {
	a.mu.Lock()
	cfg := a.cfg
	a.mu.Unlock()
	// The errors name the config file, line and field: no prefix.
	if err := a.startPlugins(ctx, cfg); err != nil {
		return err
	}
	return a.checkFilterPlugins(cfg)
}

// Close stops the plugins and closes the listeners; after Run it is done
// already.
func (a *App) Close() { a.closeExtensions() }

func (a *App) closeExtensions() {
	for _, d := range a.dispatchers {
		d.Close()
	}
	for name, l := range a.listenerImpls {
		if l.closer != nil {
			if err := l.closer.Close(); err != nil {
				a.opts.Logger.Warn("closing listener failed", "listener", name, "err", err)
			}
		}
	}
	a.listenerImpls = map[string]listenerImpl{}
	if a.host != nil {
		_ = a.host.Close()
	}
}

// selectionParts is what a mirror selects with, built from its config.
type selectionParts struct {
	filters       []filters.TopicFilter
	configFilters []filters.ConfigPropertyFilter
	groupFilters  []filters.GroupFilter
	labels        []connector.Label
	// trustedUpstreams steer labels as much as labels do.
	trustedUpstreams []string
	// rateLimits are resolved against the topics and their labels.
	rateLimits connector.RateLimits
}

func (s selectionParts) connector() connector.Selection {
	return connector.Selection{Filters: s.filters, ConfigFilters: s.configFilters, GroupFilters: s.groupFilters, Labels: s.labels, TrustedUpstreams: s.trustedUpstreams, RateLimits: s.rateLimits}
}

// Reload re-reads the config file and applies what can change while
// running: each mirror's selection (topic and group filters, config sync
// filters, labels, trusted upstreams, rate limits), its on_source_gap and
// the plugins (started, stopped or restarted as their specs changed). A
// config that fails validation is rejected, with the error returned, and
// the running config stays. Every other change (clusters, listeners, http,
// mirrors added or removed, a mirror's producer...) takes effect only at a
// restart: Reload logs those keys in one warning and returns them.
func (a *App) Reload(ctx context.Context) (restartKeys []string, err error) {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if a.opts.ConfigFile == "" {
		return nil, errors.New("reload: the config was not loaded from a file")
	}
	cfg, err := config.LoadFile(a.opts.ConfigFile)
	if err != nil {
		a.extMetrics.reloadOK.Set(0)
		a.opts.Logger.Error("config reload rejected; the running config stays", "err", err)
		return nil, err
	}
	sels := make(map[string]selectionParts, len(cfg.Mirrors))
	for _, mc := range cfg.Mirrors {
		sel, err := a.selection(mc)
		if err != nil {
			a.extMetrics.reloadOK.Set(0)
			return nil, err
		}
		sels[mc.Name] = sel
	}
	if err := a.startPlugins(ctx, cfg); err != nil {
		a.extMetrics.reloadOK.Set(0)
		a.opts.Logger.Error("config reload: plugins failed to start", "err", err)
		return nil, err
	}
	if err := a.checkFilterPlugins(cfg); err != nil {
		// The plugins now run as cfg says, but the mirrors keep
		// their previous selection, as when a plugin fails to start.
		a.extMetrics.reloadOK.Set(0)
		a.opts.Logger.Error("config reload rejected; the running selection stays", "err", err)
		return nil, err
	}
	a.mu.Lock()
	a.cfg = cfg
	a.mu.Unlock()
	for _, m := range a.mirrors {
		sel, ok := sels[m.Name()]
		if !ok {
			continue // removed: it runs as it started, until a restart
		}
		m.Reconfigure(sel.connector())
		if mc := cfg.Mirror(m.Name()); mc != nil {
			_ = m.SetOnSourceGap(mc.OnSourceGap) // validated by config.LoadFile
		}
	}
	// Compared with the config kmirror started with, not the previous
	// reload's: a change a reload could not apply is still pending.
	restartKeys = restartRequired(a.opts.Config, cfg)
	if len(restartKeys) > 0 {
		a.opts.Logger.Warn("config reload: these changes take effect only after a restart", "keys", strings.Join(restartKeys, ", "))
	}
	a.extMetrics.reloadOK.Set(1)
	a.extMetrics.reloadAt.SetToCurrentTime()
	a.opts.Logger.Info("config reloaded", "config", a.opts.ConfigFile)
	return restartKeys, nil
}

func newMirror(cfg *config.Config, mc *config.Mirror, clusters map[string]*kafka.Cluster, log *slog.Logger, metrics *connector.Metrics, sel selectionParts, notifier connector.Notifier) (*connector.Mirror, error) {
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
	src, dst := clusters[mc.Source], clusters[mc.Target]
	if src == nil || dst == nil {
		return nil, fmt.Errorf("unknown cluster %q or %q", mc.Source, mc.Target)
	}
	return connector.New(connector.Config{
		Name:                mc.Name,
		SourceAlias:         mc.Source,
		TargetAlias:         mc.Target,
		SourceOpts:          src.Opts(),
		TargetOpts:          dst.Opts(),
		SourceExplainer:     src,
		TargetExplainer:     dst,
		Policy:              pol,
		Filters:             sel.filters,
		ConfigFilters:       sel.configFilters,
		GroupFilters:        sel.groupFilters,
		Labels:              sel.labels,
		TrustedUpstreams:    sel.trustedUpstreams,
		RateLimits:          sel.rateLimits,
		Notifier:            notifier,
		ConfigSyncInterval:  enabledInterval(mc.Sync.TopicConfigs.Enabled, mc.Sync.TopicConfigs.Interval),
		ACLSyncInterval:     enabledInterval(mc.Sync.ACLs.Enabled, mc.Sync.ACLs.Interval),
		GroupSyncInterval:   time.Duration(mc.Sync.GroupOffsets.Interval),
		GroupCheckpointOnly: !mc.Sync.GroupOffsets.Enabled,
		FollowSourceRewinds: mc.Sync.GroupOffsets.FollowSourceRewinds,
		RefreshInterval:     time.Duration(mc.Topics.RefreshInterval),
		ProgressInterval:    time.Duration(mc.ProgressInterval),
		ReplicationFactor:   int16(mc.ReplicationFactor),
		StatePartitions:     int32(mc.StatePartitions),
		IndexMemory:         int64(cfg.Offsets.IndexMemory),
		Linger:              time.Duration(mc.Producer.Linger),
		DeliveryTimeout:     time.Duration(mc.Producer.DeliveryTimeout),
		ShutdownTimeout:     time.Duration(cfg.ShutdownTimeout),
		DeadLetterTopic:     deadLetterTopic(mc),
		OnSourceGap:         mc.OnSourceGap,
		Cluster:             clusterConfig(mc),
		MM2:                 mm2Config(mc.MM2),
		BatchMaxBytes:       int32(mc.Producer.BatchMaxBytes),
		FetchMaxBytes:       int32(mc.Fetch.MaxBytes),
		Compression:         codec,
		SourceCompression:   mc.Producer.Compression == "source",
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

// clusterConfig is how the mirror's workers share it (config.Load fills in
// the defaults of the cluster block).
func clusterConfig(mc *config.Mirror) *connector.ClusterConfig {
	return &connector.ClusterConfig{
		ExactlyOnce:    mc.ExactlyOnce,
		Slots:          int32(mc.Cluster.Slots),
		SessionTimeout: time.Duration(mc.Cluster.SessionTimeout),
		CommitInterval: time.Duration(mc.Cluster.CommitInterval),
	}
}

// mm2Config is the mirror's mm2 block for the connector (nil: none).
func mm2Config(m *config.MM2) *connector.MM2Config {
	if m == nil {
		return nil
	}
	return &connector.MM2Config{
		SourceAlias:         m.SourceAlias,
		Adopt:               m.Adopt,
		OffsetsTopic:        m.OffsetsTopic,
		SourceConnector:     m.SourceConnector,
		OffsetSyncsTopic:    m.OffsetSyncsTopic,
		OffsetSyncsOnTarget: m.OffsetSyncsLocation == "target",
		Heartbeats:          m.Heartbeats,
		HeartbeatsInterval:  time.Duration(m.HeartbeatsInterval),
		Checkpoints:         m.Checkpoints,
		CheckpointsInterval: time.Duration(m.CheckpointsInterval),
	}
}

func deadLetterTopic(mc *config.Mirror) string {
	if mc.DeadLetter == nil {
		return ""
	}
	return mc.DeadLetter.Topic
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
	case "none", "source":
		// source: batches forwarded as they are keep their codec; the
		// record path (fallbacks, cluster mode) produces uncompressed.
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
	defer a.closeExtensions()
	// A plugin that cannot start (a sha256 mismatch, a broken binary)
	// stops kmirror before it mirrors anything: running without a
	// configured filter would select the wrong topics.
	if err := a.StartPlugins(ctx); err != nil {
		return err
	}
	// From the shutdown on, a plugin that dies (the same SIGTERM reached
	// kmirror's whole process group) is not restarted.
	stopPlugins := context.AfterFunc(ctx, a.host.Stopping)
	defer stopPlugins()
	for _, d := range a.dispatchers {
		d.Start()
	}
	for _, c := range a.clusters {
		c.Report(log)
	}
	hc := a.opts.Config.HTTP
	for _, w := range securityWarnings(a.opts.Config) {
		log.Warn(w.msg, w.args...)
	}
	srv := &http.Server{
		Handler:           httpapi.Protect(httpapi.Handler(a.opts.Registry, a, a.Reload), httpSecurity(hc)),
		ReadHeaderTimeout: 10 * time.Second,
		// The server's own errors (a refused TLS handshake, say) in
		// kmirror's log format rather than on the standard logger.
		ErrorLog: slog.NewLogLogger(log.With("component", "http").Handler(), slog.LevelInfo),
	}
	if hc.TLS != nil {
		tc, err := httpapi.ServerTLS(hc.TLS.CertFile, hc.TLS.KeyFile, hc.TLS.ClientCAFile)
		if err != nil {
			return err
		}
		srv.TLSConfig = tc
	}
	ln, err := net.Listen("tcp", hc.Listen)
	if err != nil {
		return fmt.Errorf("http: listen on %s (http.listen): %w", hc.Listen, err)
	}
	if srv.TLSConfig != nil {
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	log.Info("http server listening", "addr", ln.Addr().String(), "tls", hc.TLS != nil, "mtls", hc.TLS != nil && hc.TLS.ClientCAFile != "", "auth", hc.Auth != nil)
	if a.opts.Ready != nil {
		a.opts.Ready(ln.Addr().String())
	}

	var g run.Group
	// The mirrors stop together when ctx ends; each returns only after
	// it has flushed and persisted, and only then does the server stop,
	// so /metrics stays scrapeable through a shutdown.
	mirrorsCtx, stopMirrors := context.WithCancel(ctx)
	mirrorsDone := make(chan struct{})
	// The group returns the first actor's error, which at a shutdown is
	// the signal's (none): the mirrors' own (records abandoned at the
	// shutdown timeout) is kept here.
	var mirrorsErr error
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
		mirrorsErr = errors.Join(all...)
		return mirrorsErr
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
	sampleCtx, stopSampling := context.WithCancel(ctx)
	g.Add(func() error {
		a.sampler.Run(sampleCtx, a.Statuses)
		return nil
	}, func(error) { stopSampling() })
	err = g.Run()
	<-mirrorsDone
	if err == nil {
		err = mirrorsErr
	}
	return err
}
