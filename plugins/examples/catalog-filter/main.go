// Command catalog-filter is an example kmirror filter plugin, a
// TopicFilter and a GroupFilter: it mirrors exactly the topics listed in a
// catalog file and, when the catalog lists groups, translates exactly
// those consumer groups: the push-down case of PIP-452 (the selection comes
// from the filter's own index, not from patterns in kmirror's config).
//
// The catalog is JSON; an entry is a name or an object with the owning
// team:
//
//	{"topics": ["orders", {"name": "payments", "team": "billing"}],
//	 "groups": ["orders-app", {"name": "billing-app", "team": "billing"}]}
//
// Without a "groups" key the plugin leaves the groups alone (every
// candidate is kept, as if it filtered topics only); "groups": [] keeps
// none.
//
// The file is the plugin config's `catalog` key, or a mirror's filter
// property `catalog` (which wins). A mirror's filter property `team`
// selects only that team's entries. The file is re-read whenever its
// modification time or size changes; a file that cannot be read or parsed
// fails the call, so kmirror keeps its last good selection (or group set).
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
	f := newCatalogFilter()
	sdk.Serve(sdk.WithInfo("catalog-filter", "1.1.0"), sdk.WithTopicFilter(f), sdk.WithGroupFilter(f))
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
		return fmt.Errorf("catalog entry %s: want a name or {\"name\", \"team\"}", b)
	}
	*e = entry(p)
	return nil
}

type catalogFile struct {
	Topics []entry `json:"topics"`
	// Groups is nil when the key is absent: groups are then not
	// filtered.
	Groups *[]entry `json:"groups"`
}

// loaded is one parse of a catalog file, with the stat it was read at.
type loaded struct {
	mtime time.Time
	size  int64
	teams map[string]string // topic -> team ("" for none)
	// groupTeams is group -> team; nil when the catalog lists no groups.
	groupTeams map[string]string
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
	teams, err := byName(f.Topics)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: topics: %w", path, err)
	}
	l := &loaded{mtime: st.ModTime(), size: st.Size(), teams: teams}
	if f.Groups != nil {
		if l.groupTeams, err = byName(*f.Groups); err != nil {
			return nil, fmt.Errorf("catalog %s: groups: %w", path, err)
		}
	}
	c.catalog[path] = l
	groups := "all" // not filtered
	if l.groupTeams != nil {
		groups = fmt.Sprint(len(l.groupTeams))
	}
	sdk.Logger().Info("catalog loaded", "path", path, "topics", len(l.teams), "groups", groups)
	return l, nil
}

// byName maps the entries' names to their teams.
func byName(es []entry) (map[string]string, error) {
	out := make(map[string]string, len(es))
	for _, e := range es {
		if e.Name == "" {
			return nil, errors.New("an entry has no name")
		}
		out[e.Name] = e.Team
	}
	return out, nil
}

// catalogFor returns the catalog a request names (the `catalog` property)
// or the configured one.
func (c *catalogFilter) catalogFor(props map[string]string) (*loaded, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	path := c.path
	if p := props["catalog"]; p != "" {
		path = p
	}
	if path == "" {
		return nil, errors.New("no catalog: set the plugin config key or the filter property `catalog`")
	}
	return c.load(path)
}

// FilterTopics implements filters.TopicFilter.
func (c *catalogFilter) FilterTopics(_ context.Context, req filters.TopicRequest) ([]string, error) {
	l, err := c.catalogFor(req.Properties)
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

// FilterGroups implements filters.GroupFilter: the groups the catalog
// lists (of the property's team), or every candidate when it lists none.
func (c *catalogFilter) FilterGroups(_ context.Context, req filters.GroupRequest) ([]string, error) {
	l, err := c.catalogFor(req.Properties)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(req.Groups))
	if l.groupTeams == nil {
		for _, g := range req.Groups {
			out = append(out, g.Name)
		}
		return out, nil
	}
	team, byTeam := req.Properties["team"]
	for _, g := range req.Groups {
		owner, listed := l.groupTeams[g.Name]
		if listed && (!byTeam || owner == team) {
			out = append(out, g.Name)
		}
	}
	return out, nil
}
