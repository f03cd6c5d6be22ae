package connector

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShutdownAfterTargetTopicRecopied: a target topic deleted and copied
// again from the start leaves nothing in flight once the copy is done: a
// shutdown then is clean (no "records not acknowledged", no refusal
// logged for the records the restart dropped). Both data paths. The
// record path's case failed about one run in five under -race before the
// copier stopped giving a restarted partition the records fetched for its
// earlier assignment (TestStaleFetchNotGivenToRestartedPartition).
func TestShutdownAfterTargetTopicRecopied(t *testing.T) {
	t.Parallel()
	for _, batchPath := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch_path=%v", batchPath), func(t *testing.T) {
			t.Parallel()
			src, dst := kfaketest.Clusters(t)
			ctx := context.Background()
			srcCl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if _, err := kadm.NewClient(srcCl).CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
				t.Fatal(err)
			}
			var recs []*kgo.Record
			// Produced while the worker copies, so that records are
			// in flight when the target topic goes.
			const total, batches = 200000, 200
			for i := range total {
				recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(i % 2), Value: fmt.Appendf(nil, "v-%d", i)})
			}
			produced := make(chan error, 1)
			go func() {
				for b := range batches {
					if err := srcCl.ProduceSync(ctx, recs[b*total/batches:(b+1)*total/batches]...).FirstErr(); err != nil {
						produced <- err
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
				produced <- nil
			}()
			logs := &kfaketest.LockedBuffer{}
			// The worker's and its clients' logs, shown on a failure: a
			// copy that stalls says nothing else.
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("worker logs:\n%s", logs)
				}
			})
			m, stop := runOrdersMirror(t, src, dst, func(c *Config) {
				c.SourceCompression = batchPath
				c.ShutdownTimeout = 5 * time.Second
				c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				c.SourceOpts = append(c.SourceOpts, kgo.WithLogger(kgo.BasicLogger(logs, kgo.LogLevelInfo, func() string { return "KGO-SRC " })))
				c.TargetOpts = append(c.TargetOpts, kgo.WithLogger(kgo.BasicLogger(logs, kgo.LogLevelInfo, func() string { return "KGO-DST " })))
			})
			dstAdm := kadm.NewClient(kfaketest.Client(t, dst))
			onTarget := func() int64 {
				ends, err := dstAdm.ListEndOffsets(ctx, "src.orders")
				if err != nil || ends.Error() != nil {
					return -1
				}
				n := int64(0)
				ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
				return n
			}
			copied := func() bool { return onTarget() == total }
			// Deleted mid-copy, once a pass has listed it (one never
			// listed yet is only not known yet: the fresh-topic grace).
			kfaketest.WaitFor(t, func() bool {
				m.mu.Lock()
				defer m.mu.Unlock()
				ts := m.topics["orders"]
				return ts != nil && ts.listed && onTarget() > 0
			}, "a pass to list the target topic")
			t.Logf("deleting the target topic with %d of %d records copied", onTarget(), total)
			if _, err := dstAdm.DeleteTopics(ctx, "src.orders"); err != nil {
				t.Fatal(err)
			}
			if err := <-produced; err != nil {
				t.Fatal(err)
			}
			kfaketest.WaitFor(t, copied, "the copy again after the target topic was deleted")
			kfaketest.WaitFor(t, func() bool { return m.copierInFlight() == 0 }, "nothing in flight")
			stop() // fails the test if Run returns an error (records abandoned)
			if n := logs.Count("target refused records"); n > 0 {
				t.Fatalf("%d refusals logged, want none: the records the restart dropped were not refused\n%s", n, logs)
			}
		})
	}
}
