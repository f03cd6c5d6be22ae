//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/internal/history"
	"github.com/kmirror/kmirror/internal/httpapi"
)

// scaleTopics is the figure: a status page for 10,000 topics.
const scaleTopics = 10_000

// scaleSource is a worker with 10,000 topics in one mirror: every 97th
// failed, every 31st pending, the rest mirroring, each with 1 to 3
// partitions; its history is a real history.Sampler fed an hour of
// samples.
type scaleSource struct {
	sts     []connector.Status
	sampler *history.Sampler
	started time.Time
}

func scaleTopicName(i int) string { return fmt.Sprintf("events.topic-%05d", i) }

func newScaleSource() *scaleSource {
	topics := make([]connector.TopicStatus, scaleTopics)
	for i := range topics {
		t := connector.TopicStatus{SourceTopic: scaleTopicName(i), TargetTopic: "east." + scaleTopicName(i),
			Partitions: int32(1 + i%3), State: connector.StateMirroring, Lag: new(int64(i % 50))}
		switch {
		case i%97 == 0:
			t.State, t.Error = connector.StateFailed, fmt.Sprintf("partition 0: target refused records: MESSAGE_TOO_LARGE (topic %d)", i)
		case i%31 == 0:
			t.State = connector.StatePending
		}
		topics[i] = t
	}
	s := &scaleSource{
		sts: []connector.Status{{Name: "east-to-west", Source: "east", Target: "west", Ready: false, LastPassAt: time.Now(),
			Lag: new(int64(123_456)), Topics: topics}},
		sampler: history.NewSampler(history.Options{}),
		started: time.Now().Add(-26 * time.Hour),
	}
	// An hour of samples, 10 s apart: a copy that speeds up and a lag
	// that grows and drains.
	t0 := time.Now().Add(-time.Hour)
	feed := slices.Clone(s.sts)
	feed[0].Topics = slices.Clone(topics)
	for k := range 361 {
		for j := range feed[0].Topics {
			feed[0].Topics[j].Copied += int64(10 + k%60)
		}
		lag := int64(1000 * (k % 90))
		feed[0].Lag = &lag
		s.sampler.Sample(t0.Add(time.Duration(k)*history.DefaultInterval), feed)
	}
	return s
}

func (s *scaleSource) Statuses() []connector.Status      { return s.sts }
func (s *scaleSource) Topics() []connector.TopicMetadata { return nil }
func (s *scaleSource) Groups() []connector.GroupStatus   { return nil }
func (s *scaleSource) History() httpapi.History          { return s.sampler }
func (s *scaleSource) Clusters() []httpapi.ClusterStatus {
	return []httpapi.ClusterStatus{{Alias: "east", BootstrapServers: []string{"10.0.0.5:9092"}}, {Alias: "west", BootstrapServers: []string{"10.1.0.5:9092"}}}
}

func (s *scaleSource) Worker() httpapi.WorkerInfo {
	return httpapi.WorkerInfo{Version: "v0.0.0-scale", GoVersion: "go1.26", StartedAt: s.started, Config: "mirrors:\n  - name: east-to-west\n"}
}

// TopicPartitions: partition p of topic i is at source offset 1000*(p+1),
// copied to 1000*(p+1) - i%50 (its lag), the target 7 offsets behind.
func (s *scaleSource) TopicPartitions(mirror, topic string) ([]connector.PartitionStatus, bool) {
	for _, t := range s.sts[0].Topics {
		if mirror != s.sts[0].Name || t.SourceTopic != topic {
			continue
		}
		out := []connector.PartitionStatus{}
		for p := range t.Partitions {
			end := int64(1000 * (p + 1))
			out = append(out, connector.PartitionStatus{Partition: p, Here: true, SourceEnd: end, CopiedTo: end - *t.Lag,
				TargetEnd: end - *t.Lag - 7, Lag: t.Lag, Copied: end - *t.Lag, State: "copying"})
		}
		return out, true
	}
	return nil, false
}

// expected is what the page must list: the topics matching q (all when
// ""), failed first, then pending, then mirroring, by name.
func (s *scaleSource) expected(q string, state connector.State) []string {
	rank := map[connector.State]int{connector.StateFailed: 0, connector.StatePending: 1, connector.StateMirroring: 2}
	var ts []connector.TopicStatus
	for _, t := range s.sts[0].Topics {
		if strings.Contains(t.SourceTopic, q) && (state == "" || t.State == state) {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b connector.TopicStatus) int {
		if c := rank[a.State] - rank[b.State]; c != 0 {
			return c
		}
		return strings.Compare(a.SourceTopic, b.SourceTopic)
	})
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.SourceTopic
	}
	return out
}

func (s *scaleSource) count(state connector.State) int { return len(s.expected("", state)) }

// scaleView is what the test reads off the page.
type scaleView struct {
	FirstRowsMs, FCPMs float64
	Rows               []string
	States             []string
	Range              string
	Buttons            []string
	MirrorSparkPoints  []string
	MirrorSparkLines   int
	Clusters           []string
	Worker             string
	TopicView          bool
	Partitions         []string
	TopicSparkLines    int
	MirrorsHidden      bool
	Banner             string
	Width, ScrollWidth int
}

const readScale = `(() => {
  const fcp = performance.getEntriesByName("first-contentful-paint")[0];
  const card = document.querySelector('[data-mirror="east-to-west"]');
  const rows = [...document.querySelectorAll("#mirrors tr[data-topic]")];
  const tv = document.getElementById("topic-view");
  return {
    FirstRowsMs: Number(document.body.dataset.firstRowsMs || -1), FCPMs: fcp ? fcp.startTime : -1,
    Rows: rows.map((r) => r.dataset.topic), States: rows.map((r) => r.dataset.state),
    Range: card ? card.querySelector(".range").textContent : "",
    Buttons: card ? [...card.querySelectorAll("[data-filter]")].map((b) => b.textContent + (b.getAttribute("aria-pressed") === "true" ? "*" : "")) : [],
    MirrorSparkPoints: card ? [...card.querySelectorAll(".card-head svg.spark")].map((s) => s.dataset.points) : [],
    MirrorSparkLines: card ? card.querySelectorAll(".card-head svg.spark polyline").length : 0,
    Clusters: [...document.querySelectorAll("tr[data-cluster-state]")].map((r) => r.innerText.replace(/\s+/g, " ").trim()),
    Worker: (document.querySelector("[data-worker]") || {}).textContent || "",
    TopicView: !tv.hidden,
    Partitions: [...tv.querySelectorAll("tr[data-partition]")].map((r) => [...r.children].map((c) => c.innerText.trim()).join("|")),
    TopicSparkLines: tv.querySelectorAll("svg.spark polyline").length,
    MirrorsHidden: document.getElementById("mirrors").hidden,
    Banner: document.getElementById("banner").hidden ? "" : document.getElementById("banner").textContent,
    Width: window.innerWidth, ScrollWidth: document.documentElement.scrollWidth};
})()`

// TestStatusPage10kTopics: the status page of a worker with 10,000 topics,
// in headless Chromium. The real HTTP API (httpapi.Handler) serves a
// status source holding 10,000 topics and a real history.Sampler with an
// hour of samples. The first rows are on the page within 1 s of the
// navigation (measured in the page: performance.now() when the table
// first has rows); the page lists 100 topics, failed first, with the
// counts per state; its pages, search and state filter list what the API
// holds; a topic's view shows its partitions and history; every cluster
// is listed; no request asks for every topic; no console errors.
// Screenshots of the list, a search and a topic's view are artifacts.
func TestStatusPage10kTopics(t *testing.T) {
	t.Parallel()
	src := newScaleSource()
	var mu sync.Mutex
	var statusQueries []string
	api := httpapi.Protect(httpapi.Handler(prometheus.NewRegistry(), src, nil), httpapi.Security{LoopbackHosts: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/status" {
			mu.Lock()
			statusQueries = append(statusQueries, r.URL.RawQuery)
			mu.Unlock()
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ctx, consoleErrors := browser(t)
	// The browser starts on a blank page: the figure is the page's, not
	// Chromium's start.
	navigate(t, ctx, "about:blank")
	navigate(t, ctx, srv.URL+"/")

	var v scaleView
	read := func() (scaleView, error) {
		c, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return chromedp.Run(c, chromedp.Evaluate[scaleView](readScale))
	}
	until := func(desc string, ok func(scaleView) bool) {
		t.Helper()
		waitFor(t, 30*time.Second, desc, func() (bool, string) {
			var err error
			if v, err = read(); err != nil {
				return false, err.Error()
			}
			return ok(v), fmt.Sprintf("%+v", v)
		})
	}
	do := func(desc string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(c, actions...); err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
	}
	all := src.expected("", "")
	failed, pending, mirroring := src.count(connector.StateFailed), src.count(connector.StatePending), src.count(connector.StateMirroring)
	wantButtons := []string{fmt.Sprintf("all %s*", commas(scaleTopics)), fmt.Sprintf("failed %d", failed), fmt.Sprintf("pending %d", pending), "mirroring " + commas(mirroring)}

	until("the first page of topics, failed first, with the counts per state and the history", func(v scaleView) bool {
		return v.FirstRowsMs > 0 && slices.Equal(v.Rows, all[:100]) && slices.Equal(v.Buttons, wantButtons) &&
			v.Range == "topics 1–100 of "+commas(scaleTopics) && v.MirrorSparkLines == 2 && slices.Equal(v.MirrorSparkPoints, []string{"360", "360"}) &&
			len(v.Clusters) == 2 && strings.Contains(v.Worker, "v0.0.0-scale") && strings.Contains(v.Worker, "up 1d 2h")
	})
	t.Logf("first rows on the page %.0f ms after the navigation started (first contentful paint %.0f ms)", v.FirstRowsMs, v.FCPMs)
	if v.FirstRowsMs >= 1000 {
		t.Errorf("the first rows took %.0f ms, want under 1 s", v.FirstRowsMs)
	}
	if n := len(slices.DeleteFunc(slices.Clone(v.States), func(s string) bool { return s != "failed" })); n != min(failed, 100) || v.States[0] != "failed" {
		t.Errorf("the first page has %d failed topics (states %v), want the %d failed ones first", n, v.States, min(failed, 100))
	}
	if !slices.Equal(v.Clusters, []string{"east 10.0.0.5:9092 reachable", "west 10.1.0.5:9092 reachable"}) {
		t.Errorf("clusters %q, want both listed as reachable", v.Clusters)
	}
	screenshot(t, ctx, "list")

	do("turning the page", chromedp.Click(chromedp.CSS(`[data-mirror="east-to-west"] button[data-page="next"]`)))
	until("the second page", func(v scaleView) bool {
		return slices.Equal(v.Rows, all[100:200]) && v.Range == "topics 101–200 of "+commas(scaleTopics)
	})

	const q = "topic-042"
	want := src.expected(q, "")
	do("searching", chromedp.SendKeys(chromedp.CSS(`[data-mirror="east-to-west"] input[data-search]`), q))
	until("the topics matching "+q, func(v scaleView) bool {
		return slices.Equal(v.Rows, want) && v.Range == fmt.Sprintf("topics 1–%d of %d", len(want), len(want)) &&
			slices.Contains(v.Buttons, fmt.Sprintf("all %d*", len(want)))
	})
	screenshot(t, ctx, "search")

	do("filtering failed topics", chromedp.Click(chromedp.CSS(`[data-mirror="east-to-west"] button[data-filter="failed"]`)))
	wantFailed := src.expected(q, connector.StateFailed)
	until("the failed topics matching "+q, func(v scaleView) bool {
		return slices.Equal(v.Rows, wantFailed) && len(wantFailed) > 0 && !slices.ContainsFunc(v.States, func(s string) bool { return s != "failed" })
	})

	topic := wantFailed[0]
	do("opening "+topic, chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-topic=%q] a`, topic))))
	parts, _ := src.TopicPartitions("east-to-west", topic)
	until("the view of "+topic+" with its partitions", func(v scaleView) bool {
		if !v.TopicView || !v.MirrorsHidden || len(v.Partitions) != len(parts) || v.TopicSparkLines != 2 {
			return false
		}
		for i, p := range parts {
			// Partition|State|Source end|Copied to|Target end|Lag|Copied|Error
			row := fmt.Sprintf("%d|copying|%s|%s|%s|%d|", p.Partition, commas(int(p.SourceEnd)), commas(int(p.CopiedTo)), commas(int(p.TargetEnd)), *p.Lag)
			if !strings.HasPrefix(v.Partitions[i], row) {
				return false
			}
		}
		return true
	})
	screenshot(t, ctx, "topic")
	do("going back", chromedp.Click(chromedp.CSS(`#topic-view a.back`)))
	until("the list again, its search and filter kept", func(v scaleView) bool {
		return !v.TopicView && !v.MirrorsHidden && slices.Equal(v.Rows, wantFailed)
	})
	if v.Banner != "" || v.ScrollWidth > v.Width {
		t.Errorf("banner %q, scroll width %d of %d", v.Banner, v.ScrollWidth, v.Width)
	}

	mu.Lock()
	for _, sq := range statusQueries {
		if !strings.Contains(sq, "limit=100") {
			t.Errorf("the page asked for every topic: /api/v1/status?%s", sq)
		}
	}
	t.Logf("%d requests to /api/v1/status, each for a page of 100", len(statusQueries))
	mu.Unlock()
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// commas formats n as the page does (en-US: 10,000).
func commas(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
