//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/httpapi"
)

// TestStatusPage10kTopics: the status page of a real worker mirroring
// 10,000 single-partition topics on kfake, in headless Chromium (see
// checkScalePage): every 250th topic fails (its target takes no record
// over 20000 bytes, and the source has one of 60 KiB), every 10th else
// holds one record. A topic's view shows the real copy's
// offsets: source end 1, copied to 1, target end 1, lag 0.
func TestStatusPage10kTopics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, kfakeBackend{}, ClusterSpec{Brokers: 1})
	name := func(i int) string { return e.topic(fmt.Sprintf("ev-%05d", i)) }
	names := make([]string, scaleTopics)
	for i := range names {
		names[i] = name(i)
	}
	ctx := ctxTimeout(t, 90*time.Second)
	for batch := range slices.Chunk(names, 1000) {
		resp, err := e.srcAdm.CreateTopics(ctx, 1, -1, nil, batch...)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("creating %d topics: %v", len(batch), err)
		}
	}
	big := make([]byte, 60<<10)
	rand.Read(big) // incompressible
	var failing, records []*kgo.Record
	states := map[string]string{}
	for i, n := range names {
		states[n] = "mirroring"
		switch {
		case i%250 == 0:
			states[n] = "failed"
			failing = append(failing, &kgo.Record{Topic: n, Value: big})
		case i%10 == 0:
			records = append(records, &kgo.Record{Topic: n, Value: []byte("v-" + n)})
		}
	}
	var targets []string
	for _, r := range failing {
		targets = append(targets, "src."+r.Topic)
	}
	resp, err := e.dstAdm.CreateTopics(ctx, 1, -1, map[string]*string{"max.message.bytes": kadm.StringPtr("20000")}, targets...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("creating the failing topics' targets: %v", err)
	}
	produce(t, e.srcCl, append(failing, records...)...)

	cfg := e.defaultConfig()
	cfg.LogLevel = "info" // debug logs a line or more per topic
	// The failing targets' limit is the test's: no config sync.
	w := e.startWorker(e.writeExtConfig("", cfg, extConfig{MirrorRaw: "    sync: {topic_configs: {enabled: false}}"}))
	addr := w.httpAddr(t)
	wantCounts := map[string]int{"failed": scaleTopics / 250, "mirroring": scaleTopics - scaleTopics/250}
	e.waitFor(90*time.Second, "the worker to copy 10,000 topics, 40 failed", func() (bool, string) {
		code, body, err := httpGet(addr, "/api/v1/status?limit=1")
		if err != nil || code != 200 {
			return false, fmt.Sprintf("%d %s %v", code, body, err)
		}
		var st httpapi.StatusResponse
		if err := json.Unmarshal(body, &st); err != nil || len(st.Mirrors) != 1 {
			return false, fmt.Sprintf("%v: %.300s", err, body)
		}
		got := map[string]int{}
		for s, n := range st.Mirrors[0].StateCounts {
			got[string(s)] = n
		}
		return fmt.Sprint(got) == fmt.Sprint(wantCounts), fmt.Sprintf("state counts %v", got)
	})
	// The worker samples its mirror every 10 s: a sample once the copy
	// runs, for the page's sparklines.
	e.waitFor(30*time.Second, "a sample of the mirror in /api/v1/history", func() (bool, string) {
		code, body, err := httpGet(addr, "/api/v1/history")
		var hr httpapi.HistoryResponse
		if err == nil && code == 200 {
			err = json.Unmarshal(body, &hr)
		}
		if err != nil {
			return false, fmt.Sprintf("%d %v", code, err)
		}
		return len(hr.Mirrors[cfg.Name].Points) > 0, fmt.Sprintf("%.300s", body)
	})

	// What the page's first request costs the worker, for the log.
	var took []time.Duration
	for range 5 {
		start := time.Now()
		if code, body, err := httpGet(addr, "/api/v1/status?limit=100&order=failed"); err != nil || code != 200 {
			t.Fatalf("%d %.300s %v", code, body, err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("the worker answers the page's first request in %v (median of 5; %v to %v)", took[2], took[0], took[4])

	rank := map[string]int{"failed": 0, "pending": 1, "mirroring": 2}
	order := slices.Clone(names)
	slices.SortFunc(order, func(a, b string) int {
		if c := rank[states[a]] - rank[states[b]]; c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	c := scaleCase{url: "http://" + addr, mirror: cfg.Name, order: order, states: states, search: "ev-042",
		open: name(4210), partitions: []string{"0|copying|1|1|1|0|1|"}}
	c.first = func(v scaleView) bool {
		return len(v.Clusters) == 2 && strings.Contains(v.Worker, "kmirror ") && len(v.MirrorSparkPoints) == 2
	}
	c.topic = func(scaleView) bool { return true } // its history starts after a minute
	checkScalePage(t, c)

}
