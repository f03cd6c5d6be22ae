package v1

import (
	"context"
	"errors"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Plugin is the go-plugin glue for protocol v1, gRPC only (after
// go-plugin's examples/bidirectional and Nomad's plugins/base). On the
// plugin side Impl is what it serves; on the host side Impl is nil and
// GRPCClient returns a *Client.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl *Impl
}

var (
	_ plugin.Plugin     = (*Plugin)(nil)
	_ plugin.GRPCPlugin = (*Plugin)(nil)
)

// GRPCServer registers Impl's services on s.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("plugins/v1: Plugin has no Impl to serve")
	}
	RegisterServer(s, p.Impl)
	return nil
}

// GRPCClient returns a *Client over c. ctx is go-plugin's: it is cancelled
// when the plugin process exits.
func (p *Plugin) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewClient(ctx, c), nil
}

// ServerPluginSet is the PluginSet a plugin binary serves for protocol v1.
func ServerPluginSet(impl *Impl) plugin.PluginSet {
	return plugin.PluginSet{PluginName: &Plugin{Impl: impl}}
}

// ClientPluginSet is the PluginSet the host dispenses for protocol v1.
func ClientPluginSet() plugin.PluginSet {
	return plugin.PluginSet{PluginName: &Plugin{}}
}
