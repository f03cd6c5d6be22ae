package kafkatest

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// MirrorMaker 2 in dedicated mode, and helpers for benchmarks that run
// their contenders as processes next to the clusters.

// MirrorMakerClass is MirrorMaker 2's dedicated-mode main class (the
// tarball's bin/connect-mirror-maker.sh runs it).
const MirrorMakerClass = "org.apache.kafka.connect.mirror.MirrorMaker"

//go:embed connect-log4j2.properties
var connectLog4j []byte

// MirrorMakerJVMOpts are the JVM options StartMirrorMaker uses unless told
// otherwise: the tarball's (connect-mirror-maker.sh's -Xms256M and
// kafka-run-class.sh's G1 settings) with a 1 GiB heap, and the JIT left at
// its default (C1 and C2), as in production.
var MirrorMakerJVMOpts = []string{
	"-Xms256m", "-Xmx1g",
	"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
	"-XX:+ExplicitGCInvokesConcurrent",
	"-Djava.awt.headless=true",
}

// Process is a child process started by this package: its stdout and
// stderr go to LogPath, and it dies with the process that started it.
type Process struct {
	Cmd     *exec.Cmd
	LogPath string
	Started time.Time
	done    chan struct{}
	waitErr error
}

// StartProcess starts cmd with its output appended to logPath, in its own
// process group and with Pdeathsig SIGKILL, from the thread the brokers
// are started from (so Pdeathsig stays armed: it fires when the forking
// thread exits).
func StartProcess(cmd *exec.Cmd, logPath string) (*Process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Process{Cmd: cmd, LogPath: logPath, done: make(chan struct{})}
	if err := startProcess(cmd); err != nil {
		logf.Close()
		return nil, fmt.Errorf("kafkatest: starting %s: %w", cmd.Path, err)
	}
	p.Started = time.Now()
	go func() {
		p.waitErr = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Exited reports whether the process has exited, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Stop sends SIGTERM, waits up to timeout, then sends SIGKILL. It returns
// how long the process took to exit and whether it had to be killed.
func (p *Process) Stop(timeout time.Duration) (took time.Duration, killed bool) {
	t := time.Now()
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return time.Since(t), false
	case <-time.After(timeout):
	}
	_ = p.Cmd.Process.Kill()
	<-p.done
	return time.Since(t), true
}

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return tail(string(b), n)
}

// ProcStat is what /proc says about a process: CPU time used (user plus
// system) and peak resident set size (VmHWM).
type ProcStat struct {
	CPU     time.Duration
	PeakRSS int64 // bytes
	RSS     int64 // bytes (VmRSS)
}

// ReadProcStat reads /proc/<pid>/stat (utime, stime in ticks of 1/100 s,
// USER_HZ) and /proc/<pid>/status (VmHWM, VmRSS).
func ReadProcStat(pid int) (ProcStat, error) {
	var st ProcStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return st, fmt.Errorf("kafkatest: unreadable /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3
	if len(f) < 13 {
		return st, fmt.Errorf("kafkatest: short /proc/%d/stat", pid)
	}
	var ut, stt int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &stt)
	st.CPU = time.Duration(ut+stt) * 10 * time.Millisecond
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		var dst *int64
		switch {
		case strings.HasPrefix(line, "VmHWM:"):
			dst = &st.PeakRSS
		case strings.HasPrefix(line, "VmRSS:"):
			dst = &st.RSS
		default:
			continue
		}
		var kb int64
		fmt.Sscan(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), &kb)
		*dst = kb * 1024
	}
	return st, nil
}

// Pid returns the broker JVM's process id, or 0 when it is not running.
func (c *Cluster) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil || c.proc.exited() {
		return 0
	}
	return c.proc.cmd.Process.Pid
}

// StartMirrorMaker runs MirrorMaker 2 in dedicated mode,
//
//	java <jvmOpts> -cp "<lib>/*" org.apache.kafka.connect.mirror.MirrorMaker <propsFile>
//
// logging with connect-log4j2.properties (the tarball's pattern, INFO, no
// client config dumps) to <dir>/mm2.log. Nil jvmOpts means
// MirrorMakerJVMOpts. It returns once the JVM started; readiness is the
// caller's to detect (MirrorMaker has no REST API in dedicated mode).
func (r *Runtime) StartMirrorMaker(dir, propsFile string, jvmOpts []string) (*Process, error) {
	if jvmOpts == nil {
		jvmOpts = MirrorMakerJVMOpts
	}
	log4j := filepath.Join(r.configDir(), "connect-log4j2.properties")
	if old, err := os.ReadFile(log4j); err != nil || !bytes.Equal(old, connectLog4j) {
		if err := os.MkdirAll(r.configDir(), 0o755); err != nil {
			return nil, fmt.Errorf("kafkatest: %w", err)
		}
		if err := writeFileAtomic(log4j, connectLog4j); err != nil {
			return nil, fmt.Errorf("kafkatest: %w", err)
		}
	}
	args := append(append([]string{}, jvmOpts...),
		"-Dlog4j2.configurationFile="+log4j,
		"-cp", r.classPath(), MirrorMakerClass, propsFile)
	cmd := exec.Command(r.Java, args...)
	cmd.Dir = dir
	logPath := filepath.Join(dir, "mm2.log")
	_ = os.WriteFile(logPath, []byte(fmt.Sprintf("kafkatest: %s %s\n", r.Java, strings.Join(args, " "))), 0o644)
	return StartProcess(cmd, logPath)
}
