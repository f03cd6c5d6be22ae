package filters

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Field is what a property Condition looks at.
type Field string

// The fields of a candidate topic a Condition can test.
const (
	// FieldConfig is a topic config (Topic.Configs[Key]).
	FieldConfig Field = "config"
	// FieldLabel is a metadata label (Topic.Labels[Key]).
	FieldLabel Field = "label"
	// FieldPartitions is the partition count (Topic.Partitions); no Key.
	FieldPartitions Field = "partitions"
)

// Op compares a field's value with a Condition's Value.
type Op string

// The comparisons.
const (
	// OpEqual: the value is exactly Value.
	OpEqual Op = "="
	// OpMatch: the whole value matches the regular expression Value
	// (anchored, like Regex's patterns).
	OpMatch Op = "~"
	// OpGreater and OpLess compare numerically; a value that is not a
	// number never matches.
	OpGreater Op = ">"
	OpLess    Op = "<"
)

// Condition is one test on a candidate topic, e.g. config.cleanup.policy =
// compact, label.team ~ pay.*, partitions > 3. A config or label the topic
// does not have fails every condition on it.
type Condition struct {
	Field Field
	// Key is the config or label name; empty for FieldPartitions.
	Key   string
	Op    Op
	Value string
}

// String renders c in the syntax ParseCondition reads.
func (c Condition) String() string {
	f := string(c.Field)
	if c.Key != "" {
		f += "." + c.Key
	}
	return fmt.Sprintf("%s %s %s", f, c.Op, c.Value)
}

var conditionSyntax = regexp.MustCompile(`^\s*(\S+?)\s*(=|~|>|<)\s*(.*?)\s*$`)

// ParseCondition reads "<field> <op> <value>", where field is
// "config.<name>", "label.<name>" or "partitions" and op is one of
// = ~ > <. The value is the rest of the line, trimmed, and may be empty
// (for =) or contain spaces (for ~).
//
//	config.cleanup.policy = compact
//	config.retention.ms > 86400000
//	label.team ~ pay(ments)?
//	partitions < 12
func ParseCondition(s string) (Condition, error) {
	m := conditionSyntax.FindStringSubmatch(s)
	if m == nil {
		return Condition{}, fmt.Errorf("property condition %q: want \"<field> <op> <value>\" with op one of = ~ > <", s)
	}
	c := Condition{Op: Op(m[2]), Value: m[3]}
	switch field := m[1]; {
	case field == string(FieldPartitions):
		c.Field = FieldPartitions
	case strings.HasPrefix(field, string(FieldConfig)+"."):
		c.Field, c.Key = FieldConfig, strings.TrimPrefix(field, string(FieldConfig)+".")
	case strings.HasPrefix(field, string(FieldLabel)+"."):
		c.Field, c.Key = FieldLabel, strings.TrimPrefix(field, string(FieldLabel)+".")
	default:
		return Condition{}, fmt.Errorf("property condition %q: field %q is not config.<name>, label.<name> or partitions", s, field)
	}
	if _, err := compileCondition(c); err != nil {
		return Condition{}, err
	}
	return c, nil
}

// Combine says how a Property filter's conditions combine.
type Combine string

const (
	// All keeps a topic that passes every condition.
	All Combine = "all"
	// Any keeps a topic that passes at least one condition.
	Any Combine = "any"
)

// Property is the built-in property filter: it keeps the candidate topics
// whose configs, labels and partition count pass its conditions, combined
// with all or any. Build it with NewProperty. It only selects topics; the
// worker's final rules still apply after it.
type Property struct {
	combine    Combine
	conditions []compiledCondition
}

var (
	_ TopicFilter  = (*Property)(nil)
	_ ConfigReader = (*Property)(nil)
)

// ReadsConfigs implements ConfigReader: true when a condition is on a
// config.
func (p *Property) ReadsConfigs() bool {
	for _, c := range p.conditions {
		if c.Field == FieldConfig {
			return true
		}
	}
	return false
}

type compiledCondition struct {
	Condition
	re  *regexp.Regexp // OpMatch
	num number         // OpGreater, OpLess
}

// NewProperty validates and compiles conditions: at least one, a known
// field with a key for config and label (none for partitions), a known op,
// a regular expression for ~ and a number for > and <. An empty combine
// means All.
func NewProperty(combine Combine, conditions ...Condition) (*Property, error) {
	switch combine {
	case "":
		combine = All
	case All, Any:
	default:
		return nil, fmt.Errorf("property filter: combine %q is not %q or %q", combine, All, Any)
	}
	if len(conditions) == 0 {
		return nil, errors.New("property filter: at least one condition is required")
	}
	p := &Property{combine: combine, conditions: make([]compiledCondition, 0, len(conditions))}
	for _, c := range conditions {
		cc, err := compileCondition(c)
		if err != nil {
			return nil, err
		}
		p.conditions = append(p.conditions, cc)
	}
	return p, nil
}

func compileCondition(c Condition) (compiledCondition, error) {
	cc := compiledCondition{Condition: c}
	switch c.Field {
	case FieldConfig, FieldLabel:
		if c.Key == "" {
			return cc, fmt.Errorf("property condition %q: %s needs a name (%s.<name>)", c, c.Field, c.Field)
		}
	case FieldPartitions:
		if c.Key != "" {
			return cc, fmt.Errorf("property condition %q: partitions takes no name", c)
		}
	default:
		return cc, fmt.Errorf("property condition %q: unknown field %q (config, label or partitions)", c, c.Field)
	}
	switch c.Op {
	case OpEqual:
	case OpMatch:
		re, err := regexp.Compile(`^(?:` + c.Value + `)$`)
		if err != nil {
			return cc, fmt.Errorf("property condition %q: %w", c, err)
		}
		cc.re = re
	case OpGreater, OpLess:
		n, ok := parseNumber(c.Value)
		if !ok {
			return cc, fmt.Errorf("property condition %q: %s needs a number, not %q", c, c.Op, c.Value)
		}
		cc.num = n
	default:
		return cc, fmt.Errorf("property condition %q: unknown op %q (= ~ > <)", c, c.Op)
	}
	return cc, nil
}

// number is an integer when it parses as one (exact for every int64, e.g.
// retention.ms = 9223372036854775807), a float otherwise.
type number struct {
	isInt bool
	i     int64
	f     float64
}

func parseNumber(s string) (number, bool) {
	s = strings.TrimSpace(s)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return number{isInt: true, i: i, f: float64(i)}, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return number{}, false
	}
	return number{f: f}, true
}

// cmp returns -1, 0 or +1 as a is less than, equal to or greater than b.
func (a number) cmp(b number) int {
	if a.isInt && b.isInt {
		switch {
		case a.i < b.i:
			return -1
		case a.i > b.i:
			return 1
		}
		return 0
	}
	switch {
	case a.f < b.f:
		return -1
	case a.f > b.f:
		return 1
	}
	return 0
}

func (c compiledCondition) match(t Topic) bool {
	var v string
	switch c.Field {
	case FieldConfig:
		var ok bool
		if v, ok = t.Configs[c.Key]; !ok {
			return false
		}
	case FieldLabel:
		var ok bool
		if v, ok = t.Labels[c.Key]; !ok {
			return false
		}
	case FieldPartitions:
		v = strconv.FormatInt(int64(t.Partitions), 10)
	}
	switch c.Op {
	case OpEqual:
		return v == c.Value
	case OpMatch:
		return c.re.MatchString(v)
	case OpGreater, OpLess:
		n, ok := parseNumber(v)
		if !ok {
			return false
		}
		if c.Op == OpGreater {
			return n.cmp(c.num) > 0
		}
		return n.cmp(c.num) < 0
	}
	return false
}

// Match reports whether t passes the filter.
func (p *Property) Match(t Topic) bool {
	for _, c := range p.conditions {
		ok := c.match(t)
		if p.combine == Any && ok {
			return true
		}
		if p.combine == All && !ok {
			return false
		}
	}
	return p.combine == All
}

// Conditions returns the filter's conditions, as given.
func (p *Property) Conditions() []Condition {
	out := make([]Condition, len(p.conditions))
	for i, c := range p.conditions {
		out[i] = c.Condition
	}
	return out
}

// Combine returns how the conditions combine.
func (p *Property) Combine() Combine { return p.combine }

// FilterTopics implements TopicFilter.
func (p *Property) FilterTopics(_ context.Context, req TopicRequest) ([]string, error) {
	out := make([]string, 0, len(req.Topics))
	for _, t := range req.Topics {
		if p.Match(t) {
			out = append(out, t.Name)
		}
	}
	return out, nil
}
