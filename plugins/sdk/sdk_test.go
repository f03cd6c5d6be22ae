package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	plugin "github.com/hashicorp/go-plugin"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
	"github.com/kmirror/kmirror/plugins/internal/handshake"
	v1 "github.com/kmirror/kmirror/plugins/v1"
)

// both is a filter and a listener with a config and resources.
type both struct {
	configured atomic.Int32
	closed     atomic.Int32
	config     atomic.Value
	failConfig bool
}

func (b *both) Configure(_ context.Context, c map[string]string) error {
	b.configured.Add(1)
	b.config.Store(c)
	if b.failConfig {
		return errors.New("bad config")
	}
	return nil
}

func (b *both) Close() error { b.closed.Add(1); return nil }

func (b *both) FilterTopics(_ context.Context, r filters.TopicRequest) ([]string, error) {
	return []string{r.Properties["keep"]}, nil
}

func (b *both) TopicsChanged(context.Context, listeners.TopicsChange) error { return nil }

// serveInProcess runs Serve's machinery in test mode and connects a host
// client to it.
func serveInProcess(t *testing.T, opts ...Option) (c *v1.Client, stop func()) {
	t.Helper()
	s, err := newServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	reattach := make(chan *plugin.ReattachConfig, 1)
	// served closes when serve has returned, after its deferred close of
	// the implementations: go-plugin's CloseCh closes before that.
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.serve(&plugin.ServeTestConfig{Context: ctx, ReattachConfigCh: reattach})
	}()
	var rc *plugin.ReattachConfig
	select {
	case rc = <-reattach:
	case <-time.After(30 * time.Second):
		t.Fatal("the plugin did not start serving")
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: handshake.Config,
		// Reattaching skips version negotiation: name the set.
		Plugins:          handshake.ClientSets()[v1.ProtocolVersion],
		Reattach:         rc,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
	})
	rpc, err := client.Client()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rpc.Dispense(v1.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		// Closing the client asks the server to stop, as kmirror does, and
		// Serve returns. Cancel only afterwards: go-plugin's GRPCServer.Stop
		// must not run twice at once.
		_ = rpc.Close()
		defer cancel()
		select {
		case <-served:
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return")
		}
	}
	t.Cleanup(stop)
	return raw.(*v1.Client), stop
}

func TestServeLifecycle(t *testing.T) {
	t.Parallel()
	b := &both{}
	c, stop := serveInProcess(t, WithInfo("both", "2.0.0"), WithTopicFilter(b), WithTopicListener(b))
	ctx := context.Background()

	info, err := c.PluginInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := v1.Info{Name: "both", Version: "2.0.0", ProtocolMinor: v1.ProtocolMinor,
		Capabilities: []v1.Capability{v1.CapabilityTopicFilter, v1.CapabilityTopicListener}}
	if !reflect.DeepEqual(info, want) {
		t.Errorf("PluginInfo = %+v, want %+v", info, want)
	}
	if err := c.Configure(ctx, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	// One implementation given for two capabilities is configured once.
	if n := b.configured.Load(); n != 1 {
		t.Errorf("Configure called %d times, want 1", n)
	}
	if got := b.config.Load(); !reflect.DeepEqual(got, map[string]string{"k": "v"}) {
		t.Errorf("config = %v", got)
	}
	names, err := c.FilterTopics(ctx, filters.TopicRequest{Properties: map[string]string{"keep": "orders"}})
	if err != nil || !reflect.DeepEqual(names, []string{"orders"}) {
		t.Errorf("FilterTopics = %v, %v", names, err)
	}
	if err := c.TopicsChanged(ctx, listeners.TopicsChange{}); err != nil {
		t.Error(err)
	}
	if _, err := c.FilterGroups(ctx, filters.GroupRequest{}); err == nil {
		t.Error("FilterGroups on a plugin without a GroupFilter succeeded")
	}
	stop()
	if n := b.closed.Load(); n != 1 {
		t.Errorf("Close called %d times, want 1", n)
	}
}

// teamGroups is a GroupFilter keeping the groups that read the topic named
// by the property "topic"; it fails when the property "fail" is set.
type teamGroups struct{ seen atomic.Value }

func (f *teamGroups) FilterGroups(_ context.Context, r filters.GroupRequest) ([]string, error) {
	f.seen.Store(r)
	if msg := r.Properties["fail"]; msg != "" {
		return nil, errors.New(msg)
	}
	var out []string
	for _, g := range r.Groups {
		for _, t := range g.Topics {
			if t == r.Properties["topic"] {
				out = append(out, g.Name)
				break
			}
		}
	}
	return out, nil
}

// TestServeGroupFilter: a plugin served WithGroupFilter only says so in
// PluginInfo, gets the whole request (mirror, properties, groups with
// their topics) and its answer or its error reaches the host; it filters
// no topics.
func TestServeGroupFilter(t *testing.T) {
	t.Parallel()
	f := &teamGroups{}
	c, _ := serveInProcess(t, WithInfo("groups", "1.0.0"), WithGroupFilter(f))
	ctx := context.Background()
	info, err := c.PluginInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(info.Capabilities, []v1.Capability{v1.CapabilityGroupFilter}) {
		t.Errorf("capabilities = %v, want [group_filter]", info.Capabilities)
	}
	req := filters.GroupRequest{
		Mirror:     "east-to-west",
		Properties: map[string]string{"topic": "orders"},
		Groups: []filters.Group{
			{Name: "billing", Topics: []string{"invoices", "orders"}},
			{Name: "audit", Topics: []string{"invoices"}},
			{Name: "shop", Topics: []string{"orders"}},
		},
	}
	names, err := c.FilterGroups(ctx, req)
	if err != nil || !reflect.DeepEqual(names, []string{"billing", "shop"}) {
		t.Errorf("FilterGroups = %v, %v; want [billing shop]", names, err)
	}
	if got := f.seen.Load(); !reflect.DeepEqual(got, req) {
		t.Errorf("the plugin got %+v, want %+v", got, req)
	}
	req.Properties = map[string]string{"fail": "catalog unreadable"}
	if names, err := c.FilterGroups(ctx, req); err == nil || !strings.Contains(err.Error(), "catalog unreadable") {
		t.Errorf("a failing GroupFilter: %v, %v; want its error", names, err)
	}
	if _, err := c.FilterTopics(ctx, filters.TopicRequest{}); err == nil {
		t.Error("FilterTopics on a plugin without a TopicFilter succeeded")
	}
}

func TestServeConfigureError(t *testing.T) {
	t.Parallel()
	b := &both{failConfig: true}
	c, _ := serveInProcess(t, WithTopicFilter(b))
	if err := c.Configure(context.Background(), nil); err == nil {
		t.Error("Configure error was lost")
	}
}

func TestNewServer(t *testing.T) {
	t.Parallel()
	if _, err := newServer(nil); err == nil {
		t.Error("no capability: want an error")
	}
	var nilFilter *both
	if _, err := newServer([]Option{WithTopicFilter(nilFilter)}); err == nil {
		t.Error("only a typed nil capability: want an error")
	}
	if _, err := newServer([]Option{WithGroupListener(groupFunc(nil))}); err == nil {
		t.Error("only a nil func capability: want an error")
	}
	s, err := newServer([]Option{WithGroupListener(groupFunc(func(context.Context, listeners.GroupsChange) error { return nil }))})
	if err != nil {
		t.Fatal(err)
	}
	if s.impl.Name == "" || s.impl.Version == "" {
		t.Errorf("default name/version: %q %q", s.impl.Name, s.impl.Version)
	}
	// Implementations that cannot be compared are kept apart, not panicked on.
	s, err = newServer([]Option{WithTopicFilter(mapFilter{}), WithGroupFilter(mapFilter{})})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.impls) != 2 {
		t.Errorf("impls = %d, want 2", len(s.impls))
	}
}

// groupFunc is a func-typed GroupListener (not comparable).
type groupFunc func(context.Context, listeners.GroupsChange) error

func (f groupFunc) GroupsChanged(ctx context.Context, c listeners.GroupsChange) error {
	return f(ctx, c)
}

type mapFilter map[string]bool

func (mapFilter) FilterTopics(context.Context, filters.TopicRequest) ([]string, error) {
	return nil, nil
}
func (mapFilter) FilterGroups(context.Context, filters.GroupRequest) ([]string, error) {
	return nil, nil
}

func TestLoggerWritesHCLogJSON(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := slog.New(newHCLogHandler(&buf, slog.LevelDebug))
	l.Warn("catalog stale", "path", "/x", "age", 3)
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%q: %v", buf.String(), err)
	}
	if got["@level"] != "warn" || got["@message"] != "catalog stale" || got["path"] != "/x" || got["age"] != 3.0 {
		t.Errorf("line = %v", got)
	}
	ts, _ := got["@timestamp"].(string)
	if _, err := time.Parse(hclogTimeFormat, ts); err != nil {
		t.Errorf("@timestamp %q: %v", ts, err)
	}
	for l, want := range map[slog.Level]string{slog.LevelDebug - 4: "trace", slog.LevelDebug: "debug",
		slog.LevelInfo: "info", slog.LevelWarn: "warn", slog.LevelError: "error", slog.LevelError + 4: "error"} {
		if got := hclogLevel(l); got != want {
			t.Errorf("hclogLevel(%v) = %q, want %q", l, got, want)
		}
	}
}
