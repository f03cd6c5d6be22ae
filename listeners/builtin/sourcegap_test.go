package builtin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/listeners"
)

// TestSourceGapsShown: a topic's source gaps reach the file and webhook
// JSON, the log listener's diff and the alert's description.
func TestSourceGapsShown(t *testing.T) {
	t.Parallel()
	old := listeners.Topic{Upstream: "orders", Downstream: "east.orders", Partitions: 2, State: "mirroring"}
	cur := old
	cur.State = "failed"
	cur.SourceGaps = []listeners.SourceGap{{Partition: 1, From: 3, To: 6, Failed: true}}
	b, err := json.Marshal(topicsJSON([]listeners.Topic{cur}))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"source_gaps":[{"partition":1,"from":3,"to":6,"records":3,"failed":true}]`; !strings.Contains(string(b), want) {
		t.Errorf("JSON = %s, want it to hold %s", b, want)
	}
	if b, _ := json.Marshal(topicsJSON([]listeners.Topic{old})); strings.Contains(string(b), "source_gaps") {
		t.Errorf("JSON without gaps = %s, want no source_gaps", b)
	}
	want := "source gap partition 1 offsets 3..6 (3, partition stopped)"
	if d := topicDiff(old, cur); !strings.Contains(d, "state mirroring->failed") || !strings.Contains(d, want) {
		t.Errorf("log diff = %q, want the state and %q", d, want)
	}
	if d := topicDiff(cur, cur); d != "" {
		t.Errorf("log diff of the same gaps = %q, want none", d)
	}
	if d := topicDescription("changed", cur); !strings.Contains(d, want) {
		t.Errorf("alert description = %q, want %q", d, want)
	}
}
