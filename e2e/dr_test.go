//go:build e2e

package e2e

// TestDisasterRecoveryDay runs the runbook, docs/disaster-recovery.md, on
// two real Kafka clusters of its own, "primary" (A) and "dr" (B).
//
// The page is the test's script, by this convention (also written at the top
// of the page, as an HTML comment):
//
//   - a ```yaml block whose first line is `# file: NAME` is a config file:
//     the test writes it under NAME in a directory of its own, with the
//     clusters' bootstrap_servers, http.listen and the intervals
//     (refresh, progress, group sync) replaced for its clusters and its
//     pace; everything else is the page's;
//   - a ```sh block whose first line is `# step: NAME` is a step: every line
//     starting with `kmirror` is a command (after `#` a comment; no pipes,
//     redirections or continuation lines), run from that directory, so the
//     page's relative config paths are the files above. `kmirror run
//     --config NAME` starts a worker in the background; any other command
//     runs to its end. The test may append flags (`-o json` to read the
//     report, a shorter `--timeout`): the last value of a flag wins.
//
// A step or file the test needs and the page lacks fails the test, and so
// does a kmirror command line the test does not expect in a step.
//
// The day: A's broker is killed (kill -9) while a Java producer writes
// and kmirror copies; `kmirror failover` with A unreachable moves the
// consumer group exactly (a Java consumer with auto.offset.reset=none
// resumes on B right after what it had committed on A) and reports the
// recovery point; applications write to B; A restarts; `kmirror failback`
// and `kmirror run` of the reverse mirror copy back exactly the new records
// (the divergent tail, the records A holds that never reached B, counted
// exactly) and the group resumes on A exactly; `kmirror cutover` refuses
// while a producer writes to B and passes once it stopped; the switch back
// (`kmirror failback` of primary-to-dr, `kmirror run`) copies only what is
// new on A; `kmirror verify` passes on both mirrors.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/kmirror/kmirror/connector/offsets"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// drRunbook is docs/disaster-recovery.md parsed by the convention above.
type drRunbook struct {
	files map[string]string     // file name -> YAML
	steps map[string][][]string // step name -> commands (args after "kmirror")
}

func readRunbook(t *testing.T) drRunbook {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "docs", "disaster-recovery.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rb := drRunbook{files: map[string]string{}, steps: map[string][][]string{}}
	var lang string
	var body []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case !in && strings.HasPrefix(line, "```"):
			in, lang, body = true, strings.TrimPrefix(line, "```"), nil
		case in && line == "```":
			in = false
			if len(body) == 0 {
				continue
			}
			first := strings.TrimSpace(body[0])
			if name, ok := strings.CutPrefix(first, "# file:"); ok && lang == "yaml" {
				rb.files[strings.TrimSpace(name)] = strings.Join(body, "\n") + "\n"
			}
			if name, ok := strings.CutPrefix(first, "# step:"); ok && lang == "sh" {
				name = strings.TrimSpace(name)
				var cmds [][]string
				for _, l := range body[1:] {
					l, _, _ = strings.Cut(l, "#")
					f := strings.Fields(l)
					if len(f) == 0 || f[0] != "kmirror" {
						continue
					}
					if strings.ContainsAny(l, "|<>&;\\$`") {
						t.Fatalf("%s: step %s: %q: no shell syntax in a step's commands", path, name, l)
					}
					cmds = append(cmds, f[1:])
				}
				if len(cmds) == 0 {
					t.Fatalf("%s: step %s has no kmirror command", path, name)
				}
				rb.steps[name] = cmds
			}
		case in:
			body = append(body, line)
		}
	}
	return rb
}

// step returns a step's commands, failing the test when the page lacks it
// or its commands are not the ones wanted (commands named by their first
// word, e.g. "failback", "run").
func (rb drRunbook) step(t *testing.T, name string, want ...string) [][]string {
	t.Helper()
	cmds, ok := rb.steps[name]
	if !ok {
		t.Fatalf("docs/disaster-recovery.md has no ```sh block marked `# step: %s`", name)
	}
	var got []string
	for _, c := range cmds {
		got = append(got, c[0])
	}
	if !slices.Equal(got, want) {
		t.Fatalf("docs/disaster-recovery.md step %s runs kmirror %v, the test expects %v", name, got, want)
	}
	return cmds
}

// drDay is the test's world.
type drDay struct {
	t    *testing.T
	e    *env // src: A (primary), dst: B (dr)
	a, b *kafkatest.Cluster
	app  *kafkatest.KafkaApp
	dir  string // the config files, the commands' working directory
	rb   drRunbook
}

// writeConfigs writes the runbook's config files for the test's clusters.
func (d *drDay) writeConfigs() {
	t := d.t
	for _, name := range []string{"primary-to-dr.yaml", "dr-to-primary.yaml"} {
		text, ok := d.rb.files[name]
		if !ok {
			t.Fatalf("docs/disaster-recovery.md has no ```yaml block marked `# file: %s`", name)
		}
		var cfg map[string]any
		if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		clusters, _ := cfg["clusters"].(map[string]any)
		for alias, addrs := range map[string][]string{"primary": d.e.src.Addrs(), "dr": d.e.dst.Addrs()} {
			c, ok := clusters[alias].(map[string]any)
			if !ok {
				t.Fatalf("%s: no cluster %q", name, alias)
			}
			c["bootstrap_servers"] = addrs
		}
		cfg["http"] = map[string]any{"listen": "127.0.0.1:0"}
		cfg["log"] = map[string]any{"level": "debug"}
		mirrors, _ := cfg["mirrors"].([]any)
		if len(mirrors) != 1 {
			t.Fatalf("%s: %d mirrors, want 1", name, len(mirrors))
		}
		m := mirrors[0].(map[string]any)
		m["topics"].(map[string]any)["refresh_interval"] = "1s"
		m["progress_interval"] = "200ms"
		sync, _ := m["sync"].(map[string]any)
		if sync == nil {
			sync = map[string]any{}
			m["sync"] = sync
		}
		gs, _ := sync["group_offsets"].(map[string]any)
		if gs == nil {
			gs = map[string]any{}
			sync["group_offsets"] = gs
		}
		gs["interval"] = "1s"
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d.dir, name), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// kmirror runs one command of a step in the config directory and returns
// its exit status, stdout and stderr.
func (d *drDay) kmirror(args []string, extra ...string) (int, string, string) {
	t := d.t
	t.Helper()
	args = append(slices.Clone(args), extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kmirrorBin, args...)
	cmd.Dir = d.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	begin := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kmirror %s did not finish within 3m; stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("kmirror %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	t.Logf("kmirror %s: exit %d in %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, time.Since(begin).Round(time.Millisecond), stdout.String(), tail(stderr.String(), 30))
	return code, stdout.String(), stderr.String()
}

// run starts the worker of a step's `kmirror run --config NAME`.
func (d *drDay) run(args []string) *worker {
	d.t.Helper()
	if len(args) != 3 || args[0] != "run" || args[1] != "--config" {
		d.t.Fatalf("kmirror %s: the test starts workers as `kmirror run --config NAME`", strings.Join(args, " "))
	}
	return d.e.startWorker(filepath.Join(d.dir, args[2]))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// appRun runs the Java application and logs what it printed.
func (d *drDay) appRun(args ...string) (string, error) {
	d.t.Helper()
	begin := time.Now()
	out, err := d.app.Run(ctxTimeout(d.t, 2*time.Minute), args...)
	short := out
	if len(short) > 3000 {
		short = short[:1500] + "\n...\n" + short[len(short)-1500:]
	}
	d.t.Logf("KafkaApp %s (%v): err %v\n%s", strings.Join(args[:min(len(args), 7)], " "), time.Since(begin).Round(time.Millisecond), err, short)
	return out, err
}

// valuesOf reads a whole topic and returns its values per partition.
//
// A read that fails is tried again, for up to a minute: right after A
// starts again, its partitions may still be electing their leader
// (ListOffsets answers NOT_LEADER_OR_FOLLOWER), and a failed read is not
// an empty topic.
func drValues(t *testing.T, addrs []string, topic string) map[int32][]string {
	t.Helper()
	var recs map[int32][]*kgo.Record
	waitFor(t, 60*time.Second, fmt.Sprintf("a read of %s at %v", topic, addrs), func() (bool, string) {
		var err error
		recs, err = readTopic(ctxTimeout(t, 30*time.Second), addrs, topic)
		return err == nil, fmt.Sprint(err)
	})
	return values(recs)
}

// The reports' JSON, as far as the test reads them.
type drFailoverReport struct {
	Fence           string `json:"fence"`
	SourceReachable bool   `json:"source_reachable"`
	RecoveryPoint   []struct {
		SourceTopic string `json:"source_topic"`
		Partition   int32  `json:"partition"`
		CopiedTo    int64  `json:"copied_to"`
		SourceEnd   int64  `json:"source_end"`
		NotCopied   int64  `json:"not_copied"`
	} `json:"recovery_point"`
	NotCopied int64 `json:"not_copied_total"`
	Groups    []struct {
		Group       string `json:"group"`
		OffsetsFrom string `json:"offsets_from"`
		Applied     bool   `json:"applied"`
		Exact       bool   `json:"exact"`
		Partitions  []struct {
			Partition    int32 `json:"partition"`
			SourceOffset int64 `json:"source_offset"`
			TargetOffset int64 `json:"target_offset"`
		} `json:"partitions"`
	} `json:"groups"`
	OK bool `json:"ok"`
}

type drFailbackReport struct {
	Partitions []struct {
		Topic          string `json:"topic"`
		Partition      int32  `json:"partition"`
		Start          int64  `json:"start"`
		TargetEnd      int64  `json:"target_end"`
		DivergentFrom  int64  `json:"divergent_from"`
		DivergentCount int64  `json:"divergent_count"`
	} `json:"partitions"`
	Divergent int64 `json:"divergent_total"`
}

type drCutoverReport struct {
	Lagging []struct {
		Partition int32 `json:"partition"`
		Moving    bool  `json:"moving"`
	} `json:"lagging"`
	Fence string `json:"fence"`
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

func decodeReport(t *testing.T, what, stdout string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(stdout), v); err != nil {
		t.Fatalf("%s: stdout is not the JSON report (%v):\n%s", what, err, stdout)
	}
}

// drCheckpoints reads mirror's checkpoints of group on the cluster at
// addrs: source partition -> source offset.
func drCheckpoints(t *testing.T, addrs []string, mirror, group string) (map[int32]int64, error) {
	recs, err := readTopic(ctxTimeout(t, 30*time.Second), addrs, "kmirror."+mirror+".checkpoints.internal")
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, rs := range recs {
		for _, r := range rs {
			var k struct {
				Group     string `json:"group"`
				Partition int32  `json:"partition"`
			}
			if err := json.Unmarshal(r.Key, &k); err != nil || k.Group != group || r.Value == nil {
				continue
			}
			payload, _, err := offsets.Decode(r.Value)
			if err != nil {
				return nil, err
			}
			var v struct {
				SourceOffset int64 `json:"source_offset"`
			}
			if err := json.Unmarshal(payload, &v); err != nil {
				return nil, err
			}
			out[k.Partition] = v.SourceOffset
		}
	}
	return out, nil
}

// drCommitted is group's committed offsets of topic on the cluster of adm.
func drCommitted(t *testing.T, adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	resp, err := adm.FetchOffsets(ctxTimeout(t, 15*time.Second), group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}

// drRuntime finds Java and the Kafka jars: the test skips without them,
// unless CI=true, where it fails.
func drRuntime(t *testing.T) *kafkatest.Runtime {
	t.Helper()
	rt, err := kafkatest.Find()
	if err == nil {
		err = rt.Ensure(ctxTimeout(t, 10*time.Minute), os.Stderr)
	}
	if err != nil {
		if errors.Is(err, kafkatest.ErrUnavailable) && !inCI() {
			t.Skipf("real Kafka unavailable, skipping: %v (with CI=true this is a failure)", err)
		}
		t.Fatalf("real Kafka: %v", err)
	}
	return rt
}

func TestDisasterRecoveryDay(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	// Registered first, so it runs last: a failure's own message is
	// logged above the logs of the workers, commands and brokers that
	// the other cleanups dump; this line says, at the very end, where the
	// day was.
	var stage atomic.Value
	stage.Store("setting up the clusters")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("TestDisasterRecoveryDay failed %v into the day, at: %s (its message is above the dumped logs)", time.Since(begin).Round(time.Millisecond), stage.Load())
		}
	})
	at := func(s string) { stage.Store(s) }
	rb := readRunbook(t)
	rt := drRuntime(t)
	base := t.TempDir()

	// Two clusters of the test's own: A is killed and started again.
	var a, b *kafkatest.Cluster
	{
		var wg sync.WaitGroup
		errs := make([]error, 2)
		cs := make([]*kafkatest.Cluster, 2)
		for i, name := range []string{"primary", "dr"} {
			c, err := rt.NewCluster(kafkatest.Config{Name: name, Dir: filepath.Join(base, name)})
			if err != nil {
				t.Fatal(err)
			}
			cs[i] = c
			t.Cleanup(func() {
				_ = c.Stop(30 * time.Second)
				if t.Failed() {
					t.Logf("kafka %s broker log: %s\n%s", name, c.LogPath(), c.Tail(40))
				}
			})
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = c.Start(ctxTimeout(t, 3*time.Minute))
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("starting the clusters: %v", err)
		}
		a, b = cs[0], cs[1]
	}
	app, err := rt.CompileKafkaApp(ctxTimeout(t, 2*time.Minute), filepath.Join(base, "app"))
	if err != nil {
		if errors.Is(err, kafkatest.ErrUnavailable) && !inCI() {
			t.Skipf("no javac for the Java application: %v", err)
		}
		t.Fatal(err)
	}
	d := &drDay{t: t, a: a, b: b, app: app, dir: t.TempDir(), rb: rb}
	d.e = newEnvWith(t, &kafkaCluster{Cluster: a, shared: true}, &kafkaCluster{Cluster: b, shared: true}, false)
	e := d.e
	aAddr, bAddr := a.Addr(kafkatest.PLAINTEXT), b.Addr(kafkatest.PLAINTEXT)
	t.Logf("clusters primary (A) %s and dr (B) %s ready after %v", aAddr, bAddr, time.Since(begin).Round(time.Millisecond))
	d.writeConfigs()

	const topic, group = "orders", "billing"
	createTopic(t, e.srcCl, topic, 2, nil)

	// ---- Step "start": primary-to-dr copies A to B.
	start := rb.step(t, "start", "run")
	wM := d.run(start[0])

	// A Java producer writes to A in rounds of 20 records (values
	// a<round>-<i>) until A dies.
	var (
		ackMu    sync.Mutex
		ackedA   []kafkatest.AppRecord
		stopProd atomic.Bool
		prodDone = make(chan struct{})
	)
	go func() {
		defer close(prodDone)
		for r := 0; !stopProd.Load(); r++ {
			out, err := app.Run(context.Background(), "produce", "--bootstrap", aAddr, "--topic", topic, "--count", "20",
				"--key-prefix", fmt.Sprintf("k%d-", r), "--value-prefix", fmt.Sprintf("a%d-", r))
			ackMu.Lock()
			ackedA = append(ackedA, kafkatest.ParseAcked(out)...)
			ackMu.Unlock()
			if err != nil {
				return // A is gone
			}
		}
	}()
	acked := func() int {
		ackMu.Lock()
		defer ackMu.Unlock()
		return len(ackedA)
	}
	at("the producer writing 100 records to A")
	waitFor(t, 90*time.Second, "the producer to write 100 records to A", func() (bool, string) {
		return acked() >= 100, fmt.Sprintf("%d acked", acked())
	})

	// The group reads part of A and commits.
	at("the group consuming on A")
	out, err := d.appRun("consume", "--bootstrap", aAddr, "--topic", topic, "--group", group, "--max", "60", "--timeout-ms", "30000", "--commit", "--reset", "earliest")
	if err != nil {
		t.Fatal(err)
	}
	committedA := kafkatest.ParseConsumeCommits(out)
	if len(committedA) != 2 {
		t.Fatalf("the group committed %v on A, want both partitions", committedA)
	}
	// kmirror checkpoints it on B (what failover reads with A gone).
	at("primary-to-dr checkpointing the group on B")
	waitFor(t, 60*time.Second, fmt.Sprintf("primary-to-dr to checkpoint %s at %v on B", group, committedA), func() (bool, string) {
		cps, err := drCheckpoints(t, e.dst.Addrs(), "primary-to-dr", group)
		if err != nil {
			return false, err.Error()
		}
		return fmt.Sprint(cps) == fmt.Sprint(committedA), fmt.Sprintf("checkpoints %v", cps)
	})
	// The producer is still writing and kmirror copying: more records
	// on B, then the disaster.
	copiedBefore, _, _ := recordCount(ctxTimeout(t, 10*time.Second), e.dstCl, topic)
	at("kmirror copying more records while the producer writes")
	waitFor(t, 60*time.Second, "kmirror to copy more records while the producer writes", func() (bool, string) {
		n, _, err := recordCount(ctxTimeout(t, 10*time.Second), e.dstCl, topic)
		return err == nil && n >= copiedBefore+40, fmt.Sprintf("%d offsets on B (%v)", n, err)
	})
	select {
	case <-prodDone:
		t.Fatal("the producer stopped before the disaster")
	default:
	}

	// kmirror falls behind: its worker is stopped (SIGSTOP) while the
	// producer writes 40 more records, so that A dies holding records
	// kmirror never saw (a lag, made deterministic).
	if err := wM.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wM.cmd.Process.Signal(syscall.SIGCONT) })
	ackedAtStop := acked()
	at("the producer writing 40 records with the worker stopped (SIGSTOP)")
	waitFor(t, 60*time.Second, "the producer to write 40 records kmirror does not copy", func() (bool, string) {
		return acked() >= ackedAtStop+40, fmt.Sprintf("%d acked", acked())
	})

	// ---- The disaster: A's broker is killed (kill -9) mid-stream.
	pid := a.Pid()
	if pid == 0 {
		t.Fatal("A is not running")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Stop(10 * time.Second) // reaps the process: "had already exited"
	stopProd.Store(true)
	if err := wM.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("A killed (kill -9 of pid %d) with %d records acked so far", pid, acked())

	// ---- Step "failover", A unreachable.
	at("step failover")
	failover := rb.step(t, "failover", "failover")
	code, stdout, _ := d.kmirror(failover[0], "-o", "json")
	var fo drFailoverReport
	decodeReport(t, "kmirror failover", stdout, &fo)
	if code != 0 || !fo.OK || fo.SourceReachable {
		t.Fatalf("kmirror failover with A gone: exit %d, ok %v, source reachable %v; want exit 0, ok, unreachable", code, fo.OK, fo.SourceReachable)
	}
	if len(fo.Groups) != 1 || fo.Groups[0].Group != group || !fo.Groups[0].Applied || !fo.Groups[0].Exact || fo.Groups[0].OffsetsFrom != "checkpoints" {
		t.Fatalf("failover groups %+v, want %s applied exactly from the checkpoints", fo.Groups, group)
	}
	select {
	case <-prodDone:
	case <-time.After(90 * time.Second):
		t.Fatal("the producer did not give up on the dead A within 90s")
	}
	ackMu.Lock()
	ackedByPart := map[int32]map[int64]string{}
	for _, r := range ackedA {
		if ackedByPart[r.Partition] == nil {
			ackedByPart[r.Partition] = map[int64]string{}
		}
		ackedByPart[r.Partition][r.Offset] = r.Value
	}
	ackMu.Unlock()

	// The recovery point: B holds A's records below copied_to, exactly.
	onB := drValues(t, e.dst.Addrs(), topic)
	copiedTo := map[int32]int64{}
	var lostAcked int64
	for _, rp := range fo.RecoveryPoint {
		if rp.SourceTopic != topic {
			t.Fatalf("recovery point of an unexpected topic: %+v", rp)
		}
		p := rp.Partition
		copiedTo[p] = rp.CopiedTo
		if int64(len(onB[p])) != rp.CopiedTo {
			t.Errorf("partition %d: copied_to %d, but B holds %d records", p, rp.CopiedTo, len(onB[p]))
		}
		for o, v := range onB[p] {
			if want, ok := ackedByPart[p][int64(o)]; ok && want != v {
				t.Errorf("partition %d: B's record %d is %q, A's acked record at offset %d is %q", p, o, v, o, want)
			}
		}
		ackedEnd := int64(0)
		for o := range ackedByPart[p] {
			ackedEnd = max(ackedEnd, o+1)
		}
		// Records acked on A that B lacks: the loss the producer
		// knows of. kmirror counts the records A held when it last
		// looked (source_end); the producer may have had more acked
		// after that look (A died before kmirror fetched again), and
		// A may hold records whose acknowledgement the kill cut off.
		// The exact count comes when A is back (the divergent tail).
		lostAcked += max(0, ackedEnd-rp.CopiedTo)
		if rp.SourceEnd < rp.CopiedTo || rp.NotCopied != rp.SourceEnd-rp.CopiedTo {
			t.Errorf("partition %d: recovery point %+v: want source_end >= copied_to and not_copied = source_end - copied_to", p, rp)
		}
		t.Logf("partition %d: copied_to %d, source_end %d as kmirror saw it, not_copied %d; the producer's acked end %d (%d acked records past kmirror's last look)",
			p, rp.CopiedTo, rp.SourceEnd, rp.NotCopied, ackedEnd, ackedEnd-rp.SourceEnd)
	}
	if len(copiedTo) != 2 {
		t.Fatalf("recovery point %+v, want both partitions", fo.RecoveryPoint)
	}
	t.Logf("recovery point: %d not copied as far as kmirror saw; %d acked on A and not on B", fo.NotCopied, lostAcked)

	at("the group resuming on B")
	// The group resumes on B exactly: its first records are the ones
	// right after what it had consumed on A.
	remaining := 0
	for p, c := range committedA {
		remaining += int(copiedTo[p] - c)
	}
	out, err = d.appRun("consume", "--bootstrap", bAddr, "--topic", topic, "--group", group, "--max", fmt.Sprint(remaining), "--timeout-ms", "30000", "--commit", "--reset", "none")
	if err != nil {
		t.Fatal(err)
	}
	_, recs := kafkatest.ParseConsumed(out)
	got := map[int32][]string{}
	for _, r := range recs {
		got[r.Partition] = append(got[r.Partition], r.Value)
	}
	want := map[int32][]string{}
	for p, c := range committedA {
		want[p] = onB[p][c:]
	}
	if diff := diffValues(want, got); diff != "" {
		t.Fatalf("the group on B did not resume right after what it consumed on A (%v):\n%s", committedA, diff)
	}

	// Applications write to B: 30 new records.
	at("applications writing to and reading from B")
	out, err = d.appRun("produce", "--bootstrap", bAddr, "--topic", topic, "--count", "30", "--key-prefix", "kb-", "--value-prefix", "b-")
	if err != nil {
		t.Fatal(err)
	}
	newOnB := map[int32][]string{}
	for _, r := range kafkatest.ParseAcked(out) {
		newOnB[r.Partition] = append(newOnB[r.Partition], r.Value)
	}
	// The group reads 10 of them on B and commits.
	out, err = d.appRun("consume", "--bootstrap", bAddr, "--topic", topic, "--group", group, "--max", "10", "--timeout-ms", "30000", "--commit", "--reset", "none")
	if err != nil {
		t.Fatal(err)
	}
	readOnB := map[int32]int{}
	_, recs = kafkatest.ParseConsumed(out)
	for _, r := range recs {
		readOnB[r.Partition]++
	}

	// ---- A comes back (its data survives).
	at("A starting again")
	if err := a.Start(ctxTimeout(t, 3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	onA := drValues(t, e.src.Addrs(), topic)
	divergent := map[int32]int64{}
	for p := range copiedTo {
		if !slices.Equal(onA[p][:copiedTo[p]], onB[p][:copiedTo[p]]) {
			t.Fatalf("partition %d: A's first %d records are not B's copies", p, copiedTo[p])
		}
		divergent[p] = int64(len(onA[p])) - copiedTo[p]
	}
	for _, rp := range fo.RecoveryPoint {
		if end := int64(len(onA[rp.Partition])); rp.SourceEnd > end {
			t.Errorf("partition %d: the recovery point's source_end %d is past A's end %d", rp.Partition, rp.SourceEnd, end)
		}
	}
	if divergent[0]+divergent[1] < lostAcked || lostAcked == 0 {
		t.Errorf("divergent tail %v: want at least the %d records acked on A that B lacks (and some)", divergent, lostAcked)
	}
	t.Logf("A is back: it holds %d+%d records; the divergent tail (A's records never copied to B) is %v", len(onA[0]), len(onA[1]), divergent)

	// ---- Step "failback": the reverse mirror copies back only the new
	// records.
	at("step failback")
	failback := rb.step(t, "failback", "failback", "run")
	code, stdout, _ = d.kmirror(failback[0], "-o", "json")
	var fb drFailbackReport
	decodeReport(t, "kmirror failback", stdout, &fb)
	if code != 0 {
		t.Fatalf("kmirror failback: exit %d", code)
	}
	var divTotal int64
	for _, p := range fb.Partitions {
		if p.DivergentCount != divergent[p.Partition] || p.DivergentFrom != copiedTo[p.Partition] || p.TargetEnd != int64(len(onA[p.Partition])) {
			t.Errorf("failback partition %+v: want the divergent tail %d..%d (%d records)", p, copiedTo[p.Partition], len(onA[p.Partition]), divergent[p.Partition])
		}
		divTotal += divergent[p.Partition]
	}
	if len(fb.Partitions) != 2 || fb.Divergent != divTotal {
		t.Errorf("failback: %d partitions, divergent_total %d; want 2 and %d", len(fb.Partitions), fb.Divergent, divTotal)
	}
	wR := d.run(failback[1])
	_ = wR
	wantA := map[int32][]string{}
	for p := range copiedTo {
		wantA[p] = append(slices.Clone(onA[p]), newOnB[p]...)
	}
	at("the reverse mirror copying B's new records to A")
	waitFor(t, 60*time.Second, "A to hold its own records and then exactly the new ones of B", func() (bool, string) {
		got, err := readTopic(ctxTimeout(t, 30*time.Second), e.src.Addrs(), topic)
		if err != nil {
			return false, err.Error()
		}
		diff := diffValues(wantA, values(got))
		return diff == "", diff
	})

	// The group resumes on A right after what it read on B: the reverse
	// mirror's group sync commits it there.
	wantResumeA := map[int32]int64{}
	for p := range copiedTo {
		// The group read every copy and readOnB[p] new records on B:
		// on A they follow A's own records.
		wantResumeA[p] = int64(len(onA[p]) + readOnB[p])
	}
	at("dr-to-primary committing the group on A")
	waitFor(t, 60*time.Second, fmt.Sprintf("dr-to-primary to commit %s on A at %v", group, wantResumeA), func() (bool, string) {
		c, err := drCommitted(t, e.srcAdm, group, topic)
		if err != nil {
			return false, err.Error()
		}
		return fmt.Sprint(c) == fmt.Sprint(wantResumeA), fmt.Sprintf("committed %v", c)
	})
	rest := 30 - readOnB[0] - readOnB[1]
	at("the group resuming on A")
	// Without --commit: the group's truth stays on B until the cutover
	// (a group that commits on A meanwhile is ahead of B's, and the
	// cutover refuses to move it backwards).
	out, err = d.appRun("consume", "--bootstrap", aAddr, "--topic", topic, "--group", group, "--max", fmt.Sprint(rest), "--timeout-ms", "30000", "--reset", "none")
	if err != nil {
		t.Fatal(err)
	}
	_, recs = kafkatest.ParseConsumed(out)
	got = map[int32][]string{}
	for _, r := range recs {
		got[r.Partition] = append(got[r.Partition], r.Value)
	}
	want = map[int32][]string{}
	for p := range copiedTo {
		want[p] = newOnB[p][readOnB[p]:]
	}
	if diff := diffValues(want, got); diff != "" {
		t.Fatalf("the group on A did not resume right after what it read on B:\n%s", diff)
	}

	// ---- Step "cutover": refused while a producer writes to B.
	at("step cutover")
	cutover := rb.step(t, "cutover", "cutover")
	var (
		stopB    = make(chan struct{})
		bDone    = make(chan struct{})
		writtenB = map[int32][]string{}
	)
	go func() {
		defer close(bDone)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopB:
				return
			case <-tick.C:
			}
			p := int32(i % 2)
			v := fmt.Sprintf("c-%d", i)
			if err := e.dstCl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
				t.Errorf("produce to B: %v", err)
				return
			}
			writtenB[p] = append(writtenB[p], v)
		}
	}()
	code, stdout, _ = d.kmirror(cutover[0], "-o", "json", "--timeout", "20s")
	var co drCutoverReport
	decodeReport(t, "kmirror cutover", stdout, &co)
	close(stopB)
	<-bDone
	if code != 1 || co.OK || co.Fence != "" || !slices.ContainsFunc(co.Lagging, func(l struct {
		Partition int32 `json:"partition"`
		Moving    bool  `json:"moving"`
	}) bool {
		return l.Moving
	}) {
		t.Fatalf("kmirror cutover while a producer writes to B: exit %d, %+v; want exit 1, partitions still written, no fence", code, co)
	}
	// The producer stopped: the gate opens.
	code, stdout, _ = d.kmirror(cutover[0], "-o", "json")
	co = drCutoverReport{}
	decodeReport(t, "kmirror cutover", stdout, &co)
	if code != 0 || !co.OK || co.Fence == "" {
		t.Fatalf("kmirror cutover with B quiet: exit %d, %+v; want exit 0, fenced", code, co)
	}
	for p := range copiedTo {
		wantA[p] = append(wantA[p], writtenB[p]...)
	}
	if diff := diffValues(wantA, drValues(t, e.src.Addrs(), topic)); diff != "" {
		t.Fatalf("after the cutover A does not hold exactly its records, B's new ones and the producer's:\n%s", diff)
	}

	// ---- Step "switch-back": primary-to-dr copies again, only what is new
	// on A. Its worker was fenced while running: it is restarted.
	if code, _ := wM.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("the fenced primary-to-dr worker exited %d, want 0", code)
	}
	at("step switch-back")
	sb := rb.step(t, "switch-back", "failback", "run")
	code, stdout, _ = d.kmirror(sb[0], "-o", "json")
	fb = drFailbackReport{}
	decodeReport(t, "kmirror failback (switch back)", stdout, &fb)
	if code != 0 || fb.Divergent != 0 {
		t.Fatalf("kmirror failback of primary-to-dr: exit %d, divergent %d; want exit 0, nothing divergent", code, fb.Divergent)
	}
	_ = d.run(sb[1])
	onBBefore := drValues(t, e.dst.Addrs(), topic)
	out, err = d.appRun("produce", "--bootstrap", aAddr, "--topic", topic, "--count", "20", "--key-prefix", "ka-", "--value-prefix", "back-")
	if err != nil {
		t.Fatal(err)
	}
	wantB := map[int32][]string{}
	for p := range copiedTo {
		wantB[p] = slices.Clone(onBBefore[p])
	}
	for _, r := range kafkatest.ParseAcked(out) {
		wantB[r.Partition] = append(wantB[r.Partition], r.Value)
	}
	e.waitTargetValues(60*time.Second, topic, wantB)

	// ---- Step "verify": both copies are clean.
	at("step verify")
	for _, args := range rb.step(t, "verify", "verify", "verify") {
		if code, _, _ := d.kmirror(args); code != 0 {
			t.Errorf("kmirror %s: exit %d, want 0", strings.Join(args, " "), code)
		}
	}
	t.Logf("the disaster-recovery day took %v", time.Since(begin).Round(time.Millisecond))
}
