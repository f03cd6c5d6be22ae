//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest/faultproxy"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ---------------------------------------------------------------------------
// Waiting
// ---------------------------------------------------------------------------

// waitFor polls cond until it reports true or timeout passes, then fails the
// test with desc and the last reason cond gave.
func waitFor(t testing.TB, timeout time.Duration, desc string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var reason string
	for {
		ok, why := cond()
		if ok {
			return
		}
		reason = why
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last reason: %s", timeout, desc, reason)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// Test environment: two clusters, clients, workers
// ---------------------------------------------------------------------------

// env is one test's world: a source and a target cluster from a backend,
// clients for both, a temp dir for configs and the kmirror workers started.
type env struct {
	t        *testing.T
	backend  Backend
	src, dst Cluster

	// srcCl and dstCl use the manual partitioner (set Record.Partition)
	// and a short metadata age, so kadm sees new topics and partitions
	// quickly.
	srcCl, dstCl   *kgo.Client
	srcAdm, dstAdm *kadm.Client

	dir string

	// id is unique in the test binary ("e0007"). Clusters may be shared
	// with other tests (shared), so every topic, transactional ID and
	// mirror a test makes carries it: see topic and defaultConfig.
	id     string
	shared bool

	// dstProxy is the fault proxy in front of the target (proxyTarget),
	// nil without one.
	dstProxy *faultproxy.Proxy

	mu      sync.Mutex
	workers []*worker
}

var envSeq atomic.Int64

func newEnv(t *testing.T, b Backend, spec ClusterSpec) *env {
	t.Helper()
	e := &env{t: t, backend: b, dir: t.TempDir(), shared: b.Shared()}
	e.id = fmt.Sprintf("e%04d", envSeq.Add(1))
	e.src, e.dst = b.Clusters(t, spec)
	e.initClients()
	return e
}

// newEnvWith is newEnv with clusters the test brought itself.
func newEnvWith(t *testing.T, src, dst Cluster, shared bool) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), shared: shared, src: src, dst: dst}
	e.id = fmt.Sprintf("e%04d", envSeq.Add(1))
	e.initClients()
	return e
}

// topic returns the test's name for a topic: base with the env's id.
func (e *env) topic(base string) string { return base + "-" + e.id }

// mine reports whether a topic name belongs to this test: every topic
// on clusters of its own, the ones carrying its id on shared clusters.
func (e *env) mine(topic string) bool { return !e.shared || strings.Contains(topic, e.id) }

func (e *env) initClients() {
	t := e.t
	e.srcCl = newClient(t, e.src.Addrs())
	e.dstCl = newClient(t, e.dst.Addrs())
	e.srcAdm = kadm.NewClient(e.srcCl)
	e.dstAdm = kadm.NewClient(e.dstCl)
}

// newClient returns a client for addrs with the manual partitioner and a
// 100ms metadata min age (kadm answers from cached metadata; the default 5s
// would hide new topics and partitions).
func newClient(t testing.TB, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{
		kgo.SeedBrokers(addrs...),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates topic on the cluster behind adm with the broker
// default replication factor and waits until its metadata is visible.
func createTopic(t testing.TB, cl *kgo.Client, topic string, partitions int, configs map[string]*string) {
	t.Helper()
	ctx := ctxTimeout(t, 60*time.Second)
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %q: %v", topic, err)
	}
	waitFor(t, 30*time.Second, fmt.Sprintf("topic %q to show up in metadata", topic), func() (bool, string) {
		n, err := partitionCount(ctx, cl, topic)
		if err != nil {
			return false, err.Error()
		}
		return n == partitions, fmt.Sprintf("%d partitions", n)
	})
}

// produce writes recs synchronously (in order per partition) and fails the
// test on any error. The returned records carry their offsets.
func produce(t testing.TB, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	ctx := ctxTimeout(t, 30*time.Second)
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// errUnknownTopic is returned by partitionCount for a missing topic.
var errUnknownTopic = errors.New("unknown topic")

// partitionCount asks a broker directly (no metadata cache) how many
// partitions topic has.
func partitionCount(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	for _, rt := range resp.Topics {
		if rt.Topic == nil || *rt.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return 0, fmt.Errorf("%w %q", errUnknownTopic, topic)
			}
			return 0, err
		}
		return len(rt.Partitions), nil
	}
	return 0, fmt.Errorf("%w %q", errUnknownTopic, topic)
}

// listTopics asks a broker directly for all topic names, sorted.
func listTopics(ctx context.Context, cl *kgo.Client) ([]string, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // all topics
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, rt := range resp.Topics {
		if rt.Topic != nil {
			names = append(names, *rt.Topic)
		}
	}
	slices.Sort(names)
	return names, nil
}

// recordCount returns the number of offsets (high watermark minus log start)
// in topic, and its partition count. With non-transactional writes that is
// the record count.
func recordCount(ctx context.Context, cl *kgo.Client, topic string) (int64, int, error) {
	adm := kadm.NewClient(cl)
	n, err := partitionCount(ctx, cl, topic)
	if err != nil {
		return 0, 0, err
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, n, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, n, err
	}
	if err := ends.Error(); err != nil {
		return 0, n, err
	}
	var total int64
	seen := 0
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok {
			total += o.Offset - s.Offset
			seen++
		}
	})
	if seen != n {
		return total, n, fmt.Errorf("offsets for %d of %d partitions", seen, n)
	}
	return total, n, nil
}

// readTopic reads topic from its log start up to the last stable offset of
// every partition, read_committed, and returns the records by partition
// (every partition has an entry, possibly empty).
func readTopic(ctx context.Context, addrs []string, topic string) (map[int32][]*kgo.Record, error) {
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	n, err := partitionCount(ctx, admCl, topic)
	if err != nil {
		return nil, err
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, topic) // last stable offsets
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list committed offsets: %w", err)
	}

	out := make(map[int32][]*kgo.Record, n)
	want := make(map[int32]kgo.Offset)
	endOf := make(map[int32]int64)
	for p := int32(0); p < int32(n); p++ {
		out[p] = nil
		s, ok1 := starts.Lookup(topic, p)
		e, ok2 := ends.Lookup(topic, p)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("no offsets for partition %d", p)
		}
		if e.Offset > s.Offset {
			want[p] = kgo.NewOffset().At(s.Offset)
			endOf[p] = e.Offset
		}
	}
	if len(want) == 0 {
		return out, nil
	}

	// Control records (transaction markers) are fetched too, so that a
	// partition whose log ends with a marker is read to its end; they are
	// not returned.
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	// A partition is done when a record (or marker) at or past its end-1
	// arrived. The quiet period only guards against a layout that never
	// gets there: long enough that a slow fetch on a loaded machine does
	// not end the read early with records missing.
	const quiet = 15 * time.Second
	lastProgress := time.Now()
	for len(endOf) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %q: %w (partitions not done: %v)", topic, err, mapsKeys(endOf))
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		for _, fe := range fs.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			return nil, fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out[r.Partition] = append(out[r.Partition], r)
			}
			lastProgress = time.Now()
			if end, ok := endOf[r.Partition]; ok && r.Offset >= end-1 {
				delete(endOf, r.Partition)
			}
		})
		if time.Since(lastProgress) > quiet {
			break
		}
	}
	return out, nil
}

func mapsKeys[K interface{ ~int32 }, V any](m map[K]V) []K {
	var ks []K
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// readTarget reads a whole target topic and fails the test on error.
func (e *env) readTarget(topic string) map[int32][]*kgo.Record {
	e.t.Helper()
	recs, err := readTopic(ctxTimeout(e.t, 60*time.Second), e.dst.Addrs(), topic)
	if err != nil {
		e.t.Fatalf("reading target topic %q: %v", topic, err)
	}
	return recs
}

// values returns the record values per partition as strings.
func values(recs map[int32][]*kgo.Record) map[int32][]string {
	out := make(map[int32][]string, len(recs))
	for p, rs := range recs {
		vs := make([]string, 0, len(rs))
		for _, r := range rs {
			vs = append(vs, string(r.Value))
		}
		out[p] = vs
	}
	return out
}

// diffValues compares per-partition value sequences exactly and describes
// the first difference of each partition ("" when equal).
func diffValues(want, got map[int32][]string) string {
	var b strings.Builder
	parts := mapsKeys(want)
	for _, p := range mapsKeys(got) {
		if _, ok := want[p]; !ok {
			parts = append(parts, p)
		}
	}
	for _, p := range parts {
		w, g := want[p], got[p]
		if slices.Equal(w, g) {
			continue
		}
		i := 0
		for i < len(w) && i < len(g) && w[i] == g[i] {
			i++
		}
		fmt.Fprintf(&b, "partition %d: want %d records, got %d; first difference at index %d: want %s, got %s\n",
			p, len(w), len(g), i, at(w, i), at(g, i))
	}
	return b.String()
}

func at(s []string, i int) string {
	if i < len(s) {
		return fmt.Sprintf("%q", s[i])
	}
	return "<end>"
}

// ---------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------

// mirrorConfig is what testdata/kmirror.yaml.tmpl renders.
type mirrorConfig struct {
	Name             string
	Source, Target   string // cluster aliases
	SourceAddrs      []string
	TargetAddrs      []string
	SourceTLS        *tlsConfig    // clusters.<source>.tls; nil: none
	TargetTLS        *tlsConfig    // clusters.<target>.tls
	SourceSASL       *saslConfig   // clusters.<source>.sasl; nil: none
	TargetSASL       *saslConfig   // clusters.<target>.sasl
	RequestTimeout   time.Duration // clusters.*.request_timeout; 0: the default
	Policy           string        // "default" or "identity"
	Separator        string
	Include, Exclude []string
	RefreshInterval  time.Duration
	ProgressInterval time.Duration
	LogLevel         string
}

// tlsConfig is clusters.<alias>.tls (docs/configuration.md).
type tlsConfig struct {
	CAFile             string `json:"ca_file,omitempty"`
	CertFile           string `json:"cert_file,omitempty"`
	KeyFile            string `json:"key_file,omitempty"`
	ServerName         string `json:"server_name,omitempty"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify,omitempty"`
}

// saslConfig is clusters.<alias>.sasl. Password is written into the file
// as is, so tests pass "${ENV_VAR}" there (or use PasswordFile).
type saslConfig struct {
	Mechanism    string `json:"mechanism"`
	Username     string `json:"username"`
	Password     string `json:"password,omitempty"`
	PasswordFile string `json:"password_file,omitempty"`
}

// defaultConfig is the config most tests use: mirror m1-<id> from alias src
// to alias dst, default policy with ".", every topic of this test (names
// ending in -<id>, see env.topic) included, 1s refresh. The target is
// reached through the fault proxy when the test has one (proxyTarget).
func (e *env) defaultConfig() mirrorConfig {
	return mirrorConfig{
		Name:             "m1-" + e.id,
		Source:           "src",
		Target:           "dst",
		SourceAddrs:      e.src.Addrs(),
		TargetAddrs:      e.targetAddrs(),
		Policy:           "default",
		Separator:        ".",
		Include:          []string{".*-" + e.id},
		Exclude:          []string{},
		RefreshInterval:  time.Second,
		ProgressInterval: 200 * time.Millisecond,
		LogLevel:         "debug",
	}
}

var configTmpl = template.Must(template.New("kmirror.yaml.tmpl").Funcs(template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
}).ParseFiles(filepath.Join("testdata", "kmirror.yaml.tmpl")))

// writeConfig renders cfg into a new file in the test's temp dir.
func (e *env) writeConfig(cfg mirrorConfig) string {
	e.t.Helper()
	return writeConfigFile(e.t, e.dir, cfg)
}

func writeConfigFile(t testing.TB, dir string, cfg mirrorConfig) string {
	t.Helper()
	if cfg.Include == nil {
		cfg.Include = []string{}
	}
	if cfg.Exclude == nil {
		cfg.Exclude = []string{}
	}
	var buf bytes.Buffer
	if err := configTmpl.Execute(&buf, cfg); err != nil {
		t.Fatalf("render config: %v", err)
	}
	f, err := os.CreateTemp(dir, "kmirror-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// ---------------------------------------------------------------------------
// The kmirror worker subprocess
// ---------------------------------------------------------------------------

// worker is one `kmirror run` subprocess.
type worker struct {
	id    int
	cmd   *exec.Cmd
	log   *outputFile // stderr
	out   *outputFile // stdout
	start time.Time

	done    chan struct{} // closed when the process has exited
	waitErr error         // set before done is closed

	mu       sync.Mutex
	stopping bool // we asked it to stop (or killed it)
}

// syncBuffer is a bytes.Buffer safe for one writer and many readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// outputFile is a subprocess's stdout or stderr, written by the process
// itself to a file. Unlike a pipe drained by a goroutine (what exec.Cmd
// does with an io.Writer), a line is readable as soon as the process has
// written it: a test that sees the effect of a logged action (a status, a
// metric) also finds the line, whatever the machine's load.
type outputFile struct {
	f *os.File
}

func newOutputFile(t testing.TB, name string) *outputFile {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &outputFile{f: f}
}

// String is everything written so far.
func (o *outputFile) String() string {
	b, err := os.ReadFile(o.f.Name())
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", o.f.Name(), err)
	}
	return string(b)
}

// stopWait is how long a worker gets to exit after SIGTERM or SIGINT:
// kmirror's shutdown_timeout (10s by default) plus a margin.
const stopWait = 30 * time.Second

// startWorker runs `kmirror run --config cfgPath`. When the test ends the
// worker gets SIGTERM (SIGKILL after stopWait), and if the test failed its
// stderr is logged.
func (e *env) startWorker(cfgPath string) *worker {
	e.t.Helper()
	return e.startWorkerEnv(cfgPath)
}

// startWorkerEnv is startWorker with extra environment variables
// ("NAME=value") for the worker.
func (e *env) startWorkerEnv(cfgPath string, extraEnv ...string) *worker {
	e.t.Helper()
	e.mu.Lock()
	id := len(e.workers) + 1
	e.mu.Unlock()

	w := &worker{id: id, log: newOutputFile(e.t, fmt.Sprintf("kmirror-%d.stderr", id)),
		out: newOutputFile(e.t, fmt.Sprintf("kmirror-%d.stdout", id)), done: make(chan struct{})}
	w.cmd = exec.Command(kmirrorBin, "run", "--config", cfgPath)
	w.cmd.Stderr = w.log.f
	w.cmd.Stdout = w.out.f
	w.cmd.Env = append(os.Environ(), extraEnv...)
	w.start = time.Now()
	if err := w.cmd.Start(); err != nil {
		e.t.Fatalf("start kmirror: %v", err)
	}
	go func() {
		w.waitErr = w.cmd.Wait()
		close(w.done)
	}()

	e.mu.Lock()
	e.workers = append(e.workers, w)
	e.mu.Unlock()

	t := e.t
	t.Cleanup(func() {
		if !w.exited() {
			w.signal(syscall.SIGTERM)
			select {
			case <-w.done:
			case <-time.After(stopWait):
				t.Errorf("kmirror #%d did not exit within %v of SIGTERM at the end of the test; killing it", w.id, stopWait)
				_ = w.cmd.Process.Kill()
				<-w.done
			}
		}
		if t.Failed() || os.Getenv("KMIRROR_E2E_SHOWLOGS") == "1" {
			w.dumpLog(t)
		}
	})
	return w
}

func (w *worker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func (w *worker) signal(sig os.Signal) {
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	_ = w.cmd.Process.Signal(sig)
}

// exitCode is the process exit code, -1 if it died of a signal.
func (w *worker) exitCode() int {
	return w.cmd.ProcessState.ExitCode()
}

// stop sends sig and waits up to stopWait for the process to exit. It
// returns the exit code and how long the exit took; the test fails if it
// took longer.
func (w *worker) stop(t testing.TB, sig os.Signal) (int, time.Duration) {
	t.Helper()
	begin := time.Now()
	w.signal(sig)
	select {
	case <-w.done:
	case <-time.After(stopWait):
		_ = w.cmd.Process.Kill()
		<-w.done
		t.Fatalf("kmirror #%d did not exit within %v of %v", w.id, stopWait, sig)
	}
	return w.exitCode(), time.Since(begin)
}

// kill sends SIGKILL and waits for the process to be gone.
func (w *worker) kill(t testing.TB) {
	t.Helper()
	w.signal(syscall.SIGKILL)
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("kmirror #%d still running 30s after SIGKILL", w.id)
	}
}

// checkAlive fails the test if the worker exited without being asked to.
func (w *worker) checkAlive(t testing.TB) {
	t.Helper()
	if !w.exited() {
		return
	}
	w.mu.Lock()
	stopping := w.stopping
	w.mu.Unlock()
	if !stopping {
		t.Fatalf("kmirror #%d exited unexpectedly after %v: %v", w.id, time.Since(w.start).Round(time.Millisecond), w.waitErr)
	}
}

// dumpLog logs the worker's stderr (the last 400 lines; the full log is
// kept in KMIRROR_E2E_LOGDIR).
func (w *worker) dumpLog(t testing.TB) {
	t.Helper()
	full := w.log.String()
	state := "running"
	if w.exited() {
		state = fmt.Sprintf("exited: %v (code %d)", w.waitErr, w.exitCode())
	}
	dir := os.Getenv("KMIRROR_E2E_LOGDIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "kmirror-e2e-logs")
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.log", strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()), w.id))
	saved := ""
	if err := os.MkdirAll(dir, 0o755); err == nil {
		if err := os.WriteFile(path, []byte(full), 0o644); err == nil {
			saved = " (full log: " + path + ")"
		}
	}
	lines := strings.Split(strings.TrimRight(full, "\n"), "\n")
	const max = 400
	if len(lines) > max {
		lines = append([]string{fmt.Sprintf("... %d earlier lines left out ...", len(lines)-max)}, lines[len(lines)-max:]...)
	}
	t.Logf("kmirror #%d (%s) stderr%s:\n%s", w.id, state, saved, strings.Join(lines, "\n"))
	if o := w.out.String(); o != "" {
		t.Logf("kmirror #%d stdout:\n%s", w.id, o)
	}
}

var httpAddrRe = regexp.MustCompile(`msg="http server listening".*?\baddr="?([0-9.]+:[0-9]+)`)

// httpAddr waits for the "http server listening" log line and returns its
// addr.
func (w *worker) httpAddr(t testing.TB) string {
	t.Helper()
	var addr string
	waitFor(t, 60*time.Second, fmt.Sprintf("kmirror #%d to log `msg=\"http server listening\" addr=...`", w.id), func() (bool, string) {
		w.checkAlive(t)
		if m := httpAddrRe.FindStringSubmatch(w.log.String()); m != nil {
			addr = m[1]
			return true, ""
		}
		return false, "no such line yet"
	})
	return addr
}

// waitFor is waitFor that also fails fast when a worker that should be
// running has exited.
func (e *env) waitFor(timeout time.Duration, desc string, cond func() (bool, string)) {
	e.t.Helper()
	waitFor(e.t, timeout, desc, func() (bool, string) {
		e.mu.Lock()
		ws := slices.Clone(e.workers)
		e.mu.Unlock()
		for _, w := range ws {
			w.checkAlive(e.t)
		}
		return cond()
	})
}

// waitTargetValues waits until the target topic has nPartitions partitions
// and, per partition, exactly the values in want (in order). On timeout the
// reason shows the first difference.
func (e *env) waitTargetValues(timeout time.Duration, topic string, want map[int32][]string) {
	e.t.Helper()
	var total int64
	for _, vs := range want {
		total += int64(len(vs))
	}
	ctx := ctxTimeout(e.t, timeout+30*time.Second)
	e.waitFor(timeout, fmt.Sprintf("target topic %q to hold exactly the expected %d records", topic, total), func() (bool, string) {
		n, got, err := e.targetSnapshot(ctx, topic, total)
		if err != nil {
			return false, err.Error()
		}
		if n != len(want) {
			return false, fmt.Sprintf("target has %d partitions, want %d", n, len(want))
		}
		if got == nil {
			cnt, _, _ := recordCount(ctx, e.dstCl, topic)
			return false, fmt.Sprintf("target has %d partitions but only %d of %d records", n, cnt, total)
		}
		if d := diffValues(want, values(got)); d != "" {
			return false, d
		}
		return true, ""
	})
}

// targetSnapshot returns the partition count and, once at least min offsets
// exist, the full content of a target topic.
func (e *env) targetSnapshot(ctx context.Context, topic string, min int64) (int, map[int32][]*kgo.Record, error) {
	cnt, n, err := recordCount(ctx, e.dstCl, topic)
	if err != nil {
		return n, nil, err
	}
	if cnt < min {
		return n, nil, nil
	}
	recs, err := readTopic(ctx, e.dst.Addrs(), topic)
	return n, recs, err
}

// ---------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------

var httpClient = &http.Client{Timeout: 15 * time.Second}

// httpGet returns status code and body of GET http://addr/path.
func httpGet(addr, path string) (int, []byte, error) {
	resp, err := httpClient.Get("http://" + addr + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}
