package plugins

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	restarts *prometheus.CounterVec
	up       *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_plugin_restarts_total",
			Help: "Times the host started a plugin again after its process died (successful or not).",
		}, []string{"plugin"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_plugin_up",
			Help: "1 while the plugin's process is running and configured, 0 while it is down or restarting.",
		}, []string{"plugin"}),
	}
	var err error
	m.restarts, err = register(reg, m.restarts)
	if err != nil {
		return nil, err
	}
	m.up, err = register(reg, m.up)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector already registered under
// its name (a second Host on the same registry, e.g. after a reload).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

func (m *metrics) restarted(name string) {
	if m != nil {
		m.restarts.WithLabelValues(name).Inc()
	}
}

func (m *metrics) setUp(name string, up bool) {
	if m == nil {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	m.up.WithLabelValues(name).Set(v)
}

func (m *metrics) init(name string) {
	if m != nil {
		m.restarts.WithLabelValues(name)
	}
}
