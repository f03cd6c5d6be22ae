package connector

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestTopicPartitions: two workers share a mirror; each lists every
// partition of a topic, the ones it copies with their offsets on both
// sides (partition p holds p+1 records: source end, copied to and target
// end p+1, lag 0; copied at most p+1: a partition handed over counts
// from then) and the others as elsewhere; together they copy each
// partition once. A topic the mirror does not select is not found.
func TestTopicPartitions(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	ctx := context.Background()
	srcCl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if _, err := kadm.NewClient(srcCl).CreateTopic(ctx, 4, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for p := range int32(4) {
		for i := range p + 1 {
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
	}
	if err := srcCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	noEOS := func(c *Config) { c.Cluster.ExactlyOnce = false }
	w1 := startClusterWorker(t, src, dst, 4, noEOS)
	w2 := startClusterWorker(t, src, dst, 4, noEOS)
	var last string
	done := func() bool {
		here := map[int32]int{}
		last = ""
		for _, w := range []*clusterWorker{w1, w2} {
			ps, ok := w.m.TopicPartitions("orders")
			last += fmt.Sprintf("%+v ", ps)
			if !ok || len(ps) != 4 || len(w.owned()) == 0 {
				return false
			}
			for i, p := range ps {
				if p.Partition != int32(i) {
					return false
				}
				if !p.Here {
					if p.State != "elsewhere" || p.Lag != nil || p.SourceEnd != -1 {
						t.Fatalf("partition %d elsewhere: %+v", i, p)
					}
					continue
				}
				here[p.Partition]++
				n := int64(p.Partition) + 1
				if p.State != "copying" || p.SourceEnd != n || p.CopiedTo != n || p.TargetEnd != n || p.Lag == nil || *p.Lag != 0 || p.Copied > n {
					return false
				}
			}
		}
		return len(here) == 4 && here[0] == 1 && here[1] == 1 && here[2] == 1 && here[3] == 1
	}
	for deadline := time.Now().Add(60 * time.Second); !done(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for each partition copied by one worker, its offsets on both sides at its end; last: %s", last)
		}
	}
	if _, ok := w1.m.TopicPartitions("nope"); ok {
		t.Error("a topic the mirror does not select was found")
	}
}
