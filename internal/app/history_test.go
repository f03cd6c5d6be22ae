package app

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/httpapi"
	"github.com/kmirror/kmirror/listeners"
)

// countingNotifier counts what the recorder hands on.
type countingNotifier struct{ topics, groups int }

func (c *countingNotifier) SetTopics([]listeners.Topic) { c.topics++ }
func (c *countingNotifier) SetGroups([]listeners.Group) { c.groups++ }

func TestRecordingNotifier(t *testing.T) {
	t.Parallel()
	next := &countingNotifier{}
	log := newChangeLog(100)
	n := &recordingNotifier{next: next, log: log, mirror: "m"}
	orders := listeners.Topic{Upstream: "orders", Downstream: "east.orders", Partitions: 3, State: "pending"}
	n.SetTopics([]listeners.Topic{orders})
	n.SetTopics([]listeners.Topic{orders}) // no change, no entry
	running := orders
	running.State = "mirroring"
	running.Metadata = map[string]string{"team": "payments"}
	clicks := listeners.Topic{Upstream: "clicks", Downstream: "east.clicks", Partitions: 1, State: "pending"}
	n.SetTopics([]listeners.Topic{running, clicks})
	n.SetTopics([]listeners.Topic{clicks})
	n.SetGroups(nil)
	n.SetGroups([]listeners.Group{{Name: "billing", Topics: []string{"orders"}}})
	n.SetGroups(nil)
	if next.topics != 4 || next.groups != 3 {
		t.Fatalf("handed on %d topic sets and %d group sets, want 4 and 3", next.topics, next.groups)
	}
	var got []string
	for _, c := range slices.Backward(log.Changes()) {
		got = append(got, fmt.Sprintf("%s %s %s %s", c.Kind, c.Name, c.Target, c.Detail))
		if c.Mirror != "m" || c.Time.IsZero() {
			t.Errorf("change %+v: want mirror m and a time", c)
		}
	}
	want := []string{
		"initial   1 topic selected at start",
		"topic_added clicks east.clicks 1 partition, pending",
		"topic_changed orders east.orders state pending → mirroring; metadata team=payments",
		"topic_removed orders east.orders ",
		"initial   0 groups translated at start",
		"group_added billing  topics orders",
		"group_removed billing  ",
	}
	// Counts of one are singular.
	one := newChangeLog(10)
	n = &recordingNotifier{next: next, log: one, mirror: "m"}
	n.SetGroups([]listeners.Group{{Name: "billing", Topics: []string{"orders"}}})
	n.SetTopics([]listeners.Topic{orders})
	if cs := one.Changes(); len(cs) != 2 || cs[1].Detail != "1 group translated at start" || cs[0].Detail != "1 topic selected at start" {
		t.Errorf("first sets of one group and one topic: %+v", cs)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("changes, oldest first:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestChangeLogBounded(t *testing.T) {
	t.Parallel()
	log := newChangeLog(3)
	for i := range 10 {
		log.add(httpapi.Change{Name: fmt.Sprint(i)})
	}
	var names []string
	for _, c := range log.Changes() {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "9,8,7" {
		t.Fatalf("changes = %s, want the 3 newest first: 9,8,7", got)
	}
}
