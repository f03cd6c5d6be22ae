package data

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/kmirror/kmirror/connector/index"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestPromiseAdvancesInOrderAndHoldsOnFailure(t *testing.T) {
	t.Parallel()
	var attention atomic.Bool
	ps := &PartitionState{Acked: 10, Persisted: 10, onFail: func() { attention.Store(true) }, Index: index.New()}
	ps.inflight = []int64{10, 11, 13} // 12 was an aborted record: a gap
	rec := &kgo.Record{Timestamp: time.Now()}
	ps.Promise(rec, nil)
	if ps.Acked != 11 {
		t.Fatalf("acked = %d, want 11", ps.Acked)
	}
	ps.Promise(rec, nil)
	ps.Promise(rec, nil)
	if ps.Acked != 14 || ps.head != 0 || len(ps.inflight) != 0 {
		t.Fatalf("acked=%d head=%d inflight=%v, want 14 and an empty queue", ps.Acked, ps.head, ps.inflight)
	}

	// A refused record fails the partition; later acks must not move it.
	ps.inflight = append(ps.inflight, 14, 15, 16)
	ps.Promise(rec, errors.New("MESSAGE_TOO_LARGE"))
	ps.Promise(rec, nil)
	ps.Promise(rec, nil)
	if ps.Acked != 14 || ps.failed == nil || !attention.Load() {
		t.Fatalf("acked=%d failed=%v attention=%v: a failure must hold the position and ask for attention", ps.Acked, ps.failed, attention.Load())
	}
	if ps.t == nil || ps.t.backoff != minRetryBackoff {
		t.Fatalf("trouble = %+v, want a backoff of %v", ps.t, minRetryBackoff)
	}

	// Rewound and acknowledged again: the trouble is over and let go.
	ps.failed = nil
	ps.inflight = append(ps.inflight, 14)
	ps.Promise(rec, nil)
	if ps.Acked != 15 || ps.t != nil {
		t.Fatalf("acked=%d trouble=%+v: an acknowledgement after a retry must end the trouble", ps.Acked, ps.t)
	}
}

// TestPartitionStateSmall: a worker holds one PartitionState per partition
// (100,000 of them at the scale goal), so what only a partition in trouble
// needs lives in partTrouble. This fails when a field grows the state past
// its allocation size class.
func TestPartitionStateSmall(t *testing.T) {
	if n := unsafe.Sizeof(PartitionState{}); n > 288 {
		t.Fatalf("PartitionState is %d bytes, want at most 288: keep what is rarely needed in partTrouble", n)
	}
}

// TestIdlePartitionLetsContextGo: once nothing of a partition is in flight
// its produce context is cancelled and dropped (an idle partition held one,
// and its parent an entry for it); while records are in flight it stays.
func TestIdlePartitionLetsContextGo(t *testing.T) {
	t.Parallel()
	parent, stop := context.WithCancel(context.Background())
	defer stop()
	ps := &PartitionState{Acked: 10, Persisted: 10, onFail: func() {}, Index: index.New()}
	ps.ctx, ps.cancel = context.WithCancel(parent)
	ctx := ps.ctx
	ps.inflight = []int64{10, 11}
	rec := &kgo.Record{Timestamp: time.Now()}
	ps.Promise(rec, nil)
	if ps.ctx == nil || ctx.Err() != nil {
		t.Fatal("the context went while a record was still in flight")
	}
	ps.Promise(rec, nil)
	if ps.ctx != nil || ps.cancel != nil || ctx.Err() == nil {
		t.Fatalf("nothing in flight: context kept (ctx %v, err %v)", ps.ctx, ctx.Err())
	}
}

// TestInflightQueueStaysBounded: under a continuous backlog the queue never
// drains, so acknowledged entries must be dropped from its front.
func TestInflightQueueStaysBounded(t *testing.T) {
	t.Parallel()
	ps := &PartitionState{Acked: -1, onFail: func() {}, Index: index.New()}
	rec := &kgo.Record{Timestamp: time.Now()}
	next := int64(0)
	for range 100 {
		for range 1000 { // produce 1000, ack 1000, always 500 in flight
			ps.inflight = append(ps.inflight, next)
			next++
		}
		for range 1000 {
			ps.Promise(rec, nil)
		}
		if next == 1000 {
			for range 500 {
				ps.inflight = append(ps.inflight, next)
				next++
			}
		}
	}
	if live := len(ps.inflight) - ps.head; live != 500 {
		t.Fatalf("%d records in flight, want 500", live)
	}
	if len(ps.inflight) > 10_000 {
		t.Fatalf("queue holds %d entries for 500 in flight: acknowledged entries are not dropped", len(ps.inflight))
	}
	if ps.Acked != next-500 {
		t.Fatalf("acked = %d, want %d", ps.Acked, next-500)
	}
}

func TestPersistGate(t *testing.T) {
	t.Parallel()
	var g PersistGate
	now := time.Now()
	for _, step := range []struct {
		changes uint64
		after   time.Duration
		want    bool
	}{
		{0, 0, true},               // the first tick walks
		{0, time.Second, false},    // nothing new
		{1, time.Second, true},     // a change
		{1, time.Second, false},    // nothing new again
		{1, PersistFullWalk, true}, // the safety net
		{1, PersistFullWalk - time.Second, false},
	} {
		now = now.Add(step.after)
		if got := g.Due(step.changes, now); got != step.want {
			t.Fatalf("due(%d) after %v = %v, want %v", step.changes, step.after, got, step.want)
		}
	}
}
