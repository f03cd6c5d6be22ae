package data

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestFetchLanesOverlap: a leader's partitions are spread over
// ptFetchLanes fetch sessions, each on a connection of its own, so a
// second Fetch is on its way while the first is still unanswered: across
// an ocean one response travels while the other's partitions ask again.
// The source holds the first Fetch that names a partition until a Fetch
// for the other partition arrives (kfake answers a connection's requests
// in order, as a broker does: on one connection the second would wait
// behind the first).
func TestFetchLanesOverlap(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	ctx := context.Background()
	srcCl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if _, err := kadm.NewClient(srcCl).CreateTopic(ctx, 2, 1, nil, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(kfaketest.Client(t, dst)).CreateTopic(ctx, 2, 1, nil, "src.c"); err != nil {
		t.Fatal(err)
	}
	tps := []TopicPartition{{"c", 0}, {"c", 1}}
	if fetchLane(tps[0]) == fetchLane(tps[1]) {
		t.Fatalf("a topic's partitions 0 and 1 share fetch lane %d", fetchLane(tps[0]))
	}
	for _, tp := range tps {
		if err := srcCl.ProduceSync(ctx, &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	var (
		mu         sync.Mutex
		held       = -1 // the partition of the Fetch held
		holding    bool // while it is held
		both       bool // a Fetch named both partitions
		overlapped bool // a Fetch for the other one came while it was held
	)
	other := make(chan struct{})
	src.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		named := map[int32]bool{}
		for _, rt := range kr.(*kmsg.FetchRequest).Topics {
			for _, rp := range rt.Partitions {
				named[rp.Partition] = true
			}
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case len(named) == 2:
			both = true
		case len(named) == 1 && held < 0:
			for p := range named {
				held = int(p)
			}
			holding = true
			mu.Unlock()
			src.SleepControl(func() {
				select {
				case <-other:
				case <-time.After(10 * time.Second):
				}
			})
			mu.Lock()
			holding = false
		case len(named) == 1 && holding && !overlapped && !named[int32(held)]:
			overlapped = true
			close(other)
		}
		return nil, nil, false
	})

	dstOpts := []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}
	cp := NewCopier(kfaketest.Logger(), nil, kfaketest.Client(t, dst), ctx, CopierOpts{Passthrough: true, DstOpts: dstOpts})
	t.Cleanup(cp.Close)
	var as []Assignment
	for _, tp := range tps {
		as = append(as, Assignment{TP: tp, Target: "src.c", Next: 0})
	}
	if _, err := cp.Assign(as, []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)}); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return overlapped || both
	}, "a Fetch for each partition")
	mu.Lock()
	defer mu.Unlock()
	if both {
		t.Fatal("one Fetch named both partitions: one session for the leader")
	}
}
