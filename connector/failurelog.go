package connector

import (
	"errors"
	"log/slog"
	"sync"
	"time"
)

// failureLog logs the failures of one periodic job (the startup, the
// control pass, a sync): the first at once, then while the job keeps
// failing a reminder after a minute, and twice as long each time after,
// up to a quarter of an hour; and one line when it succeeds again. Against
// a cluster that is down, a job retried every few seconds is then a line,
// not a line per try. A failure that the cluster's connection tracker has
// logged already (a broker that cannot be reached: internal/kafka's errors
// say so with Logged) is not logged again, so each broker failure is one
// line whichever jobs run into it.
type failureLog struct {
	now func() time.Time // tests move it

	mu       sync.Mutex
	failures int       // in a row
	since    time.Time // the first of them
	loggedAt time.Time // zero: none of them logged yet
	every    time.Duration
}

const (
	firstFailureReminder = time.Minute
	maxFailureReminder   = 15 * time.Minute
)

func newFailureLog() *failureLog { return &failureLog{now: time.Now} }

// loggedElsewhere reports whether err's cause was logged where it happened.
func loggedElsewhere(err error) bool {
	var l interface{ Logged() bool }
	return errors.As(err, &l) && l.Logged()
}

// failed counts a failure and logs it at ERROR, msg with err and args, when
// it is due.
func (f *failureLog) failed(log *slog.Logger, msg string, err error, args ...any) {
	now := f.now()
	f.mu.Lock()
	f.failures++
	if f.failures == 1 {
		f.since = now
	}
	switch {
	case loggedElsewhere(err):
		f.mu.Unlock()
		return
	case f.loggedAt.IsZero():
		f.every = firstFailureReminder
	case now.Sub(f.loggedAt) >= f.every:
		f.every = min(2*f.every, maxFailureReminder)
	default:
		f.mu.Unlock()
		return
	}
	f.loggedAt = now
	if f.failures > 1 {
		args = append(args, "failures", f.failures, "failing_for", now.Sub(f.since).Round(time.Second))
	}
	f.mu.Unlock()
	log.Error(msg, append([]any{"err", err}, args...)...)
}

// succeeded ends a run of failures, logging msg at INFO if one of them
// was logged.
func (f *failureLog) succeeded(log *slog.Logger, msg string) {
	f.mu.Lock()
	failures, since, logged := f.failures, f.since, !f.loggedAt.IsZero()
	f.failures, f.loggedAt = 0, time.Time{}
	now := f.now()
	f.mu.Unlock()
	if failures > 0 && logged {
		log.Info(msg, "failures", failures, "after", now.Sub(since).Round(time.Second))
	}
}
