// Package httpapi serves kmirror's HTTP endpoints: Prometheus metrics,
// liveness, readiness, the JSON status API and the status page (static
// files embedded in the binary that poll the JSON API).
package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kmirror/kmirror/connector"
)

// StatusSource reports the state of every mirror in the process.
type StatusSource interface {
	Statuses() []connector.Status
	Topics() []connector.TopicMetadata
	Groups() []connector.GroupStatus
}

// GroupsResponse is the body of GET /api/v1/groups.
type GroupsResponse struct {
	Groups []connector.GroupStatus `json:"groups"`
}

// TopicsResponse is the body of GET /api/v1/topics.
type TopicsResponse struct {
	Topics []connector.TopicMetadata `json:"topics"`
}

// StatusResponse is the body of GET /api/v1/status.
type StatusResponse struct {
	Ready   bool               `json:"ready"`
	Mirrors []connector.Status `json:"mirrors"`
	// Clusters are the configured clusters, when the source watches
	// their brokers (ClusterSource).
	Clusters []ClusterStatus `json:"clusters,omitempty"`
}

// ClusterSource is implemented by a StatusSource that watches the
// clusters' brokers; GET /api/v1/status lists them.
type ClusterSource interface {
	Clusters() []ClusterStatus
}

// ClusterStatus is one configured cluster as kmirror reaches it.
type ClusterStatus struct {
	Alias            string   `json:"alias"`
	BootstrapServers []string `json:"bootstrap_servers"`
	// Failing are the brokers whose last connection attempt, or last
	// request, failed; empty when every broker tried answered.
	Failing []BrokerFault `json:"failing"`
}

// BrokerFault is a broker that cannot be reached, or stopped answering.
type BrokerFault struct {
	Address string `json:"address"`
	Error   string `json:"error"`
	// Check says what to look at.
	Check    string    `json:"check"`
	Since    time.Time `json:"since"`
	Failures int       `json:"failures"`
}

// ChangeSource is implemented by a StatusSource that keeps a history of
// the replicated sets; GET /api/v1/changes serves it.
type ChangeSource interface {
	// Changes returns the recent changes, newest first.
	Changes() []Change
}

// Kinds of Change.
const (
	ChangeInitial      = "initial" // the first set after a start
	ChangeTopicAdded   = "topic_added"
	ChangeTopicRemoved = "topic_removed"
	ChangeTopicChanged = "topic_changed" // state, partitions, target or metadata
	ChangeGroupAdded   = "group_added"
	ChangeGroupRemoved = "group_removed"
)

// Change is one change to a mirror's replicated set, as the listeners are
// told about it.
type Change struct {
	Time   time.Time `json:"time"`
	Mirror string    `json:"mirror"`
	Kind   string    `json:"kind"`
	// Name is the source topic or the group; empty for ChangeInitial.
	Name string `json:"name,omitempty"`
	// Target is the target topic.
	Target string `json:"target,omitempty"`
	// Detail says what changed, for people.
	Detail string `json:"detail,omitempty"`
}

// ChangesResponse is the body of GET /api/v1/changes.
type ChangesResponse struct {
	Changes []Change `json:"changes"`
}

// ExtensionSource is implemented by a StatusSource that runs plugins and
// listeners; GET /api/v1/extensions serves their health.
type ExtensionSource interface {
	Extensions() ExtensionsResponse
}

// ExtensionsResponse is the body of GET /api/v1/extensions.
type ExtensionsResponse struct {
	Plugins   []PluginStatus   `json:"plugins"`
	Listeners []ListenerStatus `json:"listeners"`
}

// PluginStatus is one plugin process (a filter, or a plugin listener).
type PluginStatus struct {
	Name string `json:"name"`
	// Up is true while its process runs; a dead one is restarted.
	Up       bool   `json:"up"`
	Pid      int    `json:"pid,omitempty"`
	Restarts uint64 `json:"restarts"`
	// Version is what the plugin reported at its first start.
	Version string `json:"version,omitempty"`
}

// ListenerStatus is one configured listener, with the outcome of the calls
// made to it since the start.
type ListenerStatus struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Mirrors []string `json:"mirrors"`
	Calls   uint64   `json:"calls"`
	Errors  uint64   `json:"errors"`
	// Healthy is false while its last call failed (it is retried).
	Healthy bool `json:"healthy"`
	// LastCallAt and LastErrorAt are absent before the first call, and
	// the first failure ("0001-01-01T00:00:00Z" read as a failure).
	LastCallAt  time.Time `json:"last_call_at,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// CountersResponse is the body of GET /api/v1/counters: each mirror's
// copied records and bytes since the start (kmirror_replication_records_total
// and kmirror_replication_bytes_total), from which a client that polls
// computes the throughput.
type CountersResponse struct {
	Time    time.Time                 `json:"time"`
	Mirrors map[string]MirrorCounters `json:"mirrors"`
}

// MirrorCounters are one mirror's counters.
type MirrorCounters struct {
	Records float64 `json:"records"`
	Bytes   float64 `json:"bytes"`
}

// counters reads CountersResponse from the metrics.
func counters(g prometheus.Gatherer) (CountersResponse, error) {
	resp := CountersResponse{Time: time.Now(), Mirrors: map[string]MirrorCounters{}}
	mfs, err := g.Gather()
	if err != nil && len(mfs) == 0 {
		return resp, err
	}
	for _, mf := range mfs {
		name := mf.GetName()
		if name != "kmirror_replication_records_total" && name != "kmirror_replication_bytes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var mirror string
			for _, l := range m.GetLabel() {
				if l.GetName() == "mirror" {
					mirror = l.GetValue()
				}
			}
			c := resp.Mirrors[mirror]
			if name == "kmirror_replication_records_total" {
				c.Records += m.GetCounter().GetValue()
			} else {
				c.Bytes += m.GetCounter().GetValue()
			}
			resp.Mirrors[mirror] = c
		}
	}
	return resp, nil
}

// Reloader re-reads the configuration and returns the keys whose change
// takes effect only at a restart; nil disables POST /api/v1/reload.
type Reloader func(ctx context.Context) (restartRequired []string, err error)

// ReloadResponse is the body of a successful POST /api/v1/reload.
type ReloadResponse struct {
	Status string `json:"status"` // "reloaded"
	// RestartRequired are the changed keys the reload could not apply
	// (e.g. clusters.west.bootstrap_servers): they take effect at the
	// next restart. Empty when the running config is the file's.
	RestartRequired []string `json:"restart_required"`
}

// Handler returns the mux for every endpoint.
func Handler(gatherer prometheus.Gatherer, src StatusSource, reload Reloader) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/reload", func(w http.ResponseWriter, r *http.Request) {
		if reload == nil {
			writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "reloading is not enabled"})
			return
		}
		restart, err := reload(r.Context())
		if err != nil {
			// The running config stays; say why the new one was refused.
			writeJSON(w, http.StatusBadRequest, map[string]string{"status": "rejected", "error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, ReloadResponse{Status: "reloaded", RestartRequired: append([]string{}, restart...)})
	})
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
	// ?mirror=NAME keeps one mirror's topics; every ?label=KEY=VALUE must
	// match (an exact value; KEY alone matches any value).
	mux.HandleFunc("GET /api/v1/topics", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		type match struct {
			key, value string
			any        bool
		}
		var labels []match
		for _, l := range q["label"] {
			k, v, ok := strings.Cut(l, "=")
			if k == "" {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "label must be KEY=VALUE or KEY, got " + strconv.Quote(l)})
				return
			}
			labels = append(labels, match{key: k, value: v, any: !ok})
		}
		resp := TopicsResponse{Topics: []connector.TopicMetadata{}}
	topics:
		for _, t := range src.Topics() {
			if m := q.Get("mirror"); m != "" && t.Mirror != m {
				continue
			}
			for _, l := range labels {
				v, ok := t.Metadata[l.key]
				if !ok || (!l.any && v != l.value) {
					continue topics
				}
			}
			resp.Topics = append(resp.Topics, t)
		}
		writeJSON(w, http.StatusOK, resp)
	})
	// ?mirror=NAME keeps one mirror's groups.
	mux.HandleFunc("GET /api/v1/groups", func(w http.ResponseWriter, r *http.Request) {
		resp := GroupsResponse{Groups: []connector.GroupStatus{}}
		for _, g := range src.Groups() {
			if m := r.URL.Query().Get("mirror"); m == "" || g.Mirror == m {
				resp.Groups = append(resp.Groups, g)
			}
		}
		writeJSON(w, http.StatusOK, resp)
	})
	// ?limit=N keeps the N newest (default 100); ?mirror=NAME one
	// mirror's.
	mux.HandleFunc("GET /api/v1/changes", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit := 100
		if l := q.Get("limit"); l != "" {
			n, err := positiveInt("limit", l)
			if err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
				return
			}
			limit = n
		}
		resp := ChangesResponse{Changes: []Change{}}
		if cs, ok := src.(ChangeSource); ok {
			for _, c := range cs.Changes() {
				if len(resp.Changes) == limit {
					break
				}
				if m := q.Get("mirror"); m == "" || c.Mirror == m {
					resp.Changes = append(resp.Changes, c)
				}
			}
		}
		writeJSON(w, http.StatusOK, resp)
	})
	mux.HandleFunc("GET /api/v1/extensions", func(w http.ResponseWriter, _ *http.Request) {
		resp := ExtensionsResponse{Plugins: []PluginStatus{}, Listeners: []ListenerStatus{}}
		if es, ok := src.(ExtensionSource); ok {
			got := es.Extensions()
			resp.Plugins = append(resp.Plugins, got.Plugins...)
			resp.Listeners = append(resp.Listeners, got.Listeners...)
		}
		writeJSON(w, http.StatusOK, resp)
	})
	mux.HandleFunc("GET /api/v1/counters", func(w http.ResponseWriter, _ *http.Request) {
		resp, err := counters(gatherer)
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "gathering metrics: " + err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, resp)
	})
	handleViews(mux, src)
	page := pageHandler()
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /ui/", page)
	mux.Handle("GET /favicon.ico", page)
	// ?mirror, ?topic, ?state, ?limit and ?after choose the mirrors and
	// topics (statusquery.go); ready is the whole worker's either way.
	mux.HandleFunc("GET /api/v1/status", func(w http.ResponseWriter, r *http.Request) {
		sq, err := parseStatusQuery(r.URL.Query())
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		sts := src.Statuses()
		resp := StatusResponse{Ready: true, Mirrors: sq.apply(sts)}
		for _, st := range sts {
			resp.Ready = resp.Ready && st.Ready
		}
		if cs, ok := src.(ClusterSource); ok {
			resp.Clusters = cs.Clusters()
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
