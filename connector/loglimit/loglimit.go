// Package loglimit rate-limits log lines per key.
package loglimit

import (
	"log/slog"
	"math"
	"sync"
	"time"
)

// Limiter rate-limits log lines per key: a fault that lasts (a broker
// down, a topic listed with an error) is logged when it starts and then at
// most once per interval, not on every pass or poll. Counters say how often
// it happened.
type Limiter struct {
	every time.Duration

	mu   sync.Mutex
	last map[string]time.Time
}

// maxLimiterKeys bounds the limiter's memory: past it, keys are forgotten
// (their lines may then repeat once early).
const maxLimiterKeys = 10_000

// New returns a limiter that lets a key's line through at most once per
// every.
func New(every time.Duration) *Limiter {
	return &Limiter{every: every, last: make(map[string]time.Time)}
}

// Once returns a limiter that lets one line per key through, ever:
// for a condition that lasts until the operator changes something, where
// a reminder every minute would say nothing new.
func Once() *Limiter { return New(math.MaxInt64) }

// Allow reports whether a line for key may be logged now, and if so
// records it.
func (l *Limiter) Allow(key string) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[key]; ok && now.Sub(t) < l.every {
		return false
	}
	if len(l.last) >= maxLimiterKeys {
		for k, t := range l.last {
			if now.Sub(t) >= l.every {
				delete(l.last, k) // would be let through anyway
			}
		}
		if len(l.last) >= maxLimiterKeys {
			clear(l.last)
		}
	}
	l.last[key] = now
	return true
}

// Forget lets the next line for key through at once (the fault it was
// about is over).
func (l *Limiter) Forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.last, key)
}

func (l *Limiter) Warn(log *slog.Logger, key, msg string, args ...any) {
	if l.Allow(key) {
		log.Warn(msg, args...)
	}
}

func (l *Limiter) Error(log *slog.Logger, key, msg string, args ...any) {
	if l.Allow(key) {
		log.Error(msg, args...)
	}
}
