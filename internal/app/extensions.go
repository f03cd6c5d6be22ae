package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
	"github.com/kmirror/kmirror/listeners/builtin"
	"github.com/kmirror/kmirror/plugins"
)

// This file wires the extension points: filter plugins into the mirrors'
// selection, and listeners (built in or plugins) behind one dispatcher per
// mirror. The connector only ever sees filters.* and listeners.* values.

// filterTimeout bounds one filter plugin call: a pass waits for it.
const filterTimeout = 30 * time.Second

// listenerPrefix starts the name the plugin host knows a listener
// plugin by, in its errors, log lines and metrics (plugin="listener.notify"
// is listeners.notify): it keeps listener plugins apart from the filter
// plugins under plugins:, which may have the same names.
const listenerPrefix = "listener."

// pluginName of a listener plugin: kept apart from filter plugins' names.
func listenerPluginName(listener string) string { return listenerPrefix + listener }

// pluginField is the config key of the plugin the host runs as name (a
// name of pluginSpecs): listeners.<listener> for a listener plugin, else
// plugins.<name>.
func pluginField(cfg *config.Config, name string) string {
	if l, ok := strings.CutPrefix(name, listenerPrefix); ok && cfg.Listeners[l] != nil && cfg.Listeners[l].Type == "plugin" {
		return "listeners." + l
	}
	return "plugins." + name
}

// pluginStartError places a plugin's failure to start on the config key
// behind it (file:line: field:, as the config's own errors), so that the
// user knows which entry to fix: the pin for a sha256 mismatch, else the
// plugin's entry.
func pluginStartError(cfg *config.Config, name string, err error) error {
	field := pluginField(cfg, name)
	if errors.Is(err, plugins.ErrChecksumMismatch) {
		field += ".sha256"
	}
	return cfg.FieldError(field, "%v", err)
}

// filterPlugin is what the filter wiring needs of a running plugin
// (*plugins.Plugin): an interface so unit tests can stand in for a
// process.
type filterPlugin interface {
	Info() plugins.Info
	TopicFilter() (filters.TopicFilter, bool)
	GroupFilter() (filters.GroupFilter, bool)
}

// pluginLookup finds a running filter plugin by its name in the config.
type pluginLookup func(name string) (filterPlugin, bool)

// hostLookup looks plugins up in h. A plugin whose process died is still
// found (its calls fail until the restart), so its capabilities stay
// known.
func hostLookup(h *plugins.Host) pluginLookup {
	return func(name string) (filterPlugin, bool) {
		p, ok := h.Get(name)
		if !ok {
			return nil, false
		}
		return p, true
	}
}

// A plugin in mirrors[].filters filters what its capabilities say: topics
// with topic_filter, groups with group_filter, both with both. Each entry
// becomes a pluginTopicFilter in the topic chain and a pluginGroupFilter in
// the group chain; the one whose capability the plugin lacks keeps every
// candidate. Capabilities are read per call, not when the chain is built,
// because the chain is built before the plugins start and a reload may
// replace a plugin by one with other capabilities.

// errNoFilterCapability is the answer for a plugin that filters neither
// topics nor groups (startup and reloads refuse such a config; see
// checkFilterPlugins).
func errNoFilterCapability(name string, p filterPlugin) error {
	return fmt.Errorf("plugin %s filters neither topics nor groups (capabilities: %v)", name, p.Info().Capabilities)
}

// pluginTopicFilter calls the named filter plugin with a mirror's context
// properties. It looks the plugin up on every call, so a restarted plugin
// is used as soon as it is back.
type pluginTopicFilter struct {
	lookup pluginLookup
	name   string
	props  map[string]string
	cache  *coalescer
}

// ReadsConfigs implements filters.ConfigReader: a plugin may judge topics
// by their configs, and the protocol carries them. A plugin that only
// filters groups does not, so a mirror whose only plugin filters groups
// asks for no topic configs. When the plugin is not running, its
// capabilities are unknown: it might be a topic filter by the time it is
// called, so the configs are read.
func (f *pluginTopicFilter) ReadsConfigs() bool {
	p, ok := f.lookup(f.name)
	if !ok {
		return true
	}
	_, topics := p.TopicFilter()
	return topics
}

func (f *pluginTopicFilter) FilterTopics(ctx context.Context, req filters.TopicRequest) ([]string, error) {
	p, ok := f.lookup(f.name)
	if !ok {
		return nil, fmt.Errorf("filter plugin %s is not running", f.name)
	}
	tf, ok := p.TopicFilter()
	if !ok {
		if _, groups := p.GroupFilter(); groups {
			// A group filter only: it leaves the topics alone.
			names := make([]string, len(req.Topics))
			for i, t := range req.Topics {
				names[i] = t.Name
			}
			return names, nil
		}
		return nil, errNoFilterCapability(f.name, p)
	}
	req.Properties = f.props
	return f.cache.do(ctx, topicCoalesceKey(f.name, req), func(ctx context.Context) ([]string, error) {
		ctx, cancel := context.WithTimeout(ctx, filterTimeout)
		defer cancel()
		return tf.FilterTopics(ctx, req)
	})
}

// pluginGroupFilter is pluginTopicFilter for consumer groups: it calls the
// named plugin's GroupFilter, looked up on every call, bounded by
// filterTimeout and coalesced like topic calls. Its error (plugin down,
// timeout, the plugin's own error) aborts the mirror's group sync, which
// keeps the previous group set: a failing filter never looks like "no
// groups".
type pluginGroupFilter struct {
	lookup pluginLookup
	name   string
	props  map[string]string
	cache  *coalescer
}

func (f *pluginGroupFilter) FilterGroups(ctx context.Context, req filters.GroupRequest) ([]string, error) {
	if len(req.Groups) == 0 {
		return nil, nil // nothing to choose from: the answer needs no plugin
	}
	p, ok := f.lookup(f.name)
	if !ok {
		return nil, fmt.Errorf("filter plugin %s is not running", f.name)
	}
	gf, ok := p.GroupFilter()
	if !ok {
		if _, topics := p.TopicFilter(); topics {
			// A topic filter only: it leaves the groups alone.
			names := make([]string, len(req.Groups))
			for i, g := range req.Groups {
				names[i] = g.Name
			}
			return names, nil
		}
		return nil, errNoFilterCapability(f.name, p)
	}
	req.Properties = f.props
	return f.cache.do(ctx, groupCoalesceKey(f.name, req), func(ctx context.Context) ([]string, error) {
		ctx, cancel := context.WithTimeout(ctx, filterTimeout)
		defer cancel()
		return gf.FilterGroups(ctx, req)
	})
}

// checkFilterPlugins refuses a config that lists, in mirrors[].filters, a
// running plugin that filters neither topics nor groups (a listener
// plugin, say): without it, every pass would fail on it. It also logs what
// each filter plugin filters. Plugins that are not running were reported
// by startPlugins.
func (a *App) checkFilterPlugins(cfg *config.Config) error {
	return checkFilterPlugins(cfg, a.lookup, a.opts.Logger)
}

// checkFilterPlugins is App.checkFilterPlugins for any lookup: Check uses
// it too, so validate refuses what run refuses.
func checkFilterPlugins(cfg *config.Config, lookup pluginLookup, log *slog.Logger) error {
	var errs []error
	for i, mc := range cfg.Mirrors {
		for j, f := range mc.Filters {
			if f.Plugin == "" {
				continue
			}
			p, ok := lookup(f.Plugin)
			if !ok {
				continue
			}
			info := p.Info()
			topics, groups := info.Has(plugins.CapabilityTopicFilter), info.Has(plugins.CapabilityGroupFilter)
			if !topics && !groups {
				errs = append(errs, cfg.FieldError(fmt.Sprintf("mirrors[%d].filters[%d].plugin", i, j),
					"plugin %q (%s) is neither a topic_filter nor a group_filter (its capabilities: %v); a listener plugin belongs in listeners with type: plugin",
					f.Plugin, cfg.Plugins[f.Plugin].Path, info.Capabilities))
				continue
			}
			log.Info("filter plugin wired", "mirror", mc.Name, "plugin", f.Plugin, "filters_topics", topics, "filters_groups", groups)
		}
	}
	return errors.Join(errs...)
}

// coalescer caches filter plugin answers per pass and shares concurrent
// identical calls: several mirrors reading the same source with the same
// properties ask the plugin once. The key is the plugin, the sorted
// properties and the candidates (topics or groups); an answer lives for ttl, shorter than a
// pass, so an edited catalog is seen on the next pass.
type coalescer struct {
	ttl time.Duration

	mu      sync.Mutex
	entries map[string]*coalesced
}

type coalesced struct {
	done  chan struct{}
	names []string
	err   error
	at    time.Time
}

func newCoalescer(ttl time.Duration) *coalescer {
	return &coalescer{ttl: ttl, entries: make(map[string]*coalesced)}
}

// topicCoalesceKey and groupCoalesceKey are the coalescer's keys of a
// topic and a group filter call; their prefixes keep the two apart.
func topicCoalesceKey(plugin string, req filters.TopicRequest) string {
	var b strings.Builder
	b.WriteString("topics\x00")
	writeCoalesceHead(&b, plugin, req.Properties)
	for _, t := range req.Topics {
		fmt.Fprintf(&b, "%s/%d", t.Name, t.Partitions)
		for _, k := range slices.Sorted(maps.Keys(t.Configs)) {
			fmt.Fprintf(&b, ",%s=%s", k, t.Configs[k])
		}
		for _, k := range slices.Sorted(maps.Keys(t.Labels)) {
			fmt.Fprintf(&b, ";%s=%s", k, t.Labels[k])
		}
		b.WriteByte('\x00')
	}
	return b.String()
}

func groupCoalesceKey(plugin string, req filters.GroupRequest) string {
	var b strings.Builder
	b.WriteString("groups\x00")
	writeCoalesceHead(&b, plugin, req.Properties)
	for _, g := range req.Groups {
		b.WriteString(g.Name)
		for _, t := range g.Topics {
			fmt.Fprintf(&b, ",%s", t)
		}
		b.WriteByte('\x00')
	}
	return b.String()
}

func writeCoalesceHead(b *strings.Builder, plugin string, props map[string]string) {
	b.WriteString(plugin)
	for _, k := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(b, "\x00%s=%s", k, props[k])
	}
	b.WriteString("\x01")
}

// do answers the call named key: from a live cached answer, by waiting for
// the same call in flight, or by making it.
func (c *coalescer) do(ctx context.Context, key string, call func(context.Context) ([]string, error)) ([]string, error) {
	c.mu.Lock()
	for k, e := range c.entries { // drop what expired
		select {
		case <-e.done:
			if time.Since(e.at) > c.ttl {
				delete(c.entries, k)
			}
		default:
		}
	}
	if e, ok := c.entries[key]; ok {
		c.mu.Unlock()
		select {
		case <-e.done:
			return slices.Clone(e.names), e.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e := &coalesced{done: make(chan struct{})}
	c.entries[key] = e
	c.mu.Unlock()
	e.names, e.err = call(ctx)
	e.at = time.Now()
	if e.err != nil {
		// Errors are not cached: the next pass asks again.
		c.mu.Lock()
		delete(c.entries, key)
		c.mu.Unlock()
	}
	close(e.done)
	return slices.Clone(e.names), e.err
}

// pluginListener forwards to a listener plugin, looked up per call.
type pluginListener struct {
	host *plugins.Host
	name string
}

func (l pluginListener) TopicsChanged(ctx context.Context, c listeners.TopicsChange) error {
	p, ok := l.host.Get(l.name)
	if !ok {
		return fmt.Errorf("listener plugin %s is not running", l.name)
	}
	tl, ok := p.TopicListener()
	if !ok {
		return nil // the plugin only listens to groups
	}
	return tl.TopicsChanged(ctx, c)
}

func (l pluginListener) GroupsChanged(ctx context.Context, c listeners.GroupsChange) error {
	p, ok := l.host.Get(l.name)
	if !ok {
		return fmt.Errorf("listener plugin %s is not running", l.name)
	}
	gl, ok := p.GroupListener()
	if !ok {
		return nil // the plugin only listens to topics
	}
	return gl.GroupsChanged(ctx, c)
}

// extensionMetrics count listener calls and reloads.
type extensionMetrics struct {
	listenerCalls    *prometheus.CounterVec
	listenerDuration *prometheus.HistogramVec
	reloadOK         prometheus.Gauge
	reloadAt         prometheus.Gauge
}

func newExtensionMetrics(reg prometheus.Registerer) *extensionMetrics {
	m := &extensionMetrics{
		listenerCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_listener_calls_total",
			Help: "Listener calls by listener and result (ok, error).",
		}, []string{"listener", "result"}),
		listenerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kmirror_listener_call_duration_seconds",
			Help:    "Duration of listener calls.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"listener"}),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kmirror_config_last_reload_successful",
			Help: "Whether the last config reload succeeded (1) or was rejected (0).",
		}),
		reloadAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kmirror_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful config load or reload.",
		}),
	}
	reg.MustRegister(m.listenerCalls, m.listenerDuration, m.reloadOK, m.reloadAt)
	m.reloadOK.Set(1)
	m.reloadAt.SetToCurrentTime()
	return m
}

func (m *extensionMetrics) onCall(listener, _ string, err error, took time.Duration) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.listenerCalls.WithLabelValues(listener, result).Inc()
	m.listenerDuration.WithLabelValues(listener).Observe(took.Seconds())
}

// pluginSpecs lists every plugin a config needs: the filter plugins and
// the plugin listeners.
func pluginSpecs(cfg *config.Config) []plugins.Spec {
	var out []plugins.Spec
	for _, name := range slices.Sorted(maps.Keys(cfg.Plugins)) {
		p := cfg.Plugins[name]
		out = append(out, plugins.Spec{Name: name, Path: p.Path, SHA256: p.SHA256, Config: p.Config})
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Listeners)) {
		if l := cfg.Listeners[name]; l.Type == "plugin" {
			out = append(out, plugins.Spec{Name: listenerPluginName(name), Path: l.Path, SHA256: l.SHA256, Config: l.Config})
		}
	}
	return out
}

func sameSpec(a, b plugins.Spec) bool {
	return a.Name == b.Name && a.Path == b.Path && a.SHA256 == b.SHA256 && maps.Equal(a.Config, b.Config)
}

// startPlugins starts the plugins of cfg that are not running with the same
// spec, and stops those cfg no longer has or that changed.
func (a *App) startPlugins(ctx context.Context, cfg *config.Config) error {
	want := pluginSpecs(cfg)
	wanted := make(map[string]plugins.Spec, len(want))
	for _, s := range want {
		wanted[s.Name] = s
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, running := range a.specs {
		if s, ok := wanted[name]; !ok || !sameSpec(s, running) {
			if p, ok := a.host.Get(name); ok {
				_ = p.Close()
			}
			delete(a.specs, name)
			a.opts.Logger.Info("plugin stopped", "plugin", name)
		}
	}
	var errs []error
	for _, s := range want {
		if _, ok := a.specs[s.Name]; ok {
			continue
		}
		p, err := a.host.Start(ctx, s)
		if err != nil {
			errs = append(errs, pluginStartError(cfg, s.Name, err))
			continue
		}
		a.specs[s.Name] = s
		a.opts.Logger.Info("plugin started", "plugin", s.Name, "version", p.Info().Version, "capabilities", p.Info().Capabilities, "pid", p.Pid())
	}
	return errors.Join(errs...)
}

// selection builds a mirror's selection from its config.
func (a *App) selection(mc *config.Mirror) (sel selectionParts, err error) {
	sel.filters = []filters.TopicFilter{filters.Regex{Include: mc.Topics.IncludeRegexps(), Exclude: mc.Topics.ExcludeRegexps()}}
	for i, f := range mc.Filters {
		if f.Plugin != "" {
			sel.filters = append(sel.filters, &pluginTopicFilter{lookup: a.lookup, name: f.Plugin, props: f.Properties, cache: a.coalescer})
			continue
		}
		conds := make([]filters.Condition, 0, len(f.Property.Conditions))
		for _, s := range f.Property.Conditions {
			c, err := filters.ParseCondition(s)
			if err != nil {
				return sel, fmt.Errorf("mirrors[%s].filters[%d]: %w", mc.Name, i, err)
			}
			conds = append(conds, c)
		}
		p, err := filters.NewProperty(filters.Combine(f.Property.Combine), conds...)
		if err != nil {
			return sel, fmt.Errorf("mirrors[%s].filters[%d]: %w", mc.Name, i, err)
		}
		sel.filters = append(sel.filters, p)
	}
	sel.configFilters = []filters.ConfigPropertyFilter{filters.Regex{
		Include: mc.Sync.TopicConfigs.IncludeRegexps(),
		Exclude: mc.Sync.TopicConfigs.ExcludeRegexps(),
	}}
	// Groups: the regex first, then the plugins in config order. Each
	// filter sees only what the previous kept and cannot add a name, so no
	// plugin re-adds a group the regex excluded.
	sel.groupFilters = []filters.GroupFilter{filters.Regex{Include: mc.Groups.IncludeRegexps(), Exclude: mc.Groups.ExcludeRegexps()}}
	for _, f := range mc.Filters {
		if f.Plugin != "" {
			sel.groupFilters = append(sel.groupFilters, &pluginGroupFilter{lookup: a.lookup, name: f.Plugin, props: f.Properties, cache: a.coalescer})
		}
	}
	sel.labels = labels(mc.Labels)
	sel.trustedUpstreams = mc.Metadata.TrustedUpstreams
	sel.rateLimits = connector.RateLimits{Mirror: int64(mc.RateLimit)}
	for _, r := range mc.TopicRateLimits {
		sel.rateLimits.Topics = append(sel.rateLimits.Topics, connector.TopicRateLimit{Match: r.Regexp(), Labels: r.Labels, BytesPerSecond: int64(r.RateLimit)})
	}
	return sel, nil
}

// buildListeners creates one instance per configured listener (shared by
// every mirror that names it) and one dispatcher per mirror.
func (a *App) buildListeners(ctx context.Context, cfg *config.Config) error {
	for _, name := range slices.Sorted(maps.Keys(cfg.Listeners)) {
		lc := cfg.Listeners[name]
		if lc.Type == "plugin" {
			l := pluginListener{host: a.host, name: listenerPluginName(name)}
			a.listenerImpls[name] = listenerImpl{topics: l, groups: l}
			continue
		}
		l, err := builtin.New(ctx, lc.Type, lc.Config, a.opts.Logger.With("listener", name))
		if err != nil {
			return fmt.Errorf("listeners.%s: %w", name, err)
		}
		a.listenerImpls[name] = listenerImpl{topics: l, groups: l, closer: l}
	}
	return nil
}

type listenerImpl struct {
	topics listeners.TopicListener
	groups listeners.GroupListener
	closer listeners.Closer
}

// dispatcherFor builds a mirror's dispatcher over its named listeners.
func (a *App) dispatcherFor(mc *config.Mirror, cfg *config.Config, log *slog.Logger) *listeners.Dispatcher {
	timeout := 10 * time.Second
	for _, name := range mc.Listeners {
		if t := time.Duration(cfg.Listeners[name].Timeout); t > 0 {
			timeout = max(timeout, t)
		}
	}
	d := listeners.NewDispatcher(listeners.DispatcherOptions{
		Mirror:  mc.Name,
		Logger:  log,
		Timeout: timeout,
		OnCall: func(listener, kind string, err error, took time.Duration) {
			a.extMetrics.onCall(listener, kind, err, took)
			a.listenerHealth.onCall(listener, err, time.Now())
		},
	})
	names := slices.Clone(mc.Listeners)
	sort.Strings(names)
	for _, name := range names {
		// Pre-initialised: an alert on errors sees 0, not absence.
		a.extMetrics.listenerCalls.WithLabelValues(name, "ok")
		a.extMetrics.listenerCalls.WithLabelValues(name, "error")
		impl := a.listenerImpls[name]
		d.Add(name, impl.topics, impl.groups)
	}
	return d
}

// onPluginRestart hands a restarted listener plugin the full current state.
func (a *App) onPluginRestart(plugin string) {
	listener, ok := strings.CutPrefix(plugin, listenerPrefix)
	if !ok {
		return
	}
	for _, d := range a.dispatchers {
		d.Resync(listener)
	}
}
