package v1

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
	"github.com/kmirror/kmirror/plugins/v1/internal/pb"
)

// Impl is what a plugin binary serves; plugins/sdk fills it in from its
// options. Nil capabilities are not served (the host gets
// codes.Unimplemented and PluginInfo does not announce them).
type Impl struct {
	// Name and Version are returned by PluginInfo.
	Name    string
	Version string

	TopicFilter   filters.TopicFilter
	GroupFilter   filters.GroupFilter
	TopicListener listeners.TopicListener
	GroupListener listeners.GroupListener

	// Configure, when non-nil, receives the host's config map. Nil means
	// the plugin takes no configuration and accepts any.
	Configure func(ctx context.Context, config map[string]string) error

	// Logger receives panics recovered from the implementations (a panic
	// fails the call with codes.Internal instead of killing the plugin).
	// Nil discards them.
	Logger *slog.Logger
}

// Info is what PluginInfo returns for i.
func (i *Impl) Info() Info {
	info := Info{Name: i.Name, Version: i.Version, ProtocolMinor: ProtocolMinor}
	if i.TopicFilter != nil {
		info.Capabilities = append(info.Capabilities, CapabilityTopicFilter)
	}
	if i.GroupFilter != nil {
		info.Capabilities = append(info.Capabilities, CapabilityGroupFilter)
	}
	if i.TopicListener != nil {
		info.Capabilities = append(info.Capabilities, CapabilityTopicListener)
	}
	if i.GroupListener != nil {
		info.Capabilities = append(info.Capabilities, CapabilityGroupListener)
	}
	return info
}

// RegisterServer registers the services impl implements on s.
func RegisterServer(s grpc.ServiceRegistrar, impl *Impl) {
	srv := &server{impl: impl}
	pb.RegisterPluginServer(s, srv)
	if impl.TopicFilter != nil {
		pb.RegisterTopicFilterServer(s, srv)
	}
	if impl.GroupFilter != nil {
		pb.RegisterGroupFilterServer(s, srv)
	}
	if impl.TopicListener != nil {
		pb.RegisterTopicListenerServer(s, srv)
	}
	if impl.GroupListener != nil {
		pb.RegisterGroupListenerServer(s, srv)
	}
}

// server adapts an Impl to the generated service interfaces.
type server struct {
	pb.UnimplementedPluginServer
	pb.UnimplementedTopicFilterServer
	pb.UnimplementedGroupFilterServer
	pb.UnimplementedTopicListenerServer
	pb.UnimplementedGroupListenerServer
	impl *Impl
}

var (
	_ pb.PluginServer        = (*server)(nil)
	_ pb.TopicFilterServer   = (*server)(nil)
	_ pb.GroupFilterServer   = (*server)(nil)
	_ pb.TopicListenerServer = (*server)(nil)
	_ pb.GroupListenerServer = (*server)(nil)
)

// recoverInto turns a panic in an implementation into a codes.Internal
// error on the call, so a bug costs one call, not the plugin process.
func (s *server) recoverInto(method string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	if l := s.impl.Logger; l != nil {
		l.Error("plugin panicked", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	}
	*err = status.Errorf(codes.Internal, "%s panicked: %v", method, r)
}

func (s *server) PluginInfo(_ context.Context, _ *pb.PluginInfoRequest) (*pb.PluginInfoResponse, error) {
	return infoToProto(s.impl.Info()), nil
}

func (s *server) Configure(ctx context.Context, req *pb.ConfigureRequest) (_ *pb.ConfigureResponse, err error) {
	defer s.recoverInto("Configure", &err)
	if s.impl.Configure != nil {
		if err := s.impl.Configure(ctx, configureFromProto(req)); err != nil {
			return nil, err
		}
	}
	return &pb.ConfigureResponse{}, nil
}

func (s *server) FilterTopics(ctx context.Context, req *pb.FilterTopicsRequest) (_ *pb.FilterTopicsResponse, err error) {
	defer s.recoverInto("FilterTopics", &err)
	names, err := s.impl.TopicFilter.FilterTopics(ctx, topicRequestFromProto(req))
	if err != nil {
		return nil, err
	}
	return &pb.FilterTopicsResponse{Names: names}, nil
}

func (s *server) FilterGroups(ctx context.Context, req *pb.FilterGroupsRequest) (_ *pb.FilterGroupsResponse, err error) {
	defer s.recoverInto("FilterGroups", &err)
	names, err := s.impl.GroupFilter.FilterGroups(ctx, groupRequestFromProto(req))
	if err != nil {
		return nil, err
	}
	return &pb.FilterGroupsResponse{Names: names}, nil
}

func (s *server) TopicsChanged(ctx context.Context, req *pb.TopicsChangedRequest) (_ *pb.TopicsChangedResponse, err error) {
	defer s.recoverInto("TopicsChanged", &err)
	if err := s.impl.TopicListener.TopicsChanged(ctx, topicsChangeFromProto(req)); err != nil {
		return nil, err
	}
	return &pb.TopicsChangedResponse{}, nil
}

func (s *server) GroupsChanged(ctx context.Context, req *pb.GroupsChangedRequest) (_ *pb.GroupsChangedResponse, err error) {
	defer s.recoverInto("GroupsChanged", &err)
	if err := s.impl.GroupListener.GroupsChanged(ctx, groupsChangeFromProto(req)); err != nil {
		return nil, err
	}
	return &pb.GroupsChangedResponse{}, nil
}
