package v1

import (
	"context"

	"google.golang.org/grpc"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
	"github.com/kmirror/kmirror/plugins/v1/internal/pb"
)

// Client calls a plugin's v1 services. Its errors are the raw gRPC status
// errors; the host (package plugins) maps them (plugin shutdown,
// Unimplemented, the caller's deadline).
type Client struct {
	done          context.Context
	base          pb.PluginClient
	topicFilter   pb.TopicFilterClient
	groupFilter   pb.GroupFilterClient
	topicListener pb.TopicListenerClient
	groupListener pb.GroupListenerClient
}

// NewClient returns a client over conn. done is the plugin's lifetime:
// go-plugin cancels it when the plugin process exits.
func NewClient(done context.Context, conn grpc.ClientConnInterface) *Client {
	return &Client{
		done:          done,
		base:          pb.NewPluginClient(conn),
		topicFilter:   pb.NewTopicFilterClient(conn),
		groupFilter:   pb.NewGroupFilterClient(conn),
		topicListener: pb.NewTopicListenerClient(conn),
		groupListener: pb.NewGroupListenerClient(conn),
	}
}

// Done is closed when the plugin process has exited.
func (c *Client) Done() <-chan struct{} { return c.done.Done() }

// Lifetime is cancelled when the plugin process has exited; join it with a
// caller's context so a call to a dead plugin ends at once.
func (c *Client) Lifetime() context.Context { return c.done }

// PluginInfo asks the plugin who it is and what it serves.
func (c *Client) PluginInfo(ctx context.Context) (Info, error) {
	resp, err := c.base.PluginInfo(ctx, &pb.PluginInfoRequest{ProtocolMinor: ProtocolMinor})
	if err != nil {
		return Info{}, err
	}
	return infoFromProto(resp), nil
}

// Configure hands the plugin its config map.
func (c *Client) Configure(ctx context.Context, config map[string]string) error {
	_, err := c.base.Configure(ctx, configureToProto(config))
	return err
}

// FilterTopics calls the plugin's TopicFilter.
func (c *Client) FilterTopics(ctx context.Context, req filters.TopicRequest) ([]string, error) {
	resp, err := c.topicFilter.FilterTopics(ctx, topicRequestToProto(req))
	if err != nil {
		return nil, err
	}
	return namesFromTopicsProto(resp), nil
}

// FilterGroups calls the plugin's GroupFilter.
func (c *Client) FilterGroups(ctx context.Context, req filters.GroupRequest) ([]string, error) {
	resp, err := c.groupFilter.FilterGroups(ctx, groupRequestToProto(req))
	if err != nil {
		return nil, err
	}
	return namesFromGroupsProto(resp), nil
}

// TopicsChanged calls the plugin's TopicListener.
func (c *Client) TopicsChanged(ctx context.Context, ch listeners.TopicsChange) error {
	_, err := c.topicListener.TopicsChanged(ctx, topicsChangeToProto(ch))
	return err
}

// GroupsChanged calls the plugin's GroupListener.
func (c *Client) GroupsChanged(ctx context.Context, ch listeners.GroupsChange) error {
	_, err := c.groupListener.GroupsChanged(ctx, groupsChangeToProto(ch))
	return err
}
