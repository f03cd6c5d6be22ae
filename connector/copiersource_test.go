package connector

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCopierSourceCreatedOnce: the record path's consumer is created by
// whichever goroutine first needs it, an assignment (the control pass) or
// a partition leaving the batch path (the poll loop), while the control
// pass reads it. Run with -race: the two must not race, and one consumer
// is created, not two.
func TestCopierSourceCreatedOnce(t *testing.T) {
	t.Parallel()
	src, dst := testClusters(t)
	cp := newCopier(discardLogger(), nil, newClient(t, dst), context.Background(), copierOpts{})
	t.Cleanup(cp.close)
	opts := []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)}
	cp.srcMu.Lock()
	cp.srcOpts = opts
	cp.srcMu.Unlock()
	var wg sync.WaitGroup
	created := make(chan bool, 2)
	for _, topic := range []string{"a", "b"} {
		wg.Add(1)
		go func() { // as rewindFailed's fallback does, on the poll loop
			defer wg.Done()
			ok, err := cp.consume(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})
			if err != nil {
				t.Error(err)
			}
			created <- ok
		}()
	}
	wg.Add(1)
	go func() { // as the control pass does
		defer wg.Done()
		cp.unassign([]topicPartition{{"c", 0}})
	}()
	wg.Wait()
	close(created)
	n := 0
	for ok := range created {
		if ok {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d consumers created, want 1", n)
	}
}
