package connector

import (
	"context"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/listeners"
)

type fakeNotifier struct {
	mu     sync.Mutex
	topics [][]listeners.Topic
}

func (f *fakeNotifier) SetTopics(ts []listeners.Topic) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.topics = append(f.topics, ts)
}

func (f *fakeNotifier) SetGroups([]listeners.Group) {}

func (f *fakeNotifier) last() []listeners.Topic {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.topics[len(f.topics)-1]
}

func TestPassPublishesTopicSet(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	reg := prometheus.NewRegistry()
	n := &fakeNotifier{}
	h := newPassHarnessFor(t, src, dst, Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		Filters:  []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll(".*")}},
		Notifier: n,
		Metrics:  NewMetrics(reg),
		Logger:   kfaketest.Logger(),
	})
	ctx := context.Background()
	for _, topic := range []string{"a", "b", "c"} {
		if _, err := h.srcAdm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	if got := n.last(); len(got) != 3 || got[0].Downstream != "src.a" || got[0].State != "mirroring" || got[0].Metadata[MetaSourceTopic] != "a" {
		t.Fatalf("published %+v", got)
	}
	added := h.m.metrics.setChanges.WithLabelValues("added")
	if v := testutil.ToFloat64(added); v != 0 {
		t.Fatalf("the initial state counted as %v changes", v)
	}
	if _, err := h.srcAdm.CreateTopic(ctx, 1, 1, nil, "d"); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool {
		if err := h.pass(t); err != nil {
			t.Fatal(err)
		}
		return len(n.last()) == 4
	}, "the new topic to be published")
	if v := testutil.ToFloat64(added); v != 1 {
		t.Fatalf("kmirror_replicated_set_changes_total{kind=added} = %v, want 1", v)
	}
}

// TestPassFillsConfigsForFiltersThatReadThem: a property filter on a
// config sees the topics' effective configs.
func TestPassFillsConfigsForFiltersThatReadThem(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	cond, err := filters.ParseCondition("config.cleanup.policy = compact")
	if err != nil {
		t.Fatal(err)
	}
	prop, err := filters.NewProperty(filters.All, cond)
	if err != nil {
		t.Fatal(err)
	}
	h := newPassHarnessFor(t, src, dst, Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		Filters: []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll(".*")}, prop},
		Logger:  kfaketest.Logger(),
	})
	ctx := context.Background()
	if _, err := h.srcAdm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadmStr("compact")}, "compacted"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srcAdm.CreateTopic(ctx, 1, 1, nil, "plain"); err != nil {
		t.Fatal(err)
	}
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	if got := h.topicStates(); len(got) != 1 || got["compacted"] == "" {
		t.Fatalf("selected %v, want only the compacted topic", got)
	}
}

func kadmStr(s string) *string { return &s }
