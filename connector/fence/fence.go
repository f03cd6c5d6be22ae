// Package fence is a mirror's fence: a switch on the target that stops
// every worker of the mirror from copying, whatever runs them, until it is
// lifted. `kmirror failover` and `kmirror cutover` set it so that nothing
// is copied into the target once applications write there; `kmirror
// failback` lifts it on the mirror it prepares.
//
// The fence lives in kmirror.<mirror>.fence.internal on the target: one
// partition, compacted, a log of JSON records under the key "fence" whose
// last one is the mirror's state. On the target because that is where the
// workers write: a worker that cannot read it cannot copy either. Not in
// the mirror's group (offsets of a group without members expire) and not
// in the progress topic (which a worker only reads at a takeover, and which
// is large): a worker checks the fence's end offset every CheckEvery, one
// small request, and reads the record only when it moved.
package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/connector/state"
)

// key is the record key of every fence record: compaction keeps the last.
const key = "fence"

// CheckEvery is how often a running worker looks at its mirror's fence. A
// failover waits at least this long (plus a shutdown) for the workers to
// stop.
var CheckEvery = 2 * time.Second

// Topic is the name of a mirror's fence topic.
func Topic(mirror string) string { return policy.InternalTopic(mirror, "fence") }

// State is a mirror's fence as its last record says.
type State struct {
	// Fenced: no worker of the mirror copies.
	Fenced bool `json:"fenced"`
	// At is when the record was written, By what wrote it (the command
	// and the host) and Reason why, for the operator who finds a mirror
	// that does not copy.
	At     time.Time `json:"at"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	// ReverseOf names the mirror this one copies back for, set by
	// kmirror failback and kept by every later fence record: a group
	// offset below where this mirror's copy starts translates through
	// that mirror's index backwards.
	ReverseOf string `json:"reverse_of,omitempty"`
	// Divergent are the partitions where this mirror's target held
	// records its source never got (the data a failover lost), as
	// kmirror failback found them.
	Divergent []Divergent `json:"divergent,omitempty"`
}

// Divergent is one partition's divergent tail: target offsets [From, To)
// of this mirror's target that never reached its source.
type Divergent struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      int64  `json:"from"`
	To        int64  `json:"to"`
}

func (s State) String() string {
	if !s.Fenced {
		return "not fenced"
	}
	return fmt.Sprintf("fenced at %s by %s: %s", s.At.UTC().Format(time.RFC3339), s.By, s.Reason)
}

// Ensure creates the fence topic when it is missing.
func Ensure(ctx context.Context, adm *kadm.Client, mirror string, rf int16) error {
	if err := state.EnsureCompactedExists(ctx, adm, Topic(mirror), 1, rf); err != nil {
		return fmt.Errorf("fence topic %s: %w", Topic(mirror), err)
	}
	return nil
}

// Read returns the mirror's fence and the topic's end offset (what a
// Watcher compares). A missing topic is no fence: a mirror that never ran
// with one was never fenced. Any other error is returned: unknown is not
// "not fenced".
func Read(ctx context.Context, log *slog.Logger, opts []kgo.Opt, adm *kadm.Client, mirror string) (State, int64, error) {
	topic := Topic(mirror)
	end, err := endOffset(ctx, adm, topic)
	if err != nil || end <= 0 {
		return State{}, end, err
	}
	var st State
	var decodeErr error
	err = state.Read(ctx, log, opts, adm, topic, 0, func(k, v []byte) error {
		if string(k) != key {
			return nil
		}
		if v == nil {
			st = State{}
			return nil
		}
		var next State
		if err := json.Unmarshal(v, &next); err != nil {
			// Never guessed: a fence that cannot be read keeps
			// the mirror stopped until it is written again.
			decodeErr = fmt.Errorf("fence record %q in %s: %w", v, topic, err)
			return nil
		}
		st, decodeErr = next, nil
		return nil
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return State{}, 0, fmt.Errorf("read the fence %s: %w", topic, err)
	}
	return st, end, nil
}

// endOffset is the fence topic's end offset; -1 with no error when the
// topic does not exist.
func endOffset(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	if o, ok := ends.Lookup(topic, -1); ok && o.Err != nil {
		// The topic's metadata answered with an error.
		if isUnknownTopic(o.Err) {
			return -1, nil
		}
		return 0, o.Err
	}
	o, ok := ends.Lookup(topic, 0)
	switch {
	case !ok:
		return 0, fmt.Errorf("no end offset for %s", topic)
	case o.Err != nil && isUnknownTopic(o.Err):
		return -1, nil
	case o.Err != nil:
		return 0, o.Err
	}
	return o.Offset, nil
}

// Write sets the mirror's fence: it creates the topic when missing and
// returns once the target acknowledged the record.
func Write(ctx context.Context, adm *kadm.Client, cl *kgo.Client, mirror string, rf int16, st State) error {
	if err := Ensure(ctx, adm, mirror, rf); err != nil {
		return err
	}
	if st.At.IsZero() {
		st.At = time.Now()
	}
	v, err := json.Marshal(st)
	if err != nil {
		return err
	}
	r := &kgo.Record{Topic: Topic(mirror), Partition: 0, Key: []byte(key), Value: v}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("write the fence %s: %w", Topic(mirror), err)
	}
	return nil
}

// Watcher tells a running worker when its mirror's fence changed.
type Watcher struct {
	log    *slog.Logger
	opts   []kgo.Opt
	mirror string
	end    int64 // the end offset at the last read
	state  State
}

// NewWatcher returns a watcher whose first Check reads the fence.
func NewWatcher(log *slog.Logger, opts []kgo.Opt, mirror string) *Watcher {
	return &Watcher{log: log, opts: opts, mirror: mirror, end: -2}
}

// Check returns the fence, reading its record only when the topic's end
// offset moved since the last read. An error leaves the last state in
// place: the caller decides what not knowing means.
func (w *Watcher) Check(ctx context.Context, adm *kadm.Client) (State, error) {
	end, err := endOffset(ctx, adm, Topic(w.mirror))
	if err != nil {
		return w.state, fmt.Errorf("read the fence %s: %w", Topic(w.mirror), err)
	}
	if end == w.end {
		return w.state, nil
	}
	st, end, err := Read(ctx, w.log, w.opts, adm, w.mirror)
	if err != nil {
		return w.state, err
	}
	w.state, w.end = st, end
	return st, nil
}

// State is the fence as last read.
func (w *Watcher) State() State { return w.state }

func isUnknownTopic(err error) bool { return errors.Is(err, kerr.UnknownTopicOrPartition) }
