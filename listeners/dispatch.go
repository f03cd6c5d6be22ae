package listeners

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// Dispatcher delivers one mirror's topic and group sets to its listeners.
//
// Every listener has its own goroutine and remembers what it was last
// handed. Publishing a new set (SetTopics, SetGroups) never blocks: it
// replaces the latest state and wakes the listeners. A listener that is
// slow, failing or restarting simply catches up later with one call that
// carries the newest state and the diff against what it last received, so
// nothing a listener does can slow the mirror, and no change is lost (only
// folded). Calls are bounded by a timeout and retried with backoff.
type Dispatcher struct {
	opts DispatcherOptions

	mu        sync.Mutex
	topics    []Topic
	groups    []Group
	haveTopic bool // SetTopics was called at least once
	haveGroup bool
	targets   []*target

	wg     sync.WaitGroup
	cancel context.CancelFunc
	ctx    context.Context
}

// DispatcherOptions configure a Dispatcher. Mirror is required.
type DispatcherOptions struct {
	Mirror string
	Logger *slog.Logger
	// Timeout bounds one call; 10s by default.
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before retrying a failed
	// call; 500ms and 30s by default.
	MinBackoff, MaxBackoff time.Duration
	// OnCall, when set, is told about every call: the listener's name,
	// "topics" or "groups", its error and how long it took. The worker
	// turns it into metrics; this package stays free of Prometheus.
	OnCall func(listener, kind string, err error, took time.Duration)
}

// target is one listener and what it has been handed.
type target struct {
	name   string
	topics TopicListener
	groups GroupListener
	wake   chan struct{}

	// Owned by the target's goroutine, except resync.
	sentTopics   []Topic
	sentGroups   []Group
	sentTopicsOK bool // something was delivered since the (re)start
	sentGroupsOK bool
	topicSeq     uint64
	groupSeq     uint64
	resync       chan struct{}
	// busy is closed when the listener's last call returns; a call that
	// outlived its timeout keeps it open, and the next call waits for it
	// so a listener never sees two calls at once.
	busy chan struct{}
}

// NewDispatcher returns a Dispatcher; call Start, then Close on shutdown.
func NewDispatcher(opts DispatcherOptions) *Dispatcher {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 500 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	opts.Logger = opts.Logger.With("mirror", opts.Mirror)
	ctx, cancel := context.WithCancel(context.Background())
	return &Dispatcher{opts: opts, ctx: ctx, cancel: cancel}
}

// Add registers a listener under name before Start; either interface may
// be nil.
func (d *Dispatcher) Add(name string, tl TopicListener, gl GroupListener) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.targets = append(d.targets, &target{name: name, topics: tl, groups: gl, wake: make(chan struct{}, 1), resync: make(chan struct{}, 1)})
}

// Len returns the number of listeners.
func (d *Dispatcher) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.targets)
}

// Start starts one goroutine per listener.
func (d *Dispatcher) Start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range d.targets {
		d.wg.Go(func() { d.run(t) })
	}
}

// Close stops delivering (a call in flight is cancelled) and waits for
// every goroutine. It does not close the listeners: one listener may serve
// several mirrors' dispatchers, so whoever built it closes it.
func (d *Dispatcher) Close() {
	d.cancel()
	d.wg.Wait()
}

// SetTopics publishes the mirror's current topic set. It never blocks.
func (d *Dispatcher) SetTopics(topics []Topic) {
	topics = slices.Clone(topics)
	slices.SortFunc(topics, func(a, b Topic) int { return strings.Compare(a.Upstream, b.Upstream) })
	d.mu.Lock()
	d.topics, d.haveTopic = topics, true
	targets := d.targets
	d.mu.Unlock()
	for _, t := range targets {
		poke(t.wake)
	}
}

// SetGroups publishes the mirror's current group set. It never blocks.
func (d *Dispatcher) SetGroups(groups []Group) {
	groups = slices.Clone(groups)
	slices.SortFunc(groups, func(a, b Group) int { return strings.Compare(a.Name, b.Name) })
	d.mu.Lock()
	d.groups, d.haveGroup = groups, true
	targets := d.targets
	d.mu.Unlock()
	for _, t := range targets {
		poke(t.wake)
	}
}

// Resync makes the named listener's next calls carry the full current
// state as added, as on its first call: for a plugin that was restarted and
// remembers nothing. The sequence numbers go on.
func (d *Dispatcher) Resync(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range d.targets {
		if t.name == name {
			poke(t.resync)
			poke(t.wake)
		}
	}
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (d *Dispatcher) snapshot() (topics []Topic, groups []Group, haveTopic, haveGroup bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.topics, d.groups, d.haveTopic, d.haveGroup
}

// run delivers to one listener until Close.
func (d *Dispatcher) run(t *target) {
	backoff := time.Duration(0)
	for {
		var retry <-chan time.Time
		if backoff > 0 {
			retry = time.After(backoff)
		}
		select {
		case <-d.ctx.Done():
			return
		case <-t.wake:
		case <-retry:
		}
		select {
		case <-t.resync:
			t.sentTopics, t.sentGroups, t.sentTopicsOK, t.sentGroupsOK = nil, nil, false, false
		default:
		}
		if err := d.deliver(t); err != nil {
			if d.ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, d.opts.MinBackoff), d.opts.MaxBackoff)
			d.opts.Logger.Warn("listener call failed; retrying with the latest state", "listener", t.name, "retry_in", backoff, "err", err)
			continue
		}
		backoff = 0
	}
}

// deliver hands the listener what changed since its last successful call.
func (d *Dispatcher) deliver(t *target) error {
	topics, groups, haveTopic, haveGroup := d.snapshot()
	var errs []error
	if t.topics != nil && haveTopic {
		added, removed, changed := DiffTopics(t.sentTopics, topics)
		if !t.sentTopicsOK || len(added)+len(removed)+len(changed) > 0 {
			c := TopicsChange{Mirror: d.opts.Mirror, Sequence: t.topicSeq + 1, Topics: topics, Added: added, Removed: removed, Changed: changed}
			if err := d.call(t, "topics", func(ctx context.Context) error { return t.topics.TopicsChanged(ctx, c) }); err != nil {
				errs = append(errs, err)
			} else {
				t.topicSeq++
				t.sentTopics, t.sentTopicsOK = topics, true
			}
		}
	}
	if t.groups != nil && haveGroup {
		added, removed := DiffGroups(t.sentGroups, groups)
		if !t.sentGroupsOK || len(added)+len(removed) > 0 {
			c := GroupsChange{Mirror: d.opts.Mirror, Sequence: t.groupSeq + 1, Groups: groups, Added: added, Removed: removed}
			if err := d.call(t, "groups", func(ctx context.Context) error { return t.groups.GroupsChanged(ctx, c) }); err != nil {
				errs = append(errs, err)
			} else {
				t.groupSeq++
				t.sentGroups, t.sentGroupsOK = groups, true
			}
		}
	}
	return errors.Join(errs...)
}

// call runs one listener call, bounded by the timeout even when the
// listener ignores its context: then the call is abandoned (it finishes in
// the background) and reported as timed out, so neither delivery to other
// listeners nor shutdown waits for it.
func (d *Dispatcher) call(t *target, kind string, fn func(context.Context) error) error {
	if t.busy != nil {
		select {
		case <-t.busy:
		case <-d.ctx.Done():
			return d.ctx.Err()
		}
	}
	ctx, cancel := context.WithTimeout(d.ctx, d.opts.Timeout)
	defer cancel()
	start := time.Now()
	busy := make(chan struct{})
	t.busy = busy
	result := make(chan error, 1)
	go func() {
		defer close(busy)
		result <- fn(ctx)
	}()
	var err error
	select {
	case err = <-result:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil && ctx.Err() != nil && d.ctx.Err() == nil {
		err = ctx.Err() // it returned, but only after its deadline
	}
	if d.opts.OnCall != nil {
		d.opts.OnCall(t.name, kind, err, time.Since(start))
	}
	return err
}
