package app

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/plugins"
)

func TestCoalescerSharesConcurrentCallsAndExpires(t *testing.T) {
	t.Parallel()
	// A TTL far above any scheduling delay: a caller the scheduler starts
	// late still finds the answer, so the count below does not depend on
	// the machine's load.
	c := newCoalescer(time.Minute)
	var calls atomic.Int32
	release := make(chan struct{})
	call := func(context.Context) ([]string, error) {
		calls.Add(1)
		<-release
		return []string{"a"}, nil
	}
	req := filters.TopicRequest{Properties: map[string]string{"team": "x"}, Topics: []filters.Topic{{Name: "a", Partitions: 1}}}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if got, err := c.do(context.Background(), topicCoalesceKey("p", req), call); err != nil || len(got) != 1 {
				t.Errorf("got %v, %v", got, err)
			}
		})
	}
	// Usually all five are waiting on the one call by now.
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("5 concurrent identical calls reached the plugin %d times, want 1", n)
	}
	// Within the TTL the answer is shared.
	if _, err := c.do(context.Background(), topicCoalesceKey("p", req), call); err != nil || calls.Load() != 1 {
		t.Fatalf("within the TTL: calls = %d, %v", calls.Load(), err)
	}
	// Different properties are a different question.
	other := req
	other.Properties = map[string]string{"team": "y"}
	if _, err := c.do(context.Background(), topicCoalesceKey("p", other), call); err != nil || calls.Load() != 2 {
		t.Fatalf("calls = %d, %v", calls.Load(), err)
	}

	// After the TTL (less than a pass), the plugin is asked again: an
	// edited catalog is seen.
	short := newCoalescer(50 * time.Millisecond)
	if _, err := short.do(context.Background(), topicCoalesceKey("p", req), call); err != nil || calls.Load() != 3 {
		t.Fatalf("calls = %d, %v", calls.Load(), err)
	}
	time.Sleep(60 * time.Millisecond) // at least the TTL
	if _, err := short.do(context.Background(), topicCoalesceKey("p", req), call); err != nil || calls.Load() != 4 {
		t.Fatalf("after the TTL: calls = %d, %v", calls.Load(), err)
	}
}

func TestCoalescerDoesNotCacheErrors(t *testing.T) {
	t.Parallel()
	c := newCoalescer(time.Minute)
	n := 0
	fail := func(context.Context) ([]string, error) { n++; return nil, errors.New("plugin down") }
	req := filters.TopicRequest{Topics: []filters.Topic{{Name: "a"}}}
	for range 2 {
		if _, err := c.do(context.Background(), topicCoalesceKey("p", req), fail); err == nil {
			t.Fatal("want the plugin's error")
		}
	}
	if n != 2 {
		t.Fatalf("a failed call was cached: %d calls", n)
	}
}

// fakePlugin stands in for a running filter plugin with the given
// capabilities; its filters answer with topics and groups.
type fakePlugin struct {
	caps   []plugins.Capability
	topics func(context.Context, filters.TopicRequest) ([]string, error)
	groups func(context.Context, filters.GroupRequest) ([]string, error)

	topicCalls, groupCalls atomic.Int32
	mu                     sync.Mutex
	groupReqs              []filters.GroupRequest
}

func (p *fakePlugin) Info() plugins.Info {
	return plugins.Info{Name: "fake", Version: "0", Capabilities: p.caps}
}

func (p *fakePlugin) TopicFilter() (filters.TopicFilter, bool) {
	if !p.Info().Has(plugins.CapabilityTopicFilter) {
		return nil, false
	}
	return fakeTopicFilter{p}, true
}

func (p *fakePlugin) GroupFilter() (filters.GroupFilter, bool) {
	if !p.Info().Has(plugins.CapabilityGroupFilter) {
		return nil, false
	}
	return fakeGroupFilter{p}, true
}

type fakeTopicFilter struct{ p *fakePlugin }

func (f fakeTopicFilter) FilterTopics(ctx context.Context, req filters.TopicRequest) ([]string, error) {
	f.p.topicCalls.Add(1)
	return f.p.topics(ctx, req)
}

type fakeGroupFilter struct{ p *fakePlugin }

func (f fakeGroupFilter) FilterGroups(ctx context.Context, req filters.GroupRequest) ([]string, error) {
	f.p.groupCalls.Add(1)
	f.p.mu.Lock()
	saved := req
	saved.Groups = slices.Clone(req.Groups) // the caller reuses its slice
	f.p.groupReqs = append(f.p.groupReqs, saved)
	f.p.mu.Unlock()
	return f.p.groups(ctx, req)
}

func (p *fakePlugin) lastGroupRequest() filters.GroupRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.groupReqs[len(p.groupReqs)-1]
}

// keep answers with the candidates named in names.
func keepGroups(names ...string) func(context.Context, filters.GroupRequest) ([]string, error) {
	return func(context.Context, filters.GroupRequest) ([]string, error) { return names, nil }
}

func keepTopics(names ...string) func(context.Context, filters.TopicRequest) ([]string, error) {
	return func(context.Context, filters.TopicRequest) ([]string, error) { return names, nil }
}

// filterTestConfig is a config whose mirror m translates the groups
// app-.* except app-tmp and lists the plugin "cat" (properties team:
// billing) in its filters.
func filterTestConfig(t *testing.T) *config.Config {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cat")
	if err := os.WriteFile(bin, []byte("#!/bin/false\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load([]byte(`
clusters:
  a: {bootstrap_servers: ["127.0.0.1:19092"]}
  b: {bootstrap_servers: ["127.0.0.1:29092"]}
mirrors:
  - name: m
    source: a
    target: b
    groups: {include: ["app-.*"], exclude: ["app-tmp"]}
    filters:
      - plugin: cat
        properties: {team: billing}
plugins:
  cat: {path: `+bin+`, sha256: "`+strings.Repeat("ab", 32)+`"}
`), "kmirror.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testApp is an App with just what the selection wiring uses: plugins are
// looked up among ps.
func testApp(ps map[string]filterPlugin) *App {
	return &App{
		opts:      Options{Logger: slog.New(slog.DiscardHandler), ConfigFile: "kmirror.yaml"},
		coalescer: newCoalescer(0), // no caching between calls: each call is seen
		lookup: func(name string) (filterPlugin, bool) {
			p, ok := ps[name]
			return p, ok
		},
	}
}

// applyGroupFilters runs a selection's group filters in order as the
// connector does (each sees what the previous kept).
func applyGroupFilters(t *testing.T, fs []filters.GroupFilter, names ...string) ([]string, error) {
	t.Helper()
	cands := make([]filters.Group, len(names))
	for i, n := range names {
		cands[i] = filters.Group{Name: n, Topics: []string{"orders"}}
	}
	for _, f := range fs {
		keep, err := f.FilterGroups(context.Background(), filters.GroupRequest{Mirror: "m", Groups: cands})
		if err != nil {
			return nil, err
		}
		cands = slices.DeleteFunc(cands, func(g filters.Group) bool { return !slices.Contains(keep, g.Name) })
	}
	out := make([]string, len(cands))
	for i, g := range cands {
		out[i] = g.Name
	}
	return out, nil
}

func applyTopicFilters(t *testing.T, fs []filters.TopicFilter, names ...string) ([]string, error) {
	t.Helper()
	cands := make([]filters.Topic, len(names))
	for i, n := range names {
		cands[i] = filters.Topic{Name: n, Partitions: 1}
	}
	for _, f := range fs {
		keep, err := f.FilterTopics(context.Background(), filters.TopicRequest{Mirror: "m", Topics: cands})
		if err != nil {
			return nil, err
		}
		cands = slices.DeleteFunc(cands, func(tp filters.Topic) bool { return !slices.Contains(keep, tp.Name) })
	}
	out := make([]string, len(cands))
	for i, tp := range cands {
		out[i] = tp.Name
	}
	return out, nil
}

// TestGroupFilterPluginWiredAfterRegex: a plugin in mirrors[].filters with
// the group_filter capability is in the mirror's group chain after the
// regex (it sees only the groups the regex kept, with the filter's
// properties) and leaves topics alone (no call, no configs read).
func TestGroupFilterPluginWiredAfterRegex(t *testing.T) {
	t.Parallel()
	cfg := filterTestConfig(t)
	p := &fakePlugin{caps: []plugins.Capability{plugins.CapabilityGroupFilter}, groups: keepGroups("app-b", "app-tmp", "other")}
	a := testApp(map[string]filterPlugin{"cat": p})
	sel, err := a.selection(cfg.Mirrors[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(sel.groupFilters) != 2 {
		t.Fatalf("the mirror has %d group filters, want 2 (the regex, then the plugin)", len(sel.groupFilters))
	}
	got, err := applyGroupFilters(t, sel.groupFilters, "app-a", "app-b", "app-tmp", "other")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"app-b"}) {
		t.Errorf("selected groups %v, want [app-b]", got)
	}
	req := p.lastGroupRequest()
	var asked []string
	for _, g := range req.Groups {
		asked = append(asked, g.Name)
	}
	if !slices.Equal(asked, []string{"app-a", "app-b"}) {
		t.Errorf("the plugin was asked about %v, want only what the regex kept: [app-a app-b]", asked)
	}
	if req.Properties["team"] != "billing" || req.Mirror != "m" {
		t.Errorf("the plugin got mirror %q, properties %v; want m and the filter's properties {team: billing}", req.Mirror, req.Properties)
	}

	// Topics: the group-only plugin keeps every candidate, uncalled, and
	// needs no configs.
	topics, err := applyTopicFilters(t, sel.filters, "orders", "payments")
	if err != nil || !slices.Equal(topics, []string{"orders", "payments"}) {
		t.Errorf("topics selected %v, %v; want every candidate", topics, err)
	}
	if n := p.topicCalls.Load(); n != 0 {
		t.Errorf("the group-only plugin was asked about topics %d times", n)
	}
	for _, f := range sel.filters {
		if pf, ok := f.(*pluginTopicFilter); ok && pf.ReadsConfigs() {
			t.Error("a group-only plugin makes the pass read topic configs")
		}
	}
	if err := a.checkFilterPlugins(cfg); err != nil {
		t.Errorf("checkFilterPlugins: %v", err)
	}
}

// TestPluginFilterCapabilities: a plugin in mirrors[].filters filters what
// its capabilities say, and one with neither filter capability is refused
// naming the field.
func TestPluginFilterCapabilities(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                   string
		caps                   []plugins.Capability
		wantTopics, wantGroups []string // nil: an error
	}{
		{"topic_filter", []plugins.Capability{plugins.CapabilityTopicFilter}, []string{"orders"}, []string{"app-a", "app-b"}},
		{"group_filter", []plugins.Capability{plugins.CapabilityGroupFilter}, []string{"orders", "payments"}, []string{"app-b"}},
		{"both", []plugins.Capability{plugins.CapabilityTopicFilter, plugins.CapabilityGroupFilter}, []string{"orders"}, []string{"app-b"}},
		{"neither", []plugins.Capability{plugins.CapabilityTopicListener}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := filterTestConfig(t)
			p := &fakePlugin{caps: tc.caps, topics: keepTopics("orders"), groups: keepGroups("app-b")}
			a := testApp(map[string]filterPlugin{"cat": p})
			sel, err := a.selection(cfg.Mirrors[0])
			if err != nil {
				t.Fatal(err)
			}
			topics, terr := applyTopicFilters(t, sel.filters, "orders", "payments")
			groups, gerr := applyGroupFilters(t, sel.groupFilters, "app-a", "app-b")
			checkErr := a.checkFilterPlugins(cfg)
			if tc.wantTopics == nil {
				if terr == nil || gerr == nil {
					t.Errorf("a plugin that filters neither: topics %v (%v), groups %v (%v); want errors, never a selection", topics, terr, groups, gerr)
				}
				want := `kmirror.yaml:11: mirrors[0].filters[0].plugin: plugin "cat"`
				if checkErr == nil || !strings.Contains(checkErr.Error(), want) || !strings.Contains(checkErr.Error(), "topic_listener") {
					t.Errorf("checkFilterPlugins = %v, want an error containing %q and the plugin's capabilities", checkErr, want)
				}
				return
			}
			if terr != nil || !slices.Equal(topics, tc.wantTopics) {
				t.Errorf("topics %v, %v; want %v", topics, terr, tc.wantTopics)
			}
			if gerr != nil || !slices.Equal(groups, tc.wantGroups) {
				t.Errorf("groups %v, %v; want %v", groups, gerr, tc.wantGroups)
			}
			if checkErr != nil {
				t.Errorf("checkFilterPlugins: %v", checkErr)
			}
		})
	}
}

// TestPluginGroupFilterFailSafe: a group filter that cannot answer (plugin
// not running, its own error, a deadline) returns an error, never an empty
// selection; errors are not cached; a call is bounded by filterTimeout; the
// plugin is looked up on every call, so a restarted one is used at once.
func TestPluginGroupFilterFailSafe(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var current filterPlugin // nil: not running
	f := &pluginGroupFilter{
		lookup: func(string) (filterPlugin, bool) {
			mu.Lock()
			defer mu.Unlock()
			return current, current != nil
		},
		name:  "cat",
		cache: newCoalescer(0),
	}
	set := func(p filterPlugin) { mu.Lock(); current = p; mu.Unlock() }
	req := filters.GroupRequest{Mirror: "m", Groups: []filters.Group{{Name: "g1"}, {Name: "g2"}}}
	ctx := context.Background()

	if names, err := f.FilterGroups(ctx, req); err == nil || !strings.Contains(err.Error(), "filter plugin cat is not running") {
		t.Errorf("plugin not running: %v, %v; want an error", names, err)
	}
	// No candidates: nothing to ask, even with the plugin down.
	if names, err := f.FilterGroups(ctx, filters.GroupRequest{Mirror: "m"}); err != nil || len(names) != 0 {
		t.Errorf("no candidates: %v, %v; want none and no error", names, err)
	}

	var deadline time.Time
	failing := &fakePlugin{caps: []plugins.Capability{plugins.CapabilityGroupFilter}, groups: func(ctx context.Context, _ filters.GroupRequest) ([]string, error) {
		deadline, _ = ctx.Deadline()
		return nil, errors.New("catalog: broken")
	}}
	set(failing)
	for range 2 {
		if names, err := f.FilterGroups(ctx, req); err == nil || !strings.Contains(err.Error(), "catalog: broken") || names != nil {
			t.Errorf("failing plugin: %v, %v; want its error and no names", names, err)
		}
	}
	// The last call began before now: its deadline is at most
	// filterTimeout from now, however slowly the calls ran.
	end := time.Now()
	if n := failing.groupCalls.Load(); n != 2 {
		t.Errorf("two calls reached the failing plugin %d times: an error was cached", n)
	}
	if deadline.IsZero() || deadline.After(end.Add(filterTimeout)) {
		t.Errorf("the call's deadline is %v, want at most filterTimeout (%v) from the call", deadline, filterTimeout)
	}

	// "Restarted": the next call reaches the new process.
	restarted := &fakePlugin{caps: []plugins.Capability{plugins.CapabilityGroupFilter}, groups: keepGroups("g2")}
	set(restarted)
	if names, err := f.FilterGroups(ctx, req); err != nil || !slices.Equal(names, []string{"g2"}) {
		t.Errorf("after the restart: %v, %v; want [g2]", names, err)
	}
}

// TestPluginGroupFilterCoalesces: concurrent identical group filter calls
// (several mirrors, same candidates and properties) reach the plugin once;
// a topic call of the same plugin is a different question.
func TestPluginGroupFilterCoalesces(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	p := &fakePlugin{
		caps:   []plugins.Capability{plugins.CapabilityTopicFilter, plugins.CapabilityGroupFilter},
		topics: keepTopics("g1"),
		groups: func(context.Context, filters.GroupRequest) ([]string, error) { <-release; return []string{"g1"}, nil },
	}
	cache := newCoalescer(time.Minute)
	lookup := func(string) (filterPlugin, bool) { return p, true }
	gf := &pluginGroupFilter{lookup: lookup, name: "cat", props: map[string]string{"team": "x"}, cache: cache}
	req := filters.GroupRequest{Groups: []filters.Group{{Name: "g1", Topics: []string{"t"}}, {Name: "g2"}}}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if names, err := gf.FilterGroups(context.Background(), req); err != nil || !slices.Equal(names, []string{"g1"}) {
				t.Errorf("FilterGroups = %v, %v", names, err)
			}
		})
	}
	// Release only once the first call is in the plugin, so the others
	// either wait for it or find its answer cached.
	for p.groupCalls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if n := p.groupCalls.Load(); n != 1 {
		t.Errorf("3 identical group filter calls reached the plugin %d times, want 1", n)
	}
	tf := &pluginTopicFilter{lookup: lookup, name: "cat", props: map[string]string{"team": "x"}, cache: cache}
	if _, err := tf.FilterTopics(context.Background(), filters.TopicRequest{Topics: []filters.Topic{{Name: "g1"}, {Name: "g2"}}}); err != nil {
		t.Fatal(err)
	}
	if n := p.topicCalls.Load(); n != 1 {
		t.Errorf("a topic call with the same names was answered from the group cache (%d topic calls)", n)
	}
}
