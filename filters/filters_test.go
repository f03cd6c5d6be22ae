package filters_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/kmirror/kmirror/filters"
)

func TestRegex(t *testing.T) {
	t.Parallel()
	f := filters.Regex{
		Include: filters.MustCompileAll("orders.*", "payments"),
		Exclude: filters.MustCompileAll("orders\\.tmp.*"),
	}
	tests := map[string]bool{
		"orders":       true,
		"orders.eu":    true,
		"orders.tmp1":  false, // exclude wins
		"payments":     true,
		"payments.v2":  false, // anchored: whole names only
		"old-payments": false,
		"unrelated":    false,
		"":             false,
	}
	for name, want := range tests {
		if got := f.Match(name); got != want {
			t.Errorf("Match(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestRegexEmptyIncludeKeepsNothing(t *testing.T) {
	t.Parallel()
	if (filters.Regex{}).Match("orders") {
		t.Fatal("a filter with no include patterns must keep nothing")
	}
}

func TestRegexFilterTopicsKeepsOrderAndProperties(t *testing.T) {
	t.Parallel()
	f := filters.Regex{Include: filters.MustCompileAll("a.*")}
	in := []filters.Topic{
		{Name: "b"}, {Name: "a2", Partitions: 3, Configs: map[string]string{"cleanup.policy": "compact"}}, {Name: "a1"},
	}
	got, err := f.FilterTopics(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	want := []filters.Topic{in[1], in[2]}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	groups, err := f.FilterGroups(context.Background(), []string{"x", "ab", "a"})
	if err != nil || !reflect.DeepEqual(groups, []string{"ab", "a"}) {
		t.Fatalf("FilterGroups = %v, %v", groups, err)
	}
}
