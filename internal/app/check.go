package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/plugins"
)

// Check does what Run checks before it mirrors anything, and no more: it
// connects to no cluster and serves nothing. A plugin's capabilities are
// known only once it runs, so Check starts every plugin as Run does (the
// same plugins.Host.Start: the binary is read and compared with its sha256
// pin, then started, asked for its PluginInfo and configured), then stops
// them. ctx bounds the starts (plugins.HostOptions.StartTimeout bounds each).
//
// The error is what would stop Run: a plugin that does not start (a wrong
// pin, a missing or broken binary) and a filter plugin that filters
// nothing. The warnings are wiring that is legal but does nothing: a plugin
// whose capabilities no entry of the config ever calls. Errors and warnings
// name the file, line and field of the config key behind them, as
// config.Load's errors do.
func Check(ctx context.Context, cfg *config.Config, log *slog.Logger) (warnings []string, err error) {
	host, err := plugins.NewHost(plugins.HostOptions{Logger: log})
	if err != nil {
		return nil, err
	}
	defer func() { _ = host.Close() }()
	var errs []error
	for _, s := range pluginSpecs(cfg) {
		if _, err := host.Start(ctx, s); err != nil {
			errs = append(errs, pluginStartError(cfg, s.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := checkFilterPlugins(cfg, hostLookup(host), log); err != nil {
		return nil, err
	}
	infos := make(map[string]plugins.Info)
	for _, name := range host.Names() {
		p, _ := host.Get(name)
		infos[name] = p.Info()
	}
	return append(wiringWarnings(cfg, infos), trustWarnings(cfg)...), nil
}

// fieldWarning is a warning about the config key at field, placed as the
// config's errors are (file:line: field: ...).
func fieldWarning(cfg *config.Config, field, format string, args ...any) string {
	return cfg.FieldError(field, format, args...).Error()
}

// trustWarnings lists the trusted upstreams that are mirrors of this
// config writing to another cluster than the trusting mirror's source:
// their metadata topic is never there, so the trust does nothing (the
// direction of the chain is probably reversed). An upstream of another
// config cannot be checked.
func trustWarnings(cfg *config.Config) []string {
	var out []string
	for i, mc := range cfg.Mirrors {
		for j, up := range mc.Metadata.TrustedUpstreams {
			if um := cfg.Mirror(up); um != nil && um.Target != mc.Source {
				out = append(out, fieldWarning(cfg, fmt.Sprintf("mirrors[%d].metadata.trusted_upstreams[%d]", i, j), "mirror %s writes to %s, not to this mirror's source %s, so its metadata is never read here (trust the mirror whose target is %s)",
					up, um.Target, mc.Source, mc.Source))
			}
		}
	}
	return out
}

// wiringWarnings lists the plugins and listeners that are never called.
// infos are the running plugins' PluginInfo, by their name in the host
// (listener plugins under listenerPluginName).
func wiringWarnings(cfg *config.Config, infos map[string]plugins.Info) []string {
	filtered := map[string]bool{} // plugins named by a mirror's filters
	listened := map[string]bool{} // listeners named by a mirror
	for _, mc := range cfg.Mirrors {
		for _, f := range mc.Filters {
			if f.Plugin != "" {
				filtered[f.Plugin] = true
			}
		}
		for _, l := range mc.Listeners {
			listened[l] = true
		}
	}
	isListener := func(i plugins.Info) bool {
		return i.Has(plugins.CapabilityTopicListener) || i.Has(plugins.CapabilityGroupListener)
	}
	isFilter := func(i plugins.Info) bool {
		return i.Has(plugins.CapabilityTopicFilter) || i.Has(plugins.CapabilityGroupFilter)
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(cfg.Plugins)) {
		if filtered[name] {
			continue
		}
		info := infos[name]
		switch {
		case isListener(info) && !isFilter(info):
			out = append(out, fieldWarning(cfg, "plugins."+name, "%s is a listener plugin (capabilities: %v) and plugins: holds filter plugins, so it is never called; a listener plugin belongs under listeners: with type: plugin, path and sha256, named in a mirror's listeners",
				cfg.Plugins[name].Path, info.Capabilities))
		default:
			out = append(out, fieldWarning(cfg, "plugins."+name, "no mirror names it in its filters, so it is never called (add - plugin: %s to a mirror's filters, or remove it)", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Listeners)) {
		l := cfg.Listeners[name]
		if !listened[name] {
			out = append(out, fieldWarning(cfg, "listeners."+name, "no mirror names it in its listeners, so it is never called (add it to a mirror's listeners, or remove it)"))
			continue
		}
		if l.Type != "plugin" {
			continue
		}
		if info, ok := infos[listenerPluginName(name)]; ok && !isListener(info) {
			out = append(out, fieldWarning(cfg, "listeners."+name, "%s listens to neither topics nor groups (capabilities: %v), so it is never called; a filter plugin belongs under plugins:, named in a mirror's filters",
				l.Path, info.Capabilities))
		}
	}
	return out
}
