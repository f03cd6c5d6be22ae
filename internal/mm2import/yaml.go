package mm2import

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The output is built as a yaml.Node tree rather than from config's
// structs: the structs would write every default, and nodes keep the order
// and the comments a reader needs.

// pair is one key of a mapping under construction; a nil value leaves the
// key out.
type pair struct {
	key     string
	value   *yaml.Node
	comment string // head comment of the key
}

func mapping(pairs ...pair) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, p := range pairs {
		if p.value == nil {
			continue
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: p.key, HeadComment: p.comment}, p.value)
	}
	return n
}

// str is a string value. kmirror expands ${VAR} and $$ in values, so a '$'
// that would start either is doubled to stay literal.
func str(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: escapeDollars(s)}
}

// ref is a value that kmirror expands on purpose: "${NAME}".
func ref(env string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "${" + env + "}"}
}

func escapeDollars(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		if s[i] == '$' && i+1 < len(s) && (s[i+1] == '{' || s[i+1] == '$') {
			b.WriteByte('$')
		}
	}
	return b.String()
}

func integer(n int64) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(n, 10)}
}

func boolean(b bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(b)}
}

// duration writes d in the largest unit that divides it ("10m", "90s").
func duration(d time.Duration) *yaml.Node {
	var v string
	switch {
	case d != 0 && d%time.Hour == 0:
		v = strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d != 0 && d%time.Minute == 0:
		v = strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		v = strconv.FormatInt(int64(d/time.Second), 10) + "s"
	default:
		v = strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
}

// list is a flow-style list of strings.
func list(items []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, s := range items {
		n.Content = append(n.Content, str(s))
	}
	return n
}

// withComment sets n's end-of-line comment and returns n.
func withComment(n *yaml.Node, comment string) *yaml.Node {
	n.LineComment = comment
	return n
}

// isEmpty reports whether a mapping node has no keys (nil counts as empty).
func isEmpty(n *yaml.Node) bool { return n == nil || len(n.Content) == 0 }

// orNil returns n, or nil when it is an empty mapping, so that an empty
// block is left out.
func orNil(n *yaml.Node) *yaml.Node {
	if isEmpty(n) {
		return nil
	}
	return n
}

// encode writes root as a YAML document with the head comment header.
func encode(root *yaml.Node, header string) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}, HeadComment: header}); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
