package listeners

import (
	"maps"
	"slices"
	"strings"
)

// DiffTopics compares two topic sets by Upstream name and returns the
// topics added, removed and changed (partitions, state, downstream name,
// metadata, source gaps or divergent tails), each sorted by Upstream.
// Changed holds the new versions.
func DiffTopics(old, cur []Topic) (added, removed, changed []Topic) {
	before := make(map[string]Topic, len(old))
	for _, t := range old {
		before[t.Upstream] = t
	}
	now := make(map[string]bool, len(cur))
	for _, t := range cur {
		now[t.Upstream] = true
		prev, ok := before[t.Upstream]
		switch {
		case !ok:
			added = append(added, t)
		case !sameTopic(prev, t):
			changed = append(changed, t)
		}
	}
	for _, t := range old {
		if !now[t.Upstream] {
			removed = append(removed, t)
		}
	}
	for _, s := range [][]Topic{added, removed, changed} {
		slices.SortFunc(s, func(a, b Topic) int { return strings.Compare(a.Upstream, b.Upstream) })
	}
	return added, removed, changed
}

func sameTopic(a, b Topic) bool {
	return a.Upstream == b.Upstream && a.Downstream == b.Downstream && a.Partitions == b.Partitions &&
		a.State == b.State && maps.Equal(a.Metadata, b.Metadata) && slices.Equal(a.SourceGaps, b.SourceGaps) &&
		slices.Equal(a.Divergent, b.Divergent)
}

// DiffGroups compares two group sets by Name and returns the groups added
// and removed, sorted by Name.
func DiffGroups(old, cur []Group) (added, removed []Group) {
	before := make(map[string]bool, len(old))
	for _, g := range old {
		before[g.Name] = true
	}
	now := make(map[string]bool, len(cur))
	for _, g := range cur {
		now[g.Name] = true
		if !before[g.Name] {
			added = append(added, g)
		}
	}
	for _, g := range old {
		if !now[g.Name] {
			removed = append(removed, g)
		}
	}
	slices.SortFunc(added, func(a, b Group) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(removed, func(a, b Group) int { return strings.Compare(a.Name, b.Name) })
	return added, removed
}
