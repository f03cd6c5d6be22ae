package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	v1 "github.com/kmirror/kmirror/plugins/v1"
)

// Spec is one plugin binary to run (plugins.<name> in the config).
type Spec struct {
	// Name is the plugin's name in kmirror's config; it labels its logs
	// and metrics and need not match the name the plugin reports.
	Name string
	// Path is the binary. A relative path is resolved against the working
	// directory.
	Path string
	// SHA256 is the binary's sha256, in hex (the output of sha256sum).
	// Required: the host refuses to start a binary that does not match.
	SHA256 string
	// Config is handed to the plugin's Configure after every (re)start.
	Config map[string]string
}

// HostOptions are a Host's dependencies and tuning. The zero value works.
type HostOptions struct {
	// Logger receives the host's log and every plugin's log (its stderr,
	// and hclog JSON lines parsed back to levels and fields), each with
	// plugin=<Spec.Name>. Nil discards.
	Logger *slog.Logger
	// Registerer, when non-nil, gets kmirror_plugin_restarts_total{plugin}
	// and kmirror_plugin_up{plugin}. Registering twice (a second Host on
	// the same registry) reuses the first collectors.
	Registerer prometheus.Registerer
	// OnRestart, when non-nil, is called with Spec.Name after a plugin was
	// restarted and configured, before it is handed any call, from the
	// plugin's supervisor goroutine: it must not block (hand off to a
	// queue). The listener layer uses it to send the full current state.
	OnRestart func(name string)
	// StartTimeout bounds starting one plugin process, its handshake,
	// PluginInfo and Configure. Default 10s.
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before restarting a dead
	// plugin: MinBackoff after a death, doubling after every failed
	// restart up to MaxBackoff. A plugin that stayed up for at least
	// MaxBackoff starts again from MinBackoff. Defaults 100ms and 30s.
	MinBackoff time.Duration
	MaxBackoff time.Duration
}

// Host starts, supervises and stops plugin processes. It is safe for
// concurrent use.
type Host struct {
	opts    HostOptions
	log     *slog.Logger
	metrics *metrics

	// stopping is closed by Stopping: kmirror is shutting down, and a
	// plugin that dies is not restarted.
	stopping     chan struct{}
	stoppingOnce sync.Once

	mu       sync.Mutex
	closed   bool
	plugins  map[string]*Plugin // started
	starting map[string]bool    // names reserved by a Start in progress
}

// NewHost returns a Host. It fails only if the metrics cannot be
// registered.
func NewHost(opts HostOptions) (*Host, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 10 * time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("plugins: registering metrics: %w", err)
	}
	return &Host{opts: opts, log: opts.Logger, metrics: m, stopping: make(chan struct{}),
		plugins: map[string]*Plugin{}, starting: map[string]bool{}}, nil
}

// Stopping tells the host that kmirror is shutting down: the plugins keep
// running until Close, but one that dies now is not restarted. A SIGTERM
// sent to kmirror's whole process group (or cgroup, as systemd does) stops
// the plugins with kmirror; that is not a crash.
func (h *Host) Stopping() {
	h.stoppingOnce.Do(func() { close(h.stopping) })
}

// Start verifies spec's binary against its sha256, starts it, asks it for
// its PluginInfo and configures it. The returned Plugin is supervised
// (restarted when it dies) until it or the Host is closed. ctx bounds the
// start only.
func (h *Host) Start(ctx context.Context, spec Spec) (*Plugin, error) {
	sum, err := validateSpec(&spec)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	switch {
	case h.closed:
		h.mu.Unlock()
		return nil, fmt.Errorf("plugin %q: %w: host is closed", spec.Name, ErrPluginShutdown)
	case h.plugins[spec.Name] != nil || h.starting[spec.Name]:
		h.mu.Unlock()
		return nil, fmt.Errorf("plugin %q is already running", spec.Name)
	}
	h.starting[spec.Name] = true
	h.mu.Unlock()

	p := &Plugin{
		host:     h,
		spec:     spec,
		checksum: sum,
		log:      h.log.With("plugin", spec.Name),
		done:     make(chan struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())

	inst, err := p.startInstance(ctx)
	if err != nil {
		h.mu.Lock()
		delete(h.starting, spec.Name)
		h.mu.Unlock()
		p.cancel()
		close(p.done)
		return nil, err
	}
	p.info = inst.info
	p.inst = inst
	h.metrics.init(spec.Name)
	h.metrics.setUp(spec.Name, true)
	p.log.Info("plugin ready", "path", spec.Path, "pid", inst.pid, "name", inst.info.Name,
		"version", inst.info.Version, "capabilities", capabilityStrings(inst.info.Capabilities),
		"protocol", fmt.Sprintf("%d.%d", inst.protocol, inst.info.ProtocolMinor),
		"start_duration", inst.startDuration)

	h.mu.Lock()
	delete(h.starting, spec.Name)
	closed := h.closed
	if !closed {
		h.plugins[spec.Name] = p
	}
	h.mu.Unlock()
	if closed { // Close ran while we were starting
		p.cancel()
		close(p.done)
		p.stop()
		return nil, fmt.Errorf("plugin %q: %w: host is closed", spec.Name, ErrPluginShutdown)
	}
	go p.supervise(inst)
	return p, nil
}

// Get returns the running plugin named name.
func (h *Host) Get(name string) (*Plugin, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.plugins[name]
	return p, ok
}

// Names returns the names of the plugins the host runs, sorted.
func (h *Host) Names() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.plugins))
}

// Close stops every plugin (gracefully, then by force after 2s) and waits
// for their supervisors: when it returns, no goroutine of the host is
// left. Calls made after Close fail with ErrPluginShutdown.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	ps := slices.Collect(maps.Values(h.plugins))
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() { _ = p.Close() })
	}
	wg.Wait()
	return nil
}

func validateSpec(spec *Spec) ([]byte, error) {
	if spec.Name == "" {
		return nil, errors.New("plugin spec: name is required")
	}
	if spec.Path == "" {
		return nil, fmt.Errorf("plugin %q: path is required", spec.Name)
	}
	want := strings.ToLower(strings.TrimSpace(spec.SHA256))
	if want == "" {
		return nil, fmt.Errorf("plugin %q: sha256 is required (pin the binary: sha256sum %s)", spec.Name, spec.Path)
	}
	sum, err := hex.DecodeString(want)
	if err != nil || len(sum) != sha256.Size {
		return nil, fmt.Errorf("plugin %q: sha256 %q is not 64 hex digits", spec.Name, spec.SHA256)
	}
	spec.SHA256 = want
	if strings.ContainsRune(spec.Path, filepath.Separator) {
		abs, err := filepath.Abs(spec.Path)
		if err != nil {
			return nil, fmt.Errorf("plugin %q: path %s: %w", spec.Name, spec.Path, err)
		}
		spec.Path = abs
	}
	spec.Config = maps.Clone(spec.Config)
	return sum, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// passEnv are the variables a plugin inherits from kmirror. Nothing else
// is passed: kmirror's environment holds cluster credentials
// (${WEST_PASSWORD} in the config), and a plugin's configuration travels
// in Spec.Config.
var passEnv = []string{"PATH", "HOME", "USER", "TMPDIR", "TZ", "LANG", "LC_ALL",
	"GODEBUG", "GOMAXPROCS", "GOMEMLIMIT", "GOTRACEBACK", "GOCOVERDIR", "GORACE"}

func pluginEnv() []string {
	var env []string
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// instance is one process of a plugin.
type instance struct {
	cmd           *exec.Cmd // its ProcessState is safe to read once client.Kill returned
	client        *plugin.Client
	rpc           *v1.Client
	info          v1.Info
	pid           int
	protocol      int
	started       time.Time
	startDuration time.Duration
}

// stoppedBySignal reports whether the process was ended by SIGTERM or
// SIGINT, as a shutdown of the whole process group does (after
// client.Kill).
func (i *instance) stoppedBySignal() bool {
	if i.cmd == nil || i.cmd.ProcessState == nil {
		return false
	}
	ws, ok := i.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && (ws.Signal() == syscall.SIGTERM || ws.Signal() == syscall.SIGINT)
}

func (i *instance) exited() bool {
	select {
	case <-i.rpc.Done():
		return true
	default:
		return false
	}
}

// startInstance checks the binary, starts it and configures it.
func (p *Plugin) startInstance(ctx context.Context) (*instance, error) {
	spec, opts := p.spec, p.host.opts
	begin := time.Now()

	// Our own check first, for an error that says what is wrong; go-plugin's
	// SecureConfig checks again right before exec.
	actual, err := fileSHA256(spec.Path)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: reading %s: %w", spec.Name, spec.Path, err)
	}
	if actual != spec.SHA256 {
		return nil, &ChecksumError{Plugin: spec.Name, Path: spec.Path, Expected: spec.SHA256, Actual: actual}
	}

	cmd := exec.Command(spec.Path)
	cmd.Env = pluginEnv()
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: VersionedPlugins(),
		Cmd:              cmd,
		SecureConfig:     &plugin.SecureConfig{Checksum: p.checksum, Hash: sha256.New()},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Managed:          true,
		StartTimeout:     opts.StartTimeout,
		SkipHostEnv:      true,
		Logger:           newHCLogBridge(p.log),
		SyncStdout:       &lineLogger{l: p.log, level: slog.LevelInfo, attrs: []any{"stream", "stdout"}},
		SyncStderr:       &lineLogger{l: p.log, level: slog.LevelWarn, attrs: []any{"stream", "stderr"}},
		GRPCDialOptions:  v1.DialOptions(),
	})
	fail := func(err error) (*instance, error) {
		client.Kill()
		return nil, err
	}
	rpcClient, err := client.Client()
	if err != nil {
		if errors.Is(err, plugin.ErrChecksumsDoNotMatch) { // replaced between the two checks
			actual, _ = fileSHA256(spec.Path)
			return fail(&ChecksumError{Plugin: spec.Name, Path: spec.Path, Expected: spec.SHA256, Actual: actual})
		}
		return fail(fmt.Errorf("plugin %q: starting %s: %w", spec.Name, spec.Path, err))
	}
	raw, err := rpcClient.Dispense(v1.PluginName)
	if err != nil {
		return fail(fmt.Errorf("plugin %q: %s is not a kmirror plugin: %w", spec.Name, spec.Path, err))
	}
	rpc, ok := raw.(*v1.Client)
	if !ok {
		return fail(fmt.Errorf("plugin %q: unexpected client type %T", spec.Name, raw))
	}
	inst := &instance{cmd: cmd, client: client, rpc: rpc, protocol: client.NegotiatedVersion(), started: time.Now()}
	if rc := client.ReattachConfig(); rc != nil {
		inst.pid = rc.Pid
	}

	ctx, cancel := context.WithDeadline(ctx, begin.Add(opts.StartTimeout))
	defer cancel()
	err = p.call(ctx, inst, "PluginInfo", func(ctx context.Context, c *v1.Client) (err error) {
		inst.info, err = c.PluginInfo(ctx)
		return err
	})
	if errors.Is(err, errors.ErrUnsupported) {
		return fail(fmt.Errorf("plugin %q: %s does not serve kmirror.plugin.v1.Plugin (built without plugins/sdk?)", spec.Name, spec.Path))
	}
	if err != nil {
		return fail(err)
	}
	err = p.call(ctx, inst, "Configure", func(ctx context.Context, c *v1.Client) error {
		return c.Configure(ctx, spec.Config)
	})
	if err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return fail(err)
	}
	inst.startDuration = time.Since(begin)
	return inst, nil
}

// call runs fn against inst with ctx joined to the plugin process's
// lifetime, and maps its error:
//   - the process exited, or the connection is gone: ErrPluginShutdown;
//   - the caller's ctx ended: the caller's ctx.Err();
//   - codes.Unimplemented: errors.ErrUnsupported;
//   - anything else: the plugin's message.
//
// All wrapped with the plugin's name and the method.
func (p *Plugin) call(ctx context.Context, inst *instance, method string, fn func(context.Context, *v1.Client) error) error {
	if inst == nil {
		return fmt.Errorf("plugin %q: %s: %w", p.spec.Name, method, ErrPluginShutdown)
	}
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(inst.rpc.Lifetime(), cancel)
	defer stop()
	err := fn(callCtx, inst.rpc)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("plugin %q: %s: %w", p.spec.Name, method, ctx.Err())
	}
	st, _ := status.FromError(err)
	switch {
	case inst.exited(), st.Code() == codes.Unavailable, st.Code() == codes.Canceled:
		return fmt.Errorf("plugin %q: %s: %w (%s)", p.spec.Name, method, ErrPluginShutdown, st.Message())
	case st.Code() == codes.Unimplemented:
		return fmt.Errorf("plugin %q: %s: %w", p.spec.Name, method, errors.ErrUnsupported)
	case st.Code() == codes.DeadlineExceeded:
		return fmt.Errorf("plugin %q: %s: %w", p.spec.Name, method, context.DeadlineExceeded)
	default:
		return fmt.Errorf("plugin %q: %s: %s", p.spec.Name, method, st.Message())
	}
}

func capabilityStrings(cs []v1.Capability) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}
