package connector

import (
	"maps"
	"sync"
)

// byMirror holds one value per running mirror for a collector that reads
// them at scrape time: a mirror adds its value when it starts and removes
// it when it stops.
type byMirror[T any] struct {
	mu     sync.Mutex
	values map[string]T
}

// add holds v for mirror until the returned function is called.
func (b *byMirror[T]) add(mirror string, v T) (remove func()) {
	b.mu.Lock()
	if b.values == nil {
		b.values = make(map[string]T)
	}
	b.values[mirror] = v
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.values, mirror)
		b.mu.Unlock()
	}
}

// snapshot is a copy of the values held now, by mirror.
func (b *byMirror[T]) snapshot() map[string]T {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.values)
}
