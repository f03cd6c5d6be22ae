// Package kfakeproc runs kfake clusters as processes of their own
// (bench/internal/kfakesrv) for the benchmarks, so that the measured
// process does only the copying: in one process, kfake's own CPU and
// garbage would be charged to the contender.
package kfakeproc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Build compiles bench/internal/kfakesrv into dir. The clusters run
// as separate processes so that the measured process does only the copying:
// in one process, kfake's own CPU and garbage would be charged to the
// contender.
func Build(dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is needed to build kfakesrv: %w", err)
	}
	bin := filepath.Join(dir, "kfakesrv")
	cmd := exec.Command(goBin, "build", "-o", bin, "github.com/kmirror/kmirror/bench/internal/kfakesrv")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build kfakesrv: %w", err)
	}
	return bin, nil
}

// Cluster is one running kfakesrv process.
type Cluster struct {
	cmd *exec.Cmd
	// Addrs are its brokers' addresses.
	Addrs []string
}

// Start starts a fresh kfake cluster on loopback (kfake only listens
// on 127.0.0.1) and waits for its addresses.
func Start(bin string, brokers int) (*Cluster, error) {
	cmd := exec.Command(bin, "-brokers", strconv.Itoa(brokers))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kfakesrv: %w", err)
	}
	// kfakesrv prints one line once every broker listens.
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		if s == "" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, errors.New("kfakesrv exited without printing its addresses")
		}
		return &Cluster{cmd: cmd, Addrs: strings.Split(s, ",")}, nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, errors.New("kfakesrv did not print its addresses within 30s")
	}
}

// CPU returns the CPU time the cluster process has used so far, from
// /proc/<pid>/stat (utime and stime, in clock ticks of 1/100 s: USER_HZ is
// 100 in Linux's user ABI). It returns 0 where /proc is unavailable.
func (c *Cluster) CPU() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields after it are
	// plain numbers. utime and stime are fields 14 and 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// Stop sends SIGTERM and waits for a clean exit, killing the process if it
// takes longer than 10s.
func (c *Cluster) Stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = c.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// Pair is the source and target of one contender run.
type Pair struct {
	Src, Dst *Cluster
}

// StartPair starts a source and a target cluster.
func StartPair(bin string, brokers int) (*Pair, error) {
	src, err := Start(bin, brokers)
	if err != nil {
		return nil, err
	}
	dst, err := Start(bin, brokers)
	if err != nil {
		src.Stop()
		return nil, err
	}
	return &Pair{Src: src, Dst: dst}, nil
}

// CPU is both clusters' CPU time so far.
func (p *Pair) CPU() time.Duration { return p.Src.CPU() + p.Dst.CPU() }

// Stop stops both clusters.
func (p *Pair) Stop() {
	p.Src.Stop()
	p.Dst.Stop()
}

// Pid is the cluster process's ID.
func (c *Cluster) Pid() int { return c.cmd.Process.Pid }
