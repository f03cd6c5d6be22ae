// Command catalog-filter is an example kmirror TopicFilter plugin: it
// mirrors exactly the topics listed in a catalog file, the push-down case
// of PIP-452 (the selection comes from the filter's own index, not from
// patterns in kmirror's config).
//
// The catalog is JSON; an entry is a topic name or an object with the
// owning team:
//
//	{"topics": ["orders", {"name": "payments", "team": "billing"}]}
//
// The file is the plugin config's `catalog` key, or a mirror's filter
// property `catalog` (which wins). A mirror's filter property `team`
// selects only that team's entries. The file is re-read whenever its
// modification time or size changes; a file that cannot be read or parsed
// fails the call, so kmirror keeps its last good selection.
//
//	plugins:
//	  catalog: {path: ./bin/catalog-filter, sha256: "...", config: {catalog: /etc/kmirror/catalog.json}}
//	mirrors:
//	  - name: east-to-west
//	    filters: [{plugin: catalog, properties: {team: billing}}]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/plugins/sdk"
)

func main() {
	sdk.Serve(sdk.WithInfo("catalog-filter", "1.0.0"), sdk.WithTopicFilter(newCatalogFilter()))
}

// entry is one catalog entry: "name" or {"name": ..., "team": ...}.
type entry struct {
	Name string `json:"name"`
	Team string `json:"team,omitempty"`
}

func (e *entry) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err == nil {
		*e = entry{Name: name}
		return nil
	}
	type plain entry
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("catalog entry %s: want a topic name or {\"name\", \"team\"}", b)
	}
	*e = entry(p)
	return nil
}

type catalogFile struct {
	Topics []entry `json:"topics"`
}

// loaded is one parse of a catalog file, with the stat it was read at.
type loaded struct {
	mtime time.Time
	size  int64
	teams map[string]string // topic -> team ("" for none)
}

type catalogFilter struct {
	mu      sync.Mutex
	path    string             // from Configure
	catalog map[string]*loaded // by path
}

func newCatalogFilter() *catalogFilter { return &catalogFilter{catalog: map[string]*loaded{}} }

// Configure implements listeners.Configurer: the SDK calls it once, before
// any filter call.
func (c *catalogFilter) Configure(_ context.Context, config map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.path = config["catalog"]
	if c.path == "" {
		return nil // every mirror must then give the `catalog` property
	}
	_, err := c.load(c.path)
	return err
}

// load returns path's catalog, re-reading it when it changed. c.mu is held.
func (c *catalogFilter) load(path string) (*loaded, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if l := c.catalog[path]; l != nil && l.mtime.Equal(st.ModTime()) && l.size == st.Size() {
		return l, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	var f catalogFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("catalog %s: %w", path, err)
	}
	l := &loaded{mtime: st.ModTime(), size: st.Size(), teams: make(map[string]string, len(f.Topics))}
	for _, e := range f.Topics {
		if e.Name == "" {
			return nil, fmt.Errorf("catalog %s: an entry has no name", path)
		}
		l.teams[e.Name] = e.Team
	}
	c.catalog[path] = l
	sdk.Logger().Info("catalog loaded", "path", path, "topics", len(l.teams))
	return l, nil
}

// FilterTopics implements filters.TopicFilter.
func (c *catalogFilter) FilterTopics(_ context.Context, req filters.TopicRequest) ([]string, error) {
	c.mu.Lock()
	path := c.path
	if p := req.Properties["catalog"]; p != "" {
		path = p
	}
	if path == "" {
		c.mu.Unlock()
		return nil, errors.New("no catalog: set the plugin config key or the filter property `catalog`")
	}
	l, err := c.load(path)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	team, byTeam := req.Properties["team"]
	out := make([]string, 0, min(len(req.Topics), len(l.teams)))
	for _, t := range req.Topics {
		owner, listed := l.teams[t.Name]
		if listed && (!byTeam || owner == team) {
			out = append(out, t.Name)
		}
	}
	return out, nil
}
