package data

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestFetchFailureMakesLagUnknown: a partition whose fetch the source
// refuses has no end to count its lag from: the lag is unknown (since the
// first refusal), not the figure last known; the next fetch answered gives
// it back. On both paths.
func TestFetchFailureMakesLagUnknown(t *testing.T) {
	t.Parallel()
	for _, batchPath := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch_path=%v", batchPath), func(t *testing.T) {
			t.Parallel()
			src, dst := kfaketest.Clusters(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			srcCl := kfaketest.Client(t, src)
			kfaketest.CreateTopic(t, src, "c", 1)
			kfaketest.CreateTopic(t, dst, "src.c", 1)
			produce := func(n int) {
				t.Helper()
				for i := range n {
					if err := srcCl.ProduceSync(ctx, &kgo.Record{Topic: "c", Value: fmt.Appendf(nil, "v-%d", i)}).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
			}
			produce(5)
			var refusing atomic.Bool
			refuseFetches(src, &refusing)

			opts := CopierOpts{}
			if batchPath {
				opts = CopierOpts{Passthrough: true, DstOpts: []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}}
			}
			cp := NewCopier(kfaketest.Logger(), nil, kfaketest.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner())), ctx, opts)
			t.Cleanup(cp.Close)
			tp := TopicPartition{"c", 0}
			if _, err := cp.Assign([]Assignment{{TP: tp, Target: "src.c", Next: 0}}, []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)}); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { defer close(done); cp.Run(ctx) }()
			defer func() { cancel(); <-done }()
			ps := cp.Partition(tp)
			known := func() bool { l, since := ps.Lag(); return l == 0 && since.IsZero() }
			kfaketest.WaitFor(t, func() bool { acked, _, _ := ps.Status(); return acked == 5 && known() }, "the 5 records copied, lag 0")

			refusing.Store(true)
			before := time.Now()
			produce(3) // the end moves: a fetch is due
			kfaketest.WaitFor(t, func() bool { _, since := ps.Lag(); return !since.IsZero() }, "the lag to be unknown")
			if l, since := ps.Lag(); since.Before(before) || since.After(time.Now()) {
				t.Fatalf("lag %d unknown since %v, want since the refusal (after %v)", l, since, before)
			}

			refusing.Store(false)
			kfaketest.WaitFor(t, known, "the lag to be known again, 0 once the 3 records are copied")
		})
	}
}

// refuseFetches makes c answer every partition of a Fetch with
// TOPIC_AUTHORIZATION_FAILED while on is set.
func refuseFetches(c *kfake.Cluster, on *atomic.Bool) {
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		if !on.Load() || len(req.Topics) == 0 {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}
