package connector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/listeners"
)

// gapSetup: orders/0 on the source holds o-0..o-9, the mirror's stored
// position is 3 and the source deleted the records below 6 before they
// were copied (DeleteRecords). The mirror runs with on_source_gap policy
// on the record path, or with batch on the batch path.
func gapSetup(t *testing.T, policy string, batch bool) (*passHarness, *Metrics, *fakeNotifier, *kfake.Cluster) {
	t.Helper()
	src, dst := kfaketest.Clusters(t)
	cfg := passHarnessConfig()
	cfg.OnSourceGap = policy
	metrics := NewMetrics(prometheus.NewRegistry())
	cfg.Metrics = metrics
	n := &fakeNotifier{}
	cfg.Notifier = n
	h := newPassHarnessFor(t, src, dst, cfg)
	if batch {
		cp := data.NewCopier(h.m.log, nil, h.dst, context.Background(), h.m.gapOpts(data.CopierOpts{Passthrough: true, DstOpts: h.m.cfg.TargetOpts}))
		t.Cleanup(cp.Close)
		h.cp, h.plane.Copier = cp, cp
	}
	h.createWithProgress(t, "orders", 1, 3)
	produceN(t, src, "orders", "o", 10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := h.srcAdm.DeleteRecords(ctx, kadm.Offsets{"orders": {0: {Topic: "orders", Partition: 0, At: 6}}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	h.mustPass(t)
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.cp.Run(rctx)
	}()
	t.Cleanup(func() { stop(); <-done })
	return h, metrics, n, dst
}

func gapCount(m *Metrics) float64 {
	return testutil.ToFloat64(m.sourceGaps.WithLabelValues("m", "orders", "0"))
}

func ordersStatus(t *testing.T, h *passHarness) TopicStatus {
	t.Helper()
	for _, ts := range h.m.Status().Topics {
		if ts.SourceTopic == "orders" {
			return ts
		}
	}
	t.Fatal("orders not in the status")
	return TopicStatus{}
}

// listenerGapsOf is what the listeners were last told of orders' gaps.
func listenerGapsOf(t *testing.T, n *fakeNotifier) (string, []listeners.SourceGap) {
	t.Helper()
	for _, tp := range n.last() {
		if tp.Upstream == "orders" {
			return tp.State, tp.SourceGaps
		}
	}
	t.Fatal("orders not handed to the listeners")
	return "", nil
}

var afterGap = []string{"o-6", "o-7", "o-8", "o-9"}

// TestSourceGapSkip: a stored position below the log start under skip
// goes on at the log start, and the gap is counted (the lost range),
// shown in the status and handed to the listeners, on both paths.
func TestSourceGapSkip(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			t.Parallel()
			h, metrics, n, dst := gapSetup(t, "skip", batch)
			tp := data.TopicPartition{Topic: "orders", Partition: 0}
			kfaketest.WaitFor(t, func() bool { a, _ := h.acked(tp); return a == 10 }, "orders/0 copied from the log start")
			if got := targetValues(t, dst, "src.orders", 1)[0]; !slices.Equal(got, afterGap) {
				t.Fatalf("target holds %q, want %q", got, afterGap)
			}
			if c := gapCount(metrics); c != 3 {
				t.Fatalf("kmirror_source_gap_records_total = %v, want 3 (offsets 3..6)", c)
			}
			st := ordersStatus(t, h)
			want := SourceGapStatus{Partition: 0, From: 3, To: 6, Records: 3, State: "skipped", Total: 3}
			if st.State != StateMirroring || len(st.SourceGaps) != 1 || !sameGap(st.SourceGaps[0], want) {
				t.Fatalf("status = %s %+v, want mirroring with %+v", st.State, st.SourceGaps, want)
			}
			h.mustPass(t)
			state, gaps := listenerGapsOf(t, n)
			if state != string(StateMirroring) || !slices.Equal(gaps, []listeners.SourceGap{{Partition: 0, From: 3, To: 6}}) {
				t.Fatalf("listeners told %s %+v, want mirroring with the gap 3..6", state, gaps)
			}
		})
	}
}

// TestSourceGapFail: under fail the partition stops before the gap,
// failed with the range: nothing after it is copied and its position does
// not move; the gap is counted once. Setting skip (a reload) lets it go on
// from the log start without counting the gap again.
func TestSourceGapFail(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			t.Parallel()
			h, metrics, n, dst := gapSetup(t, "fail", batch)
			tp := data.TopicPartition{Topic: "orders", Partition: 0}
			var gapErr *data.GapError
			kfaketest.WaitFor(t, func() bool { _, err := h.acked(tp); return errors.As(err, &gapErr) }, "orders/0 failed at the gap")
			if gapErr.From != 3 || gapErr.To != 6 {
				t.Fatalf("gap = %d..%d, want 3..6", gapErr.From, gapErr.To)
			}
			time.Sleep(time.Second) // nothing moves meanwhile
			if a, _ := h.acked(tp); a != 3 {
				t.Fatalf("position = %d, want 3: it must not move past the gap", a)
			}
			if got := targetValues(t, dst, "src.orders", 1)[0]; len(got) != 0 {
				t.Fatalf("target holds %q, want nothing after the gap", got)
			}
			if c := gapCount(metrics); c != 3 {
				t.Fatalf("kmirror_source_gap_records_total = %v, want 3", c)
			}
			st := ordersStatus(t, h)
			if st.State != StateFailed || !strings.Contains(st.Error, "partition 0: source gap: offsets 3..6 (3)") ||
				len(st.SourceGaps) != 1 || st.SourceGaps[0].State != "failed" {
				t.Fatalf("status = %s %q %+v, want failed with the gap 3..6", st.State, st.Error, st.SourceGaps)
			}
			h.mustPass(t)
			if state, gaps := listenerGapsOf(t, n); state != string(StateFailed) || !slices.Equal(gaps, []listeners.SourceGap{{Partition: 0, From: 3, To: 6, Failed: true}}) {
				t.Fatalf("listeners told %s %+v, want failed with the gap 3..6", state, gaps)
			}
			h.m.updateMetrics()
			if f := testutil.ToFloat64(h.m.metrics.failedParts); f != 1 {
				t.Fatalf("kmirror_failed_partitions = %v, want 1", f)
			}

			// The operator's action: on_source_gap: skip, reloaded.
			if err := h.m.SetOnSourceGap("skip"); err != nil {
				t.Fatal(err)
			}
			kfaketest.WaitFor(t, func() bool { a, err := h.acked(tp); return a == 10 && err == nil }, "orders/0 to go on from the log start")
			if got := targetValues(t, dst, "src.orders", 1)[0]; !slices.Equal(got, afterGap) {
				t.Fatalf("target holds %q, want %q", got, afterGap)
			}
			if c := gapCount(metrics); c != 3 {
				t.Fatalf("kmirror_source_gap_records_total = %v after the skip, want 3 (counted once)", c)
			}
			if st := ordersStatus(t, h); st.State != StateMirroring || len(st.SourceGaps) != 1 || st.SourceGaps[0].State != "skipped" {
				t.Fatalf("status = %s %+v, want mirroring with the gap skipped", st.State, st.SourceGaps)
			}
		})
	}
}

func sameGap(a, b SourceGapStatus) bool {
	a.At = time.Time{}
	return a == b
}

func TestParseGapPolicy(t *testing.T) {
	t.Parallel()
	cfg := passHarnessConfig()
	cfg.OnSourceGap = "ignore"
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), `unknown on_source_gap "ignore"`) {
		t.Fatalf("New with on_source_gap ignore: %v, want an error naming it", err)
	}
}
