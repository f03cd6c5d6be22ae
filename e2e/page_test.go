//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// pageRefresh is the status page's polling interval (INTERVAL_SECONDS in
// internal/httpapi/ui/app.js).
const pageRefresh = 3 * time.Second

// chromium finds a headless-capable Chromium: Debian's package chromium
// (.ci/run installs it). Missing, the test fails in CI and skips locally.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium found (chromium, chromium-browser, google-chrome): the status page's browser tests need Debian's package chromium (apt-get install chromium; .ci/run installs it)"
	if inCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browser starts a headless Chromium for the test and returns a tab's
// context and the console errors so far (messages of type error and
// uncaught exceptions, the browser log's failed loads included).
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // root in CI, where Chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	var mu sync.Mutex
	var errs []string
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == "error" || m.IsException() {
				msg := m.String()
				if m.URL != "" {
					// A failed load's text does not name the resource.
					msg += " (" + m.URL + ")"
				}
				mu.Lock()
				errs = append(errs, msg)
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the console reader did not end within 30s of closing the browser")
		}
	})
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), errs...)
	}
}

// pageTopic is one row of a mirror's topic table on the page.
type pageTopic struct {
	State string `json:"state"`
	Text  string `json:"text"`
}

// pageView is what the test reads off the page.
type pageView struct {
	Polls  int                  `json:"polls"`
	Marker bool                 `json:"marker"` // set by the test: gone after a reload
	Topics map[string]pageTopic `json:"topics"`
	Banner string               `json:"banner"`
	// Changes are the recent changes' rows: "kind name".
	Changes []string `json:"changes"`
	// Listeners are the listeners' rows: "name health last-error".
	Listeners []string `json:"listeners"`
	// Rate is the first mirror's throughput.
	Rate string `json:"rate"`
}

const readPage = `(() => {
  const v = {polls: Number(document.body.dataset.polls || 0), marker: window.__kmirrorTest === true, topics: {},
    banner: document.getElementById("banner").hidden ? "" : document.getElementById("banner").textContent};
  for (const r of document.querySelectorAll("tr[data-topic]")) v.topics[r.dataset.topic] = {state: r.dataset.state, text: r.innerText};
  v.changes = [...document.querySelectorAll("tr[data-change]")].map((r) => r.dataset.change + " " + r.dataset.name);
  v.listeners = [...document.querySelectorAll("tr[data-listener]")].map((r) => (r.dataset.listener + " " + r.children[3].innerText + " " + r.children[6].innerText).trim());
  const rate = document.querySelector("[data-mirror] .rate");
  v.rate = rate ? rate.textContent : "";
  return v;
})()`

func viewPage(ctx context.Context) (pageView, error) {
	c, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return chromedp.Run(c, chromedp.Evaluate[pageView](readPage))
}

// artifactDir is where the test's screenshots go: KMIRROR_E2E_LOGDIR (with
// the logs of failed tests), by default $TMPDIR/kmirror-e2e-logs.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("KMIRROR_E2E_LOGDIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "kmirror-e2e-logs")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100)) // 100: PNG; less is JPEG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactDir(t), strings.NewReplacer("/", "_").Replace(t.Name())+"-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

// TestStatusPage: the status page of a running kmirror on kfake, in
// headless Chromium, loads without console errors and shows the mirrored
// topics; a topic created at the source appears within two of the page's
// refreshes after the API has it, without a reload; a failed topic shows
// its reason; the listeners show their health and the mirror its
// throughput; the page fits a phone's width. Screenshots of both widths
// are written as artifacts.
func TestStatusPage(t *testing.T) {
	t.Parallel()
	ctx, consoleErrors := browser(t)
	e := newEnv(t, kfakeBackend{}, ClusterSpec{Brokers: 1})
	orders, bad, late := e.topic("orders"), e.topic("bad"), e.topic("late")
	createTopic(t, e.srcCl, orders, 3, nil)
	produce(t, e.srcCl, &kgo.Record{Topic: orders, Value: []byte("o-1")})
	// bad fails: its target takes no record over 20000 bytes, and the
	// source has one of 60 KiB.
	createTopic(t, e.srcCl, bad, 1, nil)
	createTopic(t, e.dstCl, "src."+bad, 1, map[string]*string{"max.message.bytes": kadm.StringPtr("20000")})
	big := make([]byte, 60<<10)
	rand.Read(big) // incompressible
	produce(t, e.srcCl, &kgo.Record{Topic: bad, Value: big})

	cfg := e.defaultConfig()
	// The target's limit is the test's: no config sync.
	path := e.writeExtConfig("", cfg, extConfig{MirrorRaw: "    sync: {topic_configs: {enabled: false}}",
		// hook posts to a port where nothing listens: it fails, and is
		// retried.
		Listeners: []string{"journal", "hook"}, ListenerDefs: map[string]any{
			"journal": map[string]any{"type": "log"},
			"hook":    map[string]any{"type": "webhook", "config": map[string]string{"url": "http://127.0.0.1:1/kmirror", "retry_budget": "0"}},
		}})
	w := e.startWorker(path)
	addr := w.httpAddr(t)
	e.waitFor(60*time.Second, bad+" failed with MESSAGE_TOO_LARGE in /api/v1/status", func() (bool, string) {
		doc, _, err := getStatus(addr)
		if err != nil {
			return false, err.Error()
		}
		state, msg, _ := topicStatus(doc, cfg.Name, bad)
		return state == "failed" && strings.Contains(msg, "MESSAGE_TOO_LARGE"), fmt.Sprintf("state %q, error %q", state, msg)
	})

	nav, cancel := context.WithTimeout(ctx, 60*time.Second)
	if err := chromedp.Do(nav, chromedp.Navigate("http://"+addr+"/")); err != nil {
		cancel()
		t.Fatalf("opening the page: %v", err)
	}
	cancel()
	var v pageView
	e.waitFor(60*time.Second, "the page to show "+orders+" mirroring and "+bad+" failed with its reason", func() (bool, string) {
		var err error
		if v, err = viewPage(ctx); err != nil {
			return false, err.Error()
		}
		o, b := v.Topics[orders], v.Topics[bad]
		return o.State == "mirroring" && strings.Contains(o.Text, "src."+orders) &&
				b.State == "failed" && strings.Contains(b.Text, "MESSAGE_TOO_LARGE") &&
				len(v.Listeners) == 2 && strings.HasPrefix(v.Listeners[0], "hook failing") && strings.Contains(v.Listeners[0], "connection refused") &&
				v.Listeners[1] == "journal ok",
			fmt.Sprintf("%+v", v)
	})
	// Marks this document: a reload would lose the mark.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`window.__kmirrorTest = true`)); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "desktop")

	createTopic(t, e.srcCl, late, 2, nil)
	e.waitFor(60*time.Second, "/api/v1/status to list "+late, func() (bool, string) {
		doc, _, err := getStatus(addr)
		if err != nil {
			return false, err.Error()
		}
		state, _, ok := topicStatus(doc, cfg.Name, late)
		return ok, "state " + state
	})
	// Counted in the page's own refreshes, not in seconds, so that a slow
	// machine does not fail the test: the refresh after the one running now
	// fetches a status that lists the topic.
	before, err := viewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor(60*time.Second, "the page to show "+late+" without a reload", func() (bool, string) {
		if v, err = viewPage(ctx); err != nil {
			return false, err.Error()
		}
		_, ok := v.Topics[late]
		return ok, fmt.Sprintf("polls %d (%d when the API had it), topics %v", v.Polls, before.Polls, v.Topics)
	})
	if !v.Marker {
		t.Error("the page was reloaded; it must update in place")
	}
	if n := v.Polls - before.Polls; n > 2 {
		t.Errorf("%s appeared %d refreshes (of %v) after the API listed it, want at most 2", late, n, pageRefresh)
	}
	// The change log shows the new topic too (it may take one more refresh:
	// the history and the status are separate calls).
	e.waitFor(30*time.Second, "the page's recent changes to list "+late+" as added", func() (bool, string) {
		if v, err = viewPage(ctx); err != nil {
			return false, err.Error()
		}
		return slices.Contains(v.Changes, "topic_added "+late), fmt.Sprintf("%q", v.Changes)
	})
	// After two refreshes the page has two samples of the counters.
	if !strings.HasSuffix(v.Rate, "B/s") || !strings.Contains(v.Rate, " records/s, ") {
		t.Errorf("the mirror's throughput reads %q, want \"N records/s, N B/s\"", v.Rate)
	}
	if v.Banner != "" {
		t.Errorf("the page shows an error banner: %q", v.Banner)
	}

	// A phone: 390 CSS pixels wide. Nothing wider than the screen, topic
	// rows laid out as labelled cards, the failure's reason on screen.
	phone, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	type phoneView struct {
		Width, ScrollWidth int
		Thead              string
		RowRight           float64
		ReasonVisible      bool
	}
	e.waitFor(30*time.Second, "the page to fit a phone's width", func() (bool, string) {
		c, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		pv, err := chromedp.Run(c, chromedp.Evaluate[phoneView](fmt.Sprintf(`(() => {
  const row = document.querySelector('tr[data-topic=%q]');
  const r = row.getBoundingClientRect();
  return {Width: window.innerWidth, ScrollWidth: document.documentElement.scrollWidth,
    Thead: getComputedStyle(document.querySelector("thead")).display, RowRight: r.right,
    ReasonVisible: row.innerText.includes("MESSAGE_TOO_LARGE") && r.width > 0};
})()`, bad)))
		if err != nil {
			return false, err.Error()
		}
		return pv.Width == 390 && pv.ScrollWidth <= pv.Width && pv.Thead == "none" && pv.RowRight <= float64(pv.Width)+0.5 && pv.ReasonVisible,
			fmt.Sprintf("%+v", pv)
	})
	screenshot(t, ctx, "phone")

	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// navigate opens url in the tab.
func navigate(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(c, chromedp.Navigate(url)); err != nil {
		t.Fatalf("opening %s: %v", url, err)
	}
}

// TestStatusPageToken: with http.auth, the page itself opens without the
// token, asks for it, then shows the topics; the token stays in the tab
// (sessionStorage, not localStorage unless asked) and survives a reload.
func TestStatusPageToken(t *testing.T) {
	t.Parallel()
	ctx, consoleErrors := browser(t)
	e := newEnv(t, kfakeBackend{}, ClusterSpec{Brokers: 1})
	orders := e.topic("orders")
	createTopic(t, e.srcCl, orders, 1, nil)
	const token = "page-token-0123456789abcdef"
	path := e.writeExtConfig("", e.defaultConfig(), extConfig{})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const plainHTTP = `http: {listen: "127.0.0.1:0"}`
	if !strings.Contains(string(b), plainHTTP) {
		t.Fatalf("the config template changed: no %q in\n%s", plainHTTP, b)
	}
	writeFileAtomic(t, path, []byte(strings.Replace(string(b), plainHTTP,
		`http: {listen: "127.0.0.1:0", auth: {bearer_token_env: KMIRROR_E2E_HTTP_TOKEN}}`, 1)))
	w := e.startWorkerEnv(path, "KMIRROR_E2E_HTTP_TOKEN="+token)
	addr := w.httpAddr(t)

	navigate(t, ctx, "http://"+addr+"/")
	type loginView struct {
		Login, Main bool // visible
		Topics      int
		Session     string
		Local       string
	}
	const readLogin = `(() => ({Login: !document.getElementById("login").hidden, Main: !document.getElementById("main").hidden,
  Topics: document.querySelectorAll("tr[data-topic]").length,
  Session: sessionStorage.getItem("kmirror.token") || "", Local: localStorage.getItem("kmirror.token") || ""}))()`
	view := func() (loginView, error) {
		c, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return chromedp.Run(c, chromedp.Evaluate[loginView](readLogin))
	}
	e.waitFor(30*time.Second, "the page to ask for the token", func() (bool, string) {
		v, err := view()
		if err != nil {
			return false, err.Error()
		}
		return v.Login && !v.Main && v.Topics == 0, fmt.Sprintf("%+v", v)
	})
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = chromedp.Do(c, chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)))
	cancel()
	if err != nil {
		t.Fatalf("entering the token: %v", err)
	}
	shows := func(desc string) {
		t.Helper()
		e.waitFor(60*time.Second, desc, func() (bool, string) {
			v, err := view()
			if err != nil {
				return false, err.Error()
			}
			pv, err := viewPage(ctx)
			if err != nil {
				return false, err.Error()
			}
			_, ok := pv.Topics[orders]
			return ok && !v.Login && v.Main && v.Session == token && v.Local == "", fmt.Sprintf("%+v %+v", v, pv)
		})
	}
	shows("the page to show " + orders + " with the token, kept in sessionStorage only")
	navigate(t, ctx, "http://"+addr+"/")
	shows("the reloaded page to show " + orders + " without asking again")

	// The API's 401s before the token was entered are logged by the
	// browser as failed loads; nothing else may be.
	msgs := consoleErrors()
	t.Logf("console errors (401s expected): %q", msgs)
	for _, msg := range msgs {
		if !strings.Contains(msg, "401") {
			t.Errorf("console error: %s", msg)
		}
	}
}
