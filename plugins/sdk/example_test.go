package sdk_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/plugins/sdk"
)

// prefixFilter keeps the topics whose name starts with the mirror's
// "prefix" filter property (mirrors[].filters[].properties.prefix).
type prefixFilter struct{}

func (prefixFilter) FilterTopics(_ context.Context, req filters.TopicRequest) ([]string, error) {
	prefix := req.Properties["prefix"]
	var keep []string
	for _, t := range req.Topics {
		if strings.HasPrefix(t.Name, prefix) {
			keep = append(keep, t.Name)
		}
	}
	return keep, nil
}

// A plugin is a main package whose main calls Serve with its
// implementations; kmirror starts the built binary. The implementation is
// plain Go, testable without kmirror.
func Example() {
	// The plugin's whole main:
	main := func() {
		sdk.Serve(
			sdk.WithInfo("prefix-filter", "1.0.0"),
			sdk.WithTopicFilter(prefixFilter{}),
		)
	}
	_ = main // not called here: Serve takes over the process, under kmirror

	// What kmirror's calls will see, tried directly:
	keep, _ := prefixFilter{}.FilterTopics(context.Background(), filters.TopicRequest{
		Mirror:     "east-to-west",
		Properties: map[string]string{"prefix": "orders."},
		Topics:     []filters.Topic{{Name: "orders.eu"}, {Name: "clicks"}, {Name: "orders.us"}},
	})
	fmt.Println(keep)
	// Output: [orders.eu orders.us]
}

// Logger's records show up in kmirror's log with their level and
// attributes, tagged with the plugin's name.
func ExampleLogger() {
	log := sdk.Logger()
	_ = log // e.g. log.Info("catalog loaded", "topics", 42)
}
