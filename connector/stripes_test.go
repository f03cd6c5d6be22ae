package connector

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestStripesCopyExactly: a partition far behind fills fetches on its
// own, so the batch path fetches it ahead too, on its second fetch lane
// (connector/data/ptstripe.go). With the source refusing some fetches and
// dropping a connection, whatever happens to each ahead (it becomes the
// partition's fetch and its overlap is cut, it is held until the fetch
// before it is answered, it is dropped), the target holds the source's
// records once each, in order.
func TestStripesCopyExactly(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	kfaketest.CreateTopic(t, src, "orders", 1)
	const n = 48_000 // 1 KiB each: 48 MiB, in fetches of up to 2 MiB
	value := func(i int) string { return fmt.Sprintf("a-0-%d|", i) + strings.Repeat("x", 1000) }
	cl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for from := 0; from < n; from += 1000 {
		recs := make([]*kgo.Record, 0, 1000)
		for i := from; i < from+1000; i++ {
			recs = append(recs, &kgo.Record{Topic: "orders", Value: []byte(value(i))})
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// Every seventh fetch that names the partition is refused (its
	// whole session ends, the ahead's or the partition's own), and the
	// tenth's connection is dropped.
	var mu sync.Mutex
	naming := 0
	src.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		if len(req.Topics) == 0 || req.SessionEpoch <= 0 {
			return nil, nil, false
		}
		mu.Lock()
		naming++
		k := naming
		mu.Unlock()
		switch {
		case k == 10:
			return nil, errors.New("connection dropped by the test"), true
		case k%7 == 0:
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			resp.ErrorCode = kerr.UnknownServerError.Code
			return resp, nil, true
		}
		return nil, nil, false
	})

	metrics := NewMetrics(prometheus.NewRegistry())
	t.Cleanup(startOrdersMirror(t, src, dst, func(c *Config) {
		c.SourceCompression = true
		c.FetchMaxBytes = 2 << 20
		c.Metrics = metrics
	}))
	adm := kadm.NewClient(kfaketest.Client(t, dst))
	kfaketest.WaitFor(t, func() bool { return targetRecords(adm, "src.orders") >= n }, fmt.Sprintf("%d records on the target", n))
	got := targetValuesFrom(t, dst, 0)
	for i, v := range got {
		if i >= n || v != value(i) {
			t.Fatalf("target offset %d holds %.12q..., want %.12q... (%d records, the source's %d)", i, v, value(min(i, n-1)), len(got), n)
		}
	}
	used := testutil.ToFloat64(metrics.aheads.WithLabelValues("m", data.AheadUsed))
	dropped := testutil.ToFloat64(metrics.aheads.WithLabelValues("m", data.AheadDropped))
	mu.Lock()
	t.Logf("fetches ahead: %v used, %v dropped; %d fetches named the partition", used, dropped, naming)
	mu.Unlock()
	if used == 0 {
		t.Fatal("no fetch ahead was used: the partition was not striped")
	}
	// Wait for the mirror to have nothing more to write: nothing
	// copied twice after the check above.
	time.Sleep(500 * time.Millisecond)
	if end := kfaketest.EndOffsets(t, dst, "src.orders")[0]; end != n {
		t.Fatalf("the target's end offset is %d, want %d", end, n)
	}
}
