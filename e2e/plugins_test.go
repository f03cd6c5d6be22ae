//go:build e2e

package e2e

// Filters (issue 6) end to end: the catalog-filter example plugin as a real
// subprocess of kmirror, the built-in property filter, sha256 pinning and
// config reloads.

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// catalogConfig is the test's default config with the catalog-filter plugin
// (reading catalogPath) as the mirror's only filter, with props as the
// filter's properties.
func (e *env) catalogConfig(catalogPath string, props map[string]string) (mirrorConfig, extConfig) {
	e.t.Helper()
	cat := plugin(e.t, "catalog-filter")
	f := map[string]any{"plugin": "catalog"}
	if props != nil {
		f["properties"] = props
	}
	return e.defaultConfig(), extConfig{
		Filters: []any{f},
		Plugins: map[string]any{"catalog": pluginEntry(cat, map[string]string{"catalog": catalogPath})},
	}
}

// assertNeverOnTarget fails the test if the target has a mirrored copy of
// any of the source topics.
func (e *env) assertNeverOnTarget(sources ...string) {
	e.t.Helper()
	topics, err := listTopics(ctxTimeout(e.t, 15*time.Second), e.dstCl)
	if err != nil {
		e.t.Fatalf("list target topics: %v", err)
	}
	for _, s := range sources {
		for _, tp := range topics {
			if tp == "src."+s {
				e.t.Errorf("target has %s: source topic %s must not be mirrored", tp, s)
			}
		}
	}
}

// stableMirrored checks over the next n control passes that
// /api/v1/status keeps listing exactly want. Counted in passes, not
// seconds: on a loaded machine a fixed time may hold fewer passes than the
// check needs.
func (e *env) stableMirrored(addr, mirror string, n int, want ...string) {
	e.t.Helper()
	p0 := controlPasses(e.t, addr, mirror)
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := mirroredTopics(addr, mirror)
		if err != nil {
			e.t.Fatal(err)
		}
		if !sameTopicSet(got, want) {
			e.t.Fatalf("/api/v1/status lists %v for mirror %s, want exactly %v", sortedTopicSet(got), mirror, want)
		}
		// n passes started after p0 have ended once one more started.
		if controlPasses(e.t, addr, mirror) >= p0+float64(n)+1 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("mirror %s ran fewer than %d control passes in 60s", mirror, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCatalogFilterSelects: the catalog-filter plugin selects exactly the
// topics its catalog lists; editing the catalog (one topic added, one
// removed) changes the mirrored set from the first control pass after the
// edit (counted in passes, see checkSeenWithinPasses).
func TestCatalogFilterSelects(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		a, bb, c, d := e.topic("cat-a"), e.topic("cat-b"), e.topic("cat-c"), e.topic("cat-d")
		for _, tp := range []string{a, bb, c, d} {
			createTopic(t, e.srcCl, tp, 2, nil)
		}
		recsA, wantA := seqRecords(a, "a", 2, 5)
		recsB, wantB := seqRecords(bb, "b", 2, 5)
		recsC, wantC := seqRecords(c, "c", 2, 5)
		recsD, _ := seqRecords(d, "d", 2, 5)
		produce(t, e.srcCl, append(append(append(recsA, recsB...), recsC...), recsD...)...)

		catalog := filepath.Join(e.dir, "catalog.json")
		writeCatalog(t, catalog, catalogNames(a, bb)...)
		cfg, x := e.catalogConfig(catalog, nil)
		w := e.startWorker(e.writeExtConfig("", cfg, x))
		addr := w.httpAddr(t)

		e.waitMirrored(addr, cfg.Name, 30*time.Second, a, bb)
		e.waitTargetValues(30*time.Second, "src."+a, wantA)
		e.waitTargetValues(30*time.Second, "src."+bb, wantB)
		e.stableMirrored(addr, cfg.Name, 3, a, bb)
		e.assertNeverOnTarget(c, d)

		// Edit the catalog: c in, a out.
		writeCatalog(t, catalog, catalogNames(bb, c)...)
		p0 := controlPasses(t, addr, cfg.Name)
		took := e.waitMirrored(addr, cfg.Name, 30*time.Second, bb, c)
		checkSeenWithinPasses(t, "the catalog edit in /api/v1/status", p0, controlPasses(t, addr, cfg.Name))
		t.Logf("catalog edit (+%s, -%s) showed in /api/v1/status after %v (refresh_interval %v)",
			c, a, took.Round(10*time.Millisecond), cfg.RefreshInterval)
		e.waitTargetValues(30*time.Second, "src."+c, wantC)
		e.stableMirrored(addr, cfg.Name, 2, bb, c)
		e.assertNeverOnTarget(d)

		if v := mustScrapeMetric(t, addr, "kmirror_filter_errors_total", map[string]string{"mirror": cfg.Name}); v != 0 {
			t.Errorf("kmirror_filter_errors_total{mirror=%q} = %v, want 0 (no filter call should have failed)", cfg.Name, v)
		}
		if n := w.countLog(`msg="plugin ready"`, "plugin=catalog"); n != 1 {
			t.Errorf("want one `plugin ready` line for plugin=catalog in kmirror's log (started once, never restarted), got %d", n)
		}
	})
}

// TestCatalogFilterFailureKeepsSet: a filter plugin that fails (the catalog
// is made invalid JSON, so the example returns an error) or is killed with
// SIGKILL never shrinks the mirrored set; records keep flowing;
// kmirror_filter_errors_total rises; the plugin is restarted
// (kmirror_plugin_restarts_total) and selection works again afterwards.
func TestCatalogFilterFailureKeepsSet(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		a, bb, c := e.topic("fail-a"), e.topic("fail-b"), e.topic("fail-c")
		for _, tp := range []string{a, bb, c} {
			createTopic(t, e.srcCl, tp, 2, nil)
		}
		catalog := filepath.Join(e.dir, "catalog.json")
		writeCatalog(t, catalog, catalogNames(a, bb)...)
		cfg, x := e.catalogConfig(catalog, nil)
		w := e.startWorker(e.writeExtConfig("", cfg, x))
		addr := w.httpAddr(t)
		mirrorLabel := map[string]string{"mirror": cfg.Name}

		e.waitMirrored(addr, cfg.Name, 30*time.Second, a, bb)
		prod := startProducer(t, e.src.Addrs(), a, 2)
		e.waitMetric(addr, "kmirror_replication_records_total", mirrorLabel, 30*time.Second, "> 0 (records flowing)", func(v float64) bool { return v > 0 })

		// 1. The plugin returns an error: invalid JSON in the catalog.
		watch := watchMirrored(t, addr, cfg.Name, a, bb)
		errs0 := mustScrapeMetric(t, addr, "kmirror_filter_errors_total", mirrorLabel)
		recs0 := mustScrapeMetric(t, addr, "kmirror_replication_records_total", mirrorLabel)
		writeFileAtomic(t, catalog, []byte(`{"topics": ["`+a+`", `))
		e.waitMetric(addr, "kmirror_filter_errors_total", mirrorLabel, 30*time.Second,
			fmt.Sprintf("to rise by at least 2 from %v (two failed passes)", errs0), func(v float64) bool { return v >= errs0+2 })
		e.waitMetric(addr, "kmirror_replication_records_total", mirrorLabel, 30*time.Second,
			fmt.Sprintf("to rise from %v while the filter fails", recs0), func(v float64) bool { return v > recs0 })
		watch.check(t, "while the catalog plugin returned errors")
		if got, err := mirroredTopics(addr, cfg.Name); err != nil || !sameTopicSet(got, []string{a, bb}) {
			t.Fatalf("while the filter fails, /api/v1/status lists %v (err %v), want %v", sortedTopicSet(got), err, []string{a, bb})
		}
		// The plugin's own message reaches kmirror's log.
		if len(w.logLines("unexpected end of JSON input")) == 0 {
			t.Errorf("kmirror's log has no line with the plugin's error (`unexpected end of JSON input`)")
		}

		// Fixed, with c added: selection works again.
		writeCatalog(t, catalog, catalogNames(a, bb, c)...)
		e.waitMirrored(addr, cfg.Name, 30*time.Second, a, bb, c)

		// 2. The plugin is killed with SIGKILL. A pass that finds it down
		// fails; kill it again after every restart (go-plugin's restart
		// backoff doubles, so the down time grows past a refresh
		// interval) until a pass has failed, at most 6 times.
		watch = watchMirrored(t, addr, cfg.Name, a, bb, c)
		cat := plugin(t, "catalog-filter")
		errs1 := mustScrapeMetric(t, addr, "kmirror_filter_errors_total", mirrorLabel)
		recs1 := mustScrapeMetric(t, addr, "kmirror_replication_records_total", mirrorLabel)
		pid := e.waitPluginPid(w, cat, 0, 30*time.Second)
		kills := 0
		for kills < 6 {
			kill9(t, pid)
			kills++
			t.Logf("kill -9 %d (catalog-filter, kill %d)", pid, kills)
			pid = e.waitPluginPid(w, cat, pid, 60*time.Second)
			// Give a pass the chance to run after the restart too.
			time.Sleep(cfg.RefreshInterval + 200*time.Millisecond)
			if v := mustScrapeMetric(t, addr, "kmirror_filter_errors_total", mirrorLabel); v > errs1 {
				break
			}
		}
		errs2 := mustScrapeMetric(t, addr, "kmirror_filter_errors_total", mirrorLabel)
		t.Logf("after %d kill(s): kmirror_filter_errors_total %v -> %v", kills, errs1, errs2)
		if errs2 <= errs1 {
			t.Errorf("kmirror_filter_errors_total did not rise (%v) although the filter plugin was killed %d times", errs2, kills)
		}
		restarts := mustScrapeMetric(t, addr, "kmirror_plugin_restarts_total", map[string]string{"plugin": "catalog"})
		if restarts < float64(kills) {
			t.Errorf("kmirror_plugin_restarts_total{plugin=\"catalog\"} = %v after %d kills, want >= %d", restarts, kills, kills)
		}
		if n := w.countLog("plugin process died; restarting", "plugin=catalog"); n < kills {
			t.Errorf("kmirror's log has %d `plugin process died; restarting` lines for plugin=catalog, want >= %d", n, kills)
		}
		e.waitMetric(addr, "kmirror_plugin_up", map[string]string{"plugin": "catalog"}, 30*time.Second, "== 1", func(v float64) bool { return v == 1 })
		e.waitMetric(addr, "kmirror_replication_records_total", mirrorLabel, 30*time.Second,
			fmt.Sprintf("to rise from %v across the kills", recs1), func(v float64) bool { return v > recs1 })
		watch.check(t, "while the catalog plugin was being killed")

		// Selection works with the restarted plugin: b out.
		writeCatalog(t, catalog, catalogNames(a, c)...)
		e.waitMirrored(addr, cfg.Name, 30*time.Second, a, c)

		// Nothing produced was lost meanwhile.
		prod.stop(t)
		n := prod.count()
		e.waitFor(60*time.Second, fmt.Sprintf("target src.%s to hold the %d records produced", a, n), func() (bool, string) {
			got, _, err := recordCount(ctxTimeout(t, 10*time.Second), e.dstCl, "src."+a)
			if err != nil {
				return false, err.Error()
			}
			return got >= int64(n), fmt.Sprintf("%d records", got)
		})
	})
}

// TestPluginSHA256Mismatch: a plugin whose binary does not match the pinned
// sha256 is refused: `kmirror run` exits non-zero before mirroring
// anything, with a message naming the plugin, its path and both sums.
func TestPluginSHA256Mismatch(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		orders := e.topic("orders")
		createTopic(t, e.srcCl, orders, 1, nil)
		catalog := filepath.Join(e.dir, "catalog.json")
		writeCatalog(t, catalog, catalogNames(orders)...)
		cfg, x := e.catalogConfig(catalog, nil)
		cat := plugin(t, "catalog-filter")
		wrong := strings.Repeat("ab", 32)
		x.Plugins["catalog"] = pluginEntry(pluginBin{Path: cat.Path, SHA256: wrong}, map[string]string{"catalog": catalog})
		path := e.writeExtConfig("", cfg, x)

		code, stdout, stderr := runCLI(t, "run", "--config", path)
		t.Logf("kmirror run exited %d; stderr:\n%s", code, stderr)
		if code == 0 {
			t.Fatalf("kmirror run with a wrong plugin sha256 exited 0; stdout:\n%s", stdout)
		}
		// The log is logfmt: the error is a quoted value.
		msg := strings.ReplaceAll(stderr, `\"`, `"`)
		pin := fmt.Sprintf("%s:%d: plugins.catalog.sha256: ", path, configLineOf(t, path, "plugins: "))
		for _, want := range []string{pin, `plugin "catalog"`, "refusing to start " + cat.Path, "sha256 mismatch", "expected " + wrong, "actual " + cat.SHA256} {
			if !strings.Contains(msg, want) {
				t.Errorf("kmirror's error does not say %q; stderr:\n%s", want, stderr)
			}
		}
		e.assertNeverOnTarget(orders)
	})
}

// TestFilterPluginWithoutFilterCapability: a plugin listed in
// mirrors[].filters that filters neither topics nor groups (here the
// audit-listener) is refused: `kmirror run` exits non-zero before
// mirroring anything, naming the config field and the plugin.
func TestFilterPluginWithoutFilterCapability(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		orders := e.topic("orders")
		createTopic(t, e.srcCl, orders, 1, nil)
		audit := plugin(t, "audit-listener")
		path := e.writeExtConfig("", e.defaultConfig(), extConfig{
			Filters: []any{map[string]any{"plugin": "audit"}},
			Plugins: map[string]any{"audit": pluginEntry(audit, map[string]string{"path": filepath.Join(e.dir, "audit.jsonl")})},
		})
		code, stdout, stderr := runCLI(t, "run", "--config", path)
		t.Logf("kmirror run exited %d; stderr:\n%s", code, stderr)
		if code == 0 {
			t.Fatalf("kmirror run with a listener plugin as a filter exited 0; stdout:\n%s", stdout)
		}
		msg := strings.ReplaceAll(stderr, `\"`, `"`)
		field := fmt.Sprintf("%s:%d: mirrors[0].filters[0].plugin", path, configLineOf(t, path, `"plugin":"audit"`))
		for _, want := range []string{field, `plugin "audit"`, "neither a topic_filter nor a group_filter", "topic_listener"} {
			if !strings.Contains(msg, want) {
				t.Errorf("kmirror's error does not say %q; stderr:\n%s", want, stderr)
			}
		}
		e.assertNeverOnTarget(orders)
	})
}

// TestFilterReload: a reload (POST /api/v1/reload and SIGHUP) with a broken
// config is refused (400 with the file:line error; the log says so) and
// the selection stays; a valid reload that changes the filter's properties
// (the catalog team) changes the mirrored set.
func TestFilterReload(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		a, bb, c := e.topic("team-a"), e.topic("team-b"), e.topic("team-c")
		for _, tp := range []string{a, bb, c} {
			createTopic(t, e.srcCl, tp, 1, nil)
		}
		catalog := filepath.Join(e.dir, "catalog.json")
		writeCatalog(t, catalog, catalogEntry{a, "payments"}, catalogEntry{bb, "payments"}, catalogEntry{c, "billing"})
		cfg, x := e.catalogConfig(catalog, map[string]string{"team": "payments"})
		path := e.writeExtConfig("", cfg, x)
		w := e.startWorker(path)
		addr := w.httpAddr(t)
		e.waitMirrored(addr, cfg.Name, 30*time.Second, a, bb)

		// Broken: the filter names a plugin that does not exist.
		watch := watchMirrored(t, addr, cfg.Name, a, bb)
		broken := x
		broken.Filters = []any{map[string]any{"plugin": "nope", "properties": map[string]string{"team": "billing"}}}
		e.writeExtConfig(path, cfg, broken)
		line := configLineOf(t, path, `"plugin":"nope"`)
		code, body := postReload(t, addr)
		t.Logf("POST /api/v1/reload (broken) = %d %s", code, body)
		if code != 400 {
			t.Errorf("POST /api/v1/reload with a broken config = %d, want 400; body %s", code, body)
		}
		var resp struct{ Status, Error string }
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatalf("decoding the reload answer %s: %v", body, err)
		}
		wantErr := fmt.Sprintf("%s:%d: mirrors[0].filters[0].plugin: unknown plugin \"nope\"", path, line)
		if !strings.Contains(resp.Error, wantErr) {
			t.Errorf("the refused reload's error is %q, want it to contain %q", resp.Error, wantErr)
		}
		if v := mustScrapeMetric(t, addr, "kmirror_config_last_reload_successful", nil); v != 0 {
			t.Errorf("kmirror_config_last_reload_successful = %v after a refused reload, want 0", v)
		}

		// Broken differently, by SIGHUP: an unknown key.
		rejected := w.countLog("config reload rejected")
		broken = x
		broken.Filters = []any{map[string]any{"plugin": "catalog", "properties": map[string]string{"team": "billing"}}}
		broken.MirrorRaw = "    filterz: []"
		e.writeExtConfig(path, cfg, broken)
		line = configLineOf(t, path, "filterz:")
		w.sighup(t)
		e.waitFor(30*time.Second, "kmirror to log `config reload rejected` after SIGHUP", func() (bool, string) {
			return w.countLog("config reload rejected") > rejected, "not yet"
		})
		ls := w.logLines("config reload rejected")
		if last := ls[len(ls)-1]; !strings.Contains(last, fmt.Sprintf("%s:%d: mirrors[0].filterz: unknown field", path, line)) {
			t.Errorf("the rejection log line does not give %s:%d: mirrors[0].filterz: unknown field; got %s", path, line, last)
		}
		// The old selection (team payments) stays for a few passes.
		e.stableMirrored(addr, cfg.Name, 3, a, bb)
		watch.check(t, "after the refused reloads")

		// Valid, by POST: team billing.
		good := x
		good.Filters = []any{map[string]any{"plugin": "catalog", "properties": map[string]string{"team": "billing"}}}
		e.writeExtConfig(path, cfg, good)
		code, body = postReload(t, addr)
		if code != 200 {
			t.Fatalf("POST /api/v1/reload with a valid config = %d %s, want 200", code, body)
		}
		e.waitMirrored(addr, cfg.Name, 30*time.Second, c)
		if v := mustScrapeMetric(t, addr, "kmirror_config_last_reload_successful", nil); v != 1 {
			t.Errorf("kmirror_config_last_reload_successful = %v after a good reload, want 1", v)
		}

		// Valid, by SIGHUP: team payments again.
		reloaded := w.countLog("config reloaded")
		e.writeExtConfig(path, cfg, x)
		w.sighup(t)
		e.waitFor(30*time.Second, "kmirror to log `config reloaded` after SIGHUP", func() (bool, string) {
			return w.countLog("config reloaded") > reloaded, "not yet"
		})
		e.waitMirrored(addr, cfg.Name, 30*time.Second, a, bb)
	})
}

// TestPropertyFilterCompacted: the built-in property filter
// `config.cleanup.policy = compact` selects only the compacted topics.
func TestPropertyFilterCompacted(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		compacted, deleted, plain := e.topic("prop-compacted"), e.topic("prop-delete"), e.topic("prop-plain")
		createTopic(t, e.srcCl, compacted, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")})
		createTopic(t, e.srcCl, deleted, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("delete")})
		createTopic(t, e.srcCl, plain, 1, nil)
		recs, want := seqRecords(compacted, "c", 1, 5)
		produce(t, e.srcCl, recs...)

		cfg := e.defaultConfig()
		x := extConfig{Filters: []any{map[string]any{"property": map[string]any{"conditions": []string{"config.cleanup.policy = compact"}}}}}
		w := e.startWorker(e.writeExtConfig("", cfg, x))
		addr := w.httpAddr(t)
		e.waitMirrored(addr, cfg.Name, 30*time.Second, compacted)
		e.waitTargetValues(30*time.Second, "src."+compacted, want)
		e.stableMirrored(addr, cfg.Name, 3, compacted)
		e.assertNeverOnTarget(deleted, plain)
	})
}

// TestCatalogGroupFilter: the catalog-filter plugin, listing groups in its
// catalog, is the mirror's group filter (after the default groups regex):
// /api/v1/groups lists exactly its groups and only they get translated
// offsets on the target; editing the catalog changes the set. A failing
// plugin (invalid catalog) or a killed one (kill -9) aborts the group
// syncs and keeps the previous group set, never none; the plugin is
// restarted and its answers are used again. A reload (POST and SIGHUP)
// that points the filter at another catalog changes the group set at the
// next group sync.
func TestCatalogGroupFilter(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		orders := e.topic("orders")
		createTopic(t, e.srcCl, orders, 2, nil)
		recs, want := seqRecords(orders, "o", 2, 20)
		produce(t, e.srcCl, recs...)

		// Three source groups with offsets on the topic.
		gA, gB, gC := "app-a-"+e.id, "app-b-"+e.id, "app-c-"+e.id
		commits := map[string]map[kmTP]int64{
			gA: {{orders, 0}: 5, {orders, 1}: 7},
			gB: {{orders, 0}: 3, {orders, 1}: 20},
			gC: {{orders, 0}: 11, {orders, 1}: 0},
		}
		for g, cs := range commits {
			os := kadm.Offsets{}
			for tp, at := range cs {
				os.Add(kadm.Offset{Topic: tp.Topic, Partition: tp.Partition, At: at, LeaderEpoch: -1})
			}
			resp, err := e.srcAdm.CommitOffsets(ctxTimeout(t, 15*time.Second), g, os)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				t.Fatalf("commit %v for group %s on the source: %v", cs, g, err)
			}
		}

		topics := catalogNames(orders)
		catalog := filepath.Join(e.dir, "catalog.json")
		writeCatalogGroups(t, catalog, topics, catalogNames(gA, gB))
		cfg, x := e.catalogConfig(catalog, nil)
		x.MirrorRaw = "    sync: {group_offsets: {interval: 1s}}"
		path := e.writeExtConfig("", cfg, x)
		w := e.startWorker(path)
		addr := w.httpAddr(t)
		mirrorLabel := map[string]string{"mirror": cfg.Name}

		// The target offsets each group must get: translated exactly from
		// the content of both sides.
		e.waitTargetValues(45*time.Second, "src."+orders, want)
		src, dst := kmContent(t, e.src.Addrs(), orders), kmContent(t, e.dst.Addrs(), "src."+orders)
		expect := func(gs ...string) map[string]map[kmTP]int64 {
			out := map[string]map[kmTP]int64{}
			for _, g := range gs {
				byTarget := map[kmTP]int64{}
				for tp, o := range kmExpectTargetOffsets(t, commits[g], src, dst, func(s string) string { return "src." + s }) {
					byTarget[kmTP{"src." + tp.Topic, tp.Partition}] = o
				}
				out[g] = byTarget
			}
			return out
		}

		// 1. Exactly the catalog's groups.
		e.waitGroupSet(addr, cfg.Name, 45*time.Second, expect(gA, gB))
		// (A group that does not exist is GROUP_ID_NOT_FOUND on kfake,
		// empty on Kafka.)
		if got, err := kmCommitted(ctxTimeout(t, 15*time.Second), e.dstAdm, gC); (err != nil && !errors.Is(err, kerr.GroupIDNotFound)) || len(got) != 0 {
			t.Errorf("group %s, not in the catalog, has offsets %v on the target (err %v), want none", gC, got, err)
		}

		// 2. Editing the catalog changes the set.
		writeCatalogGroups(t, catalog, topics, catalogNames(gB, gC))
		e.waitGroupSet(addr, cfg.Name, 45*time.Second, expect(gB, gC))
		if v := mustScrapeMetric(t, addr, "kmirror_filter_errors_total", mirrorLabel); v != 0 {
			t.Errorf("kmirror_filter_errors_total = %v before any failure, want 0", v)
		}

		// 3. The plugin fails (invalid catalog): the group syncs abort,
		// the group set stays.
		const kept = "keeping the previous group set"
		watch := watchGroups(t, addr, cfg.Name, gB, gC)
		failed0 := w.countLog(kept)
		errs0 := mustScrapeMetric(t, addr, "kmirror_filter_errors_total", mirrorLabel)
		writeFileAtomic(t, catalog, []byte(`{"topics": ["`+orders+`"], "groups": [`))
		e.waitMetric(addr, "kmirror_filter_errors_total", mirrorLabel, 30*time.Second,
			fmt.Sprintf("to rise by at least 2 from %v (two failed group syncs)", errs0), func(v float64) bool { return v >= errs0+2 })
		// Logged once (then with backoff while it lasts), not per sync.
		e.waitFor(30*time.Second, fmt.Sprintf("the failing group sync to be logged (a line with %q)", kept), func() (bool, string) {
			n := w.countLog(kept)
			return n > failed0, fmt.Sprintf("%d such lines", n-failed0)
		})
		if l := w.logLines(kept); !strings.Contains(l[len(l)-1], "FilterGroups") || !strings.Contains(l[len(l)-1], "unexpected end of JSON input") {
			t.Errorf("the failed group sync's log line does not carry the plugin's error (FilterGroups: ... unexpected end of JSON input): %s", l[len(l)-1])
		}
		if v := mustScrapeMetric(t, addr, "kmirror_filter_errors_total", mirrorLabel); v < errs0+2 {
			t.Errorf("kmirror_filter_errors_total = %v, want it risen by at least 2 from %v", v, errs0)
		}
		watch.check(t, "while the catalog plugin returned errors")
		writeCatalogGroups(t, catalog, topics, catalogNames(gB, gC))
		e.waitGroupSet(addr, cfg.Name, 45*time.Second, expect(gB, gC))

		// 4. The plugin is killed with SIGKILL. A group sync that finds it
		// down fails; kill it again after every restart (the restart
		// backoff doubles, so the down time grows past a sync interval)
		// until one has failed, at most 6 times.
		watch = watchGroups(t, addr, cfg.Name, gB, gC)
		cat := plugin(t, "catalog-filter")
		failed1 := w.countLog(kept)
		pid := e.waitPluginPid(w, cat, 0, 30*time.Second)
		kills := 0
		for kills < 6 && w.countLog(kept) == failed1 {
			kill9(t, pid)
			kills++
			t.Logf("kill -9 %d (catalog-filter, kill %d)", pid, kills)
			pid = e.waitPluginPid(w, cat, pid, 60*time.Second)
			// Give a group sync the chance to run after the restart too.
			deadline := time.Now().Add(1500 * time.Millisecond)
			for time.Now().Before(deadline) && w.countLog(kept) == failed1 {
				time.Sleep(100 * time.Millisecond)
			}
		}
		failedSyncs := w.countLog(kept) - failed1
		t.Logf("after %d kill(s): %d group sync(s) failed on the dead plugin", kills, failedSyncs)
		if failedSyncs == 0 {
			t.Errorf("no group sync failed although the group filter plugin was killed %d times", kills)
		}
		if l := w.logLines(kept); failedSyncs > 0 && !strings.Contains(l[len(l)-1], "catalog") {
			t.Errorf("the failed group sync's log line does not name the plugin (catalog): %s", l[len(l)-1])
		}
		restarts := mustScrapeMetric(t, addr, "kmirror_plugin_restarts_total", map[string]string{"plugin": "catalog"})
		if restarts < float64(kills) {
			t.Errorf("kmirror_plugin_restarts_total{plugin=\"catalog\"} = %v after %d kills, want >= %d", restarts, kills, kills)
		}
		e.waitMetric(addr, "kmirror_plugin_up", map[string]string{"plugin": "catalog"}, 30*time.Second, "== 1", func(v float64) bool { return v == 1 })
		watch.check(t, "while the catalog plugin was being killed")

		// The restarted plugin's answers are used: gA only.
		writeCatalogGroups(t, catalog, topics, catalogNames(gA))
		e.waitGroupSet(addr, cfg.Name, 45*time.Second, expect(gA))

		// 5. A reload pointing the filter at another catalog (gC only)
		// changes the set; SIGHUP back to the first config restores it.
		other := filepath.Join(e.dir, "other.json")
		writeCatalogGroups(t, other, topics, catalogNames(gC))
		reloaded := x
		reloaded.Filters = []any{map[string]any{"plugin": "catalog", "properties": map[string]string{"catalog": other}}}
		e.writeExtConfig(path, cfg, reloaded)
		if code, body := postReload(t, addr); code != 200 {
			t.Fatalf("POST /api/v1/reload = %d %s, want 200", code, body)
		}
		e.waitGroupSet(addr, cfg.Name, 45*time.Second, expect(gC))
		e.writeExtConfig(path, cfg, x)
		w.sighup(t)
		e.waitGroupSet(addr, cfg.Name, 45*time.Second, expect(gA))
	})
}
