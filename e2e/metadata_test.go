//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// Issue 5, "How it is shown": topic config sync, `kmirror plan`, topic
// metadata (labels, restarts, reloads, chains) and ACL sync. Every test
// runs on both backends with the same assertions.

// TestTopicConfigSync: a config change at the source (incremental alter)
// is applied by kmirror within one sync interval (2s, against the 30s
// default; measured on kmirror's own log line, so that the test's polling
// on a loaded machine does not count): a changed key is set, a key the
// source stops setting is removed. Keys excluded from the sync
// (MirrorMaker 2's default list: min.insync.replicas; a user exclude list,
// which replaces the default) and settings made on the target itself are
// left alone.
//
// Not parallel: it measures latency.
func TestTopicConfigSync(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		s := kmsg.StringPtr
		// cfga goes through mirror m1 (default exclusions), cfgb through
		// m2 (exclude: retention.bytes only).
		a, bt := e.topic("cfga"), e.topic("cfgb")
		initial := map[string]*string{"retention.ms": s("3600000"), "retention.bytes": s("1073741824"), "min.insync.replicas": s("1")}
		createTopic(t, e.srcCl, a, 2, initial)
		createTopic(t, e.srcCl, bt, 1, initial)

		const interval = 2 * time.Second
		cfg := e.kmConfigFor()
		m1 := cfg.Mirrors[0]
		m1.Topics.Include = []string{regexp.QuoteMeta(a)}
		m1.Sync = &kmSync{TopicConfigs: &kmSyncItem{Interval: interval.String()}}
		m2 := kmMirrorOf("m2-"+e.id, "src", "dst", regexp.QuoteMeta(bt))
		m2.ReplicationPolicy["separator"] = "_"
		m2.Sync = &kmSync{TopicConfigs: &kmSyncItem{Interval: interval.String(), Exclude: []string{`retention\.bytes`}}}
		cfg.Mirrors = append(cfg.Mirrors, m2)
		w := e.startWorker(e.kmWriteConfig(cfg))
		addr := w.httpAddr(t)
		ta, tb := "src."+a, "src_"+bt
		e.kmWaitMirroring(addr, m1.Name, 45*time.Second, a)
		e.kmWaitMirroring(addr, m2.Name, 45*time.Second, bt)

		ctx := ctxTimeout(t, 90*time.Second)
		// want describes what a target topic must show: a value set on
		// the topic itself, or "" for "not set on the topic".
		check := func(topic string, want map[string]string) string {
			got, err := kmTopicConfigs(ctx, e.dstAdm, topic)
			if err != nil {
				return fmt.Sprintf("describe %s: %v", topic, err)
			}
			var bad []string
			for _, k := range slices.Sorted(maps.Keys(want)) {
				c, ok := got[k]
				switch {
				case want[k] == "" && ok && c.Own:
					bad = append(bad, fmt.Sprintf("%s: want not set on the topic, got %v", k, c))
				case want[k] != "" && (!ok || !c.Own || c.Value != want[k]):
					bad = append(bad, fmt.Sprintf("%s: want %s set on the topic, got %v", k, want[k], c))
				}
			}
			if len(bad) > 0 {
				return fmt.Sprintf("target topic %s: %s", topic, strings.Join(bad, "; "))
			}
			return ""
		}
		// Created with the source's configs, minus the excluded keys.
		e.waitFor(30*time.Second, "the target topics to be created with the source configs minus the excluded keys", func() (bool, string) {
			if d := check(ta, map[string]string{"retention.ms": "3600000", "retention.bytes": "1073741824", "min.insync.replicas": ""}); d != "" {
				return false, d
			}
			if d := check(tb, map[string]string{"retention.ms": "3600000", "retention.bytes": "", "min.insync.replicas": "1"}); d != "" {
				return false, d
			}
			return true, ""
		})

		// Settings made on the target only: one key the source never
		// sets, one the sync excludes.
		kmAlterTopic(t, e.dstAdm, ta, map[string]*string{"delete.retention.ms": s("4242000"), "min.insync.replicas": s("1")})
		kmAlterTopic(t, e.dstAdm, tb, map[string]*string{"delete.retention.ms": s("4242000"), "retention.bytes": s("536870912")})

		// The source changes: one key changed, one removed, one excluded
		// key changed.
		changed := time.Now()
		kmAlterTopic(t, e.srcAdm, a, map[string]*string{"retention.ms": s("7200000"), "retention.bytes": nil, "min.insync.replicas": s("2")})
		kmAlterTopic(t, e.srcAdm, bt, map[string]*string{"retention.ms": s("7200000"), "retention.bytes": s("2147483648")})
		e.waitFor(30*time.Second, "the source config changes to reach the target", func() (bool, string) {
			if d := check(ta, map[string]string{"retention.ms": "7200000", "retention.bytes": ""}); d != "" {
				return false, d
			}
			if d := check(tb, map[string]string{"retention.ms": "7200000"}); d != "" {
				return false, d
			}
			return true, ""
		})
		t.Logf("source config changes seen on the target %v after the change", time.Since(changed).Round(10*time.Millisecond))
		// When kmirror applied them, by its log: the next sync (at most one
		// interval later) plus its round trips to both clusters, with a
		// margin for a loaded machine.
		allowed := interval + 3*time.Second
		for _, tp := range []struct{ mirror, topic string }{{m1.Name, a}, {m2.Name, bt}} {
			// The log line follows the AlterConfigs answer: the target
			// can show the change a moment before the line is written.
			var at time.Time
			var line string
			ok := false
			for deadline := time.Now().Add(5 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				at, line, ok = w.firstLogAt(changed, `msg="synced topic configs"`, "mirror="+tp.mirror+" ", "topic="+tp.topic+" ")
			}
			if !ok {
				t.Errorf("kmirror logged no `synced topic configs` line for %s since the change", tp.topic)
				continue
			}
			took := at.Sub(changed)
			t.Logf("kmirror synced the configs of %s %v after the change (sync interval %v, allowed %v): %s", tp.topic, took.Round(time.Millisecond), interval, allowed, line)
			if took > allowed {
				t.Errorf("kmirror applied the config change of %s %v after it was made; want at most one sync interval plus a margin = %v", tp.topic, took.Round(time.Millisecond), allowed)
			}
		}

		// Two more syncs: the excluded keys and target-only settings are
		// still the target's own.
		time.Sleep(2*interval + 200*time.Millisecond)
		if d := check(ta, map[string]string{
			"retention.ms": "7200000", "retention.bytes": "",
			"min.insync.replicas": "1", // excluded by default: the target's own 1, not the source's 2
			"delete.retention.ms": "4242000",
		}); d != "" {
			t.Errorf("mirror with the default exclusions: %s", d)
		}
		if d := check(tb, map[string]string{
			"retention.ms":        "7200000",
			"retention.bytes":     "536870912", // excluded by the user's list: the target's own value stays
			"min.insync.replicas": "1",         // not excluded by the user's list: copied
			"delete.retention.ms": "4242000",
		}); d != "" {
			t.Errorf("mirror with exclude [retention\\.bytes]: %s", d)
		}

		// The metadata says which keys kmirror manages.
		topics, err := kmTopicsHTTP(addr, "")
		if err != nil {
			t.Fatal(err)
		}
		for target, want := range map[string]string{ta: "retention.ms", tb: "min.insync.replicas,retention.ms"} {
			md := topics[target].Metadata
			if got := md["kmirror.synced_configs"]; got != want {
				t.Errorf("metadata of %s: kmirror.synced_configs = %q, want %q (metadata %s)", target, got, want, kmFmtMap(md))
			}
			if _, err := time.Parse(time.RFC3339, md["kmirror.config_synced_at"]); err != nil {
				t.Errorf("metadata of %s: kmirror.config_synced_at = %q, want an RFC 3339 time", target, md["kmirror.config_synced_at"])
			}
		}
	})
}

// kmPlanDoc is `kmirror plan -o json`.
type kmPlanDoc struct {
	Changes bool `json:"changes"`
	Mirrors []struct {
		Mirror string `json:"mirror"`
		Create []struct {
			SourceTopic string            `json:"source_topic"`
			TargetTopic string            `json:"target_topic"`
			Partitions  int32             `json:"partitions"`
			Configs     map[string]string `json:"configs"`
			Error       string            `json:"error"`
		} `json:"create"`
		Grow []struct {
			TargetTopic string `json:"target_topic"`
			From        int32  `json:"from"`
			To          int32  `json:"to"`
			Error       string `json:"error"`
		} `json:"grow"`
		Configs []struct {
			SourceTopic string            `json:"source_topic"`
			TargetTopic string            `json:"target_topic"`
			Set         map[string]string `json:"set"`
			Delete      []string          `json:"delete"`
		} `json:"configs"`
		Failed []json.RawMessage `json:"failed"`
	} `json:"mirrors"`
}

// TestPlan: `kmirror plan` against a fresh target lists every selected topic
// with its partitions and configs (text and -o json), exits 3 and creates
// nothing on the target, not even kmirror's own topics. Once a worker has
// created everything it exits 0 with "nothing to change"; a config change
// and a partition increase at the source make it exit 3 again and list
// them, still changing nothing.
func TestPlan(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		s := kmsg.StringPtr
		p1, p2, p3, skip := e.topic("plan1"), e.topic("plan2"), e.topic("plan3"), e.topic("skip")
		createTopic(t, e.srcCl, p1, 3, map[string]*string{"retention.ms": s("3600000"), "min.insync.replicas": s("1")})
		createTopic(t, e.srcCl, p2, 1, nil)
		createTopic(t, e.srcCl, p3, 2, map[string]*string{"cleanup.policy": s("compact")})
		createTopic(t, e.srcCl, skip, 1, nil)
		recs, _ := seqRecords(p1, "p", 3, 5)
		produce(t, e.srcCl, recs...)

		cfg := e.kmConfigFor()
		mirror := cfg.Mirrors[0].Name
		cfg.Mirrors[0].Topics.Exclude = []string{`skip-.*`}
		path := e.kmWriteConfig(cfg)
		type planned struct {
			source     string
			partitions int32
			configs    map[string]string
		}
		want := map[string]planned{
			"src." + p1: {p1, 3, map[string]string{"retention.ms": "3600000"}}, // min.insync.replicas is excluded
			"src." + p2: {p2, 1, map[string]string{}},
			"src." + p3: {p3, 2, map[string]string{"cleanup.policy": "compact"}},
		}
		ctx := ctxTimeout(t, 2*time.Minute)
		noTargetTopics := func(when string) {
			t.Helper()
			tds, err := e.dstAdm.ListTopicsWithInternal(ctx)
			if err != nil {
				t.Fatalf("list target topics: %v", err)
			}
			var created []string
			for _, tp := range tds.Names() {
				// A fresh kfake target must have no topic at all; on the
				// shared Kafka target every topic of this test (and of
				// its mirror, kmirror.m1-<id>.*) carries its id.
				if e.mine(tp) {
					created = append(created, tp)
				}
			}
			if len(created) > 0 {
				t.Fatalf("%s: the target has topics %v; kmirror plan must create nothing", when, created)
			}
		}

		// Text.
		code, stdout, stderr := runCLI(t, "plan", "--config", path)
		if code != 3 {
			t.Errorf("kmirror plan on a fresh target: exit %d, want 3 (changes pending)", code)
		}
		for target, p := range want {
			count := fmt.Sprintf("%d partitions", p.partitions)
			if p.partitions == 1 {
				count = "1 partition"
			}
			line := fmt.Sprintf("+ create %s (%s) from %s", target, count, p.source)
			if len(p.configs) > 0 {
				line += " with " + strings.TrimSuffix(strings.TrimPrefix(kmFmtMap(p.configs), "{"), "}")
			}
			if !kmHasLine(stdout, line) {
				t.Errorf("kmirror plan does not print the line %q", line)
			}
		}
		if strings.Contains(stdout, skip) {
			t.Errorf("kmirror plan lists %s, which the config excludes", skip)
		}
		if strings.Contains(stdout, "min.insync.replicas") {
			t.Errorf("kmirror plan would copy min.insync.replicas, which is excluded by default")
		}
		if t.Failed() {
			t.Logf("kmirror plan --config %s: exit %d\nstdout:\n%s\nstderr:\n%s", path, code, stdout, stderr)
		}
		noTargetTopics("after kmirror plan")

		// JSON.
		doc := kmRunPlanJSON(t, path, 3)
		if !doc.Changes || len(doc.Mirrors) != 1 || doc.Mirrors[0].Mirror != mirror {
			t.Errorf("kmirror plan -o json: want changes true and one mirror %s, got %+v", mirror, doc)
		} else {
			mp := doc.Mirrors[0]
			got := map[string]planned{}
			for _, c := range mp.Create {
				if c.Error != "" {
					t.Errorf("kmirror plan -o json: the target would refuse %s: %s", c.TargetTopic, c.Error)
				}
				if c.Configs == nil {
					c.Configs = map[string]string{}
				}
				got[c.TargetTopic] = planned{c.SourceTopic, c.Partitions, c.Configs}
			}
			if !maps.EqualFunc(want, got, func(a, b planned) bool {
				return a.source == b.source && a.partitions == b.partitions && maps.Equal(a.configs, b.configs)
			}) {
				t.Errorf("kmirror plan -o json: create = %+v, want exactly %+v", got, want)
			}
			if len(mp.Grow)+len(mp.Configs)+len(mp.Failed) > 0 {
				t.Errorf("kmirror plan -o json on a fresh target: want only creations, got grow %+v, configs %+v, failed %s", mp.Grow, mp.Configs, mp.Failed)
			}
		}
		noTargetTopics("after kmirror plan -o json")

		// A worker creates everything.
		w := e.startWorker(path)
		addr := w.httpAddr(t)
		e.kmWaitMirroring(addr, mirror, 45*time.Second, p1, p2, p3)
		e.waitFor(45*time.Second, "kmirror topics to show the three stored topics", func() (bool, string) {
			tms, err := kmTopicsCLI(t, path)
			if err != nil {
				return false, err.Error()
			}
			for target := range want {
				if tms[target].Metadata["kmirror.state"] != "mirroring" {
					return false, fmt.Sprintf("%s: %+v", target, tms[target])
				}
			}
			return true, ""
		})
		if code, _ := w.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("kmirror exited with code %d after SIGTERM, want 0", code)
		}

		code, stdout, stderr = runCLI(t, "plan", "--config", path)
		if code != 0 || !strings.Contains(stdout, "nothing to change") {
			t.Errorf("kmirror plan after a run created everything: exit %d, want 0 with \"nothing to change\"\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		if doc := kmRunPlanJSON(t, path, 0); doc.Changes || len(doc.Mirrors) != 1 || len(doc.Mirrors[0].Create)+len(doc.Mirrors[0].Grow)+len(doc.Mirrors[0].Configs) > 0 {
			t.Errorf("kmirror plan -o json after a run: want no changes, got %+v", doc)
		}

		// Changes at the source.
		kmAlterTopic(t, e.srcAdm, p1, map[string]*string{"retention.ms": s("7200000")})
		if resp, err := e.srcAdm.UpdatePartitions(ctx, 2, p2); err != nil || resp.Error() != nil {
			t.Fatalf("grow %s to 2 partitions: %v %v", p2, err, resp.Error())
		}
		e.kmWaitTopic(e.srcCl, 30*time.Second, p2, 2)
		code, stdout, stderr = runCLI(t, "plan", "--config", path)
		if code != 3 {
			t.Errorf("kmirror plan after source changes: exit %d, want 3", code)
		}
		for _, line := range []string{
			fmt.Sprintf("~ configs of src.%s: set retention.ms=7200000", p1),
			fmt.Sprintf("~ grow src.%s from 1 to 2 partitions", p2),
		} {
			if !kmHasLine(stdout, line) {
				t.Errorf("kmirror plan after source changes does not print the line %q", line)
			}
		}
		if t.Failed() {
			t.Logf("kmirror plan: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		doc = kmRunPlanJSON(t, path, 3)
		if !doc.Changes || len(doc.Mirrors) != 1 {
			t.Fatalf("kmirror plan -o json after source changes: %+v", doc)
		}
		mp := doc.Mirrors[0]
		if len(mp.Configs) != 1 || mp.Configs[0].TargetTopic != "src."+p1 || mp.Configs[0].SourceTopic != p1 ||
			!maps.Equal(mp.Configs[0].Set, map[string]string{"retention.ms": "7200000"}) || len(mp.Configs[0].Delete) > 0 {
			t.Errorf("kmirror plan -o json: configs = %+v, want one change of src.%s: set retention.ms=7200000", mp.Configs, p1)
		}
		if len(mp.Grow) != 1 || mp.Grow[0].TargetTopic != "src."+p2 || mp.Grow[0].From != 1 || mp.Grow[0].To != 2 || mp.Grow[0].Error != "" {
			t.Errorf("kmirror plan -o json: grow = %+v, want src.%s from 1 to 2", mp.Grow, p2)
		}
		if len(mp.Create) > 0 {
			t.Errorf("kmirror plan -o json: create = %+v, want none", mp.Create)
		}
		// Still nothing changed on the target.
		if cs, err := kmTopicConfigs(ctx, e.dstAdm, "src."+p1); err != nil || cs["retention.ms"].Value != "3600000" {
			t.Errorf("after kmirror plan, target src.%s retention.ms = %v (err %v), want the unchanged 3600000", p1, cs["retention.ms"], err)
		}
		if n, err := partitionCount(ctx, e.dstCl, "src."+p2); err != nil || n != 1 {
			t.Errorf("after kmirror plan, target src.%s has %d partitions (err %v), want the unchanged 1", p2, n, err)
		}
	})
}

// kmRunPlanJSON runs `kmirror plan -o json` and decodes its output; the
// exit code must be wantCode.
func kmRunPlanJSON(t *testing.T, path string, wantCode int) kmPlanDoc {
	t.Helper()
	code, stdout, stderr := runCLI(t, "plan", "--config", path, "-o", "json")
	var doc kmPlanDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("kmirror plan -o json: exit %d, output is not JSON (%v)\nstdout:\n%s\nstderr:\n%s", code, err, stdout, stderr)
	}
	if code != wantCode {
		t.Errorf("kmirror plan -o json: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, wantCode, stdout, stderr)
	}
	return doc
}

// kmHasLine reports whether out has a line equal to want once trimmed.
func kmHasLine(out, want string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == want {
			return true
		}
	}
	return false
}

// kmWantMeta checks the metadata of one mirrored topic: provenance and
// exactly the given labels. It returns "" when it matches.
func kmWantMeta(tm kmTopicMeta, mirror, srcCluster, srcTopic, originCluster, originTopic string, labels map[string]string) string {
	md := tm.Metadata
	var bad []string
	for k, v := range map[string]string{
		"kmirror.mirror":         mirror,
		"kmirror.source.cluster": srcCluster,
		"kmirror.source.topic":   srcTopic,
		"kmirror.origin.cluster": originCluster,
		"kmirror.origin.topic":   originTopic,
		"kmirror.state":          "mirroring",
	} {
		if md[k] != v {
			bad = append(bad, fmt.Sprintf("%s = %q, want %q", k, md[k], v))
		}
	}
	if _, err := time.Parse(time.RFC3339, md["kmirror.created_at"]); err != nil {
		bad = append(bad, fmt.Sprintf("kmirror.created_at = %q, want an RFC 3339 time", md["kmirror.created_at"]))
	}
	if got := kmLabels(md); !maps.Equal(got, labels) {
		bad = append(bad, fmt.Sprintf("labels %s, want %s", kmFmtMap(got), kmFmtMap(labels)))
	}
	if tm.Mirror != mirror || tm.SourceTopic != srcTopic {
		bad = append(bad, fmt.Sprintf("mirror %q source_topic %q, want %q %q", tm.Mirror, tm.SourceTopic, mirror, srcTopic))
	}
	if len(bad) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %s", tm.TargetTopic, strings.Join(bad, "; "))
}

// TestTopicMetadataLabels: labels from mirrors[].labels (later entries win)
// and the provenance show in `kmirror topics -o json` (read from the
// metadata topic), in GET /api/v1/topics and its ?label= filter, and in
// the metadata topic itself for a plain consumer. The metadata survives a
// worker restart (created_at unchanged). A label change in the config
// reaches the existing topics after SIGHUP and after POST /api/v1/reload; a
// broken config is rejected by both (HTTP 400 with the file:line error) and
// the running labels stay.
func TestTopicMetadataLabels(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		begin := time.Now()
		orders, eu, misc := e.topic("orders"), e.topic("orders-eu"), e.topic("misc")
		createTopic(t, e.srcCl, orders, 2, nil)
		createTopic(t, e.srcCl, eu, 1, nil)
		createTopic(t, e.srcCl, misc, 1, nil)
		cfg := e.kmConfigFor()
		m := cfg.Mirrors[0]
		setLabels := func(ls ...kmLabel) { m.Labels = ls }
		setLabels(
			kmLabel{Match: "orders-.*", Set: map[string]string{"team": "payments", "tier": "1"}},
			kmLabel{Match: "orders-eu-.*", Set: map[string]string{"tier": "0", "region": "eu"}},
		)
		path := e.kmWriteConfig(cfg)
		// cliPath is the config `kmirror topics` reads: path, except
		// while path holds a broken config.
		cliPath := path
		targets := map[string]string{"src." + orders: orders, "src." + eu: eu, "src." + misc: misc}

		// wantLabels waits until the worker's API (addr) and the stored
		// metadata (kmirror topics) show exactly these labels.
		wantLabels := func(addr string, timeout time.Duration, want map[string]map[string]string) map[string]kmTopicMeta {
			t.Helper()
			var last map[string]kmTopicMeta
			e.waitFor(timeout, fmt.Sprintf("labels %v in /api/v1/topics and kmirror topics", want), func() (bool, string) {
				api, err := kmTopicsHTTP(addr, "")
				if err != nil {
					return false, err.Error()
				}
				cli, err := kmTopicsCLI(t, cliPath)
				if err != nil {
					return false, err.Error()
				}
				for name, got := range map[string]map[string]kmTopicMeta{"/api/v1/topics": api, "kmirror topics": cli} {
					for target, src := range targets {
						tm, ok := got[target]
						if !ok {
							return false, fmt.Sprintf("%s does not list %s", name, target)
						}
						if d := kmWantMeta(tm, m.Name, "src", src, "src", src, want[target]); d != "" {
							return false, name + ": " + d
						}
					}
					if len(got) != len(targets) {
						return false, fmt.Sprintf("%s lists %d topics, want %d: %v", name, len(got), len(targets), slices.Sorted(maps.Keys(got)))
					}
				}
				last = cli
				return true, ""
			})
			return last
		}
		labelsV1 := map[string]map[string]string{
			"src." + orders: {"team": "payments", "tier": "1"},
			"src." + eu:     {"team": "payments", "tier": "0", "region": "eu"},
			"src." + misc:   {},
		}

		w := e.startWorker(path)
		addr := w.httpAddr(t)
		e.kmWaitMirroring(addr, m.Name, 45*time.Second, orders, eu, misc)
		stored := wantLabels(addr, 45*time.Second, labelsV1)
		created := map[string]string{}
		for target, tm := range stored {
			created[target] = tm.Metadata["kmirror.created_at"]
			at, _ := time.Parse(time.RFC3339, created[target])
			if at.Before(begin.Add(-2*time.Second)) || at.After(time.Now().Add(2*time.Second)) {
				t.Errorf("%s: kmirror.created_at %s is not the time of this test (%s .. now)", target, created[target], begin.UTC().Format(time.RFC3339))
			}
			if tm.Metadata["kmirror.source.topic_id"] == "" {
				t.Errorf("%s: no kmirror.source.topic_id in %s", target, kmFmtMap(tm.Metadata))
			}
		}

		// The label filter of the API.
		for q, want := range map[string][]string{
			"label=team=payments":                  {"src." + orders, "src." + eu},
			"label=region=eu":                      {"src." + eu},
			"label=team=payments&label=tier=1":     {"src." + orders},
			"label=team=billing":                   {},
			"label=region":                         {"src." + eu},
			"mirror=" + m.Name + "&label=tier=0":   {"src." + eu},
			"mirror=nosuchmirror&label=tier=0":     {},
			"label=kmirror.source.topic=" + orders: {"src." + orders},
		} {
			got, err := kmTopicsHTTP(addr, q)
			if err != nil {
				t.Errorf("GET /api/v1/topics?%s: %v", q, err)
				continue
			}
			if g := slices.Sorted(maps.Keys(got)); !slices.Equal(g, slices.Sorted(slices.Values(want))) {
				t.Errorf("GET /api/v1/topics?%s lists %v, want %v", q, g, want)
			}
		}

		// The table form shows the labels too.
		code, table, stderr := runCLI(t, "topics", "--config", path)
		if code != 0 || !strings.Contains(table, "src."+eu) || !strings.Contains(table, "region=eu, team=payments, tier=0") {
			t.Errorf("kmirror topics (table): exit %d, want the row of src.%s with region=eu, team=payments, tier=0\nstdout:\n%s\nstderr:\n%s", code, eu, table, stderr)
		}

		// A plain consumer of the metadata topic reads the same maps.
		metaTopic := "kmirror." + m.Name + ".metadata.internal"
		recs := e.readTarget(metaTopic)
		// A key lives in one partition: the last record per key wins.
		latest := map[string]map[string]string{}
		for _, rs := range recs {
			for _, r := range rs {
				if r.Value == nil {
					delete(latest, string(r.Key))
					continue
				}
				var md map[string]string
				if err := json.Unmarshal(r.Value, &md); err != nil {
					t.Errorf("%s partition %d offset %d: value %q is not a JSON object of strings: %v", metaTopic, r.Partition, r.Offset, r.Value, err)
					continue
				}
				latest[string(r.Key)] = md
			}
		}
		for target, tm := range stored {
			if !maps.Equal(latest[target], tm.Metadata) {
				t.Errorf("%s: the latest record for key %s is %s, kmirror topics shows %s", metaTopic, target, kmFmtMap(latest[target]), kmFmtMap(tm.Metadata))
			}
		}

		// A restart keeps the metadata: created_at is what the first
		// worker wrote. created_at has whole seconds: the restart waits
		// for the next second, so a fresh timestamp would differ.
		var latestCreated time.Time
		for _, at := range created {
			if ts, _ := time.Parse(time.RFC3339, at); ts.After(latestCreated) {
				latestCreated = ts
			}
		}
		time.Sleep(time.Until(latestCreated.Add(1100 * time.Millisecond)))
		if code, _ := w.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("kmirror exited with code %d after SIGTERM, want 0", code)
		}
		w = e.startWorker(path)
		addr = w.httpAddr(t)
		e.kmWaitMirroring(addr, m.Name, 45*time.Second, orders, eu, misc)
		e.waitPasses(addr, m.Name, 2) // which would rewrite the metadata
		checkCreated := func(when string) {
			t.Helper()
			api, err := kmTopicsHTTP(addr, "")
			if err != nil {
				t.Fatal(err)
			}
			cli, err := kmTopicsCLI(t, cliPath)
			if err != nil {
				t.Fatal(err)
			}
			for target, at := range created {
				if got := api[target].Metadata["kmirror.created_at"]; got != at {
					t.Errorf("%s: /api/v1/topics shows %s kmirror.created_at %q, want the original %q", when, target, got, at)
				}
				if got := cli[target].Metadata["kmirror.created_at"]; got != at {
					t.Errorf("%s: kmirror topics shows %s kmirror.created_at %q, want the original %q", when, target, got, at)
				}
			}
		}
		checkCreated("after a restart")
		wantLabels(addr, 45*time.Second, labelsV1)

		// SIGHUP: team changes, region is dropped, misc gets a label.
		setLabels(
			kmLabel{Match: "orders-.*", Set: map[string]string{"team": "billing", "tier": "1"}},
			kmLabel{Match: "orders-eu-.*", Set: map[string]string{"tier": "0"}},
			kmLabel{Match: "misc-.*", Set: map[string]string{"team": "ops"}},
		)
		kmRewriteConfig(t, path, cfg.yaml(t))
		if err := w.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		labelsV2 := map[string]map[string]string{
			"src." + orders: {"team": "billing", "tier": "1"},
			"src." + eu:     {"team": "billing", "tier": "0"},
			"src." + misc:   {"team": "ops"},
		}
		wantLabels(addr, 45*time.Second, labelsV2)

		// POST /api/v1/reload: tier changes.
		setLabels(
			kmLabel{Match: "orders-.*", Set: map[string]string{"team": "billing", "tier": "2"}},
			kmLabel{Match: "orders-eu-.*", Set: map[string]string{"tier": "0"}},
			kmLabel{Match: "misc-.*", Set: map[string]string{"team": "ops"}},
		)
		kmRewriteConfig(t, path, cfg.yaml(t))
		code, body, err := kmHTTPPost(addr, "/api/v1/reload")
		if err != nil || code != 200 {
			t.Fatalf("POST /api/v1/reload with a good config: status %d, %s (%v); want 200", code, body, err)
		}
		labelsV3 := map[string]map[string]string{
			"src." + orders: {"team": "billing", "tier": "2"},
			"src." + eu:     {"team": "billing", "tier": "0"},
			"src." + misc:   {"team": "ops"},
		}
		wantLabels(addr, 45*time.Second, labelsV3)

		// A broken config (an invalid regexp, and a label change that must
		// not be applied) is rejected with its file:line error.
		cliPath = path + ".good.yaml"
		kmRewriteConfig(t, cliPath, cfg.yaml(t))
		m.Labels[1].Set = map[string]string{"tier": "99"}
		m.Labels[0].Match = "BROKEN-PATTERN"
		broken := strings.Replace(string(cfg.yaml(t)), "BROKEN-PATTERN", `'orders-('`, 1)
		line := 0
		for i, l := range strings.Split(broken, "\n") {
			if strings.Contains(l, "orders-(") {
				line = i + 1
			}
		}
		kmRewriteConfig(t, path, []byte(broken))
		code, body, err = kmHTTPPost(addr, "/api/v1/reload")
		if err != nil {
			t.Fatal(err)
		}
		wantErr := fmt.Sprintf("%s:%d: mirrors[0].labels[0].match", path, line)
		var rej struct{ Status, Error string }
		_ = json.Unmarshal(body, &rej)
		if code != 400 || !strings.Contains(rej.Error, wantErr) {
			t.Errorf("POST /api/v1/reload with a broken config: status %d, body %s; want 400 with an error containing %q", code, body, wantErr)
		}
		if err := w.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		e.waitFor(30*time.Second, "the SIGHUP with the broken config to be logged as rejected", func() (bool, string) {
			n := len(w.logLines("config reload rejected"))
			return n >= 2, fmt.Sprintf("%d lines with \"config reload rejected\" (one from the POST, one from SIGHUP)", n)
		})
		if ls := w.logLines("config reload rejected", fmt.Sprintf("%s:%d", path, line)); len(ls) == 0 {
			t.Errorf("the rejected reload is logged without the file:line error %s:%d", path, line)
		}
		e.waitPasses(addr, m.Name, 2)
		wantLabels(addr, 45*time.Second, labelsV3)
		checkCreated("after the reloads")
	})
}

// TestTopicMetadataChain: in a chain A -> B -> C (one process, two
// mirrors, B -> C trusting A -> B), the copy on C keeps A's labels and
// names A as its origin; C's mirror adds its own labels, which win on the
// same key. A label change on the A -> B mirror (SIGHUP) travels on to C.
// A metadata topic on B that B -> C does not trust, labelling the same
// topic otherwise, is ignored, with one warning that names it.
//
// With the kafka backend A and B are the shared clusters and C is a
// cluster of the test's own.
func TestTopicMetadataChain(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		c := kmExtraCluster(t, b, "chain-c")
		orders := e.topic("orders")
		createTopic(t, e.srcCl, orders, 2, nil)
		recs, want := seqRecords(orders, "chain", 2, 30)
		produce(t, e.srcCl, recs...)

		ab := kmMirrorOf("ab-"+e.id, "a", "b", regexp.QuoteMeta(orders))
		ab.Labels = []kmLabel{{Match: "orders-.*", Set: map[string]string{"team": "payments", "tier": "1"}}}
		bc := kmMirrorOf("bc-"+e.id, "b", "c", regexp.QuoteMeta("a."+orders))
		bc.Labels = []kmLabel{{Match: ".*", Set: map[string]string{"tier": "2", "hop": "c"}}}
		bc.Metadata = &kmMetadata{TrustedUpstreams: []string{ab.Name}}
		forged := "kmirror.forged-" + e.id + ".metadata.internal"
		createTopic(t, e.dstCl, forged, 1, nil)
		produce(t, e.dstCl, &kgo.Record{Topic: forged, Key: []byte("a." + orders), Value: []byte(`{"team":"mallory","kmirror.origin.cluster":"mallory","kmirror.origin.topic":"x"}`)})
		cfg := &kmConfig{
			Clusters: map[string]*kmCluster{
				"a": {BootstrapServers: e.src.Addrs()},
				"b": {BootstrapServers: e.dst.Addrs()},
				"c": {BootstrapServers: c.Addrs()},
			},
			Mirrors: []*kmMirror{ab, bc},
			HTTP:    map[string]string{"listen": "127.0.0.1:0"},
			Log:     map[string]string{"level": "debug"},
		}
		path := e.kmWriteConfig(cfg)
		w := e.startWorker(path)
		addr := w.httpAddr(t)
		onB, onC := "a."+orders, "b.a."+orders

		// The data goes all the way.
		ctx := ctxTimeout(t, 2*time.Minute)
		cCl := newClient(t, c.Addrs())
		e.waitFor(45*time.Second, fmt.Sprintf("%s on cluster c to hold the %d records of %s on a", onC, 60, orders), func() (bool, string) {
			if _, err := partitionCount(ctx, cCl, onC); err != nil {
				return false, err.Error()
			}
			got, err := readTopic(ctx, c.Addrs(), onC)
			if err != nil {
				return false, err.Error()
			}
			if d := diffValues(want, values(got)); d != "" {
				return false, d
			}
			return true, ""
		})

		check := func(teamOnA string) func() (bool, string) {
			return func() (bool, string) {
				api, err := kmTopicsHTTP(addr, "")
				if err != nil {
					return false, err.Error()
				}
				if d := kmWantMeta(api[onB], ab.Name, "a", orders, "a", orders, map[string]string{"team": teamOnA, "tier": "1"}); d != "" {
					return false, "/api/v1/topics: " + d
				}
				if d := kmWantMeta(api[onC], bc.Name, "b", onB, "a", orders, map[string]string{"team": teamOnA, "tier": "2", "hop": "c"}); d != "" {
					return false, "/api/v1/topics: " + d
				}
				stored, err := kmTopicsCLI(t, path, "--mirror", bc.Name)
				if err != nil {
					return false, err.Error()
				}
				if d := kmWantMeta(stored[onC], bc.Name, "b", onB, "a", orders, map[string]string{"team": teamOnA, "tier": "2", "hop": "c"}); d != "" {
					return false, "kmirror topics --mirror " + bc.Name + ": " + d
				}
				if len(stored) != 1 {
					return false, fmt.Sprintf("kmirror topics --mirror %s lists %v, want only %s", bc.Name, slices.Sorted(maps.Keys(stored)), onC)
				}
				return true, ""
			}
		}
		e.waitFor(45*time.Second, "C's copy to carry A's labels and origin", check("payments"))

		ab.Labels[0].Set["team"] = "billing"
		kmRewriteConfig(t, path, cfg.yaml(t))
		if err := w.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		e.waitFor(45*time.Second, "a label change on A -> B to reach C's copy", check("billing"))
		if ls := w.logLines("level=WARN", "ignoring the topic metadata", "topic="+forged); len(ls) != 1 {
			t.Errorf("%d warnings name the untrusted %s, want 1 (once, not every pass):\n%s", len(ls), forged, strings.Join(ls, "\n"))
		}
	})
}

// TestACLSync: with sync.acls enabled (every 1s), the literal ACLs of a
// mirrored source topic produce exactly the expected ACLs on its target
// copy, by MirrorMaker 2's rules as kmirror documents them: ALLOW READ and
// DENY DESCRIBE are copied (host included), ALL becomes READ (for ALLOW
// and DENY), WRITE (ALLOW or DENY) is never copied; prefixed ACLs, ACLs of
// topics that are not mirrored and group ACLs are not copied. An ACL added
// at the source later is copied too, and no WRITE ever appears.
//
// kfake runs with SASL, ACLs enabled and kmirror as its super user; real
// Kafka runs with the StandardAuthorizer on two clusters of the test's own,
// kmirror logging in over SASL/PLAIN as the super user User:kmirror (the
// test's clients use PLAINTEXT, whose User:ANONYMOUS is a super user too).
func TestACLSync(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		pw := "acl-secret-" + randomHex(8)
		var e *env
		var srcAddrs, dstAddrs []string
		switch b.Name() {
		case "kafka":
			mk := func(name string) kafkatest.Config {
				cfg := kafkatest.Config{Name: name, Dir: kmKafkaDir(t, name), Properties: kafkatest.AuthorizerProperties("User:kmirror")}
				if _, err := (kafkatest.Security{PlainUsers: map[string]string{"kmirror": pw}}).Apply(&cfg, filepath.Join(cfg.Dir, "tls")); err != nil {
					t.Fatal(err)
				}
				return cfg
			}
			cs := kmStartKafka(t, mk("acl-source"), mk("acl-target"))
			e = newEnvWith(t, cs[0], cs[1], false)
			srcAddrs, dstAddrs = []string{cs[0].Addr(kafkatest.SASL)}, []string{cs[1].Addr(kafkatest.SASL)}
		default:
			opts := []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("PLAIN", "kmirror", pw), kfake.EnableACLs()}
			src, dst := kmKfake(t, opts...), kmKfake(t, opts...)
			auth := []kgo.Opt{kgo.SASL(plain.Auth{User: "kmirror", Pass: pw}.AsMechanism())}
			e = kmNewEnv(t, src, dst, false, auth, auth)
			srcAddrs, dstAddrs = src.Addrs(), dst.Addrs()
		}
		secured, other := e.topic("secured"), e.topic("unmirrored")
		createTopic(t, e.srcCl, secured, 2, nil)
		createTopic(t, e.srcCl, other, 1, nil)

		const (
			topicRes = kmsg.ACLResourceTypeTopic
			groupRes = kmsg.ACLResourceTypeGroup
			lit      = kmsg.ACLResourcePatternTypeLiteral
			pre      = kmsg.ACLResourcePatternTypePrefixed
			allow    = kmsg.ACLPermissionTypeAllow
			deny     = kmsg.ACLPermissionTypeDeny
			read     = kmsg.ACLOperationRead
			write    = kmsg.ACLOperationWrite
			all      = kmsg.ACLOperationAll
			describe = kmsg.ACLOperationDescribe
		)
		kmCreateACLs(t, e.srcCl,
			kmACL{topicRes, secured, lit, "User:alice", "*", read, allow},
			kmACL{topicRes, secured, lit, "User:bob", "*", write, allow},
			kmACL{topicRes, secured, lit, "User:carol", "*", all, allow},
			kmACL{topicRes, secured, lit, "User:carol", "*", read, allow}, // the same as carol's ALL once mapped
			kmACL{topicRes, secured, lit, "User:mallory", "10.0.0.1", describe, deny},
			kmACL{topicRes, secured, lit, "User:eve", "*", write, deny},
			kmACL{topicRes, secured, lit, "User:frank", "*", all, deny},
			kmACL{topicRes, "secured-", pre, "User:pat", "*", read, allow}, // prefixed: not copied
			kmACL{topicRes, other, lit, "User:olga", "*", read, allow},     // not mirrored
			kmACL{groupRes, "g-" + e.id, lit, "User:alice", "*", read, allow},
		)

		cfg := e.kmConfigFor()
		cfg.Clusters["src"] = &kmCluster{BootstrapServers: srcAddrs, SASL: &kmSASL{Mechanism: "PLAIN", Username: "kmirror", Password: "${E2E_ACL_PASSWORD}"}}
		cfg.Clusters["dst"] = &kmCluster{BootstrapServers: dstAddrs, SASL: &kmSASL{Mechanism: "PLAIN", Username: "kmirror", Password: "${E2E_ACL_PASSWORD}"}}
		m := cfg.Mirrors[0]
		m.Topics.Exclude = []string{`unmirrored-.*`}
		m.Sync = &kmSync{ACLs: &kmSyncItem{Enabled: kmBool(true), Interval: "1s"}}
		w := e.startWorkerEnv(e.kmWriteConfig(cfg), "E2E_ACL_PASSWORD="+pw)
		addr := w.httpAddr(t)
		target := "src." + secured
		e.kmWaitTopic(e.dstCl, 45*time.Second, target, 2)

		want := []kmACL{
			{topicRes, target, lit, "User:alice", "*", read, allow},
			{topicRes, target, lit, "User:carol", "*", read, allow},
			{topicRes, target, lit, "User:mallory", "10.0.0.1", describe, deny},
			{topicRes, target, lit, "User:frank", "*", read, deny},
		}
		ctx := ctxTimeout(t, 2*time.Minute)
		exactly := func(want []kmACL) func() (bool, string) {
			slices.SortFunc(want, func(a, b kmACL) int { return strings.Compare(a.String(), b.String()) })
			return func() (bool, string) {
				got, err := kmDescribeACLs(ctx, e.dstCl)
				if err != nil {
					return false, err.Error()
				}
				for _, a := range got {
					if a.Op == write {
						t.Fatalf("the target has a WRITE ACL: %v (kmirror must never copy WRITE)", a)
					}
				}
				if !slices.Equal(got, want) {
					return false, fmt.Sprintf("target ACLs:\n  %v\nwant exactly:\n  %v", got, want)
				}
				return true, ""
			}
		}
		e.waitFor(45*time.Second, "the target to have exactly the expected ACLs", exactly(want))
		// Some more syncs add nothing.
		time.Sleep(2500 * time.Millisecond)
		if ok, why := exactly(want)(); !ok {
			t.Errorf("after more ACL syncs: %s", why)
		}

		// An ACL added at the source while running.
		kmCreateACLs(t, e.srcCl,
			kmACL{topicRes, secured, lit, "User:dave", "*", read, allow},
			kmACL{topicRes, secured, lit, "User:dave", "*", write, allow},
		)
		want = append(want, kmACL{topicRes, target, lit, "User:dave", "*", read, allow})
		e.waitFor(30*time.Second, "the ACL added at the source to be copied", exactly(want))
		// kmirror counts the ACL once the target answered, which may be
		// after the test sees it there: wait for the count.
		e.waitFor(30*time.Second, fmt.Sprintf("kmirror_acls_created_total == %d", len(want)), func() (bool, string) {
			n, err := metricSum(addr, "kmirror_acls_created_total", m.Name)
			if err != nil {
				return false, err.Error()
			}
			return n == float64(len(want)), fmt.Sprintf("%v", n)
		})
	})
}
