//go:build !linux

package faultproxy

import "net"

// advertisedWindow is Linux's TCP_INFO; elsewhere the window is unknown
// and responses under SetReceiveWindows go at minWindow per round trip.
func advertisedWindow(net.Conn) (int, bool) { return 0, false }
