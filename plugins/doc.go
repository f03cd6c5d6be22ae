// Package plugins is kmirror's host for out-of-process filter and listener
// plugins: binaries built with plugins/sdk, started and supervised through
// hashicorp/go-plugin, spoken to over gRPC (protocol v1, package
// plugins/v1).
//
// A Host starts each plugin from a Spec after checking the binary's sha256
// against the pinned value, asks it what it is (PluginInfo), configures it,
// and hands out its capabilities as the ordinary filters.TopicFilter,
// filters.GroupFilter, listeners.TopicListener and listeners.GroupListener
// interfaces: callers cannot tell a plugin from a built-in.
//
// A plugin that dies is restarted by the host with exponential backoff;
// calls made while it is down fail at once with ErrPluginShutdown (a
// filter pass aborts and keeps its last good set, a listener delivery is
// retried), and HostOptions.OnRestart tells the listener layer to hand the
// fresh process the full current state.
//
// See docs/plugins.md for writing, building and pinning a plugin.
package plugins
