package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Decoding walks the yaml.Node tree against the Go types by reflection rather
// than calling Node.Decode or Decoder.KnownFields(true): KnownFields only
// applies when decoding from bytes, environment variables must be expanded in
// values (and only values) first, and the walk lets every error carry its
// line and field path. Values are decoded into structs pre-filled with
// defaults, so an absent or null key keeps its default while an explicit
// value (even 0 or []) is checked as written.

// parse reads exactly one YAML document and returns its root node.
func parse(data []byte, file string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Line: 1, Msg: "config is empty"}
		}
		return nil, syntaxError(file, err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntaxError(file, err)
	default:
		return nil, &Error{File: file, Line: extra.Line, Msg: "unexpected second YAML document (a config file holds exactly one)"}
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	}
	if isNull(root) {
		return nil, &Error{File: file, Line: 1, Msg: "config is empty"}
	}
	return root, nil
}

var yamlLineErr = regexp.MustCompile(`(?s)^yaml: line (\d+): (.*)$`)

// syntaxError turns a go-yaml parse error ("yaml: line 3: ...") into an *Error.
func syntaxError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineErr.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	// go-yaml leaves the line out when it is 0 and, for parser (as opposed
	// to scanner) errors, counts lines from 0; its parser errors point at
	// the start of the enclosing block, or at the problem when that block
	// starts on the first line. Byte level problems (bad UTF-8, control
	// characters) have no line at all.
	switch {
	case slices.ContainsFunc(parserProblems, func(p string) bool { return strings.HasPrefix(msg, p) }):
		line++
	case line == 0 && !slices.ContainsFunc(readerProblems, func(p string) bool { return strings.Contains(msg, p) }):
		line = 1
	}
	return &Error{File: file, Line: line, Msg: "invalid YAML: " + msg}
}

var (
	parserProblems = []string{
		"did not find expected <", "did not find expected key", "did not find expected '-' indicator",
		"did not find expected node content", "did not find expected ',' or ", "found duplicate %",
		"found incompatible YAML document", "found undefined tag handle",
	}
	readerProblems = []string{"UTF-", "octet", "Unicode", "surrogate", "control characters", "input error"}
)

type lookupFunc func(string) (string, bool)

// defaulter is implemented by types whose zero value is not their default.
type defaulter interface{ setDefaults() }

type decoder struct {
	file    string
	lookup  lookupFunc
	errs    []*Error
	lines   map[string]int      // field path -> line of its key or list item
	merging map[*yaml.Node]bool // mappings being merged, to stop "<<" cycles
}

func newDecoder(file string, lookup lookupFunc) *decoder {
	return &decoder{file: file, lookup: lookup, lines: map[string]int{}, merging: map[*yaml.Node]bool{}}
}

func (d *decoder) errorf(line int, field, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) err() error { return joinErrors(d.errs) }

// joinErrors sorts errs by line (keeping the order of errors on one line)
// and joins them; a single error is returned as is.
func joinErrors(errs []*Error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	slices.SortStableFunc(errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	joined := make([]error, len(errs))
	for i, e := range errs {
		joined[i] = e
	}
	return errors.Join(joined...)
}

func cfgValue(c *Config) reflect.Value { return reflect.ValueOf(c).Elem() }

var (
	durationType = reflect.TypeFor[Duration]()
	byteSizeType = reflect.TypeFor[ByteSize]()
)

// decode stores n into v (settable), reporting problems under path.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if path == "" {
		d.lines[path] = n.Line
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if v.Type() == byteSizeType {
		d.byteSize(n, v, path)
		return
	}
	if v.Type() == durationType {
		d.duration(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(newValue(v.Type().Elem()).Addr())
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		d.structure(n, v, path)
	case reflect.Map:
		d.mapping(n, v, path)
	case reflect.Slice:
		d.sequence(n, v, path)
	case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Bool:
		d.scalar(n, v, path)
	default:
		panic(fmt.Sprintf("config: cannot decode into %s at %s", v.Type(), path))
	}
}

// newValue returns a settable new T with defaults applied (for pointer T, a
// new element with defaults).
func newValue(t reflect.Type) reflect.Value {
	p := reflect.New(t)
	if t.Kind() == reflect.Pointer {
		e := reflect.New(t.Elem())
		if df, ok := e.Interface().(defaulter); ok {
			df.setDefaults()
		}
		p.Elem().Set(e)
	} else if df, ok := p.Interface().(defaulter); ok {
		df.setDefaults()
	}
	return p.Elem()
}

type structInfo struct {
	index map[string]int // yaml key -> field index
	keys  []string       // yaml keys in field order
}

func fieldsOf(t reflect.Type) structInfo {
	info := structInfo{index: map[string]int{}}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		info.index[name] = i
		info.keys = append(info.keys, name)
	}
	return info
}

// eachKey calls fn for every key of a mapping node, with the key's field
// path, after the checks structs and maps share: null keeps the default, a
// non-mapping is a type error, a key must be a string and appear once.
func (d *decoder) eachKey(n *yaml.Node, path string, fn func(key, fp string, p pair)) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.typeError(n, path, "a mapping")
		return
	}
	seen := map[string]int{}
	for _, p := range d.pairs(n, path) {
		key, ok := d.key(p.key, path)
		if !ok {
			continue
		}
		fp := joinPath(path, key)
		if line, dup := seen[key]; dup {
			d.errorf(p.key.Line, fp, "duplicate key (first defined at line %d)", line)
			continue
		}
		seen[key] = p.key.Line
		fn(key, fp, p)
	}
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string) {
	info := fieldsOf(v.Type())
	d.eachKey(n, path, func(key, fp string, p pair) {
		i, ok := info.index[key]
		if !ok {
			d.errorf(p.key.Line, fp, "unknown field (known: %s)", strings.Join(info.keys, ", "))
			return
		}
		d.lines[fp] = p.key.Line
		d.decode(p.value, v.Field(i), fp)
	})
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if !isNull(n) && n.Kind == yaml.MappingNode && v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	d.eachKey(n, path, func(key, fp string, p pair) {
		d.lines[fp] = p.key.Line
		e := newValue(v.Type().Elem())
		d.decode(p.value, e, fp)
		v.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), e)
	})
}

func (d *decoder) sequence(n *yaml.Node, v reflect.Value, path string) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.typeError(n, path, "a list")
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		d.lines[ip] = item.Line
		e := newValue(v.Type().Elem())
		d.decode(item, e, ip)
		s.Index(i).Set(e)
	}
	v.Set(s)
}

func (d *decoder) scalar(n *yaml.Node, v reflect.Value, path string) {
	var want string
	switch v.Kind() {
	case reflect.String:
		want = "a string"
	case reflect.Bool:
		want = "a boolean"
	default:
		want = "an integer"
	}
	n, ok := d.expanded(n, path, want)
	if !ok || isNull(n) {
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		if n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			d.typeError(n, path, want)
			return
		}
		v.SetBool(b)
	default:
		var i int64
		if n.ShortTag() != "!!int" || n.Decode(&i) != nil || v.OverflowInt(i) {
			d.typeError(n, path, want)
			return
		}
		v.SetInt(i)
	}
}

func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	n, ok := d.expanded(n, path, "a duration")
	if !ok || isNull(n) {
		return
	}
	dur, err := parseDuration(n.Value)
	if err != nil {
		d.errorf(n.Line, path, "%v", err)
		return
	}
	v.SetInt(int64(dur))
}

func (d *decoder) byteSize(n *yaml.Node, v reflect.Value, path string) {
	n, ok := d.expanded(n, path, "a size")
	if !ok || isNull(n) {
		return
	}
	size, err := parseByteSize(n.Value)
	if err != nil {
		d.errorf(n.Line, path, "%v", err)
		return
	}
	v.SetInt(int64(size))
}

// expanded checks that n is a scalar and returns it with environment
// variables expanded. The tree is not modified, since an aliased node may be
// decoded more than once.
func (d *decoder) expanded(n *yaml.Node, path, want string) (*yaml.Node, bool) {
	if n.Kind != yaml.ScalarNode {
		d.typeError(n, path, want)
		return nil, false
	}
	if !strings.Contains(n.Value, "$") {
		return n, true
	}
	value, err := expandEnv(n.Value, d.lookup)
	if err != nil {
		d.errorf(n.Line, path, "%v", err)
		return nil, false
	}
	c := *n
	c.Value = value
	// A plain, untagged scalar is typed by its expanded text, so that
	// "replication_factor: ${RF}" is an integer; quoted ones stay strings.
	if c.Style&(yaml.TaggedStyle|yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
		c.Tag = ""
	}
	return &c, true
}

// key returns a mapping key's text; keys are never expanded.
func (d *decoder) key(k *yaml.Node, path string) (string, bool) {
	if k.Kind == yaml.AliasNode && k.Alias != nil {
		k = k.Alias
	}
	if k.Kind != yaml.ScalarNode {
		d.errorf(k.Line, path, "expected a string key, got %s", describe(k))
		return "", false
	}
	return k.Value, true
}

type pair struct{ key, value *yaml.Node }

// pairs returns n's key/value pairs with YAML merge keys ("<<: *anchor")
// resolved: explicit keys win over merged ones, and earlier merged mappings
// win over later ones.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var explicit, merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, d.mergePairs(v, path)...)
			continue
		}
		explicit = append(explicit, pair{k, v})
	}
	if len(merged) == 0 {
		return explicit
	}
	have := map[string]bool{}
	for _, p := range explicit {
		have[p.key.Value] = true
	}
	out := explicit
	for _, p := range merged {
		if !have[p.key.Value] {
			have[p.key.Value] = true
			out = append(out, p)
		}
	}
	return out
}

func (d *decoder) mergePairs(n *yaml.Node, path string) []pair {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		if d.merging[n] {
			d.errorf(n.Line, path, "merge key (<<) refers to the mapping that contains it")
			return nil
		}
		d.merging[n] = true
		defer delete(d.merging, n)
		return d.pairs(n, path)
	case yaml.SequenceNode:
		var out []pair
		for _, item := range n.Content {
			if item.Kind == yaml.AliasNode && item.Alias != nil {
				item = item.Alias
			}
			if item.Kind != yaml.MappingNode {
				d.errorf(item.Line, path, "merge key (<<) needs a mapping or a list of mappings, got %s", describe(item))
				continue
			}
			out = append(out, d.mergePairs(item, path)...)
		}
		return out
	}
	d.errorf(n.Line, path, "merge key (<<) needs a mapping or a list of mappings, got %s", describe(n))
	return nil
}

func (d *decoder) typeError(n *yaml.Node, path, want string) {
	d.errorf(n.Line, path, "expected %s, got %s", want, describe(n))
}

// describe names what n holds, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return strconv.Quote(n.Value)
		}
		return n.Value
	}
	return "nothing"
}

func isNull(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// expandEnv replaces ${NAME} with the variable's value and ${NAME:-default}
// with the value, or default when the variable is unset or empty; "$$" is a
// literal "$", and a "$" followed by anything else is kept as is (so regular
// expressions such as "orders$" need no escaping). Expanded text is not
// expanded again.
func expandEnv(s string, lookup lookupFunc) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated variable reference %q (write a literal $ as $$)", s[i:])
			}
			ref := s[i+2 : i+2+end]
			name, def, hasDef := strings.Cut(ref, ":-")
			if !envName.MatchString(name) {
				return "", fmt.Errorf("invalid variable reference %q (want ${NAME} or ${NAME:-default}; write a literal $ as $$)", "${"+ref+"}")
			}
			val, ok := lookup(name)
			switch {
			case hasDef && val == "":
				val = def
			case !ok:
				return "", fmt.Errorf("environment variable %s is not set (use ${%s:-default} to give a default)", name, name)
			}
			b.WriteString(val)
			i += 2 + end + 1
		default:
			b.WriteByte('$')
			i++
		}
	}
	return b.String(), nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// YAMLSyntaxError turns a go-yaml parse error of file into an *Error on the
// line it names, for other readers of YAML files (import-mm2 reading a
// Strimzi resource).
func YAMLSyntaxError(file string, err error) error { return syntaxError(file, err) }
