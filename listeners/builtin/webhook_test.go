package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is an httptest handler that answers with the statuses of plan in
// turn (the last one forever) and records every request.
type recorder struct {
	mu      sync.Mutex
	plan    []int
	bodies  [][]byte
	headers []http.Header
	paths   []string
	reply   string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	n := len(r.bodies)
	r.bodies = append(r.bodies, body)
	r.headers = append(r.headers, req.Header.Clone())
	r.paths = append(r.paths, req.Method+" "+req.URL.Path)
	status := http.StatusOK
	if len(r.plan) > 0 {
		status = r.plan[min(n, len(r.plan)-1)]
	}
	reply := r.reply
	r.mu.Unlock()
	w.WriteHeader(status)
	_, _ = io.WriteString(w, reply)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bodies)
}

func fastRetries(p *poster) {
	p.minBackoff = time.Millisecond
	p.maxBackoff = 20 * time.Millisecond
}

func TestWebhookRetriesThenSucceeds(t *testing.T) {
	rec := &recorder{plan: []int{503, 500, 502, 200}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	w, err := NewWebhook(WebhookOptions{URL: srv.URL + "/hooks/secret-token", Headers: map[string]string{"Authorization": "Bearer abc", "x-env": "test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	fastRetries(w.p)
	if err := w.TopicsChanged(context.Background(), sample()); err != nil {
		t.Fatal(err)
	}
	if rec.count() != 4 {
		t.Fatalf("%d requests, want 4", rec.count())
	}
	for i, h := range rec.headers {
		if h.Get("Authorization") != "Bearer abc" || h.Get("X-Env") != "test" || h.Get("Content-Type") != "application/json" {
			t.Errorf("request %d headers: %v", i, h)
		}
		if rec.paths[i] != "POST /hooks/secret-token" {
			t.Errorf("request %d: %s", i, rec.paths[i])
		}
		if string(rec.bodies[i]) != string(rec.bodies[0]) {
			t.Errorf("request %d body differs from the first", i)
		}
	}
	var body map[string]any
	if err := json.Unmarshal(rec.bodies[0], &body); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"kind", "mirror", "sequence", "time", "added", "removed", "changed", "topics"} {
		if _, ok := body[k]; !ok {
			t.Errorf("body lacks %q: %s", k, rec.bodies[0])
		}
	}
	if body["kind"] != "topics" || body["mirror"] != "east-to-west" || body["sequence"] != 7.0 {
		t.Errorf("body: %s", rec.bodies[0])
	}
	added := body["added"].([]any)[0].(map[string]any)
	if added["upstream"] != "orders" || added["downstream"] != "east.orders" || added["partitions"] != 3.0 ||
		added["state"] != "mirroring" || added["metadata"].(map[string]any)["kmirror.source.cluster"] != "east" {
		t.Errorf("added topic: %v", added)
	}
	if n := len(body["topics"].([]any)); n != 2 {
		t.Errorf("topics: %d, want the full set of 2", n)
	}
}

func TestWebhookGroupsBody(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	w, err := NewWebhook(WebhookOptions{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.GroupsChanged(context.Background(), sampleGroups()); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Kind     string      `json:"kind"`
		Mirror   string      `json:"mirror"`
		Sequence uint64      `json:"sequence"`
		Added    []groupJSON `json:"added"`
		Removed  []groupJSON `json:"removed"`
		Groups   []groupJSON `json:"groups"`
	}
	if err := json.Unmarshal(rec.bodies[0], &body); err != nil {
		t.Fatal(err)
	}
	if body.Kind != "groups" || body.Mirror != "east-to-west" || body.Sequence != 3 || len(body.Groups) != 1 ||
		body.Added[0].Name != "billing" || body.Removed[0].Name != "old-app" || body.Removed[0].Topics == nil {
		t.Errorf("groups body: %s", rec.bodies[0])
	}
}

// TestWebhookChangesOnly: with changes_only the body carries the changes
// and not the full sets, which at 100,000 topics are megabytes per call.
func TestWebhookChangesOnly(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	o, err := ParseWebhookOptions(map[string]string{"url": srv.URL, "changes_only": "true"})
	if err != nil || !o.ChangesOnly {
		t.Fatalf("options %+v, %v", o, err)
	}
	w, err := NewWebhook(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.GroupsChanged(ctx, sampleGroups()); err != nil {
		t.Fatal(err)
	}
	if err := w.TopicsChanged(ctx, sample()); err != nil {
		t.Fatal(err)
	}
	for i, b := range rec.bodies {
		var body map[string]json.RawMessage
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatal(err)
		}
		_, groups := body["groups"]
		_, topics := body["topics"]
		_, added := body["added"]
		if groups || topics || !added {
			t.Errorf("body %d with changes_only: %s", i, b)
		}
	}
}

func TestWebhook4xxIsPermanent(t *testing.T) {
	rec := &recorder{plan: []int{http.StatusUnprocessableEntity}, reply: strings.Repeat("x", 600) + "TAIL"}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	w, err := NewWebhook(WebhookOptions{URL: srv.URL + "/services/T000/B000/secret"})
	if err != nil {
		t.Fatal(err)
	}
	fastRetries(w.p)
	err = w.TopicsChanged(context.Background(), sample())
	if err == nil {
		t.Fatal("422 succeeded")
	}
	if rec.count() != 1 {
		t.Errorf("%d requests for a 422, want 1 (no retry)", rec.count())
	}
	if !errors.Is(err, ErrPermanent) {
		t.Errorf("errors.Is(%v, ErrPermanent) is false", err)
	}
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 422 || len(se.Body) != 512 {
		t.Fatalf("StatusError: %#v", se)
	}
	msg := err.Error()
	if !strings.Contains(msg, "422 Unprocessable Entity") || strings.Contains(msg, "TAIL") || strings.Contains(msg, "secret") {
		t.Errorf("error message %q: want the status, at most 512 bytes of body, no URL path", msg)
	}
}

func TestWebhook429IsRetried(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	w, _ := NewWebhook(WebhookOptions{URL: srv.URL})
	fastRetries(w.p)
	if err := w.TopicsChanged(context.Background(), sample()); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 2 {
		t.Fatalf("%d requests, want 2", n.Load())
	}
}

// TestWebhookGivesUpWithinBudget: an always-failing receiver is retried
// several times, then given up once the budget is spent. The bound on the
// call's duration is the budget plus a margin for a loaded machine, far
// below what an ignored budget would take (forever, or the 30s default).
func TestWebhookGivesUpWithinBudget(t *testing.T) {
	rec := &recorder{plan: []int{500}, reply: "database on fire"}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	const budget = time.Second
	w, _ := NewWebhook(WebhookOptions{URL: srv.URL, RetryBudget: budget})
	w.p.minBackoff = 10 * time.Millisecond
	w.p.maxBackoff = 40 * time.Millisecond
	start := time.Now()
	err := w.TopicsChanged(context.Background(), sample())
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("always-500 succeeded")
	}
	if errors.Is(err, ErrPermanent) {
		t.Errorf("a 500 is not permanent: %v", err)
	}
	if !strings.Contains(err.Error(), "giving up after") || !strings.Contains(err.Error(), "500 Internal Server Error: database on fire") {
		t.Errorf("error: %v", err)
	}
	if rec.count() < 3 {
		t.Errorf("%d attempts in the budget, want several", rec.count())
	}
	if elapsed > budget+5*time.Second {
		t.Errorf("gave up after %v, budget %v", elapsed, budget)
	}
}

// TestWebhookNetworkErrorAndTimeout: network errors are retried; the
// per-attempt timeout and the caller's context end a call. The bounds on
// durations leave a margin for a loaded machine and stay far below what
// ignoring the timeout (the 10s default) or the context (a 1 minute
// budget) would take.
func TestWebhookNetworkErrorAndTimeout(t *testing.T) {
	// Nothing listens: connection refused, retried, then an error without the path.
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	w, _ := NewWebhook(WebhookOptions{URL: addr + "/token/abc", RetryBudget: time.Second})
	fastRetries(w.p)
	err := w.TopicsChanged(context.Background(), sample())
	if err == nil || !strings.Contains(err.Error(), "giving up after") || strings.Contains(err.Error(), "abc") {
		t.Errorf("connection refused: %v", err)
	}

	// A server slower than the per-attempt timeout.
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	w2, _ := NewWebhook(WebhookOptions{URL: slow.URL, Timeout: 50 * time.Millisecond, RetryBudget: -1})
	start := time.Now()
	if err := w2.TopicsChanged(context.Background(), sample()); err == nil {
		t.Error("slow server succeeded")
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("timeout 50ms took %v", time.Since(start))
	}

	// The caller's context bounds the retries too.
	rec := &recorder{plan: []int{503}}
	srv3 := httptest.NewServer(rec)
	defer srv3.Close()
	w3, _ := NewWebhook(WebhookOptions{URL: srv3.URL, RetryBudget: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := w3.TopicsChanged(ctx, sample()); err == nil {
		t.Error("503 with a cancelled context succeeded")
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("ctx of 150ms, took %v", time.Since(start))
	}
}

func TestWebhookConfigureKeys(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	w := &Webhook{}
	if err := w.Configure(context.Background(), map[string]string{"url": srv.URL + "/x", "header.X-Kmirror-Token": "s3", "timeout": "1s", "retry_budget": "2s"}); err != nil {
		t.Fatal(err)
	}
	if w.p.timeout != time.Second || w.p.budget != 2*time.Second {
		t.Errorf("timeout %v budget %v", w.p.timeout, w.p.budget)
	}
	if err := w.GroupsChanged(context.Background(), sampleGroups()); err != nil {
		t.Fatal(err)
	}
	if rec.headers[0].Get("X-Kmirror-Token") != "s3" {
		t.Errorf("headers: %v", rec.headers[0])
	}
}
