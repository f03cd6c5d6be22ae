// Command bench measures kmirror against "the limit": a plain franz-go
// consume-then-produce loop copying the same records between the same kind
// of clusters on the same machine. The limit is what the client library and
// the clusters allow; kmirror's figure over it is what its bookkeeping
// (acked-offset tracking, progress, metrics, control plane) costs.
//
// Each run of each contender gets two fresh kfake clusters, each its own
// process on loopback, and two phases:
//
//   - throughput: -records records are produced to the source first (not
//     timed), then the contender is started and timed until the target has
//     acknowledged them all; the target must then hold exactly the source's
//     records per partition;
//   - latency: with a fresh contender copying a fresh topic, -rate records
//     per second are produced for -latency-duration (after a warm-up of one
//     second that is not counted), and a consumer on the target measures
//     each record's time from production to arrival.
//
// Runs alternate between contenders (in alternating order) so drifting
// machine load hits both. With -cpuprofile, the first runs are profiled and
// marked so in the table: profiling slows them a little. -memprofile takes a
// heap profile when the first throughput phase completes, before the
// contender stops, to show what it holds while copying.
// The markdown table goes to stdout and to -out. Usage:
//
//	go run ./bench -records 500000 -runs 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/bench/internal/kfakeproc"
	"github.com/kmirror/kmirror/bench/internal/workload"
	"github.com/kmirror/kmirror/internal/machine"
)

type options struct {
	records, partitions, valueSize int
	rate                           int
	latencyDuration                time.Duration
	runs, brokers                  int
	contenders                     []string
	cpuprofile, memprofile, out    string
}

// warmup is produced at the start of the latency phase and not counted:
// the first records also measure connection setup and first fetches.
const warmup = time.Second

const (
	throughputTopic = "bench"
	latencyTopic    = "latency"
)

func main() {
	log.SetFlags(log.Ltime)
	log.SetPrefix("bench: ")
	os.Exit(run())
}

func run() int {
	var o options
	var names string
	flag.IntVar(&o.records, "records", 500000, "records copied in the throughput phase")
	flag.IntVar(&o.partitions, "partitions", 8, "partitions of the source topics")
	flag.IntVar(&o.valueSize, "value-size", 1024, "bytes of each record value (random)")
	flag.IntVar(&o.rate, "rate", 5000, "records per second produced in the latency phase")
	flag.DurationVar(&o.latencyDuration, "latency-duration", 10*time.Second, "length of the latency phase, after its 1s warm-up; 0 skips it")
	flag.IntVar(&o.runs, "runs", 1, "runs per contender; the table shows each and the median")
	flag.IntVar(&o.brokers, "brokers", 3, "brokers per kfake cluster")
	flag.StringVar(&names, "contenders", "limit,kmirror", "contenders to run, comma-separated: limit, kmirror, kmirror-eos (cluster mode: transactions, exactly once), kmirror-eos-2w (two such workers sharing the mirror)")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of kmirror's first throughput phase to this file (and the limit's to FILE.limit)")
	flag.StringVar(&o.memprofile, "memprofile", "", "write a heap profile taken when kmirror's first throughput phase completes to this file (and the limit's to FILE.limit)")
	flag.StringVar(&o.out, "out", "bench/results/kfake-latest.md", "also write the report here when every run passed; empty to skip")
	flag.Parse()
	for _, n := range strings.Split(names, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if contenders[n] == nil {
			log.Printf("unknown contender %q (want limit, kmirror, kmirror-eos or kmirror-eos-2w)", n)
			return 2
		}
		if !slices.Contains(o.contenders, n) {
			o.contenders = append(o.contenders, n)
		}
	}
	if len(o.contenders) == 0 || o.records < 1 || o.partitions < 1 || o.valueSize < 0 || o.rate < 1 || o.runs < 1 || o.brokers < 1 {
		log.Print("bad flags: need at least one contender, and positive -records, -partitions, -rate, -runs, -brokers")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := os.MkdirTemp("", "kmirror-bench-")
	if err != nil {
		log.Print(err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin, err := kfakeproc.Build(dir)
	if err != nil {
		log.Print(err)
		return 1
	}

	var results []result
	var failed error
runs:
	for i := 1; i <= o.runs; i++ {
		// Alternate the order too, so neither contender always runs
		// right after the other's garbage and page cache.
		order := slices.Clone(o.contenders)
		if i%2 == 0 {
			slices.Reverse(order)
		}
		for _, name := range order {
			var prof profiles
			if i == 1 {
				prof = profiles{cpu: profilePath(o.cpuprofile, name), mem: profilePath(o.memprofile, name)}
			}
			log.Printf("run %d/%d: %s", i, o.runs, name)
			r, err := runOnce(ctx, bin, &o, name, i, prof)
			if err != nil {
				failed = fmt.Errorf("run %d of %s: %w", i, name, err)
				log.Print(failed)
				break runs
			}
			log.Printf("run %d/%d: %s: %.0f records/s", i, o.runs, name, r.recordsPerSec())
			results = append(results, r)
		}
	}

	return workload.Publish(renderReport(&o, results, failed), o.out, failed)
}

// result is one run of one contender (or, with run 0, the median of its
// runs).
type result struct {
	contender string
	run       int
	records   int
	seconds   float64
	// cpu is this process's CPU time over the throughput phase: the
	// contender's cost, since the harness only polls a counter meanwhile.
	cpu float64
	// kfakeCPU is both cluster processes' CPU time over the same phase.
	kfakeCPU float64
	// otherCPU is the rest of the machine's busy time and steal is the
	// time the hypervisor gave to other machines, over the same phase:
	// how disturbed the run was.
	otherCPU, steal float64
	// requests and batches the target producer sent for the phase.
	requests, batches float64
	p50, p99, max     time.Duration
	bytesPerRec       int
	profiled          bool
}

func (r result) recordsPerSec() float64 { return float64(r.records) / r.seconds }
func (r result) mbPerSec() float64 {
	return float64(r.records) * float64(r.bytesPerRec) / r.seconds / 1e6
}

// profiles are the files a run writes its profiles to; empty for none.
type profiles struct{ cpu, mem string }

// profilePath is base for kmirror (the one usually profiled) and
// base.<contender> for the others.
func profilePath(base, contender string) string {
	if base == "" || contender == "kmirror" {
		return base
	}
	return base + "." + contender
}

func runOnce(ctx context.Context, bin string, o *options, name string, run int, prof profiles) (res result, err error) {
	start := contenders[name]
	res = result{contender: name, run: run, records: o.records, bytesPerRec: recordBytes(o.valueSize), profiled: prof.cpu != ""}

	cs, err := kfakeproc.StartPair(bin, o.brokers)
	if err != nil {
		return res, err
	}
	defer cs.Stop()

	// Setup: the whole source topic is written before the contender starts.
	setupCtx, cancel := context.WithTimeout(ctx, 2*time.Minute+time.Duration(o.records/1000)*time.Second)
	defer cancel()
	if err := createTopic(setupCtx, cs.Src.Addrs, throughputTopic, o.partitions); err != nil {
		return res, err
	}
	t := time.Now()
	if err := preload(setupCtx, cs.Src.Addrs, throughputTopic, o.records, o.partitions, o.valueSize); err != nil {
		return res, err
	}
	log.Printf("  preloaded %d records in %.1fs", o.records, time.Since(t).Seconds())

	// Throughput. Collect the preload's garbage first so the contender
	// does not pay for it.
	runtime.GC()
	if prof.cpu != "" {
		f, err := os.Create(prof.cpu)
		if err != nil {
			return res, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, err
		}
		defer pprof.StopCPUProfile() // in case of an early return
	}
	busy0, steal0 := machine.CPU()
	cpu0, kfake0, t0 := machine.SelfCPU(), cs.CPU(), time.Now()
	c, err := start(setupCtx, cs, throughputTopic, o.partitions)
	if err != nil {
		return res, err
	}
	err = waitForTarget(setupCtx, c, int64(o.records))
	res.seconds = time.Since(t0).Seconds()
	res.cpu = (machine.SelfCPU() - cpu0).Seconds()
	res.kfakeCPU = (cs.CPU() - kfake0).Seconds()
	st := c.stats()
	res.requests, res.batches = float64(st.requests.Load()), float64(st.batches.Load())
	busy1, steal1 := machine.CPU()
	res.otherCPU = max(0, (busy1-busy0).Seconds()-res.cpu-res.kfakeCPU)
	res.steal = (steal1 - steal0).Seconds()
	if prof.cpu != "" {
		pprof.StopCPUProfile()
		log.Printf("  wrote CPU profile %s", prof.cpu)
	}
	if prof.mem != "" && err == nil {
		if err := writeHeapProfile(prof.mem); err != nil {
			c.stop()
			return res, err
		}
		log.Printf("  wrote heap profile %s", prof.mem)
	}
	c.stop()
	if err != nil {
		return res, err
	}
	// After stop, so duplicates written while stopping are caught too.
	if err := verifyCopy(setupCtx, cs, throughputTopic, targetTopic(throughputTopic), int64(o.records)); err != nil {
		return res, fmt.Errorf("throughput phase: %w", err)
	}

	if o.latencyDuration <= 0 {
		return res, nil
	}
	res.p50, res.p99, res.max, err = latencyPhase(ctx, cs, o, start)
	return res, err
}

// latencyPhase copies a fresh topic with a fresh contender while records
// are produced at a steady rate, and returns the distribution of their
// production-to-arrival times.
func latencyPhase(ctx context.Context, cs *kfakeproc.Pair, o *options, start startFunc) (p50, p99, maxLat time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, warmup+o.latencyDuration+time.Minute)
	defer cancel()
	if err := createTopic(ctx, cs.Src.Addrs, latencyTopic, o.partitions); err != nil {
		return 0, 0, 0, err
	}
	c, err := start(ctx, cs, latencyTopic, o.partitions)
	if err != nil {
		return 0, 0, 0, err
	}
	defer c.stop()
	if err := c.ready(ctx); err != nil {
		return 0, 0, 0, err
	}
	skip := int(warmup.Seconds() * float64(o.rate))
	total := skip + int(o.latencyDuration.Seconds()*float64(o.rate))
	lr, err := startLatencyReader(ctx, cs.Dst.Addrs, targetTopic(latencyTopic), o.partitions, total, skip)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := produceAtRate(ctx, cs.Src.Addrs, latencyTopic, o.partitions, o.valueSize, o.rate, total); err != nil {
		cancel()
		lr.Wait()
		return 0, 0, 0, fmt.Errorf("latency producer: %w", err)
	}
	lat, got := lr.Wait()
	if got != total {
		return 0, 0, 0, fmt.Errorf("latency phase: %d of %d records arrived on the target", got, total)
	}
	if err := verifyCopy(ctx, cs, latencyTopic, targetTopic(latencyTopic), int64(total)); err != nil {
		return 0, 0, 0, fmt.Errorf("latency phase: %w", err)
	}
	if len(lat) == 0 {
		return 0, 0, 0, errors.New("latency phase: no records measured")
	}
	return quantile(lat, 0.50), quantile(lat, 0.99), lat[len(lat)-1], nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	runtime.GC() // so in-use figures are current
	return pprof.WriteHeapProfile(f)
}

// median of each column over a contender's runs: columns are medians
// independently, so the row need not be one of the runs.
func median(rs []result) result {
	m := rs[0]
	m.run, m.profiled = 0, false
	med := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	m.seconds = med(func(r result) float64 { return r.seconds })
	m.cpu = med(func(r result) float64 { return r.cpu })
	m.kfakeCPU = med(func(r result) float64 { return r.kfakeCPU })
	m.otherCPU = med(func(r result) float64 { return r.otherCPU })
	m.steal = med(func(r result) float64 { return r.steal })
	m.requests = med(func(r result) float64 { return r.requests })
	m.batches = med(func(r result) float64 { return r.batches })
	m.p50 = time.Duration(med(func(r result) float64 { return float64(r.p50) }))
	m.p99 = time.Duration(med(func(r result) float64 { return float64(r.p99) }))
	m.max = time.Duration(med(func(r result) float64 { return float64(r.max) }))
	return m
}

func renderReport(o *options, results []result, failed error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# kmirror benchmark\n\n")
	fmt.Fprintf(&b, "- date: %s\n", time.Now().Format(time.RFC3339))
	fmt.Fprintf(&b, "- machine: runtime.NumCPU() = %d, GOMAXPROCS = %d, %s %s/%s\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "- command: `go run ./bench %s`\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(&b, "- throughput: %d records of %d B (16 B key, %d B value, one 11 B header) over %d partitions, produced before the contender starts; two kfake clusters of %d brokers, each its own process, fresh per run\n",
		o.records, recordBytes(o.valueSize), o.valueSize, o.partitions, o.brokers)
	if o.latencyDuration > 0 {
		fmt.Fprintf(&b, "- latency: %d records/s for %s (after a %s warm-up not counted) to a fresh topic while a fresh contender copies it; production to arrival at a target consumer\n",
			o.rate, o.latencyDuration, warmup)
	}
	fmt.Fprintf(&b, "- target producer for both: linger %s, batch max %d B, no compression, manual partitioner\n\n", linger, batchMaxBytes)

	fmt.Fprintf(&b, "| contender | run | records | seconds | records/s | MB/s | CPU s | kfake CPU s | other CPU s | steal s | produce reqs | records/batch | p50 ms | p99 ms | max ms |\n")
	fmt.Fprintf(&b, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	medians := map[string]result{}
	for _, name := range o.contenders {
		var rs []result
		for _, r := range results {
			if r.contender == name {
				rs = append(rs, r)
				run := fmt.Sprint(r.run)
				if r.profiled {
					run += " (profiled)"
				}
				writeRow(&b, r, run)
			}
		}
		if len(rs) > 1 {
			medians[name] = median(rs)
			writeRow(&b, medians[name], "**median**")
		} else if len(rs) == 1 {
			medians[name] = rs[0]
		}
	}
	b.WriteString("\nCPU s: this process's CPU over the throughput phase (the contender's cost). " +
		"kfake CPU s: both cluster processes over the same phase. " +
		"other CPU s and steal s: the rest of the machine's busy time and the hypervisor's steal over the same phase (disturbance). " +
		"produce reqs and records/batch: what the target producer sent (kmirror's include its few progress writes). " +
		"MB/s counts key, value and headers, 10^6 B. Latency: production to arrival at a target consumer, nearest rank.\n")
	lim, okL := medians["limit"]
	km, okK := medians["kmirror"]
	if okL && okK {
		fmt.Fprintf(&b, "\n**kmirror / limit throughput: %.2fx** (median records/s %.0f / %.0f); best runs %.2fx; CPU per record %.2fx.\n",
			km.recordsPerSec()/lim.recordsPerSec(), km.recordsPerSec(), lim.recordsPerSec(),
			best(results, "kmirror")/best(results, "limit"),
			(km.cpu/float64(km.records))/(lim.cpu/float64(lim.records)))
	}
	eos, okE := medians["kmirror-eos"]
	if okE && okK {
		fmt.Fprintf(&b, "\n**kmirror exactly-once / at-least-once throughput: %.2fx** (median records/s %.0f / %.0f).\n",
			eos.recordsPerSec()/km.recordsPerSec(), eos.recordsPerSec(), km.recordsPerSec())
	}
	if two, ok := medians["kmirror-eos-2w"]; ok && okE {
		fmt.Fprintf(&b, "\n**two exactly-once workers / one: %.2fx** (median records/s %.0f / %.0f). Both workers run in this process on the same 2 cores as the clusters, so this is the cost of coordination (the second worker joins while the first copies and half the slots move to it: a fenced takeover and a progress read each), not scaling: on separate machines each worker would bring its own cores.\n",
			two.recordsPerSec()/eos.recordsPerSec(), two.recordsPerSec(), eos.recordsPerSec())
	}
	if failed != nil {
		fmt.Fprintf(&b, "\n**FAILED:** %v\n", failed)
	}
	return b.String()
}

// best is a contender's highest records/s: on a shared machine, the run
// least disturbed by other work.
func best(results []result, contender string) float64 {
	var v float64
	for _, r := range results {
		if r.contender == contender {
			v = max(v, r.recordsPerSec())
		}
	}
	return v
}

func writeRow(b *strings.Builder, r result, run string) {
	ms := func(d time.Duration) string {
		if d == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond))
	}
	perBatch := 0.0
	if r.batches > 0 {
		perBatch = float64(r.records) / r.batches
	}
	fmt.Fprintf(b, "| %s | %s | %d | %.2f | %.0f | %.1f | %.2f | %.2f | %.2f | %.2f | %.0f | %.0f | %s | %s | %s |\n",
		r.contender, run, r.records, r.seconds, r.recordsPerSec(), r.mbPerSec(), r.cpu, r.kfakeCPU,
		r.otherCPU, r.steal, r.requests, perBatch, ms(r.p50), ms(r.p99), ms(r.max))
}
