// Package v1 is kmirror's plugin protocol, major version 1: the gRPC
// services in proto/kmirror/plugin/v1/plugin.proto, the conversion between
// their messages and the filters/listeners Go types, and the go-plugin
// glue for both sides.
//
// The generated protobuf code lives in internal/pb and never leaves this
// package: the host (package plugins) and the SDK (package plugins/sdk)
// see only filters, listeners and the types below. Regenerate it with
// `make generate` after editing the .proto; the rules for changing it are
// in the .proto's header and in docs/plugins.md (within v1: add only).
package v1

import (
	"fmt"
	"slices"

	"google.golang.org/grpc"
)

// ProtocolVersion is the go-plugin handshake version this package speaks.
const ProtocolVersion = 1

// ProtocolMinor counts the backwards-compatible additions to protocol v1.
// Plugins and the host exchange it in PluginInfo for logs and diagnostics;
// it is never negotiated (an addition is optional by construction).
//
// Minor 0: PluginInfo, Configure, TopicFilter, GroupFilter, TopicListener,
// GroupListener.
// Minor 1: ListenerTopic.source_gaps (listeners.Topic.SourceGaps).
// Minor 2: ListenerTopic.divergent (listeners.Topic.Divergent).
const ProtocolMinor = 2

// PluginName is the name the plugin is registered under in go-plugin's
// PluginSet: one go-plugin "plugin" per binary, serving every service the
// binary implements.
const PluginName = "kmirror"

// MaxMessageSize bounds one gRPC message either way. A filter pass is one
// message holding every candidate (100,000 topics with their configs are a
// few tens of MiB), far above gRPC's 4 MiB default.
const MaxMessageSize = 512 << 20

// Capability names a service a plugin implements.
type Capability string

// The capabilities of protocol v1.
const (
	CapabilityTopicFilter   Capability = "topic_filter"
	CapabilityGroupFilter   Capability = "group_filter"
	CapabilityTopicListener Capability = "topic_listener"
	CapabilityGroupListener Capability = "group_listener"
)

// Info is what a plugin says about itself (the PluginInfo RPC).
type Info struct {
	// Name and Version are the plugin's own, free form.
	Name    string
	Version string
	// Capabilities are the services the plugin serves. A capability a
	// newer plugin announces and this host does not know shows up as
	// "unknown_<n>" and is ignored.
	Capabilities []Capability
	// ProtocolMinor is the minor version of protocol v1 the plugin was
	// built against.
	ProtocolMinor uint32
}

// Has reports whether the plugin announced c.
func (i Info) Has(c Capability) bool { return slices.Contains(i.Capabilities, c) }

// String is for logs: "name version (caps...)".
func (i Info) String() string {
	return fmt.Sprintf("%s %s %v (protocol 1.%d)", i.Name, i.Version, i.Capabilities, i.ProtocolMinor)
}

// ServerOptions are the gRPC server options a plugin must serve with.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageSize), grpc.MaxSendMsgSize(MaxMessageSize)}
}

// DialOptions are the gRPC dial options the host must connect with.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize))}
}
