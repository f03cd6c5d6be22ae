package kafkatest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Listener names and security protocols.
const (
	// PLAINTEXT is the listener every cluster has: inter-broker traffic,
	// readiness checks and test clients use it.
	PLAINTEXT = "PLAINTEXT"
	// CONTROLLER is the KRaft controller listener (PLAINTEXT).
	CONTROLLER = "CONTROLLER"

	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// Listener is an extra listener, besides PLAINTEXT and CONTROLLER. Its
// per-listener settings go into Config.Properties with the prefix
// "listener.name.<lower-case name>.".
type Listener struct {
	Name     string // upper case letters, digits and _, e.g. "SASL"
	Protocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
}

// Config describes one single-node cluster.
type Config struct {
	// Name labels the cluster in messages ("source", "target").
	Name string
	// Dir is the cluster's own directory, created if missing: data/,
	// server.properties and server.log (appended to across restarts).
	Dir string
	// Listeners are added after PLAINTEXT and CONTROLLER.
	Listeners []Listener
	// Properties are added to server.properties, overriding the defaults.
	Properties map[string]string
	// ClassPath entries are appended to the broker's class path (for
	// policy classes and the like).
	ClassPath []string
	// Heap is the JVM's -Xmx (default "512m").
	Heap string
	// JVMOpts are added to the JVM's options.
	JVMOpts []string
	// StartTimeout bounds Start (default 2m).
	StartTimeout time.Duration
}

// Cluster is a single-node KRaft cluster. Its ports are picked once (free
// loopback ports) and its data directory formatted once, so Stop followed by
// Start brings back the same cluster at the same addresses.
type Cluster struct {
	rt        *Runtime
	cfg       Config
	clusterID string
	ports     map[string]int // by listener name, CONTROLLER included
	names     []string       // listener names in order

	mu        sync.Mutex
	formatted bool
	started   bool // it has been ready once: the ports are its own
	proc      *process
	starts    int
}

type process struct {
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// NewCluster picks the cluster's ports and writes its server.properties.
// It starts nothing; the first Start formats the data directory.
func (r *Runtime) NewCluster(cfg Config) (*Cluster, error) {
	if cfg.Dir == "" {
		return nil, errors.New("kafkatest: Config.Dir is required")
	}
	if cfg.Name == "" {
		cfg.Name = filepath.Base(cfg.Dir)
	}
	if cfg.Heap == "" {
		cfg.Heap = "512m"
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 2 * time.Minute
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	c := &Cluster{rt: r, cfg: cfg, clusterID: newClusterID()}
	c.names = []string{PLAINTEXT, CONTROLLER}
	for _, l := range cfg.Listeners {
		if l.Name == PLAINTEXT || l.Name == CONTROLLER || slices.Contains(c.names, l.Name) {
			return nil, fmt.Errorf("kafkatest: listener name %q is used twice", l.Name)
		}
		c.names = append(c.names, l.Name)
	}
	if err := c.pickPorts(); err != nil {
		return nil, err
	}
	return c, nil
}

// pickPorts chooses the listeners' ports and writes server.properties.
func (c *Cluster) pickPorts() error {
	ports, err := freePorts(len(c.names))
	if err != nil {
		return err
	}
	c.ports = make(map[string]int, len(c.names))
	for i, n := range c.names {
		c.ports[n] = ports[i]
	}
	if err := os.WriteFile(c.propertiesPath(), []byte(c.serverProperties()), 0o644); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	return nil
}

// newClusterID returns a random Kafka UUID as StorageTool random-uuid
// prints it: 16 random bytes, URL-safe base64 without padding, never
// starting with '-' (a command line would read it as an option).
func newClusterID() string {
	for {
		var b [16]byte
		_, _ = rand.Read(b[:])
		if s := base64.RawURLEncoding.EncodeToString(b[:]); s[0] != '-' {
			return s
		}
	}
}

// freePorts returns n distinct free loopback ports below the kernel's
// ephemeral range. A broker keeps its ports across a restart (Stop, then
// Start); while it is down, a port from the ephemeral range could be taken
// by any outgoing connection or by another listener on port 0, and the
// broker would fail to start again. Ports below the range are only ever
// taken by a listener that names them. Each is bound (all n at once, so
// they differ) and released.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	lo, hi := portRange()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries >= 1000 {
			return nil, fmt.Errorf("kafkatest: no free loopback port in %d-%d after %d tries", lo, hi, tries)
		}
		port := lo + mrand.IntN(hi-lo)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken: try another
		}
		lns = append(lns, ln)
		ports = append(ports, port)
	}
	return ports, nil
}

// FreePort returns a free loopback port below the ephemeral range, for a
// listener of the caller's own (see freePorts).
func FreePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// portRange is where freePorts picks: from 10000 up to the start of the
// ephemeral range (/proc/sys/net/ipv4/ip_local_port_range; 32768 when it
// cannot be read).
func portRange() (lo, hi int) {
	lo, hi = 10000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var first, last int
		if _, err := fmt.Sscan(string(b), &first, &last); err == nil && first > lo+1000 {
			hi = first
		}
	}
	return lo, hi
}

func (c *Cluster) propertiesPath() string { return filepath.Join(c.cfg.Dir, "server.properties") }

// LogPath is the broker's log (stdout and stderr of every start).
func (c *Cluster) LogPath() string { return filepath.Join(c.cfg.Dir, "server.log") }

// Dir is the cluster's directory.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// Name is the cluster's label.
func (c *Cluster) Name() string { return c.cfg.Name }

// ID is the cluster ID the data directory was formatted with.
func (c *Cluster) ID() string { return c.clusterID }

// Addr returns host:port of a listener ("" for an unknown name).
func (c *Cluster) Addr(listener string) string {
	p, ok := c.ports[listener]
	if !ok {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}

// Addrs returns the PLAINTEXT bootstrap address as a list.
func (c *Cluster) Addrs() []string { return []string{c.Addr(PLAINTEXT)} }

// serverProperties renders server.properties: a single node that is
// broker and controller, loopback only, every internal topic with
// replication factor 1 and few partitions, no automatic topic creation.
func (c *Cluster) serverProperties() string {
	var listeners, protoMap []string
	for _, n := range c.names {
		listeners = append(listeners, fmt.Sprintf("%s://%s", n, c.Addr(n)))
		proto := ProtocolPlaintext
		for _, l := range c.cfg.Listeners {
			if l.Name == n {
				proto = l.Protocol
			}
		}
		protoMap = append(protoMap, n+":"+proto)
	}
	props := []struct{ k, v string }{
		{"process.roles", "broker,controller"},
		{"node.id", "1"},
		// Dynamic quorum (KIP-853), formatted with --standalone.
		{"controller.quorum.bootstrap.servers", c.Addr(CONTROLLER)},
		{"listeners", strings.Join(listeners, ",")},
		{"advertised.listeners", strings.Join(listeners, ",")},
		{"inter.broker.listener.name", PLAINTEXT},
		{"controller.listener.names", CONTROLLER},
		{"listener.security.protocol.map", strings.Join(protoMap, ",")},
		{"log.dirs", filepath.Join(c.cfg.Dir, "data")},
		// Small thread pools: tests run several brokers on 2 cores.
		{"num.network.threads", "2"},
		{"num.io.threads", "4"},
		{"num.recovery.threads.per.data.dir", "1"},
		{"background.threads", "4"},
		{"num.partitions", "1"},
		{"default.replication.factor", "1"},
		// Tests and kmirror create every topic explicitly.
		{"auto.create.topics.enable", "false"},
		// A single broker: replication factor and min ISR 1 for every
		// internal topic, and few partitions so they are created fast.
		{"offsets.topic.replication.factor", "1"},
		{"offsets.topic.num.partitions", "1"},
		{"transaction.state.log.replication.factor", "1"},
		{"transaction.state.log.min.isr", "1"},
		{"transaction.state.log.num.partitions", "1"},
		{"share.coordinator.state.topic.replication.factor", "1"},
		{"share.coordinator.state.topic.min.isr", "1"},
		{"share.coordinator.state.topic.num.partitions", "1"},
		// No 3s wait before the first rebalance of a classic group.
		{"group.initial.rebalance.delay.ms", "0"},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# kafkatest: single-node KRaft cluster %q (Apache Kafka %s); generated, do not edit\n", c.cfg.Name, Version)
	for _, p := range props {
		if _, over := c.cfg.Properties[p.k]; over {
			continue
		}
		fmt.Fprintf(&b, "%s=%s\n", p.k, escapeProperty(p.v))
	}
	keys := make([]string, 0, len(c.cfg.Properties))
	for k := range c.cfg.Properties {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) > 0 {
		b.WriteString("# Config.Properties\n")
	}
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, escapeProperty(c.cfg.Properties[k]))
	}
	return b.String()
}

// escapeProperty escapes a value for a java.util.Properties file.
func escapeProperty(v string) string {
	r := strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	v = r.Replace(v)
	if strings.HasPrefix(v, " ") {
		v = `\` + v
	}
	return v
}

// jvmOpts are the broker JVM's options: a small heap and G1 with Kafka's
// own GC settings (kafka-run-class.sh), so that several brokers and the
// tests fit in memory, and only the C1 compiler: it starts the broker
// faster and leaves the CPU to the tests (measured on 2 cores: two
// clusters ready in about 7s instead of 9s). Config.JVMOpts
// "-XX:TieredStopAtLevel=4" brings C2 back for throughput measurements.
func (c *Cluster) jvmOpts() []string {
	opts := []string{
		"-Xms128m", "-Xmx" + c.cfg.Heap,
		"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-XX:+ExplicitGCInvokesConcurrent",
		"-XX:TieredStopAtLevel=1",
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(c.rt.configDir(), "log4j2.properties"),
	}
	opts = append(opts, c.cfg.JVMOpts...)
	return append(opts, strings.Fields(os.Getenv(JVMOptsEnv))...)
}

// JVMOptsEnv names an environment variable with extra JVM options for every
// broker (for debugging: -Xmx1g, -agentlib:..., -XX:+PrintFlagsFinal).
const JVMOptsEnv = "KMIRROR_KAFKA_JVM_OPTS"

// format runs StorageTool format --standalone with the cluster's ID.
func (c *Cluster) format(ctx context.Context) error {
	args := []string{
		"-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(c.rt.configDir(), "tools-log4j2.properties"),
		"-cp", c.rt.classPath(c.cfg.ClassPath...),
		"kafka.tools.StorageTool", "format", "--standalone",
		"--cluster-id", c.clusterID, "--config", c.propertiesPath(),
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.rt.Java, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	c.appendLog(fmt.Sprintf("kafkatest: %s %s\n%s", c.rt.Java, strings.Join(args, " "), out.String()))
	if err != nil {
		return fmt.Errorf("kafkatest: formatting cluster %s (StorageTool format) failed: %v\n%s", c.cfg.Name, err, tail(out.String(), 40))
	}
	return nil
}

// appendLog adds a harness line to server.log.
func (c *Cluster) appendLog(s string) {
	f, err := os.OpenFile(c.LogPath(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	_, _ = io.WriteString(f, s)
}

// Start formats the data directory (first start only), starts the JVM and
// waits until the broker answers a Metadata request on its PLAINTEXT
// listener (Kafka opens its client listeners only once the broker is
// registered and unfenced). It fails early when the JVM exits, and the
// error then carries the end of the log.
//
// The ports are free when NewCluster picks them, but another process may
// bind one before the broker does. On the first start only (later starts
// must keep the addresses), that failure picks new ports, formats again and
// retries, twice at most.
func (c *Cluster) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil && !c.proc.exited() {
		return fmt.Errorf("kafkatest: cluster %s is already running", c.cfg.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		var logStart int64
		if fi, err := os.Stat(c.LogPath()); err == nil {
			logStart = fi.Size()
		}
		err := c.startOnce(ctx)
		if err == nil {
			c.started = true
			return nil
		}
		if c.started || attempt > 2 || !c.logContains(logStart, "Address already in use") {
			return err
		}
		c.appendLog("kafkatest: ==== a port was taken before the broker bound it; picking new ports and formatting again")
		if err := os.RemoveAll(filepath.Join(c.cfg.Dir, "data")); err != nil {
			return fmt.Errorf("kafkatest: %w", err)
		}
		c.formatted = false
		if err := c.pickPorts(); err != nil {
			return err
		}
	}
}

func (c *Cluster) startOnce(ctx context.Context) error {
	if !c.formatted {
		if err := c.format(ctx); err != nil {
			return err
		}
		c.formatted = true
	}
	c.starts++
	args := append(c.jvmOpts(), "-cp", c.rt.classPath(c.cfg.ClassPath...), "kafka.Kafka", c.propertiesPath())
	c.appendLog(fmt.Sprintf("kafkatest: ==== start #%d of cluster %s at %s: %s %s",
		c.starts, c.cfg.Name, time.Now().Format(time.RFC3339Nano), c.rt.Java, strings.Join(args, " ")))
	logf, err := os.OpenFile(c.LogPath(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	cmd := exec.Command(c.rt.Java, args...)
	cmd.Dir = c.cfg.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group: a Ctrl-C meant for the tests does not
		// reach the broker before the harness stops it.
		Setpgid: true,
		// If the test process dies (a panic, a test timeout, kill -9),
		// the broker goes with it instead of holding its ports.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := startProcess(cmd); err != nil {
		logf.Close()
		return fmt.Errorf("kafkatest: starting the JVM of cluster %s: %w", c.cfg.Name, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	c.proc = p
	if err := c.waitReady(ctx, p); err != nil {
		c.stopLocked(10 * time.Second)
		return err
	}
	return nil
}

// waitReady polls the PLAINTEXT listener until a Metadata request lists
// the broker.
func (c *Cluster) waitReady(ctx context.Context, p *process) error {
	addr := c.Addr(PLAINTEXT)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(time.Second), kgo.RequestRetries(0),
		kgo.RetryTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var last error
	for {
		if p.exited() {
			return fmt.Errorf("kafkatest: the JVM of cluster %s exited before the broker was ready (%v); %s:\n%s",
				c.cfg.Name, p.waitErr, c.LogPath(), c.Tail(40))
		}
		if conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond); err != nil {
			last = err
		} else {
			conn.Close()
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			md, err := adm.BrokerMetadata(rctx)
			cancel()
			if err == nil && len(md.Brokers) > 0 {
				return nil
			}
			if err != nil {
				last = err
			} else {
				last = errors.New("metadata lists no broker")
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkatest: cluster %s not ready at %s after %v (last: %v); %s:\n%s",
				c.cfg.Name, addr, c.cfg.StartTimeout, last, c.LogPath(), c.Tail(40))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Running reports whether the broker's JVM is running.
func (c *Cluster) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc != nil && !c.proc.exited()
}

// Stop sends SIGTERM (Kafka shuts down in a controlled way) and waits up
// to timeout, then sends SIGKILL. It returns an error when the broker had to
// be killed or had already died on its own. Stopping a stopped cluster does
// nothing.
func (c *Cluster) Stop(timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopLocked(timeout)
}

func (c *Cluster) stopLocked(timeout time.Duration) error {
	p := c.proc
	if p == nil {
		return nil
	}
	c.proc = nil
	if p.exited() {
		return fmt.Errorf("kafkatest: cluster %s had already exited: %v", c.cfg.Name, p.waitErr)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		c.appendLog(fmt.Sprintf("kafkatest: ==== cluster %s stopped (SIGTERM) at %s", c.cfg.Name, time.Now().Format(time.RFC3339Nano)))
		return nil
	case <-time.After(timeout):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	c.appendLog(fmt.Sprintf("kafkatest: ==== cluster %s killed (SIGKILL) %v after SIGTERM", c.cfg.Name, timeout))
	return fmt.Errorf("kafkatest: cluster %s did not stop within %v of SIGTERM; killed", c.cfg.Name, timeout)
}

// logContains reports whether the log from byte offset from on contains s.
func (c *Cluster) logContains(from int64, s string) bool {
	f, err := os.Open(c.LogPath())
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return false
	}
	b, err := io.ReadAll(f)
	return err == nil && bytes.Contains(b, []byte(s))
}

// Tail returns the last n lines of the broker's log.
func (c *Cluster) Tail(n int) string {
	b, err := os.ReadFile(c.LogPath())
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return tail(string(b), n)
}

// spawner starts processes from one OS thread that lives as long as the
// process: Pdeathsig fires when the thread that forked the child exits, and
// Go may end an ordinary goroutine's thread at any time.
var spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

func startProcess(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread stays
			for r := range spawner.reqs {
				r.err <- r.cmd.Start()
			}
		}()
	})
	r := spawnReq{cmd: cmd, err: make(chan error, 1)}
	spawner.reqs <- r
	return <-r.err
}
