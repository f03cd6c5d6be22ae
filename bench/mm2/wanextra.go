package main

// The WAN phase's extras (issue 27, goals 3 and 4), kmirror only, through
// the latency proxy at -wan-extras-rtt on topics of -wan-extras-partitions:
//
//   - rate limit: kmirror with rate_limit -wan-rate-limit copies a backlog
//     that keeps it at the limit for longer than the window; the bytes it
//     copied over -wan-rate-window (after -wan-rate-warmup) against the
//     limit (goal: within 5%), and the seconds the limit held it back;
//   - outage: kmirror copies -wan-outage-rate records/s; the link goes
//     down for -wan-outage (faultproxy's SetDown) while the source is
//     still written; then the time from the link's return until kmirror
//     caught up, without a rate limit and with -wan-rate-limit.
//
// Each run is a fresh kmirror process and a fresh topic, and is checked:
// the target must hold exactly the source's records per partition.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/bench/internal/workload"
	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/e2e/kafkatest/faultproxy"
	"github.com/kmirror/kmirror/internal/machine"
)

// wanExtras are the extras' runs (nil when they did not run).
type wanExtras struct {
	partitions int
	rtt        time.Duration
	rate       *wanRateRun
	outages    []wanOutageRun // without a rate limit, then with it
	// settings are kmirror's in the rate limit run (the outage runs' are
	// the same but for the topic, and the first has no rate_limit).
	settings string
}

// wanRateRun is kmirror at its rate limit on a saturated source.
type wanRateRun struct {
	limit   int64 // bytes per second (rate_limit)
	records int64 // the backlog
	// recordBytes is the source's log size over its records: the bytes a
	// record takes on the wire (a fetch returns the batches as stored),
	// its share of the batch header included.
	recordBytes float64
	// window is the measured window, from the poll that opened it to the
	// one that closed it (first record at the target + warmup, then
	// -wan-rate-window); windowRecords those copied in it.
	warmup, window time.Duration
	windowRecords  int64
	// saturated: the backlog was not copied yet when the window closed.
	saturated bool
	// throttled and topicThrottled are kmirror_throttled_seconds_total
	// {limit="mirror"} and {limit="topic"} over the window; metricLimit
	// kmirror_rate_limit_bytes_per_second at its end.
	throttled, topicThrottled, metricLimit float64
	// linkBytes are the bytes of the responses the proxy sent kmirror
	// over the window (faultproxy's ResponseBytes): what the link carried,
	// fetched bytes kmirror did not copy (a batch the broker cut at the
	// fetch's size) and the responses' framing included.
	linkBytes int64
	cpu       time.Duration // kmirror's, over the window
	conns     int           // kmirror's connections via the proxy
	load      string        // before → after the window
}

func (w wanRateRun) bytesPerSec() float64 {
	return float64(w.windowRecords) * w.recordBytes / w.window.Seconds()
}

func (w wanRateRun) linkBytesPerSec() float64 { return float64(w.linkBytes) / w.window.Seconds() }

// ratio is the bytes per second copied over the limit.
func (w wanRateRun) ratio() float64 { return w.bytesPerSec() / float64(w.limit) }

// wanOutageRun is one outage and kmirror's catch-up after it.
type wanOutageRun struct {
	limit  int64 // rate_limit; 0: none
	rate   int   // records/s asked of the producer
	outage time.Duration
	// recordBytes as wanRateRun's, of this topic (smaller batches).
	recordBytes float64
	// steadyLag is the most records behind (source minus target end
	// offsets, polled every 100 ms) over the last 5 s before the outage:
	// what the round trip and fetching cost under the load.
	steadyLag int64
	// threshold is the lag at which kmirror counts as caught up.
	threshold int64
	// backlog is the records the source had that the target did not when
	// the link came back (source minus target end offsets).
	backlog int64
	// drained: the link's return to the target holding the source's
	// records as of the return; caughtUp: to the lag at most threshold.
	drained, caughtUp time.Duration
	// copied are the records copied from the link's return to caughtUp,
	// incoming those produced meanwhile (source end offsets).
	copied, incoming int64
	// throttled: kmirror_throttled_seconds_total{limit="mirror"} over the
	// catch-up.
	throttled float64
	// linkBytes: the responses' bytes the proxy sent kmirror over the
	// catch-up (as wanRateRun's).
	linkBytes int64
	// resets are the connections the proxy reset while the link was down.
	resets int
	// produced: records the producer wrote over the whole run.
	produced int64
	load     string // at the link's return → when caught up
	loadDown string // when the link went down
}

func (w wanOutageRun) backlogBytes() float64 { return float64(w.backlog) * w.recordBytes }

// incomingBytesPerSec is the source's write rate over the catch-up.
func (w wanOutageRun) incomingBytesPerSec() float64 {
	return float64(w.incoming) * w.recordBytes / w.caughtUp.Seconds()
}

// copyBytesPerSec is kmirror's copy rate over the catch-up.
func (w wanOutageRun) copyBytesPerSec() float64 {
	return float64(w.copied) * w.recordBytes / w.caughtUp.Seconds()
}

func (w wanOutageRun) linkBytesPerSec() float64 { return float64(w.linkBytes) / w.caughtUp.Seconds() }

// expected is the catch-up time at the limit: the backlog over what the
// limit leaves beyond the incoming rate (0 without a limit, or when the
// limit does not exceed the incoming rate).
func (w wanOutageRun) expected() time.Duration {
	spare := float64(w.limit) - w.incomingBytesPerSec()
	if w.limit == 0 || spare <= 0 {
		return 0
	}
	return time.Duration(w.backlogBytes() / spare * float64(time.Second))
}

// wanExtrasPhase runs the extras for contender c (kmirror) on a fresh pair
// of clusters, its brokers warmed up as wanPair's.
func wanExtrasPhase(ctx context.Context, e *env, o *options, c contender) (x *wanExtras, err error) {
	x = &wanExtras{partitions: o.wanExtrasPartitions, rtt: o.wanExtrasRTT}
	base, err := e.begin(ctx, c, "wan-extras")
	if err != nil {
		return x, err
	}
	defer func() { base.end(err != nil) }()
	if err := warmBrokers(ctx, base.p, x.partitions, o.valueSize); err != nil {
		return x, err
	}
	px, err := faultproxy.New(base.p.src.Addrs())
	if err != nil {
		return x, err
	}
	defer px.Close()
	px.SetReceiveWindows(true) // as in the WAN phase
	check := func(err error) error {
		if err == nil {
			err = px.Err()
		}
		return err
	}
	rate, err := wanRateLimit(ctx, base, o, px, x)
	x.rate = &rate
	if err = check(err); err != nil {
		return x, fmt.Errorf("rate limit: %w", err)
	}
	log.Printf("  rate limit %s at %v: %.2f MB/s copied over %.1fs, %.3f× the limit; throttled %.1fs (load %s)",
		o.wanRateLimit, x.rtt, rate.bytesPerSec()/1e6, rate.window.Seconds(), rate.ratio(), rate.throttled, rate.load)
	for _, limited := range []bool{false, true} {
		w, err := wanOutage(ctx, base, o, px, x, limited)
		if err = check(err); err != nil {
			return x, fmt.Errorf("outage (rate limit %v): %w", limited, err)
		}
		x.outages = append(x.outages, w)
		log.Printf("  outage %v%s: backlog %d records (%.0f MB), caught up %.1fs after the link's return (%.1f MB/s copied)%s (load %s)",
			w.outage, limitNote(w.limit), w.backlog, w.backlogBytes()/1e6, w.caughtUp.Seconds(), w.copyBytesPerSec()/1e6, expectedNote(w), w.load)
	}
	return x, nil
}

func limitNote(limit int64) string {
	if limit == 0 {
		return ", no rate limit"
	}
	return fmt.Sprintf(", rate limit %.1f MB/s", float64(limit)/1e6)
}

func expectedNote(w wanOutageRun) string {
	if d := w.expected(); d > 0 {
		return fmt.Sprintf(", %.1fs expected at the limit", d.Seconds())
	}
	return ""
}

// wanRateLimit: a backlog copied by kmirror at -wan-rate-limit.
func wanRateLimit(ctx context.Context, base *contenderRun, o *options, px *faultproxy.Proxy, x *wanExtras) (w wanRateRun, err error) {
	w = wanRateRun{limit: o.wanRateLimitBytes, warmup: o.wanRateWarmup}
	r, err := base.rerun("rate")
	if err != nil {
		return w, err
	}
	defer func() { r.finish(err != nil) }()
	const topic = "wanrate"
	src := []string{r.p.src.Addr(kafkatest.PLAINTEXT)}
	if err := workload.CreateTopic(ctx, src, topic, x.partitions); err != nil {
		return w, err
	}
	w.records = int64(o.wanRateRecords)
	if w.records == 0 {
		// Enough for the warm-up, the window and 10 s more at the limit
		// (a record's wire size is above RecordBytes: more than enough).
		w.records = int64(float64(o.wanRateLimitBytes) * (o.wanRateWarmup + o.wanRateWindow + 10*time.Second).Seconds() / float64(workload.RecordBytes(o.valueSize)))
	}
	t := time.Now()
	if err := workload.Preload(ctx, src, topic, int(w.records), x.partitions, o.valueSize); err != nil {
		return w, err
	}
	log.Printf("  preloaded %d records in %.1fs", w.records, time.Since(t).Seconds())
	size, err := srcLogBytes(r.p, topic)
	if err != nil {
		return w, err
	}
	w.recordBytes = float64(size) / float64(w.records)
	settle()
	px.SetLatency(x.rtt)
	err = r.startContender(spec{topics: topic, partitions: x.partitions, via: px.Addrs()[0], rateLimit: o.wanRateLimit, kmirrorDefaults: true})
	x.settings = r.settings
	if err != nil {
		return w, err
	}
	metrics, err := kmirrorMetricsURL(ctx, r)
	if err != nil {
		return w, err
	}
	var t0, t1, t2 time.Time
	var n1, n2, link1, link2 int64
	var m1, m2 map[string]float64
	var st1, st2 kafkatest.ProcStat
	var load1 string
	var scrapeErr error
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute+o.wanRateWarmup+o.wanRateWindow)
	defer cancel()
	_, err = r.waitTarget(wctx, []string{targetTopic(topic)}, 20*time.Millisecond, func(m map[string]map[int32]int64) bool {
		now, n := time.Now(), sum(m)
		switch {
		case t0.IsZero():
			return false
		case t1.IsZero():
			if now.Sub(t0) >= o.wanRateWarmup {
				t1, n1, st1, load1, link1 = now, n, r.stat(), machine.Loadavg(), px.ResponseBytes()
				m1, scrapeErr = scrapeMetrics(ctx, metrics)
				return scrapeErr != nil
			}
			return n >= w.records
		case now.Sub(t1) >= o.wanRateWindow || n >= w.records:
			t2, n2, st2, link2 = now, n, r.stat(), px.ResponseBytes()
			m2, scrapeErr = scrapeMetrics(ctx, metrics)
			return true
		}
		return false
	}, func(int64) { t0 = time.Now() })
	if err == nil {
		err = scrapeErr
	}
	if err != nil {
		return w, err
	}
	if t1.IsZero() {
		return w, fmt.Errorf("the backlog of %d records was copied within the warm-up (%v): raise -wan-rate-records", w.records, o.wanRateWarmup)
	}
	w.window, w.windowRecords, w.saturated, w.linkBytes = t2.Sub(t1), n2-n1, n2 < w.records, link2-link1
	w.cpu, w.load = st2.CPU-st1.CPU, load1+" → "+machine.Loadavg()
	w.throttled = m2[`kmirror_throttled_seconds_total{limit="mirror"}`] - m1[`kmirror_throttled_seconds_total{limit="mirror"}`]
	w.topicThrottled = m2[`kmirror_throttled_seconds_total{limit="topic"}`] - m1[`kmirror_throttled_seconds_total{limit="topic"}`]
	w.metricLimit = m2["kmirror_rate_limit_bytes_per_second"]
	if w.conns, err = r.proxied(px); err != nil {
		return w, err
	}
	// The rest of the backlog, still at the limit.
	dctx, cancel2 := context.WithTimeout(ctx, 5*time.Minute+time.Duration(float64(w.records-n2)*w.recordBytes/float64(w.limit)*float64(time.Second)))
	defer cancel2()
	if _, err := r.waitTarget(dctx, []string{targetTopic(topic)}, 100*time.Millisecond,
		func(m map[string]map[int32]int64) bool { return sum(m) >= w.records }, nil); err != nil {
		return w, fmt.Errorf("the rest of the backlog: %w", err)
	}
	r.stopContender()
	if err := r.verify(ctx, topic); err != nil {
		return w, err
	}
	return w, dropTopics(ctx, r.p, topic)
}

// wanOutage: kmirror copies a steady load; the link goes down for
// -wan-outage and comes back; the catch-up is timed.
func wanOutage(ctx context.Context, base *contenderRun, o *options, px *faultproxy.Proxy, x *wanExtras, limited bool) (w wanOutageRun, err error) {
	w = wanOutageRun{rate: o.wanOutageRate, outage: o.wanOutage}
	name, s := "outage", spec{partitions: x.partitions, via: px.Addrs()[0], kmirrorDefaults: true}
	if limited {
		name, s.rateLimit, w.limit = "outage-limited", o.wanRateLimit, o.wanRateLimitBytes
	}
	topic := "wan" + strings.ReplaceAll(name, "-", "")
	s.topics = topic
	r, err := base.rerun(name)
	if err != nil {
		return w, err
	}
	defer func() { r.finish(err != nil) }()
	srcAddr := r.p.src.Addr(kafkatest.PLAINTEXT)
	if err := workload.CreateTopic(ctx, []string{srcAddr}, topic, x.partitions); err != nil {
		return w, err
	}
	px.SetLatency(x.rtt)
	px.SetDown(false)
	if err := r.startContender(s); err != nil {
		return w, err
	}
	metrics, err := kmirrorMetricsURL(ctx, r)
	if err != nil {
		return w, err
	}
	prod, err := workload.StartSteady([]string{srcAddr}, topic, x.partitions, o.valueSize, o.wanOutageRate)
	if err != nil {
		return w, err
	}
	defer func() {
		n, perr := prod.Stop() // a no-op once stopped below
		if err == nil && perr != nil {
			err = fmt.Errorf("the producer: %w", perr)
		}
		w.produced = n
	}()
	lp, err := newLagPoller(r, topic)
	if err != nil {
		return w, err
	}
	defer lp.close()

	// Steady: copying, then the most it lags over the last 5 s of 10.
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := r.waitTarget(rctx, []string{targetTopic(topic)}, 100*time.Millisecond,
		func(m map[string]map[int32]int64) bool { return sum(m) > 0 }, nil); err != nil {
		return w, fmt.Errorf("kmirror copying: %w", err)
	}
	const steadyFor, steadyLast = 10 * time.Second, 5 * time.Second
	for t := time.Now(); time.Since(t) < steadyFor; {
		p, err := lp.poll(ctx)
		if err != nil {
			return w, err
		}
		if time.Since(t) >= steadyFor-steadyLast {
			w.steadyLag = max(w.steadyLag, p.lag())
		}
		if err := prod.Err(); err != nil {
			return w, fmt.Errorf("the producer: %w", err)
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	// Caught up: back to within a second of records, or to twice the
	// steady lag on a machine where that was more.
	w.threshold = max(int64(o.wanOutageRate), 2*w.steadyLag)
	if w.steadyLag > int64(o.wanOutageRate) {
		log.Printf("  kmirror lagged %d records before the outage, more than a second's (%d)", w.steadyLag, o.wanOutageRate)
	}

	// The link goes down; the producer goes on.
	w.loadDown = machine.Loadavg()
	resets0 := px.Resets()
	px.SetDown(true)
	down := time.Now()
	for time.Since(down) < o.wanOutage {
		if err := r.alive(); err != nil {
			px.SetDown(false)
			return w, err
		}
		if err := prod.Err(); err != nil {
			px.SetDown(false)
			return w, fmt.Errorf("the producer: %w", err)
		}
		if !sleepCtx(ctx, min(time.Second, time.Until(down.Add(o.wanOutage)))) {
			px.SetDown(false)
			return w, ctx.Err()
		}
	}
	back, err := lp.poll(ctx)
	if err != nil {
		px.SetDown(false)
		return w, err
	}
	size, err := srcLogBytes(r.p, topic)
	if err != nil {
		px.SetDown(false)
		return w, err
	}
	w.recordBytes = float64(size) / float64(sumP(back.src)) // an estimate: measured again at the end
	w.backlog = back.lag()
	m1, err := scrapeMetrics(ctx, metrics)
	if err != nil {
		px.SetDown(false)
		return w, err
	}
	load1, link1 := machine.Loadavg(), px.ResponseBytes()
	px.SetDown(false)
	tBack := time.Now()
	w.resets = px.Resets() - resets0
	log.Printf("  the link is back after %v: %d records behind (%.0f MB); %d connections were reset", o.wanOutage, w.backlog, w.backlogBytes()/1e6, w.resets)

	// Catch-up: polled every 100 ms.
	timeout := 5*time.Minute + 2*o.wanOutage
	if limited {
		spare := float64(w.limit) - float64(o.wanOutageRate)*w.recordBytes
		if spare <= 0 {
			return w, fmt.Errorf("-wan-rate-limit %s is no more than the incoming %.1f MB/s: kmirror would never catch up", o.wanRateLimit, float64(o.wanOutageRate)*w.recordBytes/1e6)
		}
		timeout = 5*time.Minute + 3*time.Duration(w.backlogBytes()/spare*float64(time.Second))
	}
	cctx, cancel3 := context.WithTimeout(ctx, timeout)
	defer cancel3()
	var last lagPoll
	for {
		if err := r.alive(); err != nil {
			return w, err
		}
		if err := prod.Err(); err != nil {
			return w, fmt.Errorf("the producer: %w", err)
		}
		p, err := lp.poll(cctx)
		if err != nil {
			return w, fmt.Errorf("catching up (%d records behind at the last poll): %w", last.lag(), err)
		}
		last = p
		if w.drained == 0 && covers(p.dst, back.src) {
			w.drained = p.at.Sub(tBack)
		}
		if w.drained > 0 && p.lag() <= w.threshold {
			w.caughtUp, w.linkBytes = p.at.Sub(tBack), px.ResponseBytes()-link1
			w.copied = sumP(p.dst) - sumP(back.dst)
			w.incoming = sumP(p.src) - sumP(back.src)
			break
		}
		if !sleepCtx(cctx, 100*time.Millisecond) {
			return w, fmt.Errorf("catching up: %d records behind after %v: %w", p.lag(), time.Since(tBack).Round(time.Second), cctx.Err())
		}
	}
	m2, err := scrapeMetrics(ctx, metrics)
	if err != nil {
		return w, err
	}
	w.throttled = m2[`kmirror_throttled_seconds_total{limit="mirror"}`] - m1[`kmirror_throttled_seconds_total{limit="mirror"}`]
	w.load = load1 + " → " + machine.Loadavg()
	if _, err := r.proxied(px); err != nil {
		return w, err
	}

	// The producer stops; the rest is copied and checked.
	if w.produced, err = prod.Stop(); err != nil {
		return w, fmt.Errorf("the producer: %w", err)
	}
	final, err := lp.poll(ctx)
	if err != nil {
		return w, err
	}
	dctx, cancel4 := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel4()
	if _, err := r.waitTarget(dctx, []string{targetTopic(topic)}, 100*time.Millisecond,
		func(m map[string]map[int32]int64) bool { return covers(m[targetTopic(topic)], final.src) }, nil); err != nil {
		return w, fmt.Errorf("the last records: %w", err)
	}
	// Every record written: the bytes per record over all of them.
	if size, err = srcLogBytes(r.p, topic); err != nil {
		return w, err
	}
	w.recordBytes = float64(size) / float64(sumP(final.src))
	r.stopContender()
	if err := r.verify(ctx, topic); err != nil {
		return w, err
	}
	return w, dropTopics(ctx, r.p, topic)
}

// lagPoller reads a topic's end offsets on the source and its copy's on
// the target (the bench's clients reach both directly).
type lagPoller struct {
	topic      string
	sadm, dadm *kadm.Client
}

type lagPoll struct {
	at       time.Time // after both were read
	src, dst map[int32]int64
}

// lag is the records the source has that the target has not (read
// source first: never below the true lag at the target's reading).
func (p lagPoll) lag() int64 {
	var n int64
	for part, s := range p.src {
		n += max(0, s-p.dst[part])
	}
	return n
}

func newLagPoller(r *contenderRun, topic string) (*lagPoller, error) {
	_, sadm, err := client(r.p.src.Addr(kafkatest.PLAINTEXT))
	if err != nil {
		return nil, err
	}
	_, dadm, err := client(r.p.dst.Addr(kafkatest.PLAINTEXT))
	if err != nil {
		sadm.Close()
		return nil, err
	}
	return &lagPoller{topic: topic, sadm: sadm, dadm: dadm}, nil
}

func (lp *lagPoller) close() { lp.sadm.Close(); lp.dadm.Close() }

func (lp *lagPoller) poll(ctx context.Context) (lagPoll, error) {
	src, err := workload.EndOffsets(ctx, lp.sadm, lp.topic)
	if err != nil {
		return lagPoll{}, err
	}
	dst, err := workload.EndOffsets(ctx, lp.dadm, targetTopic(lp.topic))
	if err != nil {
		return lagPoll{}, err
	}
	return lagPoll{at: time.Now(), src: src[lp.topic], dst: dst[targetTopic(lp.topic)]}, nil
}

// covers reports whether have reached want in every partition of want.
func covers(have, want map[int32]int64) bool {
	for p, n := range want {
		if have[p] < n {
			return false
		}
	}
	return true
}

func sumP(m map[int32]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// sleepCtx sleeps d, false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// srcLogBytes is the size of topic's log segments on the source
// (compressed.go's logBytes: the .log files, the bytes a fetch returns).
func srcLogBytes(p *pair, topic string) (int64, error) {
	n, err := logBytes(filepath.Join(p.dir, "source", "data"), topic)
	if err == nil && n == 0 {
		err = fmt.Errorf("the source's log of %s is empty", topic)
	}
	return n, err
}

// dropTopics deletes a checked run's topics on both clusters: their
// gigabytes are not needed for the next run.
func dropTopics(ctx context.Context, p *pair, topic string) error {
	for _, d := range []struct {
		c *kafkatest.Cluster
		t string
	}{{p.src, topic}, {p.dst, targetTopic(topic)}} {
		_, adm, err := client(d.c.Addr(kafkatest.PLAINTEXT))
		if err != nil {
			return err
		}
		resp, err := adm.DeleteTopics(ctx, d.t)
		adm.Close()
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return fmt.Errorf("delete topic %s: %w", d.t, err)
		}
	}
	return nil
}

// httpAddrRe finds kmirror's status listener in its log (its config asks
// for a free port: 127.0.0.1:0).
var httpAddrRe = regexp.MustCompile(`msg="http server listening".*?\baddr="?([0-9.]+:[0-9]+)`)

// kmirrorMetricsURL waits for kmirror's "http server listening" log line
// and returns its /metrics URL.
func kmirrorMetricsURL(ctx context.Context, r *contenderRun) (string, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := os.ReadFile(r.proc.LogPath)
		if err != nil {
			return "", err
		}
		if m := httpAddrRe.FindSubmatch(b); m != nil {
			return "http://" + string(m[1]) + "/metrics", nil
		}
		if err := r.alive(); err != nil {
			return "", err
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("kmirror did not log its status address (msg=\"http server listening\") within a minute: %s", r.proc.LogPath)
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return "", ctx.Err()
		}
	}
}

// scrapeMetrics reads the kmirror_throttled_seconds_total and
// kmirror_rate_limit_bytes_per_second series at url, keyed by name and
// limit label (`kmirror_throttled_seconds_total{limit="mirror"}`), summed
// over mirrors.
func scrapeMetrics(ctx context.Context, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kmirror metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("kmirror metrics: %s: %s", resp.Status, b)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics picks the throttle series out of Prometheus text.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	found := false
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || (name != "kmirror_throttled_seconds_total" && name != "kmirror_rate_limit_bytes_per_second") {
			continue
		}
		labels, val, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(val)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("kmirror metrics: %q: %w", line, err)
		}
		key := name
		for _, l := range strings.Split(labels, ",") {
			if strings.HasPrefix(l, "limit=") {
				key += "{" + l + "}"
			}
		}
		out[key] += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, errors.New("kmirror metrics: no kmirror_throttled_seconds_total series (no mirror running?)")
	}
	return out, nil
}

// parseBytes parses -wan-rate-limit as kmirror's config does: a number of
// bytes, or one with a unit (KB, MB, GB powers of 1000; KiB, MiB, GiB of
// 1024; B).
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult, num := int64(1), s
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is no positive number of bytes (such as 20MB or 16MiB)", s)
	}
	return n * mult, nil
}
