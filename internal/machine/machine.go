// Package machine reads what the benchmarks report about the machine they
// run on: busy CPU and steal (/proc/stat), this process's CPU (getrusage)
// and the load average, so that every figure can be read with the
// disturbance beside it.
package machine

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPU returns the whole machine's busy CPU time so far and the time stolen
// by the hypervisor, from the first line of /proc/stat (clock ticks of 1/100
// s: USER_HZ is 100 in Linux's user ABI). Busy time beyond the measured
// processes, and steal, tell how much a run was disturbed by other work.
// Zero where /proc is unavailable.
func CPU() (busy, steal time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	// cpu user nice system idle iowait irq softirq steal guest guest_nice;
	// guest time is already counted in user.
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0
	}
	tick := func(i int) time.Duration {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		return time.Duration(v) * 10 * time.Millisecond
	}
	return tick(1) + tick(2) + tick(3) + tick(6) + tick(7), tick(8)
}

// SelfCPU is the user plus system CPU time of this process so far.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Loadavg is the 1, 5 and 15 minute load averages, "?" where unknown.
func Loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
