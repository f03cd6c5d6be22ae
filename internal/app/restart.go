package app

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/kmirror/kmirror/config"
)

// This file finds what a reload cannot apply: the config keys whose value
// differs from the running one outside the few that Reload applies. The
// comparison walks the config structs by their yaml tags, so a key added
// to the config is reported by itself until it is made reloadable here.

// appliedKey is a key (and everything under it) that Reload applies. In
// key, "*" stands for any one name (a map key, or a mirror as [*]).
type appliedKey struct {
	key string
	// when, if set, narrows the key to the names it holds for (the name
	// that the key's "*" stands for).
	when func(old, cfg *config.Config, name string) bool
}

// reloadApplied are the keys Reload applies: each mirror's selection
// (Reconfigure: topic and group filters, config sync filters, labels,
// trusted upstreams, rate limits), its on_source_gap (SetOnSourceGap) and
// the plugins (startPlugins starts, stops or restarts them).
var reloadApplied = []appliedKey{
	{key: "plugins"},
	{key: "mirrors[*].topics.include"},
	{key: "mirrors[*].topics.exclude"},
	{key: "mirrors[*].groups.include"},
	{key: "mirrors[*].groups.exclude"},
	{key: "mirrors[*].filters"},
	{key: "mirrors[*].sync.topic_configs.include"},
	{key: "mirrors[*].sync.topic_configs.exclude"},
	{key: "mirrors[*].labels"},
	{key: "mirrors[*].metadata.trusted_upstreams"},
	{key: "mirrors[*].rate_limit"},
	{key: "mirrors[*].topic_rate_limits"},
	{key: "mirrors[*].on_source_gap"},
	// A plugin listener's binary, pin and config are its plugin's spec:
	// startPlugins restarts it, and the dispatchers look the plugin up
	// on every call.
	{key: "listeners.*.path", when: pluginListenerBoth},
	{key: "listeners.*.sha256", when: pluginListenerBoth},
	{key: "listeners.*.config", when: pluginListenerBoth},
}

// pluginListenerBoth: the listener is a plugin in both configs.
func pluginListenerBoth(old, cfg *config.Config, name string) bool {
	o, n := old.Listeners[name], cfg.Listeners[name]
	return o != nil && n != nil && o.Type == "plugin" && n.Type == "plugin"
}

// restartRequired lists the keys of cfg whose change from old (the config
// kmirror started with: what runs, but for what reloads applied) takes
// effect only at a restart, e.g. clusters.west.bootstrap_servers,
// listeners.pager (added or removed as a whole), mirrors[east-to-west]
// (a mirror added or removed), mirrors[east-to-west].producer.linger.
func restartRequired(old, cfg *config.Config) []string {
	d := &keyDiff{old: old, cfg: cfg}
	d.walk(nil, reflect.ValueOf(old).Elem(), reflect.ValueOf(cfg).Elem())
	// The token is read from its file when the config is loaded: the
	// same file holding another token is a change no key shows.
	if oa, na := old.HTTP.Auth, cfg.HTTP.Auth; oa != nil && na != nil && oa.BearerTokenFile == na.BearerTokenFile && oa.Token() != na.Token() {
		d.keys = append(d.keys, "http.auth.bearer_token_file")
	}
	return d.keys
}

// keyDiff collects the keys that differ between two configs and that
// reloadApplied does not cover.
type keyDiff struct {
	old, cfg *config.Config
	keys     []string
}

// walk compares a and b, the values at path (its segments: yaml names, map
// keys and [name] for a named list's element).
func (d *keyDiff) walk(path []string, a, b reflect.Value) {
	if d.applied(path) {
		return
	}
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				d.add(path)
			}
			return
		}
		d.walk(path, a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if name := yamlName(a.Type().Field(i)); name != "" {
				d.walk(child(path, name), a.Field(i), b.Field(i))
			}
		}
	case reflect.Map:
		d.walkMap(path, a, b)
	case reflect.Slice:
		if nameField(a.Type().Elem()) >= 0 {
			d.walkNamed(path, a, b)
			return
		}
		if a.Len() != 0 || b.Len() != 0 { // nil and empty are the same list
			d.compare(path, a, b)
		}
	default:
		d.compare(path, a, b)
	}
}

func (d *keyDiff) compare(path []string, a, b reflect.Value) {
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		d.add(path)
	}
}

// walkMap compares two maps key by key: a key in one only is a change of
// its whole entry.
func (d *keyDiff) walkMap(path []string, a, b reflect.Value) {
	keys := map[string]reflect.Value{}
	for _, m := range []reflect.Value{a, b} {
		for _, k := range m.MapKeys() {
			keys[k.String()] = k
		}
	}
	for _, name := range slices.Sorted(maps.Keys(keys)) {
		av, bv := a.MapIndex(keys[name]), b.MapIndex(keys[name])
		if !av.IsValid() || !bv.IsValid() {
			if p := child(path, name); !d.applied(p) {
				d.add(p)
			}
			continue
		}
		d.walk(child(path, name), av, bv)
	}
}

// walkNamed compares two lists of named elements (mirrors) by name, so
// that a mirror moved in the list is no change: one in one list only is
// a change of the whole element.
func (d *keyDiff) walkNamed(path []string, a, b reflect.Value) {
	byName := func(l reflect.Value) (names []string, els map[string]reflect.Value) {
		els = map[string]reflect.Value{}
		field := nameField(l.Type().Elem())
		for i := range l.Len() {
			el := reflect.Indirect(l.Index(i))
			if !el.IsValid() {
				continue // a null entry: validation refused it
			}
			name := el.Field(field).String()
			names = append(names, name)
			els[name] = el
		}
		return names, els
	}
	oldNames, olds := byName(a)
	newNames, news := byName(b)
	for _, name := range oldNames {
		p := child(path, "["+name+"]")
		if n, ok := news[name]; ok {
			d.walk(p, olds[name], n)
		} else {
			d.add(p)
		}
	}
	for _, name := range newNames {
		if _, ok := olds[name]; !ok {
			d.add(child(path, "["+name+"]"))
		}
	}
}

func (d *keyDiff) add(path []string) { d.keys = append(d.keys, formatKey(path)) }

// applied reports whether path is, or is under, a key Reload applies.
func (d *keyDiff) applied(path []string) bool {
	for _, k := range reloadApplied {
		name, ok := matchKey(splitKey(k.key), path)
		if ok && (k.when == nil || k.when(d.old, d.cfg, name)) {
			return true
		}
	}
	return false
}

// matchKey reports whether path starts with pattern, and what the
// pattern's first "*" stands for.
func matchKey(pattern, path []string) (name string, ok bool) {
	if len(path) < len(pattern) {
		return "", false
	}
	for i, seg := range pattern {
		switch {
		case seg == "*" && !strings.HasPrefix(path[i], "["), seg == "[*]" && strings.HasPrefix(path[i], "["):
			if name == "" {
				name = strings.Trim(path[i], "[]")
			}
		case seg != path[i]:
			return "", false
		}
	}
	return name, true
}

// splitKey is formatKey's inverse for the keys of reloadApplied (whose
// names hold no dots).
func splitKey(key string) []string {
	return strings.Split(strings.ReplaceAll(key, "[", ".["), ".")
}

// formatKey writes a path as the config's error messages name keys:
// mirrors[east-to-west].producer.linger.
func formatKey(path []string) string {
	var b strings.Builder
	for i, seg := range path {
		if i > 0 && !strings.HasPrefix(seg, "[") {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

// child is path with seg appended, in a slice of its own.
func child(path []string, seg string) []string {
	return append(slices.Clip(path), seg)
}

// yamlName is a struct field's key in the file; "" for a field that is
// not one (unexported, untagged, or "-").
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if !f.IsExported() || name == "-" {
		return ""
	}
	return name
}

// nameField is the index of the field keyed "name" of a list's element
// type (a struct or a pointer to one), or -1: such lists are compared by
// name.
func nameField(t reflect.Type) int {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return -1
	}
	for i := range t.NumField() {
		if yamlName(t.Field(i)) == "name" {
			return i
		}
	}
	return -1
}
