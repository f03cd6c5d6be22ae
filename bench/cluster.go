package main

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

// buildKfakesrv compiles bench/internal/kfakesrv into dir. The clusters run
// as separate processes so that the measured process does only the copying:
// in one process, kfake's own CPU and garbage would be charged to the
// contender.
func buildKfakesrv(dir string) (string, error) {
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

// cluster is one running kfakesrv process.
type cluster struct {
	cmd   *exec.Cmd
	addrs []string
}

// startCluster starts a fresh kfake cluster on loopback (kfake only listens
// on 127.0.0.1) and waits for its addresses.
func startCluster(bin string, brokers int) (*cluster, error) {
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
		return &cluster{cmd: cmd, addrs: strings.Split(s, ",")}, nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, errors.New("kfakesrv did not print its addresses within 30s")
	}
}

// cpu returns the CPU time the cluster process has used so far, from
// /proc/<pid>/stat (utime and stime, in clock ticks of 1/100 s: USER_HZ is
// 100 in Linux's user ABI). It returns 0 where /proc is unavailable.
func (c *cluster) cpu() time.Duration {
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

// stop sends SIGTERM and waits for a clean exit, killing the process if it
// takes longer than 10s.
func (c *cluster) stop() {
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

// clusters are the source and target of one contender run.
type clusters struct {
	src, dst *cluster
}

func startClusters(bin string, brokers int) (*clusters, error) {
	src, err := startCluster(bin, brokers)
	if err != nil {
		return nil, err
	}
	dst, err := startCluster(bin, brokers)
	if err != nil {
		src.stop()
		return nil, err
	}
	return &clusters{src: src, dst: dst}, nil
}

func (cs *clusters) cpu() time.Duration { return cs.src.cpu() + cs.dst.cpu() }

func (cs *clusters) stop() {
	cs.src.stop()
	cs.dst.stop()
}
