package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/listeners"
)

type postedAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
}

func posted(t *testing.T, rec *recorder) []postedAlert {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var all []postedAlert
	for i, b := range rec.bodies {
		if rec.paths[i] != "POST /api/v2/alerts" {
			t.Errorf("request %d: %s, want POST /api/v2/alerts", i, rec.paths[i])
		}
		var as []postedAlert
		if err := json.Unmarshal(b, &as); err != nil {
			t.Fatalf("body %d is not a JSON array of alerts: %v\n%s", i, err, b)
		}
		all = append(all, as...)
	}
	return all
}

func TestAlertmanagerPayload(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	a, err := NewAlertmanager(AlertmanagerOptions{URL: srv.URL + "/", GeneratorURL: "http://grafana.example/d/kmirror",
		Labels: map[string]string{"cluster": "eu1"}, InitialAlerts: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	a.now = func() time.Time { return now }
	ctx := context.Background()
	if err := a.TopicsChanged(ctx, sample()); err != nil {
		t.Fatal(err)
	}
	alerts := posted(t, rec)
	if len(alerts) != 3 {
		t.Fatalf("%d alerts, want 3 (added, removed, changed)", len(alerts))
	}
	want := []postedAlert{{
		Labels: map[string]string{"alertname": "KmirrorReplicatedSetChanged", "mirror": "east-to-west", "topic": "orders",
			"change": "added", "severity": "info", "cluster": "eu1"},
		Annotations: map[string]string{
			"summary":     "Mirror east-to-west: topic orders is now mirrored",
			"description": "Now mirrored: orders -> east.orders, 3 partitions, state mirroring",
			"sequence":    "7",
		},
		StartsAt: now, EndsAt: now.Add(5 * time.Minute), GeneratorURL: "http://grafana.example/d/kmirror",
	}}
	if !reflect.DeepEqual(alerts[:1], want) {
		t.Errorf("added alert:\n got %+v\nwant %+v", alerts[0], want[0])
	}
	if l := alerts[1].Labels; l["change"] != "removed" || l["topic"] != "gone" {
		t.Errorf("removed alert: %+v", alerts[1])
	}
	if d := alerts[1].Annotations["description"]; d != "No longer mirrored: gone -> east.gone, 1 partitions, state mirroring" {
		t.Errorf("removed description %q", d)
	}
	if l := alerts[2].Labels; l["change"] != "changed" || l["topic"] != "payments" {
		t.Errorf("changed alert: %+v", alerts[2])
	}
	if d := alerts[2].Annotations["description"]; d != "Changed: payments -> east.payments, 6 partitions, state pending" {
		t.Errorf("changed description %q", d)
	}

	// Groups: KmirrorGroupSetChanged with a group label.
	rec.mu.Lock()
	rec.bodies, rec.paths, rec.headers = nil, nil, nil
	rec.mu.Unlock()
	if err := a.GroupsChanged(ctx, sampleGroups()); err != nil {
		t.Fatal(err)
	}
	alerts = posted(t, rec)
	if len(alerts) != 2 {
		t.Fatalf("%d group alerts, want 2", len(alerts))
	}
	wantLabels := map[string]string{"alertname": "KmirrorGroupSetChanged", "mirror": "east-to-west", "group": "billing",
		"change": "added", "severity": "info", "cluster": "eu1"}
	if !reflect.DeepEqual(alerts[0].Labels, wantLabels) {
		t.Errorf("group labels %v, want %v", alerts[0].Labels, wantLabels)
	}
	if alerts[0].Annotations["summary"] != "Mirror east-to-west: consumer group billing added" ||
		alerts[0].Annotations["description"] == "" || alerts[1].Labels["change"] != "removed" {
		t.Errorf("group alerts: %+v", alerts)
	}
}

// By default the first call per mirror (the full state at start) sends
// nothing; the next ones do. A call without a diff sends nothing.
func TestAlertmanagerInitialAndEmpty(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	a := &Alertmanager{}
	if err := a.Configure(context.Background(), map[string]string{"url": srv.URL, "severity": "warning", "resolve_after": "1h"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := listeners.TopicsChange{Mirror: "m", Sequence: 1, Topics: sample().Topics, Added: sample().Topics}
	if err := a.TopicsChanged(ctx, start); err != nil {
		t.Fatal(err)
	}
	if err := a.GroupsChanged(ctx, listeners.GroupsChange{Mirror: "m", Sequence: 1, Added: sampleGroups().Groups}); err != nil {
		t.Fatal(err)
	}
	if rec.count() != 0 {
		t.Fatalf("the initial state sent %d requests", rec.count())
	}
	if err := a.TopicsChanged(ctx, listeners.TopicsChange{Mirror: "m", Sequence: 2, Topics: sample().Topics}); err != nil {
		t.Fatal(err)
	}
	if rec.count() != 0 {
		t.Fatalf("an empty diff sent %d requests", rec.count())
	}
	added := listeners.Topic{Upstream: "new", Downstream: "new", Partitions: 1, State: "pending"}
	if err := a.TopicsChanged(ctx, listeners.TopicsChange{Mirror: "m", Sequence: 3, Added: []listeners.Topic{added}}); err != nil {
		t.Fatal(err)
	}
	alerts := posted(t, rec)
	if len(alerts) != 1 || alerts[0].Labels["topic"] != "new" || alerts[0].Labels["severity"] != "warning" ||
		alerts[0].EndsAt.Sub(alerts[0].StartsAt) != time.Hour || alerts[0].GeneratorURL != "" {
		t.Fatalf("alerts: %+v", alerts)
	}
	// Another mirror's first call is skipped too.
	if err := a.TopicsChanged(ctx, listeners.TopicsChange{Mirror: "m2", Sequence: 1, Added: []listeners.Topic{added}}); err != nil {
		t.Fatal(err)
	}
	if rec.count() != 1 {
		t.Fatalf("m2's initial state was sent")
	}
}

func TestAlertmanagerBatchesAndErrors(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	a, _ := NewAlertmanager(AlertmanagerOptions{URL: srv.URL + "/api/v2/alerts", InitialAlerts: true, MaxAlerts: 5000})
	var c listeners.TopicsChange
	c.Mirror = "m"
	for i := range 1200 {
		c.Added = append(c.Added, listeners.Topic{Upstream: fmt.Sprintf("t%d", i)})
	}
	if err := a.TopicsChanged(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if rec.count() != 3 || len(posted(t, rec)) != 1200 {
		t.Fatalf("%d requests, want 3 batches of at most 500", rec.count())
	}

	bad := &recorder{plan: []int{http.StatusBadRequest}, reply: `"start time must be before end time"`}
	srv2 := httptest.NewServer(bad)
	defer srv2.Close()
	a2, _ := NewAlertmanager(AlertmanagerOptions{URL: srv2.URL, InitialAlerts: true})
	err := a2.TopicsChanged(context.Background(), sample())
	var se *StatusError
	if !errors.Is(err, ErrPermanent) || !errors.As(err, &se) || se.StatusCode != 400 || bad.count() != 1 {
		t.Fatalf("400: %v (%d requests)", err, bad.count())
	}
}

// TestAlertmanagerSummarizesLargeChanges: a change with more topics than
// max_alerts (the first start of a large mirror with initial_alerts) sends
// one alert per kind of change, with the count and the first names, rather
// than one alert per topic.
func TestAlertmanagerSummarizesLargeChanges(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	a, _ := NewAlertmanager(AlertmanagerOptions{URL: srv.URL, InitialAlerts: true})
	var c listeners.TopicsChange
	c.Mirror, c.Sequence = "m", 1
	for i := range 100000 {
		c.Added = append(c.Added, listeners.Topic{Upstream: fmt.Sprintf("t%06d", i)})
	}
	c.Removed = []listeners.Topic{{Upstream: "old"}}
	if err := a.TopicsChanged(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	alerts := posted(t, rec)
	if rec.count() != 1 || len(alerts) != 2 {
		t.Fatalf("%d requests with %d alerts, want one request with a summary alert per kind of change (2)", rec.count(), len(alerts))
	}
	byChange := map[string]postedAlert{}
	for _, al := range alerts {
		byChange[al.Labels["change"]] = al
	}
	added := byChange["added"]
	if added.Labels["alertname"] != AlertTopicSetChanged || added.Labels["topic"] != "*" || added.Labels["mirror"] != "m" ||
		added.Annotations["count"] != "100000" ||
		!strings.Contains(added.Annotations["description"], "t000000, t000001") ||
		!strings.Contains(added.Annotations["description"], "and 99980 more") {
		t.Errorf("added summary = %+v", added)
	}
	if removed := byChange["removed"]; removed.Annotations["count"] != "1" || !strings.Contains(removed.Annotations["description"], "old") {
		t.Errorf("removed summary = %+v", removed)
	}

	// At the cap, one alert per topic as before.
	rec2 := &recorder{}
	srv2 := httptest.NewServer(rec2)
	defer srv2.Close()
	a2, _ := NewAlertmanager(AlertmanagerOptions{URL: srv2.URL, InitialAlerts: true, MaxAlerts: 3})
	small := listeners.TopicsChange{Mirror: "m", Added: []listeners.Topic{{Upstream: "a"}, {Upstream: "b"}, {Upstream: "c"}}}
	if err := a2.TopicsChanged(context.Background(), small); err != nil {
		t.Fatal(err)
	}
	if got := posted(t, rec2); len(got) != 3 || got[0].Labels["topic"] == "*" {
		t.Fatalf("3 changes with max_alerts 3: %d alerts %+v, want one per topic", len(got), got)
	}
	if _, err := ParseAlertmanagerOptions(map[string]string{"url": "http://am:9093", "max_alerts": "0"}); err == nil || !strings.Contains(err.Error(), "max_alerts") {
		t.Errorf("max_alerts 0: %v, want an error naming it", err)
	}
}

// The listener is safe for concurrent use.
func TestAlertmanagerConcurrent(t *testing.T) {
	rec := &recorder{plan: []int{http.StatusOK}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	a, _ := NewAlertmanager(AlertmanagerOptions{URL: srv.URL})
	done := make(chan error)
	for i := range 8 {
		go func() {
			c := sample()
			c.Mirror = fmt.Sprintf("m%d", i%2)
			err := a.TopicsChanged(context.Background(), c)
			if err == nil {
				err = a.GroupsChanged(context.Background(), sampleGroups())
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// m0 and m1 skip one topics call each, groups skip one: 8+8-3 calls.
	if rec.count() != 13 {
		t.Fatalf("%d requests, want 13", rec.count())
	}
}
