// Package sdk is what a kmirror plugin imports. A plugin is a main package
// that implements one or more of filters.TopicFilter, filters.GroupFilter,
// listeners.TopicListener and listeners.GroupListener, and hands them to
// Serve:
//
//	func main() {
//		sdk.Serve(
//			sdk.WithInfo("catalog-filter", "1.2.0"),
//			sdk.WithTopicFilter(&catalog{}),
//		)
//	}
//
// Serve speaks kmirror's plugin protocol (hashicorp/go-plugin over gRPC,
// protocol v1) on the plugin's behalf; the plugin never sees go-plugin or
// protobuf types. Built with `go build`, the binary is started by kmirror
// (it refuses to run by hand), pinned by its sha256 in kmirror's config:
//
//	plugins:
//	  catalog: {path: ./bin/catalog-filter, sha256: "<sha256sum of the binary>", config: {catalog: /etc/kmirror/catalog.json}}
//
// Lifecycle, per plugin process (kmirror restarts a process that dies):
//  1. kmirror asks for the plugin's info (WithInfo, and the capabilities
//     given to Serve).
//  2. If an implementation also implements listeners.Configurer, its
//     Configure is called once with the plugin's config map, before any
//     other call. An error fails the start (kmirror logs it and retries
//     with backoff).
//  3. Calls, possibly concurrent: an implementation must be safe for
//     concurrent use. Every call carries the caller's deadline in ctx.
//     A filter's error means "no answer" (kmirror keeps its last good
//     selection); a listener's error makes kmirror retry the delivery.
//     A panic fails only that call.
//  4. On shutdown, implementations that implement listeners.Closer are
//     closed once, after the last call (kmirror waits 2s for the process
//     to exit, then kills it).
//
// Log with Logger: its lines show up in kmirror's log with their level
// and fields and plugin=<name>. Anything else written to stderr or stdout
// is logged too, line by line. Stdout must not be written to before Serve
// (go-plugin's handshake uses it).
package sdk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
	"github.com/kmirror/kmirror/plugins/internal/handshake"
	v1 "github.com/kmirror/kmirror/plugins/v1"
)

// Option configures Serve.
type Option func(*options)

type options struct {
	name, version string
	topicFilter   filters.TopicFilter
	groupFilter   filters.GroupFilter
	topicListener listeners.TopicListener
	groupListener listeners.GroupListener
}

// WithInfo sets the name and version the plugin reports to kmirror (for
// its logs). Defaults: the binary's name, and the main module's version
// from the build info.
func WithInfo(name, version string) Option {
	return func(o *options) { o.name, o.version = name, version }
}

// WithTopicFilter serves f as the plugin's TopicFilter.
func WithTopicFilter(f filters.TopicFilter) Option {
	return func(o *options) { o.topicFilter = f }
}

// WithGroupFilter serves f as the plugin's GroupFilter.
func WithGroupFilter(f filters.GroupFilter) Option {
	return func(o *options) { o.groupFilter = f }
}

// WithTopicListener serves l as the plugin's TopicListener.
func WithTopicListener(l listeners.TopicListener) Option {
	return func(o *options) { o.topicListener = l }
}

// WithGroupListener serves l as the plugin's GroupListener.
func WithGroupListener(l listeners.GroupListener) Option {
	return func(o *options) { o.groupListener = l }
}

// Serve serves the implementations given by opts to kmirror, and returns
// once kmirror has shut the plugin down and every listeners.Closer was
// closed. Call it from main. It exits the process with status 1 if no
// capability was given or the binary was not started by kmirror.
func Serve(opts ...Option) {
	s, err := newServer(opts)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror plugin: %v\n", err)
		os.Exit(1)
	}
	go s.exitWithParent(os.Getppid(), time.Second)
	s.serve(nil)
}

// exitWithParent ends the plugin when the process that started it is gone
// (kmirror was killed with SIGKILL and could not stop it): the plugin is
// then re-parented, and nobody will ever call it again.
func (s *server) exitWithParent(ppid int, every time.Duration) {
	if ppid <= 1 {
		return
	}
	for range time.Tick(every) {
		if os.Getppid() != ppid {
			Logger().Warn("kmirror is gone; exiting", "parent_pid", ppid)
			s.close()
			os.Exit(1)
		}
	}
}

// server is one Serve: the implementations and their lifecycle.
type server struct {
	impl      *v1.Impl
	impls     []any // distinct implementations, in option order
	closeOnce sync.Once
}

func newServer(opts []Option) (*server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	// A typed nil (a nil *T in the interface) is no implementation.
	if isNil(o.topicFilter) {
		o.topicFilter = nil
	}
	if isNil(o.groupFilter) {
		o.groupFilter = nil
	}
	if isNil(o.topicListener) {
		o.topicListener = nil
	}
	if isNil(o.groupListener) {
		o.groupListener = nil
	}
	if o.topicFilter == nil && o.groupFilter == nil && o.topicListener == nil && o.groupListener == nil {
		return nil, errors.New("sdk.Serve needs at least one of WithTopicFilter, WithGroupFilter, WithTopicListener, WithGroupListener")
	}
	if o.name == "" {
		o.name = filepath.Base(os.Args[0])
	}
	if o.version == "" {
		o.version = "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			o.version = bi.Main.Version
		}
	}
	s := &server{}
	for _, x := range []any{o.topicFilter, o.groupFilter, o.topicListener, o.groupListener} {
		if x != nil && !containsImpl(s.impls, x) {
			s.impls = append(s.impls, x)
		}
	}
	s.impl = &v1.Impl{
		Name:          o.name,
		Version:       o.version,
		TopicFilter:   o.topicFilter,
		GroupFilter:   o.groupFilter,
		TopicListener: o.topicListener,
		GroupListener: o.groupListener,
		Configure:     s.configure,
		Logger:        Logger(),
	}
	return s, nil
}

// isNil reports whether x is nil or a typed nil pointer/map/func/....
func isNil(x any) bool {
	if x == nil {
		return true
	}
	v := reflect.ValueOf(x)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Interface, reflect.Slice:
		return v.IsNil()
	}
	return false
}

// containsImpl reports whether x is already in impls, so an implementation
// given for two capabilities is configured and closed once. Values of
// types that cannot be compared are taken as distinct.
func containsImpl(impls []any, x any) bool {
	if !reflect.TypeOf(x).Comparable() {
		return false
	}
	for _, y := range impls {
		if reflect.TypeOf(y) == reflect.TypeOf(x) && y == x {
			return true
		}
	}
	return false
}

// configure calls every listeners.Configurer, in option order.
func (s *server) configure(ctx context.Context, config map[string]string) error {
	for _, x := range s.impls {
		if c, ok := x.(listeners.Configurer); ok {
			if err := c.Configure(ctx, config); err != nil {
				return err
			}
		}
	}
	return nil
}

// close calls every listeners.Closer, in option order, once.
func (s *server) close() {
	s.closeOnce.Do(s.closeAll)
}

func (s *server) closeAll() {
	for _, x := range s.impls {
		if c, ok := x.(listeners.Closer); ok {
			if err := c.Close(); err != nil {
				Logger().Error("close failed", "error", err)
			}
		}
	}
}

// serve runs go-plugin's Serve (in test mode when test is non-nil), then
// closes the implementations.
func (s *server) serve(test *plugin.ServeTestConfig) {
	defer s.close()
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  handshake.Config,
		VersionedPlugins: handshake.ServerSets(s.impl),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, v1.ServerOptions()...)...)
		},
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:       "go-plugin",
			Output:     stderr,
			JSONFormat: true,
			Level:      hclog.Debug,
		}),
		Test: test,
	})
}
