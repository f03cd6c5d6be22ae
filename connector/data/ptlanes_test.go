package data

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestFetchLanesOverlap: a leader's partitions that are behind are spread
// over ptFetchLanes fetch sessions, each on a connection of its own, so a
// second Fetch is on its way while the first is still unanswered: across
// an ocean one response travels while the other's partitions ask again.
// Each partition holds more than its first fetch's limit, so that fetch
// leaves it behind. The source then holds the first Fetch that names one
// partition until a Fetch for the other partition arrives (kfake answers
// a connection's requests in order, as a broker does: on one connection,
// or in one session, the second would wait behind the first).
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
	// 2.5 MiB in batches of 64 KiB that do not compress: more than the
	// first fetch's limit, ptPartitionMaxBytes.
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tp := range tps {
		for range 40 {
			value := make([]byte, 64<<10)
			for i := range value {
				value[i] = byte(rng.Uint32())
			}
			if err := srcCl.ProduceSync(ctx, &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}

	var (
		mu         sync.Mutex
		held       = -1 // the partition of the Fetch held
		holding    bool // while it is held
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
	// The poll loop takes what the first fetch brought: the partitions
	// rejoin, on their own lanes.
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); cp.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	kfaketest.WaitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return overlapped
	}, "a Fetch for each partition, the second while the first was held")
}
