package httpapi

import (
	"net/http"
	"time"

	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/internal/history"
)

// The endpoints behind the status page's views beyond the topic list: one
// topic with its partitions, the last hour's throughput and lag, and the
// worker itself.

// PartitionSource is implemented by a StatusSource that can list a
// topic's partitions; GET /api/v1/mirrors/{mirror}/topics/{topic} shows
// them.
type PartitionSource interface {
	// TopicPartitions returns the partitions of a mirror's selected
	// source topic, false when there is no such mirror or topic.
	TopicPartitions(mirror, topic string) ([]connector.PartitionStatus, bool)
}

// History is the recent throughput and lag of mirrors and topics
// (history.Sampler).
type History interface {
	Mirror(name string) (history.Series, bool)
	Topic(mirror, topic string) (history.Series, bool)
}

// HistorySource is implemented by a StatusSource that samples its
// mirrors; GET /api/v1/history serves it.
type HistorySource interface {
	History() History
}

// WorkerSource is implemented by a StatusSource that knows its process;
// GET /api/v1/worker serves it.
type WorkerSource interface {
	Worker() WorkerInfo
}

// WorkerInfo is the body of GET /api/v1/worker.
type WorkerInfo struct {
	Version   string    `json:"version"`
	GoVersion string    `json:"go_version"`
	StartedAt time.Time `json:"started_at"`
	// UptimeSeconds is set by the handler, from StartedAt.
	UptimeSeconds float64 `json:"uptime_seconds"`
	// Config is the configuration in force as YAML, every secret (a
	// password, a token, a secret-looking setting of a plugin or a
	// listener) replaced by "<secret>"; files are named, never read.
	Config string `json:"config"`
}

// TopicDetail is the body of GET /api/v1/mirrors/{mirror}/topics/{topic}.
type TopicDetail struct {
	Mirror string                `json:"mirror"`
	Topic  connector.TopicStatus `json:"topic"`
	// Partitions are empty when the source cannot list them.
	Partitions []connector.PartitionStatus `json:"partitions"`
	// History is the topic's last hour, when the source samples it.
	History *history.Series `json:"history,omitempty"`
}

// HistoryResponse is the body of GET /api/v1/history: each mirror's
// samples, by name.
type HistoryResponse struct {
	Mirrors map[string]history.Series `json:"mirrors"`
}

func handleViews(mux *http.ServeMux, src StatusSource) {
	mux.HandleFunc("GET /api/v1/mirrors/{mirror}/topics/{topic}", func(w http.ResponseWriter, r *http.Request) {
		mirror, topic := r.PathValue("mirror"), r.PathValue("topic")
		resp, ok := topicDetail(src, mirror, topic)
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "mirror " + mirror + " has no topic " + topic})
			return
		}
		writeJSON(w, http.StatusOK, resp)
	})
	// ?mirror=NAME keeps one mirror's.
	mux.HandleFunc("GET /api/v1/history", func(w http.ResponseWriter, r *http.Request) {
		resp := HistoryResponse{Mirrors: map[string]history.Series{}}
		if hs, ok := src.(HistorySource); ok {
			h := hs.History()
			for _, st := range src.Statuses() {
				if m := r.URL.Query().Get("mirror"); m != "" && st.Name != m {
					continue
				}
				if s, ok := h.Mirror(st.Name); ok {
					resp.Mirrors[st.Name] = s
				}
			}
		}
		writeJSON(w, http.StatusOK, resp)
	})
	mux.HandleFunc("GET /api/v1/worker", func(w http.ResponseWriter, _ *http.Request) {
		ws, ok := src.(WorkerSource)
		if !ok {
			writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "this server does not describe its worker"})
			return
		}
		info := ws.Worker()
		if !info.StartedAt.IsZero() {
			info.UptimeSeconds = time.Since(info.StartedAt).Seconds()
		}
		writeJSON(w, http.StatusOK, info)
	})
}

func topicDetail(src StatusSource, mirror, topic string) (TopicDetail, bool) {
	resp := TopicDetail{Mirror: mirror, Partitions: []connector.PartitionStatus{}}
	found := false
	for _, st := range src.Statuses() {
		if st.Name != mirror {
			continue
		}
		for _, t := range st.Topics {
			if t.SourceTopic == topic {
				resp.Topic, found = t, true
				break
			}
		}
	}
	if !found {
		return resp, false
	}
	if ps, ok := src.(PartitionSource); ok {
		if parts, ok := ps.TopicPartitions(mirror, topic); ok {
			resp.Partitions = append(resp.Partitions, parts...)
		}
	}
	if hs, ok := src.(HistorySource); ok {
		if s, ok := hs.History().Topic(mirror, topic); ok {
			resp.History = &s
		}
	}
	return resp, true
}
