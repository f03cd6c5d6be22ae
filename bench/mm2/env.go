package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/internal/machine"
)

// env is what every phase shares: the Kafka runtime, the built kmirror
// binary, this binary (for the limit child) and a scratch directory.
type env struct {
	rt                          *kafkatest.Runtime
	dir                         string
	kmirror, self               string
	kmirrorVersion, javaVersion string
	mm2JVM                      []string
	brokerHeap                  string
	brokerJVM                   []string
	keep                        bool
	cpuprofile                  string
	// eosSlots is kmirror-eos's cluster.slots (0: kmirror's default).
	eosSlots int
}

func newEnv(ctx context.Context, o *options) (*env, error) {
	rt, err := kafkatest.Find()
	if err != nil {
		return nil, err
	}
	if err := rt.Ensure(ctx, os.Stderr); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kmirror-bench-mm2-")
	if err != nil {
		return nil, err
	}
	e := &env{rt: rt, dir: dir, brokerHeap: o.brokerHeap, keep: o.keep, cpuprofile: o.cpuprofile, eosSlots: o.eosSlots,
		// C2 on (the harness defaults to C1 only, for fast test starts).
		brokerJVM: []string{"-XX:TieredStopAtLevel=4"},
		mm2JVM:    append([]string{"-Xms256m", "-Xmx" + o.mm2Heap}, kafkatest.MirrorMakerJVMOpts[2:]...),
	}
	if e.self, err = os.Executable(); err != nil {
		return nil, err
	}
	e.kmirror = filepath.Join(dir, "kmirror")
	build := exec.CommandContext(ctx, "go", "build", "-o", e.kmirror, "./cmd/kmirror")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/kmirror: %w", err)
	}
	if out, err := exec.Command(e.kmirror, "version").CombinedOutput(); err == nil {
		e.kmirrorVersion = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command(rt.Java, "-version").CombinedOutput(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		e.javaVersion = strings.Join(lines, "; ")
	}
	return e, nil
}

func (e *env) close() {
	if !e.keep {
		os.RemoveAll(e.dir)
	}
}

// pair is a fresh source and target cluster, each a single KRaft node.
type pair struct {
	dir      string
	src, dst *kafkatest.Cluster
}

func (e *env) startPair(ctx context.Context, name string) (*pair, error) {
	p := &pair{dir: filepath.Join(e.dir, name)}
	var err error
	mk := func(n string) (*kafkatest.Cluster, error) {
		return e.rt.NewCluster(kafkatest.Config{Name: n, Dir: filepath.Join(p.dir, n), Heap: e.brokerHeap, JVMOpts: e.brokerJVM})
	}
	if p.src, err = mk("source"); err != nil {
		return nil, err
	}
	if p.dst, err = mk("target"); err != nil {
		return nil, err
	}
	errs := make(chan error, 2)
	for _, c := range []*kafkatest.Cluster{p.src, p.dst} {
		go func() { errs <- c.Start(ctx) }()
	}
	err = errors.Join(<-errs, <-errs)
	if err != nil {
		p.stop(false)
		return nil, err
	}
	return p, nil
}

func (p *pair) stop(keep bool) {
	_ = p.src.Stop(30 * time.Second)
	_ = p.dst.Stop(30 * time.Second)
	if !keep {
		os.RemoveAll(p.dir)
	}
}

// settle lets the brokers settle before a contender starts: the
// preloaded records are written to disk (sync), so that the copy window
// does not pay for the preload's writeback (gigabytes of dirty pages that
// the kernel throttles writers on), and 2 s pass (flushes, GC).
func settle() {
	t := time.Now()
	syscall.Sync()
	if d := time.Since(t); d > time.Second {
		log.Printf("  sync took %.1fs", d.Seconds())
	}
	time.Sleep(2 * time.Second)
}

// brokerCPU is both brokers' CPU time so far.
func (p *pair) brokerCPU() time.Duration { return processCPU(p.src) + processCPU(p.dst) }

// processCPU is a broker's CPU time so far (0 if unknown).
func processCPU(c *kafkatest.Cluster) time.Duration {
	st, err := kafkatest.ReadProcStat(c.Pid())
	if err != nil {
		return 0
	}
	return st.CPU
}

func client(addr string, opts ...kgo.Opt) (*kgo.Client, *kadm.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	return cl, kadm.NewClient(cl), nil
}

func sum(m map[string]map[int32]int64) int64 {
	var n int64
	for _, ps := range m {
		for _, v := range ps {
			n += v
		}
	}
	return n
}

func franzVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/twmb/franz-go" {
				return d.Version
			}
		}
	}
	return "?"
}

// disturbance measures what else ran on the machine over a phase: busy CPU
// beyond the contender, the brokers and this harness, and steal.
type disturbance struct {
	busy0, steal0, self0, brokers0 time.Duration
	load0                          string
}

func startDisturbance(p *pair) disturbance {
	d := disturbance{self0: machine.SelfCPU(), brokers0: p.brokerCPU(), load0: machine.Loadavg()}
	d.busy0, d.steal0 = machine.CPU()
	return d
}

// end returns broker CPU, other CPU and steal over the phase, given the
// contender's CPU over it.
func (d disturbance) end(p *pair, contender time.Duration) (brokers, other, steal time.Duration, load string) {
	busy, st := machine.CPU()
	brokers = p.brokerCPU() - d.brokers0
	other = max(0, busy-d.busy0-contender-brokers-(machine.SelfCPU()-d.self0))
	return brokers, other, st - d.steal0, d.load0 + " → " + machine.Loadavg()
}
