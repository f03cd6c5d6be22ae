package connector

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestLagUnknownWhileSourceUnread: while the source's end offsets cannot
// be read (the source refuses the listing, or does not answer at all), the
// status says the lag is unknown and since when, not the figure last known
// (a frozen source showed every topic at lag 0); the metrics say how many
// partitions that is. It is known again once the source answers, at the
// first pass that reaches it.
func TestLagUnknownWhileSourceUnread(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	var refusing, down atomic.Bool
	kfaketest.RefuseListOffsets(src, "orders", &refusing)
	src.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		if !down.Load() {
			return nil, nil, false
		}
		return nil, errors.New("source down"), true // the connection is cut
	})
	cfg := passHarnessConfig()
	cfg.Metrics = NewMetrics(prometheus.NewRegistry())
	cfg.RefreshInterval = time.Millisecond
	// Requests to a source that is down fail within a second.
	h := newPassHarnessFor(t, src, dst, cfg, kgo.RetryTimeout(time.Second))
	h.createWithProgress(t, "orders", 2, 0)
	produceOrders(t, src, 2, 5, "a")
	unknownGauge := cfg.Metrics.lagUnknown.WithLabelValues("m")
	// pass runs a pass that refreshes the ends: a refresh interval after
	// the last (endsDue; a pass on kfake can take less).
	pass := func() error {
		t.Helper()
		time.Sleep(2 * cfg.RefreshInterval)
		return h.pass(t)
	}
	mustPass := func() {
		t.Helper()
		if err := pass(); err != nil {
			t.Fatal(err)
		}
	}

	// known checks the status's lag of orders and of the mirror: want
	// records, or unknown (-1) since after from.
	known := func(what string, want int64, from time.Time) {
		t.Helper()
		h.m.updateMetrics()
		st := h.m.Status()
		var topic *TopicStatus
		for i := range st.Topics {
			if st.Topics[i].SourceTopic == "orders" {
				topic = &st.Topics[i]
			}
		}
		if topic == nil {
			t.Fatalf("%s: orders not in the status", what)
		}
		gauge := testutil.ToFloat64(unknownGauge)
		if want >= 0 {
			if topic.Lag == nil || *topic.Lag != want || !topic.LagUnknownSince.IsZero() || st.Lag == nil || *st.Lag != want || gauge != 0 {
				t.Fatalf("%s: lag of orders %v (unknown since %v), of the mirror %v, %v partitions unknown; want %d, known", what, topic.Lag, topic.LagUnknownSince, st.Lag, gauge, want)
			}
			return
		}
		since := topic.LagUnknownSince
		if topic.Lag != nil || st.Lag != nil || since.Before(from) || since.After(time.Now()) || !st.LagUnknownSince.Equal(since) || gauge != 2 {
			t.Fatalf("%s: lag of orders %v unknown since %v, of the mirror %v since %v, %v partitions unknown; want both unknown since after %v, 2 partitions",
				what, topic.Lag, since, st.Lag, st.LagUnknownSince, gauge, from)
		}
	}

	mustPass()
	known("source answering", 10, time.Time{})

	from := time.Now()
	refusing.Store(true)
	mustPass() // the listing of ends fails, the pass does not
	known("listing of ends refused", -1, from)
	refusing.Store(false)
	mustPass()
	known("listing of ends answered again", 10, time.Time{})

	// From now on no refresh is due by the schedule: the pass after the
	// source comes back refreshes the ends anyway.
	h.m.cfg.RefreshInterval = time.Hour // no pass runs concurrently
	from = time.Now()
	down.Store(true)
	if err := pass(); err == nil {
		t.Fatal("a pass with the source down succeeded")
	}
	known("source down", -1, from)
	down.Store(false)
	mustPass()
	known("source back", 10, time.Time{})
}
