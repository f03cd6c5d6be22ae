//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// statusDoc is GET /api/v1/status.
type statusDoc struct {
	Mirrors []struct {
		Name   string `json:"name"`
		Source string `json:"source"`
		Target string `json:"target"`
		Ready  bool   `json:"ready"`
		Topics []struct {
			SourceTopic string `json:"source_topic"`
			TargetTopic string `json:"target_topic"`
			Partitions  int    `json:"partitions"`
			State       string `json:"state"`
			Lag         *int64 `json:"lag"` // null: unknown
			Error       string `json:"error"`
			SourceGaps  []struct {
				Partition int32  `json:"partition"`
				From      int64  `json:"from"`
				To        int64  `json:"to"`
				Records   int64  `json:"records"`
				State     string `json:"state"`
			} `json:"source_gaps"`
		} `json:"topics"`
	} `json:"mirrors"`
}

// TestHTTPEndpoints: /healthz, /readyz, /api/v1/status and /metrics of a
// running worker; SIGINT stops it with exit code 0.
func TestHTTPEndpoints(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		orders := e.topic("orders")
		createTopic(t, e.srcCl, orders, 3, nil)
		recs, want := seqRecords(orders, "orders", 3, 20)
		produce(t, e.srcCl, recs...)

		cfg := e.defaultConfig()
		w := e.startWorker(e.writeConfig(cfg))
		addr := w.httpAddr(t)
		t.Logf("kmirror HTTP server at %s", addr)

		e.waitFor(30*time.Second, "/healthz to answer 200", func() (bool, string) {
			code, body, err := httpGet(addr, "/healthz")
			if err != nil {
				return false, err.Error()
			}
			return code == 200, fmt.Sprintf("status %d: %s", code, body)
		})

		e.waitTargetValues(45*time.Second, "src."+orders, want)

		e.waitFor(30*time.Second, "/readyz to answer 200", func() (bool, string) {
			code, body, err := httpGet(addr, "/readyz")
			if err != nil {
				return false, err.Error()
			}
			return code == 200, fmt.Sprintf("status %d: %s", code, body)
		})

		e.waitFor(30*time.Second, "/api/v1/status to show "+cfg.Name+" ready, mirroring src."+orders+" with 3 partitions and lag 0", func() (bool, string) {
			code, body, err := httpGet(addr, "/api/v1/status")
			if err != nil {
				return false, err.Error()
			}
			if code != 200 {
				return false, fmt.Sprintf("status %d: %s", code, body)
			}
			var doc statusDoc
			if err := json.Unmarshal(body, &doc); err != nil {
				return false, fmt.Sprintf("decoding %s: %v", body, err)
			}
			if len(doc.Mirrors) != 1 {
				return false, fmt.Sprintf("want 1 mirror, got %s", body)
			}
			m := doc.Mirrors[0]
			if m.Name != cfg.Name || m.Source != "src" || m.Target != "dst" || !m.Ready {
				return false, fmt.Sprintf("want mirror %s src->dst ready, got %s", cfg.Name, body)
			}
			for _, tp := range m.Topics {
				if tp.SourceTopic != orders {
					continue
				}
				if tp.TargetTopic != "src."+orders || tp.Partitions != 3 || tp.State != "mirroring" || tp.Lag == nil || *tp.Lag != 0 || tp.Error != "" {
					return false, fmt.Sprintf("want %s -> src.%s, 3 partitions, mirroring, lag 0, no error; got %s", orders, orders, body)
				}
				return true, ""
			}
			return false, fmt.Sprintf("topic %s not listed: %s", orders, body)
		})

		e.waitFor(30*time.Second, `/metrics kmirror_replication_records_total{mirror="`+cfg.Name+`"} >= 60`, func() (bool, string) {
			code, body, err := httpGet(addr, "/metrics")
			if err != nil {
				return false, err.Error()
			}
			if code != 200 {
				return false, fmt.Sprintf("status %d", code)
			}
			sum, n := sumMetric(string(body), "kmirror_replication_records_total", "mirror", cfg.Name)
			if n == 0 {
				return false, `no kmirror_replication_records_total series with mirror="` + cfg.Name + `"`
			}
			return sum >= 60, fmt.Sprintf("sum over %d series = %v", n, sum)
		})

		code, took := w.stop(t, syscall.SIGINT)
		if code != 0 {
			t.Errorf("kmirror exited with code %d after SIGINT, want 0", code)
		}
		t.Logf("exited %v after SIGINT", took.Round(time.Millisecond))
	})
}

// sumMetric sums the samples of metric (Prometheus text format) whose
// labels include label="value", and returns the sum and the series count.
func sumMetric(text, metric, label, value string) (float64, int) {
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(metric) + `(\{[^}]*\})?\s+(\S+)`)
	want := label + `="` + value + `"`
	var sum float64
	n := 0
	for _, line := range strings.Split(text, "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil || !(strings.Contains(m[1], "{"+want) || strings.Contains(m[1], ","+want)) {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			continue
		}
		sum += v
		n++
	}
	return sum, n
}
