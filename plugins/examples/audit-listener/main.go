// Command audit-listener is an example kmirror TopicListener and
// GroupListener plugin, and the template for writing one: it appends every
// change it is told about as one JSON line to the file given by its config
// key `path`.
//
//	listeners:
//	  audit: {type: plugin, path: ./bin/audit-listener, sha256: "...", config: {path: /var/log/kmirror/audit.jsonl}}
//	mirrors:
//	  - name: east-to-west
//	    listeners: [audit]
//
// A line looks like
//
//	{"time":"...","kind":"topics","mirror":"east-to-west","sequence":3,"count":12,"added":[...],"removed":[],"changed":[]}
//
// Every call carries the full current set too (count is its size); after a
// restart kmirror's first call lists everything as added.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/kmirror/kmirror/listeners"
	"github.com/kmirror/kmirror/plugins/sdk"
)

func main() {
	a := &audit{}
	sdk.Serve(sdk.WithInfo("audit-listener", "1.0.0"), sdk.WithTopicListener(a), sdk.WithGroupListener(a))
}

type audit struct {
	mu sync.Mutex
	f  *os.File
}

// Configure implements listeners.Configurer.
func (a *audit) Configure(_ context.Context, config map[string]string) error {
	path := config["path"]
	if path == "" {
		return errors.New("config key `path` (the audit file) is required")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f != nil {
		_ = a.f.Close()
	}
	a.f = f
	return nil
}

// Close implements listeners.Closer.
func (a *audit) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	return err
}

type topic struct {
	Upstream   string            `json:"upstream"`
	Downstream string            `json:"downstream"`
	Partitions int32             `json:"partitions"`
	State      string            `json:"state"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	SourceGaps []sourceGap       `json:"source_gaps,omitempty"`
	Divergent  []divergentTail   `json:"divergent,omitempty"`
}

// sourceGap is a range of source offsets deleted before they were copied.
type sourceGap struct {
	Partition int32 `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
	Failed    bool  `json:"failed"`
}

// divergentTail is a range of target offsets that never reached the
// former target of a failover (a mirror copying back).
type divergentTail struct {
	Partition int32 `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
}

type group struct {
	Name   string   `json:"name"`
	Topics []string `json:"topics"`
}

type line struct {
	Time     time.Time `json:"time"`
	Kind     string    `json:"kind"` // "topics" or "groups"
	Mirror   string    `json:"mirror"`
	Sequence uint64    `json:"sequence"`
	Count    int       `json:"count"`
	Added    any       `json:"added"`
	Removed  any       `json:"removed"`
	Changed  any       `json:"changed,omitempty"`
}

func topics(ts []listeners.Topic) []topic {
	out := make([]topic, len(ts))
	for i, t := range ts {
		out[i] = topic{Upstream: t.Upstream, Downstream: t.Downstream, Partitions: t.Partitions, State: t.State, Metadata: t.Metadata}
		for _, g := range t.SourceGaps {
			out[i].SourceGaps = append(out[i].SourceGaps, sourceGap(g))
		}
		for _, d := range t.Divergent {
			out[i].Divergent = append(out[i].Divergent, divergentTail(d))
		}
	}
	return out
}

func groups(gs []listeners.Group) []group {
	out := make([]group, len(gs))
	for i, g := range gs {
		out[i] = group(g)
	}
	return out
}

// TopicsChanged implements listeners.TopicListener.
func (a *audit) TopicsChanged(_ context.Context, c listeners.TopicsChange) error {
	return a.write(line{Kind: "topics", Mirror: c.Mirror, Sequence: c.Sequence, Count: len(c.Topics),
		Added: topics(c.Added), Removed: topics(c.Removed), Changed: topics(c.Changed)})
}

// GroupsChanged implements listeners.GroupListener.
func (a *audit) GroupsChanged(_ context.Context, c listeners.GroupsChange) error {
	return a.write(line{Kind: "groups", Mirror: c.Mirror, Sequence: c.Sequence, Count: len(c.Groups),
		Added: groups(c.Added), Removed: groups(c.Removed)})
}

// write appends l as one line and syncs it: an error makes kmirror retry
// the delivery, so a line is written at least once.
func (a *audit) write(l line) error {
	l.Time = time.Now().UTC()
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return errors.New("audit file is not open")
	}
	if _, err := a.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return a.f.Sync()
}
