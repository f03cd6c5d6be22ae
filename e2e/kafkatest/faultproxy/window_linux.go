package faultproxy

import (
	"net"

	"golang.org/x/sys/unix"
)

// advertisedWindow returns the receive window the client at the other end
// of nc advertised last (TCP_INFO's tcpi_snd_wnd: the window this side may
// send into).
func advertisedWindow(nc net.Conn) (int, bool) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return 0, false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || ierr != nil {
		return 0, false
	}
	return int(info.Snd_wnd), true
}
