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

func TestRegexFilterTopicsAndGroups(t *testing.T) {
	t.Parallel()
	f := filters.Regex{Include: filters.MustCompileAll("a.*")}
	got, err := f.FilterTopics(context.Background(), filters.TopicRequest{
		Mirror: "m",
		Topics: []filters.Topic{{Name: "b"}, {Name: "a2", Partitions: 3}, {Name: "a1"}},
	})
	if err != nil || !reflect.DeepEqual(got, []string{"a2", "a1"}) {
		t.Fatalf("FilterTopics = %v, %v", got, err)
	}
	groups, err := f.FilterGroups(context.Background(), filters.GroupRequest{
		Groups: []filters.Group{{Name: "x"}, {Name: "ab"}, {Name: "a"}},
	})
	if err != nil || !reflect.DeepEqual(groups, []string{"ab", "a"}) {
		t.Fatalf("FilterGroups = %v, %v", groups, err)
	}
}
