// Command mm2 (make bench-mm2) measures kmirror side by side with Apache
// Kafka MirrorMaker 2 and with "the limit" (a plain franz-go
// consume-then-produce loop), on real Apache Kafka 4.3.1 clusters started
// by e2e/kafkatest: every contender runs as its own process (the limit as
// this binary's "limit-child", kmirror as the real binary built from
// ./cmd/kmirror, MM2 in dedicated mode from the Maven jars), on a fresh
// pair of single-node KRaft clusters per contender and phase, so CPU
// (/proc/<pid>/stat) and peak RSS (VmHWM) are the process's own.
//
// Phases (each flag scales one down for a smoke run):
//
//   - throughput: -records records of 1 KiB over -partitions partitions,
//     produced before the contender starts; records/s over the window from
//     the first record visible at the target to the last, CPU per GB, peak
//     RSS; then, for kmirror and kmirror-eos (unless -verify=false), the
//     built binary's `kmirror verify` over the same clusters, timed as a
//     command (verify.go): records compared per second against the copy's;
//   - latency: -rate records/s for -latency-duration (after a warm-up of
//     1s, not counted) once the contender copies; produce time (a header)
//     to arrival at a target consumer;
//   - startup: -startup-topics topics with one record each; process start
//     to the last topic's record visible at the target;
//   - failover: a source group commits mid-batch at various lags, the
//     contender (kmirror, MM2) syncs it to the target, the application
//     fails over: records re-delivered and skipped;
//   - compressed: -compressed-records JSON-like records produced with zstd
//     and with lz4 (compressed.go): kmirror with its defaults, the limit
//     and MM2 re-encoding with the codec; CPU per GB, bytes on disk;
//   - wan (not in the default list: about 80 minutes, 20 of them
//     kmirror's extras; make bench-wan): the contender reaches the source
//     through a latency proxy (e2e/kafkatest/faultproxy) adding each of
//     -wan-rtts round trips, on topics of each of -wan-partitions
//     partitions (wan.go): records/s of a backlog of -wan-records (over at
//     most -wan-window, then the rest without latency, checked; a copy
//     done inside the window runs -wan-repeats times, the median kept; a
//     contender whose count at the target then stays flat for a minute,
//     wanStopped, stopped copying: reported so, not measured),
//     CPU per GB, and p99 at -rate records/s for -wan-latency-duration;
//     contenders limit, kmirror, mm2-defaults (MM2 as it comes: tasks.max
//     1, the Java clients' defaults), mm2 and mm2-wan (MM2 with the consumer tuning operators apply to
//     such links); its report goes to
//     bench/results/wan.md when it runs alone. After kmirror's runs,
//     unless -wan-extras=false, its extras (wanextra.go), through the
//     proxy at -wan-extras-rtt (80ms) on topics of -wan-extras-partitions
//     (16): kmirror (defaults, compression source) with rate_limit
//     -wan-rate-limit (20MB) copying a backlog that keeps it at the limit,
//     the bytes copied over -wan-rate-window (30s, after -wan-rate-warmup
//     5s) against the limit, and kmirror_throttled_seconds_total; then,
//     under -wan-outage-rate records/s (10,000), the link down for
//     -wan-outage (5m) and the time from its return until kmirror caught
//     up, without a rate limit and with -wan-rate-limit.
//
// kmirror-eos and mm2-eos run the throughput, latency and compressed phases with
// exactly-once on (kmirror `exactly_once: true`, MM2
// `exactly.once.source.support = enabled`), timed by the target's last
// stable offsets and checked with read_committed (eos.go). kmirror-eos-2w is
// two such workers of one mirror, in the throughput phase only: on one
// 2-core machine it shows what coordinating two members costs, not how
// kmirror scales out.
//
// Every phase checks that the target holds exactly the source's records
// per partition. Usage:
//
//	go run ./bench/mm2 -records 100000 -latency-duration 10s -startup-topics 100   # smoke
//	go run ./bench/mm2                                                             # the full run
//	go run ./bench/mm2 -phases wan                                                 # the WAN phase
//	go run ./bench/mm2 -phases wan -contenders kmirror -wan-rtts 0 -wan-partitions 1 -wan-records 20000 \
//	    -wan-latency-duration 2s -wan-rate-window 10s -wan-outage 20s -out ''        # its smoke, with the extras
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/bench/internal/workload"
	"github.com/kmirror/kmirror/internal/machine"
)

type options struct {
	records, partitions, valueSize int
	rate                           int
	latencyDuration                time.Duration
	startupTopics                  int
	failoverRecords                int
	compressedRecords              int
	eosSlots                       int
	contenders, phases             []string
	out                            string
	mm2Heap, brokerHeap            string
	cpuprofile                     string
	keep                           bool
	verify                         bool
	// The WAN phase (wan.go).
	wanRTTs                       []time.Duration
	wanPartitions                 []int
	wanRecords                    int
	wanWindow, wanLatencyDuration time.Duration
	wanRepeats                    int
	// The WAN phase's extras, kmirror only (wanextra.go).
	wanExtras                    bool
	wanExtrasRTT                 time.Duration
	wanExtrasPartitions          int
	wanRateLimit                 string
	wanRateLimitBytes            int64
	wanRateWarmup, wanRateWindow time.Duration
	wanRateRecords               int
	wanOutage                    time.Duration
	wanOutageRate                int
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "limit-child" {
		// The limit as a process of its own (workload.LimitChild):
		// kmirror's copy settings, target topics named src.<topic>.
		os.Exit(workload.LimitChild(os.Args[2:], workload.LimitConfig{FetchMaxWait: fetchMaxWait, Linger: linger, BatchMaxBytes: batchMaxBytes}))
	}
	if len(os.Args) > 1 && os.Args[1] == "kmirror-child" {
		os.Exit(kmirrorChild(os.Args[2:]))
	}
	log.SetFlags(log.Ltime)
	log.SetPrefix("bench-mm2: ")
	os.Exit(run())
}

func run() int {
	var o options
	var contenders, phases, wanRTTs, wanPartitions string
	flag.IntVar(&o.records, "records", 2000000, "throughput: records produced before the contender starts")
	flag.IntVar(&o.partitions, "partitions", 16, "partitions of the throughput and latency topics (and MM2's tasks.max)")
	flag.IntVar(&o.valueSize, "value-size", 1024, "bytes of each record value (random)")
	flag.IntVar(&o.rate, "rate", 5000, "latency: records per second")
	flag.DurationVar(&o.latencyDuration, "latency-duration", 60*time.Second, "latency: length of the measured phase, after a 1s warm-up")
	flag.IntVar(&o.startupTopics, "startup-topics", 1000, "startup: topics with one record each")
	flag.IntVar(&o.failoverRecords, "failover-records", 5000, "failover: records per partition (8 partitions)")
	// 8,000,000: kmirror copies 2,000,000 of these in 1 to 5 s, most of it
	// spent while a fresh target broker's JIT compiles its hot paths; the
	// records/s of one contender then moved 3x between runs.
	flag.IntVar(&o.compressedRecords, "compressed-records", 8000000, "compressed: JSON-like records per codec (zstd, lz4)")
	flag.StringVar(&contenders, "contenders", defaultContenders, "contenders, comma-separated: limit, kmirror, mm2, kmirror-eos and mm2-eos (exactly once: throughput, latency and compressed phases only), kmirror-eos-2w (two exactly once workers of one mirror: throughput only; CPU and peak RSS summed over both), kmirror-eos-4s (exactly once with 4 slots instead of 16), kmirror-prof (kmirror in-process with a CPU profile), kmirror-eos-prof (the same with exactly-once), mm2-defaults (MM2 as it comes: tasks.max 1, the Java clients' defaults; wan phase only) and mm2-wan (MM2 tuned for a high-latency link: wan phase only); with -phases wan alone the default is "+wanContenders)
	flag.StringVar(&phases, "phases", "throughput,latency,startup,failover,compressed", "phases, comma-separated: those and wan (a latency proxy in front of the source; about 80 minutes with kmirror's extras, so not in the default list)")
	flag.StringVar(&o.out, "out", defaultOut, "also write the report here when every run passed; empty to skip; with -phases wan alone the default is "+wanOut)
	flag.IntVar(&o.eosSlots, "eos-slots", 0, "kmirror-eos (and its -2w and -prof): cluster.slots (0: kmirror's default, 16)")
	flag.StringVar(&o.mm2Heap, "mm2-heap", "1g", "MirrorMaker 2's -Xmx")
	flag.StringVar(&o.brokerHeap, "broker-heap", "1g", "each broker's -Xmx")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "with the contenders kmirror-prof and kmirror-eos-prof (kmirror in this process's child, wired as `kmirror run`): write its CPU profile here")
	flag.BoolVar(&o.keep, "keep", false, "keep the clusters' directories and logs")
	flag.StringVar(&wanRTTs, "wan-rtts", "0,40,80,150ms", "wan: round trips the proxy adds, comma-separated (a bare number takes the last one's unit)")
	flag.StringVar(&wanPartitions, "wan-partitions", "1,16", "wan: partitions of the topics, comma-separated")
	// 2,000,000 records (2.1 GB) and 15 s: a copy of 500,000 took
	// kmirror 2 to 5 s, and such a short one measures a burst, not a
	// rate (its 16 partitions at 0 ms: 268,739 records/s over 500,000,
	// 177,322 over 2,000,000 with the same binary), so the ratios to
	// 0 ms moved with it; over 2,000,000 a fresh connection's first
	// round trips are a small part of the copy too. The WAN table then
	// takes about an hour for the four contenders.
	flag.IntVar(&o.wanRecords, "wan-records", 2000000, "wan: records of the backlog copied per contender, partition count and round trip")
	flag.DurationVar(&o.wanWindow, "wan-window", 15*time.Second, "wan: the longest copy window measured; the rest of the backlog is then copied without latency, and checked (a contender that brings no new record for a minute then stopped copying: reported so, not measured)")
	// 3: kmirror's copies inside the window take 2 to 5 s, and one run's
	// records/s of its 1 partition at 0 ms (the ratios' base) was 132k,
	// 174k, 147k and 274k in four runs; the median of 3 sets one outlier
	// aside either way.
	flag.IntVar(&o.wanRepeats, "wan-repeats", 3, "wan: runs of a cell whose first run copied the whole backlog inside -wan-window (each a fresh topic and contender process); the row is the run with the median records/s; 1 runs each cell once")
	flag.DurationVar(&o.wanLatencyDuration, "wan-latency-duration", 10*time.Second, "wan: length of each latency measurement (-rate records/s), after a 1s warm-up")
	flag.BoolVar(&o.wanExtras, "wan-extras", true, "wan: after kmirror's runs, its rate limit on a saturated source and its catch-up after an outage (wanextra.go); -wan-extras=false to skip")
	flag.DurationVar(&o.wanExtrasRTT, "wan-extras-rtt", 80*time.Millisecond, "wan extras: the round trip the proxy adds")
	flag.IntVar(&o.wanExtrasPartitions, "wan-extras-partitions", 16, "wan extras: partitions of their topics")
	flag.StringVar(&o.wanRateLimit, "wan-rate-limit", "20MB", "wan extras: kmirror's rate_limit (bytes per second fetched from the source; MB = 10^6 B), in the rate limit run and the second outage run")
	flag.DurationVar(&o.wanRateWarmup, "wan-rate-warmup", 5*time.Second, "wan extras, rate limit: from the first record at the target to the window's start")
	flag.DurationVar(&o.wanRateWindow, "wan-rate-window", 30*time.Second, "wan extras, rate limit: the window the bytes copied are measured over")
	flag.IntVar(&o.wanRateRecords, "wan-rate-records", 0, "wan extras, rate limit: records of the backlog (0: the limit's worth of the warm-up, the window and 10 s more)")
	flag.DurationVar(&o.wanOutage, "wan-outage", 5*time.Minute, "wan extras, outage: how long the link is down")
	flag.IntVar(&o.wanOutageRate, "wan-outage-rate", 10000, "wan extras, outage: records per second produced throughout (-value-size bytes each)")
	flag.BoolVar(&o.verify, "verify", true, "throughput: after kmirror's and kmirror-eos's copy, time `kmirror verify` over it (records compared per second against the copy's); -verify=false to skip")
	flag.Parse()
	for _, n := range strings.Split(phases, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains([]string{"throughput", "latency", "startup", "failover", "compressed", "wan"}, n) {
			log.Printf("unknown phase %q", n)
			return 2
		}
		o.phases = append(o.phases, n)
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	contenders, o.out = phaseDefaults(o.phases, set, contenders, o.out)
	for _, n := range strings.Split(contenders, ",") {
		n = strings.TrimSpace(n)
		if !slices.ContainsFunc(allContenders, func(c contender) bool { return c.name == n }) {
			log.Printf("unknown contender %q", n)
			return 2
		}
		o.contenders = append(o.contenders, n)
	}
	var err error
	if o.wanRTTs, err = parseRTTs(wanRTTs); err == nil {
		o.wanPartitions, err = parsePartitions(wanPartitions)
	}
	if err != nil {
		log.Print(err)
		return 2
	}
	if o.wanRepeats < 1 {
		log.Printf("-wan-repeats must be at least 1")
		return 2
	}
	if o.wanRateLimitBytes, err = parseBytes(o.wanRateLimit); err != nil {
		log.Printf("-wan-rate-limit: %v", err)
		return 2
	}
	if o.failoverRecords <= int(slices.Max(failoverLags)) {
		log.Printf("-failover-records must be above %d", slices.Max(failoverLags))
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e, err := newEnv(ctx, &o)
	if err != nil {
		log.Print(err)
		return 1
	}
	defer e.close()
	log.Printf("scratch directory %s; load %s", e.dir, machine.Loadavg())

	rep := &report{o: &o, e: e, started: time.Now(), load0: machine.Loadavg(), settings: map[string]string{},
		tp: map[string]throughput{}, lat: map[string]latency{}, st: map[string]startup{}, fo: map[string]failover{}, cp: map[string]map[string]compressed{}, wan: map[string][]wanRun{}}
	var failed error
	for _, phase := range o.phases {
		for _, name := range o.contenders {
			c := allContenders[slices.IndexFunc(allContenders, func(c contender) bool { return c.name == name })]
			if !c.runs(phase) {
				continue
			}
			if ctx.Err() != nil {
				failed = ctx.Err()
				break
			}
			log.Printf("%s: %s (load %s)", phase, name, machine.Loadavg())
			var err error
			switch phase {
			case "throughput":
				var r throughput
				var settings string
				r, settings, err = throughputPhase(ctx, e, &o, c)
				if err == nil {
					rep.tp[name], rep.settings[name] = r, settings
					log.Printf("  %s: %.0f records/s, %.1f CPU s/GB, peak RSS %s", name, r.recordsPerSec(), cpuPerGB(r.cpuWindow, r.windowRecords, o.valueSize), mib(r.peakRSS))
					if v := r.verify; v != nil {
						log.Printf("  %s verify: %d records matched in %.2fs: %.0f records/s, %.2f× the copy's; %.1f CPU s, peak RSS %s", name, v.matched, v.took.Seconds(), v.recordsPerSec(), v.recordsPerSec()/r.recordsPerSec(), v.cpu.Seconds(), mib(v.peakRSS))
					}
				}
			case "latency":
				var r latency
				r, err = latencyPhase(ctx, e, &o, c)
				if err == nil {
					rep.lat[name] = r
					log.Printf("  %s: p50 %s p99 %s max %s", name, ms(r.p50), ms(r.p99), ms(r.max))
				}
			case "startup":
				var r startup
				r, err = startupPhase(ctx, e, &o, c)
				if err == nil {
					rep.st[name] = r
					log.Printf("  %s: %d topics visible after %.2fs", name, r.topics, r.took.Seconds())
				}
			case "compressed":
				var r map[string]compressed
				r, _, err = compressedPhase(ctx, e, &o, c)
				if err == nil {
					rep.cp[name] = r
				}
			case "wan":
				var runs []wanRun
				var settings string
				runs, settings, err = wanPhase(ctx, e, &o, c)
				rep.wan[name] = runs // the runs done so far, if one failed
				if _, ok := rep.settings[name]; !ok && settings != "" {
					rep.settings[name] = settings
				}
				if err == nil && name == "kmirror" && o.wanExtras {
					log.Printf("wan extras: kmirror (load %s)", machine.Loadavg())
					rep.wanExtras, err = wanExtrasPhase(ctx, e, &o, c)
				}
			case "failover":
				var r failover
				r, err = failoverPhase(ctx, e, &o, c)
				if err == nil {
					rep.fo[name] = r
					log.Printf("  %s: re-delivered %d, skipped %d; %s", name, r.redelivered, r.skipped, r.detail)
				}
			}
			if err != nil {
				failed = fmt.Errorf("%s, %s: %w", phase, name, err)
				log.Print(failed)
				break
			}
		}
		if failed != nil {
			break
		}
	}
	return workload.Publish(rep.render(failed), o.out, failed)
}

// The defaults of -contenders and -out, and those of a run of the WAN
// phase alone: its contenders differ, and its report has a file of its own
// so that it does not replace the full run's.
const (
	defaultContenders = "limit,kmirror,mm2,kmirror-eos,kmirror-eos-2w,mm2-eos"
	defaultOut        = "bench/results/latest.md"
	wanOut            = "bench/results/wan.md"
)

// phaseDefaults returns -contenders and -out: as given (set holds the
// flags given), or the defaults of the phases.
func phaseDefaults(phases []string, set map[string]bool, contenders, out string) (string, string) {
	if len(phases) == 0 || slices.ContainsFunc(phases, func(p string) bool { return p != "wan" }) {
		return contenders, out
	}
	if !set["contenders"] {
		contenders = wanContenders
	}
	if !set["out"] {
		out = wanOut
	}
	return contenders, out
}
