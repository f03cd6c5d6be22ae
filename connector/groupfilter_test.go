package connector

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/listeners"
)

// switchGroupFilter answers with names, or fails while err is set: a group
// filter plugin that goes down and comes back.
type switchGroupFilter struct {
	mu    sync.Mutex
	names []string
	err   error
	asked [][]string
}

func (f *switchGroupFilter) set(err error, names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names, f.err = names, err
}

func (f *switchGroupFilter) FilterGroups(_ context.Context, req filters.GroupRequest) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var asked []string
	for _, g := range req.Groups {
		asked = append(asked, g.Name)
	}
	f.asked = append(f.asked, asked)
	return f.names, f.err
}

func (f *switchGroupFilter) lastAsked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[len(f.asked)-1]
}

// groupNotifier records the group sets a mirror publishes.
type groupNotifier struct {
	mu     sync.Mutex
	groups [][]listeners.Group
}

func (n *groupNotifier) SetTopics([]listeners.Topic) {}

func (n *groupNotifier) SetGroups(gs []listeners.Group) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.groups = append(n.groups, gs)
}

func (n *groupNotifier) calls() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.groups)
}

func (n *groupNotifier) last() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, g := range n.groups[len(n.groups)-1] {
		out = append(out, g.Name)
	}
	return out
}

func groupNames(gs []GroupStatus) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.Group
	}
	return out
}

// TestGroupFilterErrorKeepsGroupSet: group filters run in order after the
// regex; a later filter cannot re-add a group an earlier one dropped, nor
// add a name that is no candidate. A failing group filter aborts the group
// sync: the translated groups (/api/v1/groups) and the set the listeners
// were given stay as they were, never empty, and the failure is counted in
// kmirror_filter_errors_total. Once the filter answers again, its answer
// is the group set.
func TestGroupFilterErrorKeepsGroupSet(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	reg := prometheus.NewRegistry()
	n := &groupNotifier{}
	plugin := &switchGroupFilter{}
	h := newPassHarnessFor(t, src, dst, Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		Filters: []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll(".*")}},
		GroupFilters: []filters.GroupFilter{
			filters.Regex{Include: filters.MustCompileAll("app-.*"), Exclude: filters.MustCompileAll("app-tmp")},
			plugin,
		},
		Notifier: n,
		Metrics:  NewMetrics(reg),
		Logger:   kfaketest.Logger(),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.srcAdm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"app-a", "app-b", "app-tmp", "other"} {
		if _, err := h.srcAdm.CommitOffsets(ctx, g, kadm.Offsets{"orders": {0: {Topic: "orders", Partition: 0, At: 0, LeaderEpoch: -1}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	filterErrors := h.m.metrics.filterErrors

	// The plugin keeps app-b and tries to re-add app-tmp (excluded by
	// the regex) and to add a group that is no candidate.
	plugin.set(nil, "app-b", "app-tmp", "not-a-candidate")
	if err := h.m.syncGroups(ctx, h.c, h.cp); err != nil {
		t.Fatal(err)
	}
	if got := plugin.lastAsked(); !slices.Equal(got, []string{"app-a", "app-b"}) {
		t.Errorf("the plugin was asked about %v, want what the regex kept: [app-a app-b]", got)
	}
	if got := groupNames(h.m.Groups()); !slices.Equal(got, []string{"app-b"}) {
		t.Fatalf("translated groups %v, want [app-b]", got)
	}
	before := h.m.Groups()
	published := n.calls()
	if got := n.last(); !slices.Equal(got, []string{"app-b"}) {
		t.Fatalf("listeners were given %v, want [app-b]", got)
	}

	// The plugin fails: twice, the group set stays.
	plugin.set(errors.New("plugin \"catalog\": FilterGroups: plugin is shutting down"))
	for i := range 2 {
		err := h.m.syncGroups(ctx, h.c, h.cp)
		if err == nil || !strings.Contains(err.Error(), "keeping the previous group set") || !strings.Contains(err.Error(), "shutting down") {
			t.Fatalf("sync %d with a failing group filter: %v; want the filter's error, saying the group set is kept", i+1, err)
		}
	}
	if got := h.m.Groups(); !slices.EqualFunc(got, before, func(a, b GroupStatus) bool {
		return a.Group == b.Group && a.State == b.State && a.LastSyncAt.Equal(b.LastSyncAt)
	}) {
		t.Errorf("after failed group filter calls the translated groups are %+v, want them as before: %+v", got, before)
	}
	if got := n.calls(); got != published {
		t.Errorf("listeners were given %d new group sets while the filter failed, want none", got-published)
	}
	if v := testutil.ToFloat64(filterErrors); v != 2 {
		t.Errorf("kmirror_filter_errors_total = %v after two failed group syncs, want 2", v)
	}

	// Back: its new answer is the group set.
	plugin.set(nil, "app-a")
	if err := h.m.syncGroups(ctx, h.c, h.cp); err != nil {
		t.Fatal(err)
	}
	if got := groupNames(h.m.Groups()); !slices.Equal(got, []string{"app-a"}) {
		t.Errorf("after the filter recovered: groups %v, want [app-a]", got)
	}
	if got := n.last(); !slices.Equal(got, []string{"app-a"}) {
		t.Errorf("after the filter recovered: listeners were given %v, want [app-a]", got)
	}
}
