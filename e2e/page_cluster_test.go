//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/internal/httpapi"
)

// fixedSource is a worker's state, fixed: what a cluster-mode worker with
// translated groups reports.
type fixedSource struct{}

func (fixedSource) Statuses() []connector.Status {
	lagUnknownSince := time.Now().Add(-90 * time.Second)
	return []connector.Status{{
		Name: "east-to-west", Source: "east", Target: "west", Ready: true, LastPassAt: time.Now(), LagUnknownSince: lagUnknownSince,
		Topics: []connector.TopicStatus{
			{SourceTopic: "orders", TargetTopic: "east.orders", Partitions: 8, State: connector.StateMirroring, Lag: new(int64(40))},
			// The source's end offsets of payments could not be read for
			// 90 s: its lag, the mirror's and slot 2's are unknown.
			{SourceTopic: "payments", TargetTopic: "east.payments", Partitions: 2, State: connector.StateMirroring, LagUnknownSince: lagUnknownSince},
		},
		Cluster: &connector.ClusterStatus{
			Member: "kmirror-a-7f3", Slots: 8, Owned: []int32{0, 1, 2, 3, 6}, ControlPlane: true,
			SlotLag: map[int32]*int64{0: new(int64(10)), 1: new(int64(0)), 2: nil, 3: new(int64(0)), 6: new(int64(0))},
			Workers: []connector.WorkerStatus{
				{Member: "kmirror-a-7f3", ClientID: "kmirror", Host: "/10.0.0.1", Slots: []int32{0, 1, 2, 3, 6}, ControlPlane: true},
				{Member: "kmirror-b-9c1", ClientID: "kmirror", Host: "/10.0.0.2", Slots: []int32{4, 5, 7}},
			},
			WorkersError: "",
		},
	}}
}

func (fixedSource) Topics() []connector.TopicMetadata { return nil }

// Worker: the page asks for it at every refresh.
func (fixedSource) Worker() httpapi.WorkerInfo {
	return httpapi.WorkerInfo{Version: "v0.0.0-test", GoVersion: "go1.26", StartedAt: time.Now().Add(-time.Hour), Config: "mirrors: []\n"}
}

// Clusters: the source answers, one of the target's brokers does not.
func (fixedSource) Clusters() []httpapi.ClusterStatus {
	return []httpapi.ClusterStatus{
		{Alias: "east", BootstrapServers: []string{"10.0.0.5:9092"}},
		{Alias: "west", BootstrapServers: []string{"10.1.0.5:9092", "10.1.0.6:9092"}, Failing: []httpapi.BrokerFault{{
			Address: "10.1.0.6:9092", Error: "dial tcp 10.1.0.6:9092: i/o timeout",
			Check: "nothing answered within dial_timeout (10s): is the broker up, the address right, a firewall in the way?",
			Since: time.Now().Add(-90 * time.Second), Failures: 7,
		}}},
	}
}

func (fixedSource) Groups() []connector.GroupStatus {
	return []connector.GroupStatus{{
		Mirror: "east-to-west", Group: "billing", State: connector.GroupPartial, LastSyncAt: time.Now(),
		Partitions: []connector.GroupPartition{
			{SourceTopic: "orders", TargetTopic: "east.orders", Partition: 0, SourceOffset: 120, TargetOffset: 117},
			{SourceTopic: "orders", TargetTopic: "east.orders", Partition: 1, SourceOffset: 5, TargetOffset: -1, Untranslatable: true, Reason: "older than the offset index"},
		},
	}}
}

// The mirror's lag and payments', unknown for 90 s, give or take the poll's
// delay; orders' is known.
var (
	lagUnknownRe = regexp.MustCompile(`lag unknown for 9\ds`)
	lagsRe       = regexp.MustCompile(`^40\|unknown for 9\ds$`)
)

// TestStatusPageCluster: the page renders a cluster-mode worker (its
// workers, their slots, the control plane), a lag that is unknown as
// unknown (not 0), a group's translation per partition and the broker the
// worker cannot reach (its address on one line), on a desktop and at a
// phone's width, without console errors.
// The API is served from fixed state: the page is what is tested.
func TestStatusPageCluster(t *testing.T) {
	t.Parallel()
	ctx, consoleErrors := browser(t)
	srv := httptest.NewServer(httpapi.Protect(httpapi.Handler(prometheus.NewRegistry(), fixedSource{}, nil), httpapi.Security{LoopbackHosts: true}))
	t.Cleanup(srv.Close)
	navigate(t, ctx, srv.URL+"/")
	type clusterView struct {
		Cluster, Workers, Groups, Brokers, Head, Lags string
		AddressLines, Width, ScrollWidth              int
	}
	const read = `(() => {
  const card = document.querySelector('[data-mirror="east-to-west"]');
  const cluster = card ? card.querySelector(".cluster") : null;
  const address = document.querySelector("tr[data-broker] .addr");
  return {Cluster: cluster ? cluster.innerText : "",
    Head: card ? card.querySelector(".card-head").innerText : "",
    Lags: card ? [...card.querySelectorAll('tr[data-topic] td[data-label="Lag"]')].map((c) => c.innerText).join("|") : "",
    AddressLines: address ? address.getClientRects().length : 0,
    Workers: cluster ? [...cluster.querySelectorAll("tbody tr")].map((r) => [...r.children].map((c) => c.innerText).join("|")).join("\n") : "",
    Groups: [...document.querySelectorAll("tr[data-group]")].map((r) => r.textContent).join("\n"),
    Brokers: document.getElementById("clusters-section").hidden ? "" :
      [...document.querySelectorAll("tr[data-broker]")].map((r) => [...r.children].map((c) => c.innerText).join("|")).join("\n"),
    Width: window.innerWidth, ScrollWidth: document.documentElement.scrollWidth};
})()`
	check := func(desc string) {
		t.Helper()
		waitFor(t, 30*time.Second, desc, func() (bool, string) {
			c, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			v, err := chromedp.Run(c, chromedp.Evaluate[clusterView](read))
			if err != nil {
				return false, err.Error()
			}
			ok := strings.Contains(v.Cluster, "Cluster: 8 slots; this worker kmirror-a-7f3 owns 0-3 6; control plane: yes") &&
				strings.Contains(v.Workers, "kmirror-a-7f3|kmirror|/10.0.0.1|0-3 6|yes") &&
				strings.Contains(v.Workers, "kmirror-b-9c1|kmirror|/10.0.0.2|4-5 7|") &&
				strings.Contains(v.Cluster, "0: 10, 1: 0, 2: ?, 3: 0, 6: 0") &&
				lagUnknownRe.MatchString(v.Head) && lagsRe.MatchString(v.Lags) &&
				v.AddressLines == 1 && // "10.1.0.6:9092" on one line, however narrow its column
				strings.Contains(v.Groups, "billing") && strings.Contains(v.Groups, "partial") &&
				strings.Contains(v.Groups, "orders/0: 120 → 117 on east.orders") &&
				strings.Contains(v.Groups, "orders/1: 5 → untranslatable (older than the offset index)") &&
				strings.Contains(v.Brokers, "west|10.1.0.6:9092|") && // then "90s ago", give or take the poll's delay
				strings.Contains(v.Brokers, "s ago|7|dial tcp 10.1.0.6:9092: i/o timeout|nothing answered within dial_timeout") &&
				!strings.Contains(v.Brokers, "east") &&
				v.ScrollWidth <= v.Width
			return ok, fmt.Sprintf("%+v", v)
		})
	}
	check("the page to show the workers, their slots and the group's partitions")
	screenshot(t, ctx, "desktop")
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(c, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	check("the same at a phone's width, with nothing wider than the screen")
	screenshot(t, ctx, "phone")
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
