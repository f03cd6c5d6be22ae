package plugins

import (
	plugin "github.com/hashicorp/go-plugin"

	"github.com/kmirror/kmirror/plugins/internal/handshake"
	v1 "github.com/kmirror/kmirror/plugins/v1"
)

// Handshake is the go-plugin handshake between kmirror and its plugins.
// The magic cookie is a UX guard (running a plugin binary by hand prints a
// helpful message), not a security measure: integrity comes from the
// sha256 pin and AutoMTLS.
//
// ProtocolVersion is the transport major, negotiated by go-plugin (the
// highest version both sides list in VersionedPlugins wins):
//
//	Version 1: kmirror 0.x, gRPC only (net/rpc is refused): services
//	           kmirror.plugin.v1.{Plugin, TopicFilter, GroupFilter,
//	           TopicListener, GroupListener} (package plugins/v1).
//
// Within a major version the protocol only grows (see docs/plugins.md);
// a breaking change adds plugins/v2, ProtocolVersion 2 and a line above,
// and both host and SDK keep serving 1 while plugins migrate.
//
// The values live in plugins/internal/handshake so the SDK can share them
// without importing this package.
var Handshake plugin.HandshakeConfig = handshake.Config

// ProtocolVersion is the highest protocol major this host speaks.
const ProtocolVersion = v1.ProtocolVersion

// VersionedPlugins returns the PluginSets the host dispenses, one per
// protocol major it speaks. The SDK's counterpart is in
// plugins/internal/handshake (ServerSets).
func VersionedPlugins() map[int]plugin.PluginSet { return handshake.ClientSets() }
