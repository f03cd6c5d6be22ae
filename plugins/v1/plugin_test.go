package v1_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
	v1 "github.com/kmirror/kmirror/plugins/v1"
)

// mock implements every capability with func fields (after Nomad's
// base.MockPlugin); a nil field panics, which the server turns into
// codes.Internal.
type mock struct {
	FilterTopicsF  func(context.Context, filters.TopicRequest) ([]string, error)
	FilterGroupsF  func(context.Context, filters.GroupRequest) ([]string, error)
	TopicsChangedF func(context.Context, listeners.TopicsChange) error
	GroupsChangedF func(context.Context, listeners.GroupsChange) error
}

func (m *mock) FilterTopics(ctx context.Context, r filters.TopicRequest) ([]string, error) {
	return m.FilterTopicsF(ctx, r)
}
func (m *mock) FilterGroups(ctx context.Context, r filters.GroupRequest) ([]string, error) {
	return m.FilterGroupsF(ctx, r)
}
func (m *mock) TopicsChanged(ctx context.Context, c listeners.TopicsChange) error {
	return m.TopicsChangedF(ctx, c)
}
func (m *mock) GroupsChanged(ctx context.Context, c listeners.GroupsChange) error {
	return m.GroupsChangedF(ctx, c)
}

// connect serves impl through go-plugin's real gRPC transport (no
// subprocess) and returns the host-side client.
func connect(t *testing.T, impl *v1.Impl) *v1.Client {
	t.Helper()
	client, server := plugin.TestPluginGRPCConn(t, false, v1.ServerPluginSet(impl))
	t.Cleanup(func() {
		// Stop first: client.Close asks the server to stop too, and
		// go-plugin's GRPCServer.Stop is not safe to run twice at once.
		server.Stop()
		_ = client.Close()
	})
	// The host dispenses through its own PluginSet (Impl nil).
	client.Plugins = v1.ClientPluginSet()
	raw, err := client.Dispense(v1.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(*v1.Client)
}

func all(m *mock) *v1.Impl {
	return &v1.Impl{Name: "mock", Version: "0.1.0", TopicFilter: m, GroupFilter: m, TopicListener: m, GroupListener: m}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	m := &mock{}
	var configured map[string]string
	impl := all(m)
	impl.Configure = func(_ context.Context, c map[string]string) error { configured = c; return nil }
	c := connect(t, impl)
	ctx := context.Background()

	info, err := c.PluginInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := v1.Info{Name: "mock", Version: "0.1.0", ProtocolMinor: v1.ProtocolMinor, Capabilities: []v1.Capability{
		v1.CapabilityTopicFilter, v1.CapabilityGroupFilter, v1.CapabilityTopicListener, v1.CapabilityGroupListener}}
	if !reflect.DeepEqual(info, want) {
		t.Errorf("PluginInfo = %+v, want %+v", info, want)
	}

	if err := c.Configure(ctx, map[string]string{"path": "/tmp/x"}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(configured, map[string]string{"path": "/tmp/x"}) {
		t.Errorf("Configure got %v", configured)
	}

	treq := filters.TopicRequest{Mirror: "m", Properties: map[string]string{"team": "a"}, Topics: []filters.Topic{
		{Name: "orders", Partitions: 3, Configs: map[string]string{"cleanup.policy": "compact"}, Labels: map[string]string{"team": "a"}},
		{Name: "clicks", Partitions: 1},
	}}
	m.FilterTopicsF = func(_ context.Context, r filters.TopicRequest) ([]string, error) {
		if !reflect.DeepEqual(r, treq) {
			t.Errorf("plugin got %+v, want %+v", r, treq)
		}
		return []string{"orders"}, nil
	}
	names, err := c.FilterTopics(ctx, treq)
	if err != nil || !reflect.DeepEqual(names, []string{"orders"}) {
		t.Errorf("FilterTopics = %v, %v", names, err)
	}

	greq := filters.GroupRequest{Mirror: "m", Groups: []filters.Group{{Name: "g", Topics: []string{"orders"}}}}
	m.FilterGroupsF = func(_ context.Context, r filters.GroupRequest) ([]string, error) {
		if !reflect.DeepEqual(r, greq) {
			t.Errorf("plugin got %+v, want %+v", r, greq)
		}
		return nil, nil
	}
	names, err = c.FilterGroups(ctx, greq)
	if err != nil || names != nil {
		t.Errorf("FilterGroups = %#v, %v; want nil, nil", names, err)
	}

	tc := listeners.TopicsChange{Mirror: "m", Sequence: 3,
		Topics: []listeners.Topic{{Upstream: "orders", Downstream: "east.orders", Partitions: 3, State: "mirroring", Metadata: map[string]string{"a": "b"}}},
		Added:  []listeners.Topic{{Upstream: "orders", Downstream: "east.orders", Partitions: 3, State: "mirroring", Metadata: map[string]string{"a": "b"}}}}
	m.TopicsChangedF = func(_ context.Context, got listeners.TopicsChange) error {
		if !reflect.DeepEqual(got, tc) {
			t.Errorf("plugin got %+v, want %+v", got, tc)
		}
		return nil
	}
	if err := c.TopicsChanged(ctx, tc); err != nil {
		t.Error(err)
	}

	gc := listeners.GroupsChange{Mirror: "m", Sequence: 1, Groups: []listeners.Group{{Name: "g"}}, Removed: []listeners.Group{{Name: "h", Topics: []string{"x"}}}}
	m.GroupsChangedF = func(_ context.Context, got listeners.GroupsChange) error {
		if !reflect.DeepEqual(got, gc) {
			t.Errorf("plugin got %+v, want %+v", got, gc)
		}
		return nil
	}
	if err := c.GroupsChanged(ctx, gc); err != nil {
		t.Error(err)
	}
}

func TestMissingCapabilityIsUnimplemented(t *testing.T) {
	t.Parallel()
	m := &mock{FilterTopicsF: func(context.Context, filters.TopicRequest) ([]string, error) { return nil, nil }}
	c := connect(t, &v1.Impl{Name: "only-topics", TopicFilter: m})
	ctx := context.Background()
	info, err := c.PluginInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(info.Capabilities, []v1.Capability{v1.CapabilityTopicFilter}) {
		t.Errorf("capabilities = %v", info.Capabilities)
	}
	if _, err := c.FilterTopics(ctx, filters.TopicRequest{}); err != nil {
		t.Errorf("FilterTopics: %v", err)
	}
	calls := map[string]error{}
	_, calls["FilterGroups"] = c.FilterGroups(ctx, filters.GroupRequest{})
	calls["TopicsChanged"] = c.TopicsChanged(ctx, listeners.TopicsChange{})
	calls["GroupsChanged"] = c.GroupsChanged(ctx, listeners.GroupsChange{})
	for name, err := range calls {
		if status.Code(err) != codes.Unimplemented {
			t.Errorf("%s: %v, want codes.Unimplemented", name, err)
		}
	}
	// Configure with no Configure func accepts anything.
	if err := c.Configure(ctx, map[string]string{"x": "y"}); err != nil {
		t.Errorf("Configure: %v", err)
	}
}

func TestErrorsCrossTheWire(t *testing.T) {
	t.Parallel()
	m := &mock{
		FilterTopicsF: func(context.Context, filters.TopicRequest) ([]string, error) {
			return nil, errors.New("catalog unreachable")
		},
		TopicsChangedF: func(context.Context, listeners.TopicsChange) error { panic("boom") },
		FilterGroupsF: func(ctx context.Context, _ filters.GroupRequest) ([]string, error) {
			if _, ok := ctx.Deadline(); !ok {
				return nil, errors.New("no deadline reached the plugin")
			}
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}
	impl := all(m)
	impl.Configure = func(context.Context, map[string]string) error { return errors.New("bad config: path") }
	c := connect(t, impl)
	ctx := context.Background()

	_, err := c.FilterTopics(ctx, filters.TopicRequest{})
	if st := status.Convert(err); st.Code() != codes.Unknown || st.Message() != "catalog unreachable" {
		t.Errorf("FilterTopics error = %v", err)
	}
	err = c.TopicsChanged(ctx, listeners.TopicsChange{})
	if st := status.Convert(err); st.Code() != codes.Internal || !strings.Contains(st.Message(), "TopicsChanged panicked: boom") {
		t.Errorf("TopicsChanged (panic) error = %v", err)
	}
	// The plugin survived the panic.
	if _, err := c.PluginInfo(ctx); err != nil {
		t.Errorf("PluginInfo after a panic: %v", err)
	}
	if err := c.Configure(ctx, nil); status.Convert(err).Message() != "bad config: path" {
		t.Errorf("Configure error = %v", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = c.FilterGroups(dctx, filters.GroupRequest{})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("FilterGroups past its deadline: %v, want DeadlineExceeded", err)
	}
}

func TestGRPCServerWithoutImpl(t *testing.T) {
	t.Parallel()
	if err := (&v1.Plugin{}).GRPCServer(nil, nil); err == nil {
		t.Fatal("GRPCServer with no Impl: want an error")
	}
}
