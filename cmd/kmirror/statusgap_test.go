package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector"
)

// TestStatusSourceGaps: kmirror status lists each partition's source gap
// with its offsets, count and state, and each partition's divergent tail
// (a mirror copying back) with its offsets and count, under the mirror's
// topics.
func TestStatusSourceGaps(t *testing.T) {
	t.Parallel()
	url := statusServer(t, statusSource{{
		Name: "east-to-west", Source: "east", Target: "west", LastPassAt: time.Now(),
		Topics: []connector.TopicStatus{{
			SourceTopic: "orders", TargetTopic: "east.orders", Partitions: 2, State: connector.StateFailed,
			Error: "partition 1: source gap: offsets 3..6 (3) deleted at the source before they were copied",
			SourceGaps: []connector.SourceGapStatus{
				{Partition: 0, From: 10, To: 110, Records: 100, State: "skipped", Total: 100},
				{Partition: 1, From: 3, To: 6, Records: 3, State: "failed", Total: 3},
			},
		}, {
			SourceTopic: "payments", TargetTopic: "payments", Partitions: 2, State: connector.StateMirroring,
			Divergent: []connector.DivergentStatus{{Partition: 1, From: 20, To: 25, Records: 5}},
		}},
	}})
	var stdout, stderr bytes.Buffer
	if code := run([]string{"status", "--url", url}, &stdout, &stderr); code != exitNegative { // a failed topic: not ready
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{
		"partition 1: source gap: offsets 3..6",
		"source gap orders/0: offsets 10..110 (100 offsets lost, skipped)",
		"source gap orders/1: offsets 3..6 (3 offsets lost, failed)",
		"divergent tail payments/1: offsets 20..25 (5 records the former target never got)",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
}
