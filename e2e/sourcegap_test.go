//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSourceGap: the source deletes records kmirror has not copied while
// kmirror is stopped (its stored position, 5, falls below the log start,
// 15). On restart a mirror with on_source_gap: skip goes on at the log
// start and one with fail stops its partition before the gap; both show
// the gap 5..15 (10 offsets) in kmirror_source_gap_records_total and in
// /api/v1/status (source_gaps), and the failed one in its topic's error.
//
// The records are deleted with DeleteRecords, which moves the log start
// exactly where the test says at once. Retention moves it only when the
// broker's retention check runs (log.retention.check.interval.ms, and
// log.initial.task.delay.ms after a start) on closed segments: slower and
// timing-dependent, for the same OFFSET_OUT_OF_RANGE at the same place.
func TestSourceGap(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		skip, fail := e.topic("gapskip"), e.topic("gapfail")
		mSkip, mFail := "skip-"+e.id, "fail-"+e.id
		for _, topic := range []string{skip, fail} {
			createTopic(t, e.srcCl, topic, 1, nil)
			produce(t, e.srcCl, gapRecords(topic, "a", 5)...)
		}
		cfg := e.kmConfigFor()
		cfg.Mirrors = []*kmMirror{kmMirrorOf(mSkip, "src", "dst", skip), kmMirrorOf(mFail, "src", "dst", fail)}
		cfg.Mirrors[1].OnSourceGap = "fail"
		path := e.kmWriteConfig(cfg)

		w := e.startWorker(path)
		a := gapValues("a", 5)
		for _, topic := range []string{skip, fail} {
			e.waitTargetValues(60*time.Second, "src."+topic, map[int32][]string{0: a})
		}
		if code, _ := w.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("kmirror exited %d on SIGTERM", code)
		}

		// Offsets 5..14 are written and deleted before kmirror runs again.
		adm := kadm.NewClient(e.srcCl)
		for _, topic := range []string{skip, fail} {
			produce(t, e.srcCl, gapRecords(topic, "b", 10)...)
			res, err := adm.DeleteRecords(ctxTimeout(t, 30*time.Second), kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 15}}})
			if err == nil {
				err = res.Error()
			}
			if err != nil {
				t.Fatalf("delete records of %s below 15: %v", topic, err)
			}
			produce(t, e.srcCl, gapRecords(topic, "c", 5)...)
		}

		w = e.startWorker(path)
		addr := w.httpAddr(t)
		e.waitTargetValues(60*time.Second, "src."+skip, map[int32][]string{0: append(a, gapValues("c", 5)...)})
		for _, c := range []struct{ mirror, topic, state string }{{mSkip, skip, "skipped"}, {mFail, fail, "failed"}} {
			e.waitFor(30*time.Second, c.mirror+": the gap 5..15 in /metrics and /api/v1/status", func() (bool, string) {
				v, n, err := scrapeMetric(addr, "kmirror_source_gap_records_total", map[string]string{"mirror": c.mirror, "topic": c.topic, "partition": "0"})
				if err != nil || n != 1 || v != 10 {
					return false, fmt.Sprintf("kmirror_source_gap_records_total = %v (%d series, %v), want 10", v, n, err)
				}
				doc, body, err := getStatus(addr)
				if err != nil {
					return false, err.Error()
				}
				for _, m := range doc.Mirrors {
					for _, ts := range m.Topics {
						if m.Name != c.mirror || ts.SourceTopic != c.topic {
							continue
						}
						if len(ts.SourceGaps) != 1 {
							return false, body
						}
						g := ts.SourceGaps[0]
						if g.Partition != 0 || g.From != 5 || g.To != 15 || g.Records != 10 || g.State != c.state {
							return false, body
						}
						if c.state == "failed" && (ts.State != "failed" || !strings.Contains(ts.Error, "partition 0: source gap: offsets 5..15 (10)")) {
							return false, body
						}
						if c.state == "skipped" && ts.State != "mirroring" {
							return false, body
						}
						return true, ""
					}
				}
				return false, body
			})
		}
		// Under fail nothing after the gap was copied.
		if got := values(e.readTarget("src." + fail))[0]; strings.Join(got, ",") != strings.Join(a, ",") {
			t.Fatalf("src.%s holds %q, want only %q: nothing past the gap", fail, got, a)
		}
		w.checkAlive(t)
	})
}

func gapRecords(topic, prefix string, n int) []*kgo.Record {
	var out []*kgo.Record
	for _, v := range gapValues(prefix, n) {
		out = append(out, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)})
	}
	return out
}

func gapValues(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}
