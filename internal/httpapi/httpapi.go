// Package httpapi serves kmirror's HTTP endpoints: Prometheus metrics,
// liveness, readiness and the JSON status API.
package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kmirror/kmirror/connector"
)

// StatusSource reports the state of every mirror in the process.
type StatusSource interface {
	Statuses() []connector.Status
}

// StatusResponse is the body of GET /api/v1/status.
type StatusResponse struct {
	Ready   bool               `json:"ready"`
	Mirrors []connector.Status `json:"mirrors"`
}

// Handler returns the mux for every endpoint.
func Handler(gatherer prometheus.Gatherer, src StatusSource) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		for _, st := range src.Statuses() {
			if !st.Ready {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte("not ready: mirror " + st.Name + notReadyReason(st) + "\n"))
				return
			}
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("GET /api/v1/status", func(w http.ResponseWriter, _ *http.Request) {
		sts := src.Statuses()
		resp := StatusResponse{Ready: true, Mirrors: sts}
		for _, st := range sts {
			resp.Ready = resp.Ready && st.Ready
		}
		writeJSON(w, http.StatusOK, resp)
	})
	return mux
}

func notReadyReason(st connector.Status) string {
	if st.LastPassError != "" {
		return ": " + st.LastPassError
	}
	if st.LastPassAt.IsZero() {
		return ": starting"
	}
	for _, t := range st.Topics {
		if t.State != connector.StateMirroring {
			reason := ": topic " + t.SourceTopic + " is " + string(t.State)
			if t.Error != "" {
				reason += " (" + t.Error + ")"
			}
			return reason
		}
	}
	return ""
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
