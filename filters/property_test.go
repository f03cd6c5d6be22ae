package filters_test

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/filters"
)

var propertyTopics = []filters.Topic{
	{Name: "orders", Partitions: 12,
		Configs: map[string]string{"cleanup.policy": "delete", "retention.ms": "604800000"},
		Labels:  map[string]string{"team": "payments", "tier": "gold"}},
	{Name: "orders-compacted", Partitions: 3,
		Configs: map[string]string{"cleanup.policy": "compact", "retention.ms": "9223372036854775807"},
		Labels:  map[string]string{"team": "payments"}},
	{Name: "clicks", Partitions: 48,
		Configs: map[string]string{"cleanup.policy": "delete", "retention.ms": "86400000", "max.message.bytes": "1.5e6"},
		Labels:  map[string]string{"team": "web"}},
	{Name: "bare", Partitions: 1},
}

func cond(t *testing.T, s string) filters.Condition {
	t.Helper()
	c, err := filters.ParseCondition(s)
	if err != nil {
		t.Fatalf("ParseCondition(%q): %v", s, err)
	}
	return c
}

func TestPropertyFilter(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		combine    filters.Combine
		conditions []string
		want       []string
	}{
		"config exact":              {"", []string{"config.cleanup.policy = compact"}, []string{"orders-compacted"}},
		"config exact, empty value": {"", []string{"config.cleanup.policy ="}, nil},
		"label exact":               {"", []string{"label.team = payments"}, []string{"orders", "orders-compacted"}},
		"label regex":               {"", []string{"label.team ~ pay.*"}, []string{"orders", "orders-compacted"}},
		"regex is anchored":         {"", []string{"label.team ~ pay"}, nil},
		"regex with alternation":    {"", []string{"label.team ~ web|payments"}, []string{"clicks", "orders", "orders-compacted"}},
		"partitions exact":          {"", []string{"partitions = 12"}, []string{"orders"}},
		"partitions greater":        {"", []string{"partitions > 3"}, []string{"clicks", "orders"}},
		"partitions less":           {"", []string{"partitions < 12"}, []string{"bare", "orders-compacted"}},
		"partitions regex":          {"", []string{"partitions ~ [0-9]"}, []string{"bare", "orders-compacted"}},
		"config numeric greater":    {"", []string{"config.retention.ms > 86400000"}, []string{"orders", "orders-compacted"}},
		"config numeric less":       {"", []string{"config.retention.ms < 604800000"}, []string{"clicks"}},
		"int64 max is exact":        {"", []string{"config.retention.ms > 9223372036854775806"}, []string{"orders-compacted"}},
		"float value":               {"", []string{"config.max.message.bytes > 1000000"}, []string{"clicks"}},
		"non-number never matches":  {"", []string{"config.cleanup.policy > 0"}, nil},
		"missing key never matches": {"", []string{"label.tier ~ .*"}, []string{"orders"}},
		"all": {filters.All, []string{"label.team = payments", "partitions > 3"},
			[]string{"orders"}},
		"empty combine is all": {"", []string{"label.team = payments", "config.cleanup.policy = delete"},
			[]string{"orders"}},
		"any": {filters.Any, []string{"config.cleanup.policy = compact", "partitions > 40"},
			[]string{"clicks", "orders-compacted"}},
		"any, none match": {filters.Any, []string{"label.team = nobody", "partitions > 100"}, nil},
		"all on labels, configs and partitions": {filters.All,
			[]string{"label.team ~ pay.*", "config.retention.ms > 0", "partitions < 100"},
			[]string{"orders", "orders-compacted"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var cs []filters.Condition
			for _, s := range tc.conditions {
				cs = append(cs, cond(t, s))
			}
			p, err := filters.NewProperty(tc.combine, cs...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.FilterTopics(context.Background(), filters.TopicRequest{Mirror: "m", Topics: propertyTopics})
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(got)
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("FilterTopics = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseCondition(t *testing.T) {
	t.Parallel()
	tests := map[string]filters.Condition{
		"config.cleanup.policy = compact": {Field: filters.FieldConfig, Key: "cleanup.policy", Op: filters.OpEqual, Value: "compact"},
		"config.retention.ms>100":         {Field: filters.FieldConfig, Key: "retention.ms", Op: filters.OpGreater, Value: "100"},
		"  label.team ~ a b  ":            {Field: filters.FieldLabel, Key: "team", Op: filters.OpMatch, Value: "a b"},
		"label.k = a=b":                   {Field: filters.FieldLabel, Key: "k", Op: filters.OpEqual, Value: "a=b"},
		"partitions < 7":                  {Field: filters.FieldPartitions, Op: filters.OpLess, Value: "7"},
	}
	for in, want := range tests {
		got, err := filters.ParseCondition(in)
		if err != nil {
			t.Errorf("ParseCondition(%q): %v", in, err)
			continue
		}
		if got != want {
			t.Errorf("ParseCondition(%q) = %+v, want %+v", in, got, want)
		}
		again, err := filters.ParseCondition(got.String())
		if err != nil || again != got {
			t.Errorf("ParseCondition(%q.String() = %q) = %+v, %v; want a round trip", in, got.String(), again, err)
		}
	}
}

func TestPropertyRejects(t *testing.T) {
	t.Parallel()
	bad := map[string]string{
		"no op":                 "config.retention.ms",
		"unknown field":         "name = orders",
		"config without a name": "config = x",
		"label without a name":  "label. = x",
		"partitions with name":  "partitions.x > 1",
		"bad regex":             "label.team ~ (",
		"number op, no number":  "partitions > many",
	}
	for name, s := range bad {
		if c, err := filters.ParseCondition(s); err == nil {
			t.Errorf("%s: ParseCondition(%q) = %+v, want an error", name, s, c)
		}
	}
	if _, err := filters.NewProperty(filters.All); err == nil {
		t.Error("NewProperty with no condition: want an error")
	}
	if _, err := filters.NewProperty("some", filters.Condition{Field: filters.FieldPartitions, Op: filters.OpLess, Value: "1"}); err == nil {
		t.Error("NewProperty with combine \"some\": want an error")
	}
	_, err := filters.NewProperty(filters.All, filters.Condition{Field: filters.FieldConfig, Key: "x", Op: "!=", Value: "1"})
	if err == nil || !strings.Contains(err.Error(), "unknown op") {
		t.Errorf("NewProperty with op != = %v, want unknown op", err)
	}
}

func TestPropertyAccessors(t *testing.T) {
	t.Parallel()
	c := filters.Condition{Field: filters.FieldLabel, Key: "team", Op: filters.OpEqual, Value: "web"}
	p, err := filters.NewProperty(filters.Any, c)
	if err != nil {
		t.Fatal(err)
	}
	if p.Combine() != filters.Any || !reflect.DeepEqual(p.Conditions(), []filters.Condition{c}) {
		t.Errorf("Combine, Conditions = %v, %v", p.Combine(), p.Conditions())
	}
}
