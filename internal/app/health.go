package app

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/kmirror/kmirror/internal/httpapi"
)

// listenerHealth is the outcome of the calls to each listener since the
// start, for GET /api/v1/extensions.
type listenerHealth struct {
	mu sync.Mutex
	by map[string]*httpapi.ListenerStatus
}

func newListenerHealth() *listenerHealth {
	return &listenerHealth{by: map[string]*httpapi.ListenerStatus{}}
}

// onCall records one call (listeners.DispatcherOptions.OnCall).
func (h *listenerHealth) onCall(listener string, err error, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.by[listener]
	if s == nil {
		s = &httpapi.ListenerStatus{Name: listener}
		h.by[listener] = s
	}
	s.Calls++
	s.LastCallAt = at
	s.Healthy = err == nil
	if err != nil {
		s.Errors++
		s.LastError, s.LastErrorAt = err.Error(), at
	}
}

func (h *listenerHealth) get(listener string) (httpapi.ListenerStatus, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.by[listener]
	if !ok {
		return httpapi.ListenerStatus{}, false
	}
	return *s, true
}

// Extensions implements httpapi.ExtensionSource: the plugins the host
// runs and the listeners of the config in force, with their health.
func (a *App) Extensions() httpapi.ExtensionsResponse {
	resp := httpapi.ExtensionsResponse{}
	if a.host != nil {
		for _, name := range slices.Sorted(slices.Values(a.host.Names())) {
			p, ok := a.host.Get(name)
			if !ok {
				continue
			}
			pid := p.Pid()
			resp.Plugins = append(resp.Plugins, httpapi.PluginStatus{Name: name, Up: pid > 0, Pid: pid, Restarts: p.Restarts(), Version: p.Info().Version})
		}
	}
	a.mu.Lock()
	cfg := a.cfg
	a.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(cfg.Listeners)) {
		st, called := a.listenerHealth.get(name)
		if !called {
			// Not called yet: nothing has failed.
			st = httpapi.ListenerStatus{Name: name, Healthy: true}
		}
		st.Type = cfg.Listeners[name].Type
		st.Mirrors = []string{}
		for _, mc := range cfg.Mirrors {
			if slices.Contains(mc.Listeners, name) {
				st.Mirrors = append(st.Mirrors, mc.Name)
			}
		}
		resp.Listeners = append(resp.Listeners, st)
	}
	return resp
}

// Clusters implements httpapi.ClusterSource: every configured cluster, by
// alias, with its failing brokers.
func (a *App) Clusters() []httpapi.ClusterStatus {
	out := make([]httpapi.ClusterStatus, 0, len(a.clusters))
	for _, alias := range slices.Sorted(maps.Keys(a.clusters)) {
		c := a.clusters[alias]
		st := httpapi.ClusterStatus{Alias: alias, BootstrapServers: c.BootstrapServers(), Failing: []httpapi.BrokerFault{}}
		for _, f := range c.Faults() {
			st.Failing = append(st.Failing, httpapi.BrokerFault{Address: f.Address, Error: f.Error, Check: f.Check, Since: f.Since, Failures: f.Failures})
		}
		out = append(out, st)
	}
	return out
}
