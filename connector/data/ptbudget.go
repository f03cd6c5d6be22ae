package data

import (
	"sync"
	"sync/atomic"
)

// BatchBudget bounds the batches that the batch paths sharing it (the
// copiers of one worker: the shared one, or one per exactly_once slot)
// hold fetched and not yet acknowledged, together: ptMaxBatches in all,
// not per copier. With a bound per copier, 16 exactly_once slots could hold
// 16 times as many small batches as one copier, and a restart of 100,000
// partitions held every partition's batch at once (each about 2 KiB with
// its unit, queue entry and progress writes: the worker's peak memory was
// twice the at-least-once worker's). Bytes stay bounded per copier, by its
// producer buffer (enqueue), so that slots copying large batches do not
// wait on one another's bytes. A copier that shares none has one of its
// own.
type BatchBudget struct {
	// held is the members' batches together: each member adds what its
	// own count moved by (publishHeld), so room reads one number.
	held    atomic.Int64
	mu      sync.Mutex
	members map[*passthrough]struct{}
}

// NewBatchBudget returns a budget for the copiers of one worker.
func NewBatchBudget() *BatchBudget {
	return &BatchBudget{members: make(map[*passthrough]struct{})}
}

// useBudget makes b p's budget, leaving the one it had. Called before p's
// loops start.
func (p *passthrough) useBudget(b *BatchBudget) {
	if p.budget != nil {
		p.budget.leave(p)
	}
	b.mu.Lock()
	b.members[p] = struct{}{}
	b.mu.Unlock()
	p.budget = b
	b.held.Add(p.heldBatches.Load())
}

// leave takes p's batches out of the budget (its copier stopped: nothing
// of it publishes any more) and lets the others fetch into the room.
func (b *BatchBudget) leave(p *passthrough) {
	b.mu.Lock()
	if _, ok := b.members[p]; ok {
		delete(b.members, p)
		b.held.Add(-p.heldBatches.Swap(0))
	}
	b.mu.Unlock()
	b.wake()
}

// wake kicks every member's fetch loop: room was freed.
func (b *BatchBudget) wake() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for p := range b.members {
		kick(p.kickFetch)
	}
}

// publishHeld counts p's batches fetched and not yet acknowledged into its
// budget. The caller holds p.mu.
func (p *passthrough) publishHeld() {
	n := int64(p.bufferedBatches + p.readyBatches)
	p.budget.held.Add(n - p.heldBatches.Swap(n))
}
