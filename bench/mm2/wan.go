package main

// (f) WAN (issue 27): the contender reaches the source cluster through a
// latency proxy (e2e/kafkatest/faultproxy) that adds a round trip to every
// request, as a link between two sites would; the target is local. Per
// contender, partition count and round trip: the records/s and CPU of a
// preloaded backlog's copy, and the p99 latency at -rate records/s.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/bench/internal/workload"
	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/e2e/kafkatest/faultproxy"
)

// wanContenders are the contenders of a run of the WAN phase alone, unless
// -contenders says otherwise.
const wanContenders = "limit,kmirror,mm2-defaults,mm2,mm2-wan"

// wanRun is one contender at one partition count and round trip.
type wanRun struct {
	partitions int
	rtt        time.Duration
	// tp is the backlog's copy through the proxy; bounded when its window
	// ended at -wan-window, before the backlog was copied.
	tp      throughput
	bounded bool
	// conns are the contender's connections through the proxy at the end
	// of the copy window (none went to the source directly: checked).
	conns int
	// inFlight is the most response bytes one of its connections had on
	// their way over the copy window, under the receive window it
	// advertised then (wnd): faultproxy's MaxInFlight.
	inFlight, wnd int
	// lat is -rate records/s through the proxy, by the same process once
	// it copied the backlog; not measured (behind) when the backlog's
	// copy ran below -rate: such a contender falls further behind every
	// second, so its p99 is only how long the test ran.
	lat    latency
	behind bool
	// stalled: nothing reached the target within wanStall of the
	// contender's start (records/s 0 over that wait).
	stalled bool
	// stopped: records arrived, then, while the bench waited for the rest
	// of the backlog with the latency lifted, their count at the target
	// did not grow for wanStopped (arrived: that count), so the bench gave
	// up on the copy: no records/s, ratio, CPU s/GB or latency, since what
	// arrived before a contender stopped is no rate, and no check of a
	// copy known to be incomplete.
	stopped bool
	arrived int64
	// repeats are the records/s of every run of this cell, in run order,
	// when its first copy finished inside -wan-window and it ran
	// -wan-repeats times (this run is the median); nil for one run.
	repeats []float64
}

// wanStall is how long a WAN run waits for the contender's first record
// at the target (a JVM's start and MirrorMaker 2's task assignment take
// seconds to tens of seconds) before it counts as stalled.
const wanStall = 2 * time.Minute

// wanStopped is how long the wait for the rest of a backlog lets the
// target's record count stay flat before the contender counts as stopped
// copying. A MirrorMaker 2 task that died (an OutOfMemoryError a few
// seconds in) is not restarted by Connect: its partition is never copied,
// and without this the wait lasted its whole timeout (5 minutes and a
// second per 2,000 records: 22 minutes at 2,000,000). The rest copies
// with the latency lifted, where every contender's count grows many times
// a second; even at 150 ms MM2 at its defaults (a few hundred records/s)
// grows it every few seconds, so a minute flat is no slow copy.
const wanStopped = time.Minute

// p99 is the run's p99 latency in ms, or why it was not measured.
func (w wanRun) p99() string {
	switch {
	case w.stopped:
		return "not measured"
	case w.behind:
		return "behind"
	}
	return ms(w.lat.p99)
}

// rate is the run's records/s, "-" for a copy that stopped.
func (w wanRun) rate() string {
	if w.stopped {
		return "-"
	}
	return fmt.Sprintf("%.0f", w.tp.recordsPerSec())
}

// cpuPerGB is the run's CPU s/GB over its window, "-" for a copy that
// stopped.
func (w wanRun) cpuPerGB(valueSize int) string {
	if w.stopped {
		return "-"
	}
	return fmt.Sprintf("%.2f", cpuPerGB(w.tp.cpuWindow, w.tp.windowRecords, valueSize))
}

// progress follows the target's record count while the bench waits for
// a backlog, to tell a copy that goes on, however slowly, from one that
// stopped.
type progress struct {
	n    int64     // the most records seen at the target
	grew time.Time // when n was first seen; zero before any poll
}

// stopped takes the count n seen at t and reports whether the copy
// stopped: records had arrived and their count has not grown for limit
// (timed from the first poll, where the wait began with records already
// there). A count that never left 0 never stops here: nothing started,
// which is wanStall's case (stalled).
func (p *progress) stopped(t time.Time, n int64, limit time.Duration) bool {
	if p.grew.IsZero() || n > p.n {
		p.n, p.grew = n, t
		return false
	}
	return p.n > 0 && t.Sub(p.grew) >= limit
}

// wanPhase runs contender c at every -wan-partitions and -wan-rtts; it
// returns the runs and the settings of the first.
func wanPhase(ctx context.Context, e *env, o *options, c contender) (runs []wanRun, settings string, err error) {
	for _, parts := range o.wanPartitions {
		rs, s, err := wanPair(ctx, e, o, c, parts)
		runs = append(runs, rs...)
		if settings == "" {
			settings = s
		}
		if err != nil {
			return runs, settings, fmt.Errorf("%d partitions: %w", parts, err)
		}
	}
	return runs, settings, nil
}

// wanPair runs contender c at every round trip on one pair of clusters
// (starting a pair and a JVM per run would double the phase's length),
// with topics of parts partitions: two topics and a fresh contender
// process per run, one run per round trip or -wan-repeats of them. (MM2
// restarted on a pair first runs the previous run's tasks from its config
// topic for a few seconds, then the new ones: before the copy window,
// which starts with the first record copied.)
func wanPair(ctx context.Context, e *env, o *options, c contender, parts int) (runs []wanRun, settings string, err error) {
	base, err := e.begin(ctx, c, fmt.Sprintf("wan-%dp", parts))
	if err != nil {
		return nil, "", err
	}
	defer func() { base.end(err != nil) }()
	if err := warmBrokers(ctx, base.p, parts, o.valueSize); err != nil {
		return nil, "", err
	}
	px, err := faultproxy.New(base.p.src.Addrs())
	if err != nil {
		return nil, "", err
	}
	defer px.Close()
	px.SetReceiveWindows(true)
	for _, rtt := range o.wanRTTs {
		// A copy done inside -wan-window takes seconds, so one run's
		// records/s moves with whatever else the machine did then
		// (kmirror's 1 partition at 0 ms: 132k to 274k records/s across
		// runs): such a cell runs -wan-repeats times, each a fresh topic
		// and process, and keeps the median. A copy the window bounded,
		// or that stalled or fell behind, is measured once: it took the
		// window, and repeating it would add minutes per cell.
		var reps []wanRun
		for i, n := 1, 1; i <= n; i++ {
			w, s, err := wanOne(ctx, base, o, px, parts, rtt, wanRunName(rtt, i))
			if settings == "" {
				settings = s
			}
			if err == nil {
				err = px.Err() // a response the proxy could not pass on
			}
			if err != nil {
				return runs, settings, fmt.Errorf("RTT %v%s: %w", rtt, runMark(i, o.wanRepeats), err)
			}
			log.Printf("  %s, %d partitions, RTT %v%s: %s records/s%s, %s CPU s/GB, %d connections via the proxy (at most %d B in flight, window %d B); p99 ms at %d/s: %s",
				c.name, parts, rtt, runMark(i, o.wanRepeats), w.rate(), boundMark(w.bounded)+stallMark(w.stalled)+stopMark(w), w.cpuPerGB(o.valueSize), w.conns, w.inFlight, w.wnd, o.rate, w.p99())
			reps = append(reps, w)
			if w.stopped {
				// The cell ends here and shows this run (keptRun):
				// the contender lost part of the copy, which a median
				// over the other runs would hide.
				break
			}
			if i == 1 && !w.bounded && !w.stalled && !w.behind {
				n = o.wanRepeats
			}
		}
		m, rps := keptRun(reps)
		w := reps[m]
		if len(reps) > 1 {
			w.repeats = rps
			kept := "the median"
			if w.stopped {
				kept = "it stopped copying"
			}
			log.Printf("  %s, %d partitions, RTT %v: records/s of each run %s; kept run %d, %s", c.name, parts, rtt, repeatsList(w), m+1, kept)
		}
		runs = append(runs, w)
		// The other runs' topics (a gigabyte a backlog, source and target)
		// are not needed again. A run behind measured no latency: its
		// latency topic holds nothing and may have no copy at the target
		// (nor has one that stopped; keptRun keeps such a run anyway).
		for i, x := range reps {
			if i == m {
				continue
			}
			backlog, steady := wanTopics(wanRunName(rtt, i+1))
			topics := []string{backlog}
			if !x.behind && !x.stopped {
				topics = append(topics, steady)
			}
			for _, t := range topics {
				if err := dropTopics(ctx, base.p, t); err != nil {
					return runs, settings, fmt.Errorf("RTT %v%s: %w", rtt, runMark(i+1, o.wanRepeats), err)
				}
			}
		}
	}
	return runs, settings, nil
}

// wanRunName names run i (from 1) of a round trip's cell: its directory
// and, through wanTopics, its topics, so that no repeat reuses another's
// on the pair.
func wanRunName(rtt time.Duration, i int) string {
	name := fmt.Sprintf("%dms", rtt.Milliseconds())
	if i > 1 {
		name += fmt.Sprintf("-r%d", i)
	}
	return name
}

// wanTopics are the backlog and latency topics of the run named name.
func wanTopics(name string) (backlog, steady string) {
	return "wan-" + name, "wanlat-" + name
}

// runMark is run i's mark in the log and in errors, when cells may run
// more than once.
func runMark(i, repeats int) string {
	if repeats <= 1 {
		return ""
	}
	return fmt.Sprintf(", run %d", i)
}

// medianRun returns the index of the run with the median records/s (of
// an even count, the lower of the two middle ones; of equal ones, the
// first) and every run's records/s, in run order.
func medianRun(runs []wanRun) (median int, rps []float64) {
	order := make([]int, len(runs))
	for i, w := range runs {
		rps = append(rps, w.tp.recordsPerSec())
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rps[a], rps[b]) })
	return order[(len(order)-1)/2], rps
}

// keptRun returns the index of the run a cell's row shows and the
// records/s its "records/s of each run" lists: the median run and every
// run's; or, when the last run stopped copying (wanPair runs no more
// after such a run), that run and the records/s of those before it, since
// what a stopped copy brought is no rate to take a median over.
func keptRun(runs []wanRun) (kept int, rps []float64) {
	last := len(runs) - 1
	if !runs[last].stopped {
		return medianRun(runs)
	}
	for _, w := range runs[:last] {
		rps = append(rps, w.tp.recordsPerSec())
	}
	return last, rps
}

// warmupRecords are the records warmBrokers writes to each cluster and
// reads back.
const warmupRecords = 200000

// warmBrokers runs a fresh pair's brokers once through the paths a copy
// takes (produce requests, fetches), so that the first round trip
// measured (0 ms, the ratios' base) does not pay for compiling them, as a
// fresh broker's JIT does for seconds.
func warmBrokers(ctx context.Context, p *pair, parts, valueSize int) error {
	t := time.Now()
	for _, c := range []*kafkatest.Cluster{p.src, p.dst} {
		if err := workload.CreateTopic(ctx, c.Addrs(), "warmup", parts); err != nil {
			return err
		}
		if err := workload.Preload(ctx, c.Addrs(), "warmup", warmupRecords, parts, valueSize); err != nil {
			return err
		}
		if _, err := workload.CommittedCounts(ctx, c.Addrs(), "warmup"); err != nil {
			return err
		}
	}
	log.Printf("  brokers warmed up in %.1fs", time.Since(t).Seconds())
	return nil
}

// wanOne is one run at round trip rtt, by a fresh contender process behind
// the proxy, in a directory and on topics named after name (wanRunName):
// the backlog's copy, then the latency once it caught up. Measuring both
// with one process saves a JVM start per run; the latency topic is
// mirrored from the start, idle during the copy, and MM2 gets a task per
// partition of both topics, so that the copy's tasks are its own.
func wanOne(ctx context.Context, base *contenderRun, o *options, px *faultproxy.Proxy, parts int, rtt time.Duration, name string) (w wanRun, settings string, err error) {
	w = wanRun{partitions: parts, rtt: rtt}
	r, err := base.rerun(name)
	if err != nil {
		return w, "", err
	}
	defer func() { r.finish(err != nil) }()
	backlog, steady := wanTopics(name)
	src := []string{r.p.src.Addr(kafkatest.PLAINTEXT)}
	for _, t := range []string{backlog, steady} {
		if err := workload.CreateTopic(ctx, src, t, parts); err != nil {
			return w, "", err
		}
	}
	t := time.Now()
	if err := workload.Preload(ctx, src, backlog, o.wanRecords, parts, o.valueSize); err != nil {
		return w, "", err
	}
	log.Printf("  preloaded %d records in %.1fs", o.wanRecords, time.Since(t).Seconds())
	settle()
	px.SetLatency(rtt)
	px.ResetMaxInFlight()
	dist := startDisturbance(r.p)
	// kmirror with its defaults, as the issue asks: compression source
	// (the batch path, forwarding the uncompressed batches as they are).
	if err := r.startContender(spec{topics: backlog + "|" + steady, partitions: 2 * parts, via: px.Addrs()[0], kmirrorDefaults: true}); err != nil {
		return w, r.settings, err
	}
	if err := r.wanCopy(ctx, o, px, backlog, dist, &w); err != nil {
		return w, r.settings, fmt.Errorf("copy: %w", err)
	}
	if w.stopped {
		// No latency run: the contender no longer copies all it is
		// given (its readiness on the latency topic could only time
		// out), and no check: the copy is incomplete.
		return w, r.settings, nil
	}
	if w.tp.recordsPerSec() < float64(o.rate) {
		w.behind = true
		r.stopContender()
		return w, r.settings, r.verify(ctx, backlog)
	}
	px.SetLatency(rtt)
	if w.lat, err = r.measureLatency(ctx, o, steady, parts, o.wanLatencyDuration); err != nil {
		return w, r.settings, err
	}
	// The contender stopped: the backlog's copy must not have changed.
	return w, r.settings, r.verify(ctx, backlog)
}

// rerun is a fresh run of r's contender on r's clusters, in a directory of
// its own.
func (r *contenderRun) rerun(name string) (*contenderRun, error) {
	dir := filepath.Join(r.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &contenderRun{e: r.e, p: r.p, c: r.c, dir: dir}, nil
}

// wanCopy measures the contender's copy of the backlog topic (-wan-records
// records) behind the proxy at w.rtt, over the window from the first
// record visible at the target to the last, or to -wan-window after the
// first: a slow contender at 150 ms would take minutes per run. A window
// longer than wanStopped also ends once the count stayed flat that long
// (nothing more to measure; whether the contender stopped or only cannot
// fetch through the latency, the wait without it tells). Then the proxy's
// latency is lifted, so that the rest copies at loopback speed, and the
// target must hold exactly the source's records; unless the contender
// stopped copying meanwhile (wanRest), which w then says.
func (r *contenderRun) wanCopy(ctx context.Context, o *options, px *faultproxy.Proxy, backlog string, dist disturbance, w *wanRun) error {
	want := int64(o.wanRecords)
	var t1 time.Time
	var st1 kafkatest.ProcStat
	var n1 int64
	var inWindow progress
	wctx, cancel := context.WithTimeout(ctx, wanStall+o.wanWindow)
	defer cancel()
	ends, err := r.waitTarget(wctx, []string{targetTopic(backlog)}, 20*time.Millisecond,
		func(m map[string]map[int32]int64) bool {
			n := sum(m)
			return n >= want || !t1.IsZero() && (time.Since(t1) >= o.wanWindow || inWindow.stopped(time.Now(), n, wanStopped))
		},
		func(n int64) { t1, st1, n1 = time.Now(), r.stat(), n })
	switch {
	case err != nil && t1.IsZero() && wctx.Err() != nil && ctx.Err() == nil:
		// Nothing arrived: a client whose fetch responses outgrow its
		// request timeout at this window never completes one. 0
		// records/s over the wait, then the rest at loopback speed.
		w.stalled = true
		w.tp = throughput{records: want, window: time.Since(r.proc.Started), total: time.Since(r.proc.Started)}
		w.bounded = true
	case err != nil:
		return err
	default:
		t2, st2, n2 := time.Now(), r.stat(), sum(ends)
		w.tp = throughput{
			records: want, windowRecords: n2 - n1,
			total: t2.Sub(r.proc.Started), window: t2.Sub(t1),
			cpuTotal: st2.CPU, cpuWindow: st2.CPU - st1.CPU, peakRSS: st2.PeakRSS,
		}
		w.tp.brokerCPU, w.tp.otherCPU, w.tp.steal, w.tp.load = dist.end(r.p, st2.CPU)
		w.bounded = n2 < want
	}
	if w.conns, err = r.proxied(px); err != nil {
		return err
	}
	w.inFlight, w.wnd = px.MaxInFlight()
	px.SetLatency(0)
	if w.bounded {
		n, stopped, err := r.wanRest(ctx, backlog, want)
		if err != nil {
			return err
		}
		if stopped {
			w.stopped, w.arrived = true, n
			log.Printf("  %s stopped copying: %d of %d records at the target, none more for %v with the latency lifted; the bench gives up on this copy (not measured, not checked)%s",
				r.c.name, n, want, wanStopped, logErrors(r.proc.LogPath, 10))
			return nil
		}
	}
	return r.verify(ctx, backlog)
}

// wanRest waits for the rest of a backlog of want records that the window
// bounded, the proxy's latency lifted: for at most 5 minutes and a second
// per 2,000 records, and no longer than wanStopped without a new record
// at the target once records arrived (stopped; arrived is their count).
// The window already ended the measurement; this wait is what a
// contender that stopped copying would otherwise hold for its whole
// timeout. Progress is timed from the lift, not from the window's last
// record: the contender gets wanStopped under the new conditions (a Java
// consumer whose fetches timed out under the latency retries them only
// after its request timeout).
func (r *contenderRun) wanRest(ctx context.Context, backlog string, want int64) (arrived int64, stopped bool, err error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Minute+time.Duration(want/2000)*time.Second)
	defer cancel()
	var p progress
	ends, err := r.waitTarget(dctx, []string{targetTopic(backlog)}, 100*time.Millisecond,
		func(m map[string]map[int32]int64) bool {
			n := sum(m)
			if n >= want {
				return true
			}
			stopped = p.stopped(time.Now(), n, wanStopped)
			return stopped
		}, nil)
	if err != nil {
		return 0, false, fmt.Errorf("the rest of the backlog, without latency: %w", err)
	}
	return sum(ends), stopped, nil
}

// logErrors is up to most lines of the log at path that say ERROR or
// OutOfMemoryError, the first ones (what failed first), indented for the
// bench's log: the contender's log goes with its pair's directory, which
// the bench removes, and a task that died says why only there.
func logErrors(path string, most int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if len(lines) == most {
			break
		}
		if strings.Contains(l, "ERROR") || strings.Contains(l, "OutOfMemoryError") {
			lines = append(lines, "    "+strings.TrimSpace(l))
		}
	}
	if len(lines) == 0 {
		return "; its log " + path + " says no ERROR"
	}
	return "; its log " + path + " says first:\n" + strings.Join(lines, "\n")
}

// proxied returns the contender's established connections through the
// proxy, and fails if it has any to the source cluster directly: the
// proxy rewrites the brokers' addresses in the responses that carry them,
// and a client that found the source another way would skip the round
// trips measured.
func (r *contenderRun) proxied(px *faultproxy.Proxy) (int, error) {
	byPort, err := connsByRemotePort(r.proc.Pid())
	if err != nil {
		return 0, err
	}
	count := func(addrs ...string) (n int) {
		for _, a := range addrs {
			if _, p, err := net.SplitHostPort(a); err == nil {
				port, _ := strconv.Atoi(p)
				n += byPort[port]
			}
		}
		return n
	}
	via := count(px.Addrs()...)
	if direct := count(r.p.src.Addr(kafkatest.PLAINTEXT), r.p.src.Addr(kafkatest.CONTROLLER)); direct > 0 {
		return via, fmt.Errorf("%s has %d connections to the source directly (and %d through the proxy)", r.c.name, direct, via)
	}
	if via == 0 {
		return 0, fmt.Errorf("%s has no connection through the proxy", r.c.name)
	}
	return via, nil
}

func boundMark(bounded bool) string {
	if bounded {
		return " (window bounded)"
	}
	return ""
}

func stallMark(stalled bool) string {
	if stalled {
		return " (stalled: nothing copied)"
	}
	return ""
}

// stopMark says where a copy that stopped stopped: the records at the
// target when the bench gave up, of the backlog's.
func stopMark(w wanRun) string {
	if w.stopped {
		return fmt.Sprintf(" (stopped copying at %d of %d records)", w.arrived, w.tp.records)
	}
	return ""
}

// parseRTTs parses -wan-rtts: durations separated by commas, where a bare
// number takes the unit of the list's last element ("0,40,80,150ms").
func parseRTTs(s string) ([]time.Duration, error) {
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	last := parts[len(parts)-1]
	unit := strings.TrimLeft(last, "0123456789.")
	var out []time.Duration
	for _, p := range parts {
		if p != "" && strings.TrimLeft(p, "0123456789.") == "" {
			p += unit
		}
		d, err := time.ParseDuration(p)
		if err != nil {
			return nil, fmt.Errorf("-wan-rtts %q: %w", s, err)
		}
		if d < 0 {
			return nil, fmt.Errorf("-wan-rtts %q: negative round trip %v", s, d)
		}
		if slices.Contains(out, d) {
			return nil, fmt.Errorf("-wan-rtts %q: %v twice", s, d)
		}
		out = append(out, d)
	}
	return out, nil
}

// parsePartitions parses -wan-partitions: partition counts separated by
// commas.
func parsePartitions(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-wan-partitions %q: %q is no partition count", s, p)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("-wan-partitions %q: %d twice", s, n)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("-wan-partitions: empty")
	}
	return out, nil
}
