package builtin

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/listeners"
)

// TestDivergentShown: a topic's divergent tail (a mirror copying back
// after a failover) reaches the file and webhook JSON, the log listener's
// diff and its list of added topics, and the alert's description.
func TestDivergentShown(t *testing.T) {
	t.Parallel()
	old := listeners.Topic{Upstream: "orders", Downstream: "orders", Partitions: 2, State: "mirroring"}
	cur := old
	cur.Divergent = []listeners.DivergentTail{{Partition: 0, From: 20, To: 25}}
	b, err := json.Marshal(topicsJSON([]listeners.Topic{cur}))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"divergent":[{"partition":0,"from":20,"to":25,"records":5}]`; !strings.Contains(string(b), want) {
		t.Errorf("JSON = %s, want it to hold %s", b, want)
	}
	if b, _ := json.Marshal(topicsJSON([]listeners.Topic{old})); strings.Contains(string(b), "divergent") {
		t.Errorf("JSON without a divergent tail = %s, want no divergent", b)
	}
	want := "divergent tail partition 0 offsets 20..25 (5)"
	if d := topicDiff(old, cur); d != want {
		t.Errorf("log diff = %q, want %q", d, want)
	}
	if d := topicDiff(cur, cur); d != "" {
		t.Errorf("log diff of the same tail = %q, want none", d)
	}
	if d := topicDescription("added", cur); !strings.Contains(d, want) {
		t.Errorf("alert description = %q, want %q", d, want)
	}
	if _, _, changed := listeners.DiffTopics([]listeners.Topic{old}, []listeners.Topic{cur}); len(changed) != 1 {
		t.Errorf("a new divergent tail: changed %+v, want the topic", changed)
	}

	// The log listener's first call (the mirror starts): the topic is
	// added, with its tail.
	var buf strings.Builder
	l := &Log{logger: slog.New(slog.NewJSONHandler(&buf, nil))}
	if err := l.TopicsChanged(context.Background(), listeners.TopicsChange{Mirror: "back", Topics: []listeners.Topic{cur}, Added: []listeners.Topic{cur}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "orders ("+want+")") {
		t.Errorf("log = %s, want the added topic with %q", buf.String(), want)
	}
}
