package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// connsByRemotePort counts process pid's established TCP connections by
// remote port: its sockets (the inodes of /proc/<pid>/fd) looked up in
// its network namespace's /proc/net/tcp and tcp6 (a JVM's sockets are
// IPv6 ones, with IPv4-mapped addresses, unless it prefers IPv4).
func connsByRemotePort(pid int) (map[int]int, error) {
	inodes, err := socketInodes(pid)
	if err != nil {
		return nil, err
	}
	out := map[int]int{}
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if errors.Is(err, fs.ErrNotExist) {
			continue // no IPv6 on this machine
		}
		if err != nil {
			return nil, err
		}
		for port, n := range parseProcNetTCP(b, inodes) {
			out[port] += n
		}
	}
	return out, nil
}

// socketInodes are the inodes of the sockets process pid holds open.
func socketInodes(pid int) (map[uint64]bool, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	inodes := map[uint64]bool{}
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if s, ok := strings.CutPrefix(link, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				inodes[n] = true
			}
		}
	}
	return inodes, nil
}

// parseProcNetTCP counts, by remote port, the established connections
// (state 01) of a /proc/net/tcp or tcp6 table whose inode is in inodes.
// A line: "sl local_address rem_address st tx_queue:rx_queue tr:tm->when
// retrnsmt uid timeout inode ...", addresses as hex IP:port.
func parseProcNetTCP(table []byte, inodes map[uint64]bool) map[int]int {
	out := map[int]int{}
	sc := bufio.NewScanner(bytes.NewReader(table))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != "01" {
			continue // the header, or not established
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil || !inodes[inode] {
			continue
		}
		_, hexPort, ok := strings.Cut(f[2], ":")
		if port, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil {
			out[int(port)]++
		}
	}
	return out
}
