package builtin

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kmirror/kmirror/listeners"
)

// DefaultLogMaxNames is how many names the log listener lists per key
// before it writes "+N more".
const DefaultLogMaxNames = 100

// LogOptions configure a Log listener.
type LogOptions struct {
	// Logger is where the lines go; nil means slog.Default().
	Logger *slog.Logger
	// Level is the level of every line (default Info).
	Level slog.Level
	// MaxNames bounds the names listed under added, removed and changed:
	// past it the list ends with "+N more". 0 means DefaultLogMaxNames; a
	// negative value means no bound.
	MaxNames int
}

// Log writes one line per change set through a *slog.Logger:
//
//	msg="mirrored topics changed" kind=topics mirror=east-to-west sequence=4 total=12 added=[orders] removed=[] changed=["payments (partitions 3->6)"]
//	msg="mirrored groups changed" kind=groups mirror=east-to-west sequence=2 total=3 added=[billing] removed=[] changed=[]
//
// The keys are stable: kind, mirror, sequence, total (the size of the full
// set), added, removed and changed (always [] for groups). A topic is named
// by its upstream name, as "upstream->downstream" when they differ; a changed
// topic also says what changed when this listener saw its previous version.
//
// Config keys: level (debug, info, warn, error; default info) and max_names
// (default 100, -1 for no bound).
type Log struct {
	mu       sync.Mutex
	logger   *slog.Logger
	level    slog.Level
	maxNames int
	// last is each mirror's topics of the previous call, to say what changed.
	last map[string]map[string]listeners.Topic
}

// NewLog returns a Log listener.
func NewLog(o LogOptions) (*Log, error) {
	l := &Log{}
	l.apply(o)
	return l, nil
}

func (l *Log) apply(o LogOptions) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.logger = o.Logger
	l.level = o.Level
	l.maxNames = o.MaxNames
}

// ParseLogOptions reads a log listener's config map (keys level,
// max_names). The Logger is not set: it cannot come from a map.
func ParseLogOptions(config map[string]string) (LogOptions, error) {
	r := newConfigReader(KindLog, config)
	var o LogOptions
	if v, ok := r.str("level"); ok {
		if err := o.Level.UnmarshalText([]byte(v)); err != nil {
			r.errorf("level: %q is not debug, info, warn or error", v)
		}
	}
	if v, ok := r.str("max_names"); ok {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			r.errorf("max_names: %q is not an integer", v)
		case n == 0:
			r.errorf("max_names: must not be 0 (-1 lists every name)")
		default:
			o.MaxNames = n
		}
	}
	return o, r.finish()
}

// Configure implements listeners.Configurer. It keeps the logger the
// listener was built with.
func (l *Log) Configure(_ context.Context, config map[string]string) error {
	o, err := ParseLogOptions(config)
	if err != nil {
		return err
	}
	l.mu.Lock()
	o.Logger = l.logger
	l.mu.Unlock()
	l.apply(o)
	return nil
}

// Close implements listeners.Closer; it holds nothing.
func (l *Log) Close() error { return nil }

func (l *Log) settings() (*slog.Logger, slog.Level, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lg := l.logger
	if lg == nil {
		lg = slog.Default()
	}
	n := l.maxNames
	if n == 0 {
		n = DefaultLogMaxNames
	}
	return lg, l.level, n
}

// TopicsChanged implements listeners.TopicListener.
func (l *Log) TopicsChanged(ctx context.Context, c listeners.TopicsChange) error {
	logger, level, limit := l.settings()

	l.mu.Lock()
	prev := l.last[c.Mirror]
	changed := make([]string, len(c.Changed))
	for i, t := range c.Changed {
		changed[i] = topicName(t)
		if old, ok := prev[t.Upstream]; ok {
			if d := topicDiff(old, t); d != "" {
				changed[i] += " (" + d + ")"
			}
		}
	}
	cur := make(map[string]listeners.Topic, len(c.Topics))
	for _, t := range c.Topics {
		t.Metadata = maps.Clone(t.Metadata)
		cur[t.Upstream] = t
	}
	if l.last == nil {
		l.last = map[string]map[string]listeners.Topic{}
	}
	l.last[c.Mirror] = cur
	l.mu.Unlock()

	added := make([]string, len(c.Added))
	for i, t := range c.Added {
		added[i] = topicName(t)
		if d := divergentText(nil, t.Divergent); d != "" {
			added[i] += " (" + d + ")" // a mirror copying back, as it starts
		}
	}
	removed := make([]string, len(c.Removed))
	for i, t := range c.Removed {
		removed[i] = topicName(t)
	}
	logger.Log(ctx, level, "mirrored topics changed",
		"kind", "topics",
		"mirror", c.Mirror,
		"sequence", c.Sequence,
		"total", len(c.Topics),
		"added", bound(added, limit),
		"removed", bound(removed, limit),
		"changed", bound(changed, limit))
	return nil
}

// GroupsChanged implements listeners.GroupListener.
func (l *Log) GroupsChanged(ctx context.Context, c listeners.GroupsChange) error {
	logger, level, limit := l.settings()
	added := make([]string, len(c.Added))
	for i, g := range c.Added {
		added[i] = g.Name
	}
	removed := make([]string, len(c.Removed))
	for i, g := range c.Removed {
		removed[i] = g.Name
	}
	logger.Log(ctx, level, "mirrored groups changed",
		"kind", "groups",
		"mirror", c.Mirror,
		"sequence", c.Sequence,
		"total", len(c.Groups),
		"added", bound(added, limit),
		"removed", bound(removed, limit),
		"changed", []string{})
	return nil
}

func topicName(t listeners.Topic) string {
	if t.Downstream == "" || t.Downstream == t.Upstream {
		return t.Upstream
	}
	return t.Upstream + "->" + t.Downstream
}

// topicDiff says what differs between two versions of a topic.
func topicDiff(old, cur listeners.Topic) string {
	var d []string
	if old.Downstream != cur.Downstream {
		d = append(d, fmt.Sprintf("downstream %s->%s", old.Downstream, cur.Downstream))
	}
	if old.Partitions != cur.Partitions {
		d = append(d, fmt.Sprintf("partitions %d->%d", old.Partitions, cur.Partitions))
	}
	if old.State != cur.State {
		d = append(d, fmt.Sprintf("state %s->%s", old.State, cur.State))
	}
	if !maps.Equal(old.Metadata, cur.Metadata) {
		d = append(d, "metadata")
	}
	if gaps := sourceGapsText(old.SourceGaps, cur.SourceGaps); gaps != "" {
		d = append(d, gaps)
	}
	if div := divergentText(old.Divergent, cur.Divergent); div != "" {
		d = append(d, div)
	}
	return strings.Join(d, ", ")
}

// sourceGapsText names the source gaps cur has and old had not: "source
// gap partition 0 offsets 3..6 (3, skipped)".
func sourceGapsText(old, cur []listeners.SourceGap) string {
	var d []string
	for _, g := range cur {
		if slices.Contains(old, g) {
			continue
		}
		how := "skipped"
		if g.Failed {
			how = "partition stopped"
		}
		d = append(d, fmt.Sprintf("source gap partition %d offsets %d..%d (%d, %s)", g.Partition, g.From, g.To, g.To-g.From, how))
	}
	return strings.Join(d, ", ")
}

// divergentText names the divergent tails cur has and old had not:
// "divergent tail partition 0 offsets 20..25 (5)", the target's records
// the former target of a failover never got.
func divergentText(old, cur []listeners.DivergentTail) string {
	var d []string
	for _, t := range cur {
		if !slices.Contains(old, t) {
			d = append(d, fmt.Sprintf("divergent tail partition %d offsets %d..%d (%d)", t.Partition, t.From, t.To, t.To-t.From))
		}
	}
	return strings.Join(d, ", ")
}

func bound(names []string, limit int) []string {
	if limit < 0 || len(names) <= limit {
		return names
	}
	out := append(names[:limit:limit], fmt.Sprintf("+%d more", len(names)-limit))
	return out
}
