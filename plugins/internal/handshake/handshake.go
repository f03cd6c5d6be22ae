// Package handshake holds the go-plugin handshake kmirror and its plugins
// share. It is internal so that the SDK can use it without importing
// package plugins (the host, which pulls in Prometheus). The values and
// their history are documented in plugins/handshake.go, which re-exports
// them; change them only there.
package handshake

import (
	plugin "github.com/hashicorp/go-plugin"

	v1 "github.com/kmirror/kmirror/plugins/v1"
)

// Config is the handshake: see plugins.Handshake.
var Config = plugin.HandshakeConfig{
	ProtocolVersion:  v1.ProtocolVersion,
	MagicCookieKey:   "KMIRROR_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "d78e3a47bef30e4dd11b9fbef41a7f546bdad3078c00f7c899f5363da331981b",
}

// ClientSets are the protocol versions the host speaks, each with the
// PluginSet it dispenses.
func ClientSets() map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		v1.ProtocolVersion: v1.ClientPluginSet(),
	}
}

// ServerSets are the protocol versions a plugin built with the SDK serves.
func ServerSets(impl *v1.Impl) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		v1.ProtocolVersion: v1.ServerPluginSet(impl),
	}
}
