// Package history keeps the last hour of each mirror's and each topic's
// throughput and lag in memory, for the status page's sparklines: fixed
// rings, so its memory is bounded by the number of topics, whatever the
// uptime.
package history

// Ring holds the last len(buf) values pushed, overwriting the oldest.
type Ring[T any] struct {
	buf  []T
	next int32 // where the next value goes
	n    int32 // values held, at most len(buf)
}

// NewRing returns an empty ring of size values (at least 1).
func NewRing[T any](size int) Ring[T] {
	return Ring[T]{buf: make([]T, max(size, 1))}
}

// Push adds v, dropping the oldest value when the ring is full.
func (r *Ring[T]) Push(v T) {
	r.buf[r.next] = v
	r.next = (r.next + 1) % int32(len(r.buf))
	r.n = min(r.n+1, int32(len(r.buf)))
}

// Len is the number of values held.
func (r *Ring[T]) Len() int { return int(r.n) }

// Values returns the values held, oldest first, in a new slice.
func (r *Ring[T]) Values() []T {
	out := make([]T, 0, r.n)
	start := (r.next - r.n + int32(len(r.buf))) % int32(len(r.buf))
	for i := range r.n {
		out = append(out, r.buf[(start+i)%int32(len(r.buf))])
	}
	return out
}
