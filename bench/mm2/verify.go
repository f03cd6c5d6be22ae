package main

// The throughput phase's verify (issue 26: "kmirror verify as fast as a
// copy"): once kmirror's copy is done, checked and kmirror stopped, the
// built binary's `kmirror verify` compares the same source and target
// record by record through the offset index, and is timed as a command.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	kverify "github.com/kmirror/kmirror/connector/verify"
	"github.com/kmirror/kmirror/internal/machine"
)

// verifyRun is one `kmirror verify` over a throughput phase's copy.
type verifyRun struct {
	// matched is the report's total matched: the records compared, equal
	// to the records copied (else the phase fails); read is both sides'
	// records read (the report's records_read).
	matched, read int64
	// took is the command's wall clock: process start (config, clients,
	// the progress topic and offset index) to exit.
	took time.Duration
	// cpu and peakRSS are the verify process's own (wait4's rusage).
	cpu       time.Duration
	peakRSS   int64
	brokerCPU time.Duration // both brokers over the command
	load      string
	command   string
}

func (v verifyRun) recordsPerSec() float64 { return float64(v.matched) / v.took.Seconds() }

// verifyTimeout is generous: a verify far slower than the copy still ends
// with a figure, which the goal row then reports as missed.
func verifyTimeout(records int) time.Duration {
	return 5*time.Minute + time.Duration(records/2000)*time.Second
}

// kmirrorVerify runs `kmirror verify` with the contender's config over the
// pair and fails unless it exits 0 with want records matched (no
// difference, no partition in error; duplicates are no difference).
func (r *contenderRun) kmirrorVerify(ctx context.Context, want int64, timeout time.Duration) (verifyRun, error) {
	var v verifyRun
	logPath := filepath.Join(r.dir, "verify.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return v, err
	}
	defer logf.Close()
	args := []string{"verify", "--config", filepath.Join(r.dir, "kmirror.yaml"), "--mirror", "bench", "-o", "json", "--timeout", timeout.String()}
	// As Settings shows the run command: the config by its file name.
	v.command = fmt.Sprintf("%s %s", filepath.Base(r.e.kmirror), strings.Join(append([]string{"verify", "--config", "kmirror.yaml"}, args[3:]...), " "))
	cctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, r.e.kmirror, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	load0, b0 := machine.Loadavg(), r.p.brokerCPU()
	t := time.Now()
	err = cmd.Run()
	v.took = time.Since(t)
	v.brokerCPU, v.load = r.p.brokerCPU()-b0, load0+" → "+machine.Loadavg()
	if ps := cmd.ProcessState; ps != nil {
		v.cpu = ps.UserTime() + ps.SystemTime()
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			v.peakRSS = ru.Maxrss << 10 // KiB on Linux
		}
	}
	if err != nil {
		stderr, _ := os.ReadFile(logPath)
		return v, fmt.Errorf("%s: %w after %.1fs; stderr (%s):\n%s", v.command, err, v.took.Seconds(), logPath, tail(string(stderr), 20))
	}
	var rep kverify.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return v, fmt.Errorf("%s: its JSON: %w:\n%s", v.command, err, tail(out.String(), 20))
	}
	v.matched, v.read = rep.Total.Matched, rep.Records
	t2 := rep.Total
	if rep.Errors > 0 || t2.Differs() || t2.Matched != want {
		return v, fmt.Errorf("%s: %d matched of %d records copied (%d different, %d missing, %d extra, %d duplicate, %d partitions in error)",
			v.command, t2.Matched, want, t2.Different, t2.Missing, t2.Extra, t2.Duplicate, rep.Errors)
	}
	return v, nil
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
