// Package builtin holds kmirror's built-in listeners: log, file, webhook and
// alertmanager. Each implements listeners.TopicListener and
// listeners.GroupListener, plus listeners.Configurer and listeners.Closer,
// and is safe for concurrent use (one instance may serve several mirrors,
// and topic and group calls may overlap).
//
// Each has a constructor taking a typed options struct (NewLog, NewFile,
// NewWebhook, NewAlertmanager) and a Configure method taking the config map
// of the config file (listeners.<name>.config); New builds one by kind from
// such a map. Configure rejects unknown keys, so a typo fails at start
// instead of being ignored.
//
// The package depends on the standard library only.
package builtin

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/listeners"
)

// Listener is what every built-in listener implements.
type Listener interface {
	listeners.TopicListener
	listeners.GroupListener
	listeners.Configurer
	listeners.Closer
}

// The kinds New knows.
const (
	KindLog          = "log"
	KindFile         = "file"
	KindWebhook      = "webhook"
	KindAlertmanager = "alertmanager"
)

// Kinds lists the built-in listener kinds, sorted.
func Kinds() []string {
	return []string{KindAlertmanager, KindFile, KindLog, KindWebhook}
}

// New builds the built-in listener of the given kind and configures it with
// config (the same map Configure takes). logger is where the log listener
// writes (nil: slog.Default()); the others do not log.
func New(ctx context.Context, kind string, config map[string]string, logger *slog.Logger) (Listener, error) {
	var l Listener
	switch kind {
	case KindLog:
		l = &Log{logger: logger}
	case KindFile:
		l = &File{}
	case KindWebhook:
		l = &Webhook{}
	case KindAlertmanager:
		l = &Alertmanager{}
	default:
		return nil, fmt.Errorf("unknown built-in listener %q (known: %s)", kind, strings.Join(Kinds(), ", "))
	}
	if err := l.Configure(ctx, config); err != nil {
		return nil, err
	}
	return l, nil
}

var (
	_ Listener = (*Log)(nil)
	_ Listener = (*File)(nil)
	_ Listener = (*Webhook)(nil)
	_ Listener = (*Alertmanager)(nil)
)

// topicJSON and groupJSON are how topics and groups appear in the file and
// in webhook bodies (the same shape as the audit-listener example plugin).
type topicJSON struct {
	Upstream   string            `json:"upstream"`
	Downstream string            `json:"downstream"`
	Partitions int32             `json:"partitions"`
	State      string            `json:"state"`
	Metadata   map[string]string `json:"metadata"`
	// SourceGaps: offsets the source deleted before they were copied,
	// the latest range per partition (absent when none).
	SourceGaps []sourceGapJSON `json:"source_gaps,omitempty"`
	// Divergent: a mirror that copies back after a failover, the
	// target's records per partition that never reached the former
	// target (absent when none).
	Divergent []divergentJSON `json:"divergent,omitempty"`
}

type divergentJSON struct {
	Partition int32 `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
	Records   int64 `json:"records"`
}

type sourceGapJSON struct {
	Partition int32 `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
	Records   int64 `json:"records"`
	Failed    bool  `json:"failed"`
}

type groupJSON struct {
	Name   string   `json:"name"`
	Topics []string `json:"topics"`
}

// topicsJSON never returns nil, so JSON shows [] rather than null.
func topicsJSON(ts []listeners.Topic) []topicJSON {
	out := make([]topicJSON, len(ts))
	for i, t := range ts {
		md := t.Metadata
		if md == nil {
			md = map[string]string{}
		}
		out[i] = topicJSON{Upstream: t.Upstream, Downstream: t.Downstream, Partitions: t.Partitions, State: t.State, Metadata: md}
		for _, g := range t.SourceGaps {
			out[i].SourceGaps = append(out[i].SourceGaps, sourceGapJSON{Partition: g.Partition, From: g.From, To: g.To, Records: g.To - g.From, Failed: g.Failed})
		}
		for _, d := range t.Divergent {
			out[i].Divergent = append(out[i].Divergent, divergentJSON{Partition: d.Partition, From: d.From, To: d.To, Records: d.To - d.From})
		}
	}
	return out
}

func groupsJSON(gs []listeners.Group) []groupJSON {
	out := make([]groupJSON, len(gs))
	for i, g := range gs {
		ts := g.Topics
		if ts == nil {
			ts = []string{}
		}
		out[i] = groupJSON{Name: g.Name, Topics: ts}
	}
	return out
}

// configReader reads a listener's config map and remembers which keys it
// used, so that finish can reject the others.
type configReader struct {
	kind string
	m    map[string]string
	used map[string]bool
	keys []string // documented keys, for the error message
	errs []string
}

func newConfigReader(kind string, m map[string]string) *configReader {
	return &configReader{kind: kind, m: m, used: map[string]bool{}}
}

func (r *configReader) str(key string) (string, bool) {
	r.keys = append(r.keys, key)
	v, ok := r.m[key]
	if ok {
		r.used[key] = true
	}
	return strings.TrimSpace(v), ok
}

// prefixed returns the entries whose key starts with prefix, without it.
func (r *configReader) prefixed(prefix string) map[string]string {
	r.keys = append(r.keys, prefix+"<name>")
	var out map[string]string
	for k, v := range r.m {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			r.used[k] = true
			if name == "" {
				r.errorf("%s: empty name", k)
				continue
			}
			if out == nil {
				out = map[string]string{}
			}
			out[name] = v
		}
	}
	return out
}

func (r *configReader) errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *configReader) finish() error {
	var unknown []string
	for k := range r.m {
		if !r.used[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		r.errorf("unknown key %q (known: %s)", k, strings.Join(r.keys, ", "))
	}
	if len(r.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s listener config: %s", r.kind, strings.Join(r.errs, "; "))
}

// duration reads a Go duration ("30s", "5m"); set is false when the key is
// absent. Negative durations are refused.
func (r *configReader) duration(key string) (d time.Duration, set bool) {
	v, ok := r.str(key)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		r.errorf("%s: %q is not a duration (e.g. 30s, 5m)", key, v)
		return 0, false
	}
	if d < 0 {
		r.errorf("%s: %s is negative", key, v)
		return 0, false
	}
	return d, true
}

func (r *configReader) boolean(key string) (b, set bool) {
	v, ok := r.str(key)
	if !ok {
		return false, false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.errorf("%s: %q is not true or false", key, v)
		return false, false
	}
	return b, true
}

func (r *configReader) integer(key string) (n int, set bool) {
	v, ok := r.str(key)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.errorf("%s: %q is not a whole number", key, v)
		return 0, false
	}
	return n, true
}
