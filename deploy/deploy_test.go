package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	rulesFile     = "prometheus/kmirror-rules.yml"
	rulesTestFile = "prometheus/kmirror-rules_test.yml"
	dashboardFile = "grafana/kmirror-dashboard.json"
)

// knownMetrics are the series kmirror exports (docs/architecture.md,
// docs/plugins.md, and the listener metrics): an expression naming anything
// else is a typo.
var knownMetrics = []string{
	"kmirror_replication_records_total",
	"kmirror_replication_bytes_total",
	"kmirror_replication_latency_seconds_bucket",
	"kmirror_replication_latency_seconds_sum",
	"kmirror_replication_latency_seconds_count",
	"kmirror_replication_lag_records",
	"kmirror_mirrored_topics",
	"kmirror_topic_create_errors_total",
	"kmirror_produce_errors_total",
	"kmirror_source_topic_recreations_total",
	"kmirror_topic_config_changes_total",
	"kmirror_topic_config_sync_errors_total",
	"kmirror_acls_created_total",
	"kmirror_group_offsets_synced_total",
	"kmirror_group_sync_errors_total",
	"kmirror_control_passes_total",
	"kmirror_control_pass_errors_total",
	"kmirror_control_last_success_timestamp_seconds",
	"kmirror_build_info",
	"kmirror_plugin_restarts_total",
	"kmirror_plugin_up",
	"kmirror_listener_calls_total",
	"kmirror_listener_call_duration_seconds_bucket",
	"kmirror_listener_call_duration_seconds_sum",
	"kmirror_listener_call_duration_seconds_count",
	"kmirror_replicated_set_changes_total",
	"kmirror_internal_write_errors_total",
	"kmirror_admin_errors_total",
	"kmirror_group_untranslatable_partitions",
	"kmirror_failed_partitions",
	"kmirror_dead_letter_records_total",
	"kmirror_cluster_slots",
	"kmirror_cluster_slots_owned",
	"kmirror_cluster_slots_unowned",
	"kmirror_cluster_rebalance_seconds",
	"kmirror_cluster_slot_changes_total",
	"kmirror_cluster_control_plane",
	"kmirror_transactions_total",
	"kmirror_transaction_commit_seconds_bucket",
	"kmirror_transaction_commit_seconds_sum",
	"kmirror_transaction_commit_seconds_count",
	"kmirror_batches_total",
	"kmirror_passthrough_fallbacks_total",
	"kmirror_source_gap_records_total",
	"kmirror_divergent_records",
	"kmirror_throttled_seconds_total",
	"kmirror_rate_limit_bytes_per_second",
	"kmirror_topic_rate_limit_bytes_per_second",
}

var metricName = regexp.MustCompile(`\bkmirror_[a-z0-9_]+`)

func checkMetrics(t *testing.T, where, expr string) {
	t.Helper()
	names := metricName.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s: expression names no kmirror metric: %s", where, expr)
	}
	for _, n := range names {
		if !slices.Contains(knownMetrics, n) {
			t.Errorf("%s: unknown metric %s in %s", where, n, expr)
		}
	}
}

// inCI reports whether the tests run in CI (CI=true), where a missing tool
// fails instead of skipping.
func inCI() bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv("CI")))
	return v != "" && v != "false" && v != "0"
}

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	msg := "promtool not found: apt-get install prometheus (see deploy/REQUIREMENTS)"
	if inCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func run(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	t.Logf("%s %s:\n%s", filepath.Base(name), strings.Join(args, " "), strings.TrimSpace(string(out)))
}

func TestRulesCheck(t *testing.T) {
	run(t, ".", promtool(t), "check", "rules", rulesFile)
}

func TestRulesUnitTests(t *testing.T) {
	run(t, "prometheus", promtool(t), "test", "rules", filepath.Base(rulesTestFile))
}

// The alerts the kit promises, each with a severity and the three
// annotations, on known metrics only.
func TestRulesContent(t *testing.T) {
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	// The rule file is plain YAML of a fixed shape; reading it line by
	// line keeps this package free of a YAML dependency. promtool checks
	// the YAML itself.
	type rule struct {
		name, expr string
		keys       []string
	}
	var rules []rule
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(trimmed, "- alert: "); ok {
			rules = append(rules, rule{name: name})
			continue
		}
		if len(rules) == 0 || strings.HasPrefix(trimmed, "#") {
			continue
		}
		r := &rules[len(rules)-1]
		if expr, ok := strings.CutPrefix(trimmed, "expr: "); ok {
			r.expr = expr
		}
		if k, _, ok := strings.Cut(trimmed, ":"); ok {
			r.keys = append(r.keys, k)
		}
	}
	want := []string{"KmirrorReplicatedSetChanged", "KmirrorTopicFailed", "KmirrorReplicationLagHigh",
		"KmirrorControlLoopStale", "KmirrorListenerFailing", "KmirrorPluginRestarting",
		"KmirrorPartitionFailed", "KmirrorSourceGap", "KmirrorInternalWritesFailing", "KmirrorGroupOffsetsUntranslatable",
		"KmirrorClusterSlotsUnowned", "KmirrorClusterGroupNotSettling", "KmirrorClusterRebalancing"}
	var got []string
	for _, r := range rules {
		got = append(got, r.name)
		checkMetrics(t, r.name, r.expr)
		for _, k := range []string{"severity", "summary", "description", "runbook"} {
			if !slices.Contains(r.keys, k) {
				t.Errorf("%s has no %s", r.name, k)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("alerts %v, want %v", got, want)
	}
	tests, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"KmirrorTopicFailed", "KmirrorListenerFailing", "KmirrorPartitionFailed", "KmirrorSourceGap", "KmirrorClusterSlotsUnowned", "KmirrorClusterGroupNotSettling"} {
		if !strings.Contains(string(tests), "alertname: "+a) {
			t.Errorf("%s has no unit test in %s", a, rulesTestFile)
		}
	}
}

type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		GridPos struct{ H, W, X, Y int } `json:"gridPos"`
		Targets []struct {
			RefID      string `json:"refId"`
			Expr       string `json:"expr"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

func TestDashboard(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q", d.UID, d.Title)
	}
	var hasDS bool
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus" {
			hasDS = true
		}
	}
	if !hasDS {
		t.Error("no datasource variable (name datasource, type datasource, query prometheus)")
	}
	if len(d.Panels) < 10 {
		t.Errorf("%d panels", len(d.Panels))
	}
	ids := map[int]bool{}
	var titles []string
	for i, p := range d.Panels {
		where := fmt.Sprintf("panel %d %q", i, p.Title)
		if p.Title == "" {
			t.Errorf("panel %d has no title", i)
		}
		titles = append(titles, p.Title)
		if ids[p.ID] {
			t.Errorf("%s: duplicate id %d", where, p.ID)
		}
		ids[p.ID] = true
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("%s: datasource %q, want ${datasource}", where, p.Datasource.UID)
		}
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("%s: gridPos %+v", where, p.GridPos)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s has no targets", where)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("%s: target %s has no expr", where, tg.RefID)
			}
			if tg.Datasource.UID != "${datasource}" {
				t.Errorf("%s: target %s datasource %q", where, tg.RefID, tg.Datasource.UID)
			}
			checkMetrics(t, where, tg.Expr)
		}
	}
	// What the dashboard promises to show.
	for _, m := range []string{"kmirror_replication_records_total", "kmirror_replication_bytes_total",
		"kmirror_replication_latency_seconds_bucket", "kmirror_replication_lag_records", "kmirror_mirrored_topics",
		"kmirror_topic_create_errors_total", "kmirror_produce_errors_total", "kmirror_listener_calls_total",
		"kmirror_plugin_restarts_total", "kmirror_group_offsets_synced_total"} {
		found := false
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				found = found || strings.Contains(tg.Expr, m)
			}
		}
		if !found {
			t.Errorf("no panel shows %s (panels: %v)", m, titles)
		}
	}
}

// Every dashboard expression is valid PromQL: promtool checks them as
// recording rules, with Grafana's variables substituted.
func TestDashboardPromQL(t *testing.T) {
	bin := promtool(t)
	d := readDashboard(t)
	repl := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$mirror", ".*")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, p := range d.Panels {
		for _, tg := range p.Targets {
			expr, _ := json.Marshal(repl.Replace(tg.Expr)) // a JSON string is a YAML string
			fmt.Fprintf(&b, "      - record: kmirror:dashboard_panel%d_%s\n        expr: %s\n", i, strings.ToLower(tg.RefID), expr)
		}
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ".", bin, "check", "rules", path)
}
