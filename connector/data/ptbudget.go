package data

import "sync"

// BatchBudget bounds the batches that the batch paths sharing it (the
// copiers of one worker: the shared one, or one per exactly_once slot)
// hold fetched and not yet acknowledged, together: ptMaxBatches in all,
// not per copier. With a bound per copier, 16 exactly_once slots could hold
// 16 times as many small batches as one copier, and a restart of 100,000
// partitions held every partition's batch at once (each about 2 KiB with
// its unit, queue entry and progress writes: the worker's peak memory was
// twice the at-least-once worker's). Bytes stay bounded per copier, by its
// producer buffer (enqueue), so that slots copying large batches do not
// wait on one another's bytes.
type BatchBudget struct {
	mu      sync.Mutex
	members map[*passthrough]struct{}
}

// NewBatchBudget returns a budget for the copiers of one worker.
func NewBatchBudget() *BatchBudget {
	return &BatchBudget{members: make(map[*passthrough]struct{})}
}

func (b *BatchBudget) join(p *passthrough) {
	b.mu.Lock()
	b.members[p] = struct{}{}
	b.mu.Unlock()
}

// leave takes p's batches out of the budget (its copier stopped) and lets
// the others fetch into the room.
func (b *BatchBudget) leave(p *passthrough) {
	b.mu.Lock()
	delete(b.members, p)
	b.mu.Unlock()
	b.wake()
}

// held is the batches every member holds.
func (b *BatchBudget) held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for p := range b.members {
		n += int(p.heldBatches.Load())
	}
	return n
}

// wake kicks every member's fetch loop: room was freed.
func (b *BatchBudget) wake() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for p := range b.members {
		kick(p.kickFetch)
	}
}

// publishHeld publishes p's batches fetched and not yet acknowledged for
// its budget (read without p.mu). The caller holds p.mu.
func (p *passthrough) publishHeld() {
	p.heldBatches.Store(int64(p.bufferedBatches + p.readyBatches))
}

// batchesHeld is what counts against ptMaxBatches: the budget's, when
// p shares one. The caller holds p.mu.
func (p *passthrough) batchesHeld() int {
	if p.budget != nil {
		return p.budget.held()
	}
	return p.bufferedBatches + p.readyBatches
}
