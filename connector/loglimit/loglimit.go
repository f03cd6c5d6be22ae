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
	now   func() time.Time // tests move it

	mu   sync.Mutex
	last map[string]seen
}

// seen is a key's last line let through and the lines held back since.
type seen struct {
	at   time.Time
	held int
}

// maxLimiterKeys bounds the limiter's memory: past it, keys are forgotten
// (their lines may then repeat once early).
const maxLimiterKeys = 10_000

// New returns a limiter that lets a key's line through at most once per
// every.
func New(every time.Duration) *Limiter {
	return &Limiter{every: every, now: time.Now, last: make(map[string]seen)}
}

// Once returns a limiter that lets one line per key through, ever:
// for a condition that lasts until the operator changes something, where
// a reminder every minute would say nothing new.
func Once() *Limiter { return New(math.MaxInt64) }

// Allow reports whether a line for key may be logged now, and if so
// records it.
func (l *Limiter) Allow(key string) bool {
	ok, _ := l.Pass(key)
	return ok
}

// Pass is Allow that also says, when the line may be logged, how many
// lines for key were held back since the last one let through: a line
// that stands for the ones it replaced can say so.
func (l *Limiter) Pass(key string) (ok bool, held int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s, found := l.last[key]
	if found && now.Sub(s.at) < l.every {
		s.held++
		l.last[key] = s
		return false, 0
	}
	if len(l.last) >= maxLimiterKeys {
		for k, s := range l.last {
			if now.Sub(s.at) >= l.every {
				delete(l.last, k) // would be let through anyway
			}
		}
		if len(l.last) >= maxLimiterKeys {
			clear(l.last)
		}
	}
	l.last[key] = seen{at: now}
	return true, s.held
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
