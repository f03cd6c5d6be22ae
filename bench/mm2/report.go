package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/bench/internal/workload"
	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/internal/machine"
)

type report struct {
	o        *options
	e        *env
	started  time.Time
	load0    string
	settings map[string]string
	tp       map[string]throughput
	lat      map[string]latency
	st       map[string]startup
	fo       map[string]failover
	cp       map[string]map[string]compressed // by contender, codec (compressed.go)
	wan      map[string][]wanRun              // by contender (wan.go)
	// wanExtras: kmirror's rate limit and outage runs (wanextra.go).
	wanExtras *wanExtras
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond))
}

func mib(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(b)/(1<<20))
}

// cpuPerGB is CPU seconds per 10^9 bytes of records copied (key, value,
// headers as the connector counts them).
func cpuPerGB(cpu time.Duration, records int64, valueSize int) float64 {
	gb := float64(records) * float64(workload.RecordBytes(valueSize)) / 1e9
	if gb == 0 {
		return 0
	}
	return cpu.Seconds() / gb
}

func (r *report) render(failed error) string {
	o := r.o
	var b strings.Builder
	fmt.Fprintf(&b, "# kmirror vs MirrorMaker 2 (and the limit) on real Apache Kafka\n\n")
	fmt.Fprintf(&b, "- date: %s (took %s)\n", r.started.UTC().Format(time.RFC3339), time.Since(r.started).Round(time.Second))
	fmt.Fprintf(&b, "- machine: %d cores (runtime.NumCPU), GOMAXPROCS %d, %s/%s; load average (1/5/15 min) at start %s, at end %s\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, r.load0, machine.Loadavg())
	fmt.Fprintf(&b, "- versions: Apache Kafka %s (brokers and MirrorMaker 2, Maven Central jars); Java: %s; Go %s; kmirror: %s; franz-go %s\n",
		kafkatest.Version, r.e.javaVersion, runtime.Version(), r.e.kmirrorVersion, franzVersion())
	fmt.Fprintf(&b, "- command: `go run ./bench/mm2 %s`\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(&b, "- clusters: a fresh pair of single-node KRaft clusters (broker+controller in one JVM, -Xmx%s, G1, C2 JIT on, RF 1, on loopback) for every contender and phase; everything on this one machine, so brokers and contender share the cores; after a phase's records are produced, the bench syncs them to disk and waits 2 s before the contender starts\n", o.brokerHeap)
	fmt.Fprintf(&b, "- records: %d B each (16 B random key, %d B random value, one 11 B `seq` header; the latency phase adds a 10 B time header)\n\n",
		workload.RecordBytes(o.valueSize), o.valueSize)

	names := o.contenders
	if len(r.tp) > 0 {
		fmt.Fprintf(&b, "## (a) Throughput: %d records over %d partitions, produced before the contender starts\n\n", o.records, o.partitions)
		b.WriteString("| contender | records/s | MB/s | copy s | start→done s | CPU s | CPU s/GB | CPU s/GB incl. start | peak RSS MiB | broker CPU s | other CPU s | steal s | load before → after |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, n := range names {
			t, ok := r.tp[n]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %s | %.0f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %.1f | %.1f | %.1f | %s |\n",
				n, t.recordsPerSec(), t.recordsPerSec()*float64(workload.RecordBytes(o.valueSize))/1e6, t.window.Seconds(), t.total.Seconds(),
				t.cpuWindow.Seconds(), cpuPerGB(t.cpuWindow, t.windowRecords, o.valueSize), cpuPerGB(t.cpuTotal, t.records, o.valueSize),
				mib(t.peakRSS), t.brokerCPU.Seconds(), t.otherCPU.Seconds(), t.steal.Seconds(), t.load)
		}
		b.WriteString("\nrecords/s, MB/s, CPU s and CPU s/GB: over the copy window, from the first poll (every 20 ms) that sees a record at the target to the one that sees them all (the target's end offsets), so process and JVM start-up are excluded; \"incl. start\" divides the process's whole CPU time, start-up included, by all the records. MB = 10^6 B of key+value+headers. peak RSS: the process's VmHWM. broker CPU: both brokers from the phase's start until the copy was done (exactly once's settle and read_committed scan, which come after, are left out, as at least once's check after the phase is); other CPU and steal: the rest of the machine and the hypervisor over the phase (disturbance). kmirror-eos and mm2-eos copy with exactly-once (kmirror `exactly_once: true`, MM2 `exactly.once.source.support = enabled`): their window ends at the first poll of the target's last stable offsets that is past every partition's last record, found after the copy by reading the target with read_committed, which also checks every record is there once and in order. kmirror-eos-2w: two kmirror-eos workers of one mirror, each with half the slots; its CPU and peak RSS are the sum of both processes, and on this one 2-core machine, shared with both brokers, a second worker shows what coordinating two members costs, not how kmirror scales out.\n\n")
		r.renderVerify(&b)
	}
	if len(r.lat) > 0 {
		fmt.Fprintf(&b, "## (b) Latency: %d records/s for %s over %d partitions\n\n", o.rate, o.latencyDuration, o.partitions)
		b.WriteString("| contender | records measured | p50 ms | p99 ms | max ms | CPU s (steady phase) | peak RSS MiB | ready after s | other CPU s | load before → after |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, n := range names {
			l, ok := r.lat[n]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %.2f | %s | %.1f | %.1f | %s |\n",
				n, l.records, ms(l.p50), ms(l.p99), ms(l.max), l.cpu.Seconds(), mib(l.peakRSS), l.ready.Seconds(), l.otherCPU.Seconds(), l.load)
		}
		b.WriteString("\nLatency: from the produce call at the source (a nanosecond header) to the record's arrival at a franz-go consumer on the target, nearest rank; the first second (warm-up) is not counted. The contender starts first and is ready once one primer record per partition is visible at the target (\"ready after\").\n\n")
	}
	if len(r.st) > 0 {
		fmt.Fprintf(&b, "## (c) Startup: %d topics (1 partition each) with one record each\n\n", o.startupTopics)
		b.WriteString("| contender | start → last topic's record visible s | CPU s | peak RSS MiB | load before → after |\n")
		b.WriteString("|---|---:|---:|---:|---|\n")
		for _, n := range names {
			s, ok := r.st[n]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %s | %.2f | %.1f | %s | %s |\n", n, s.took.Seconds(), s.cpu.Seconds(), mib(s.peakRSS), s.load)
		}
		b.WriteString("\nThe target's end offsets of all the target topics are polled every 100 ms. The limit lists the topics once and creates the target topics itself; kmirror and MM2 discover them (refresh 1s) and create them. MM2 runs with the Java producer's default batch.size (16384) here: with 1 MiB it allocates 1 MiB per partition and a 1 GiB heap runs out of memory at 1,000 partitions (tasks killed, records never mirrored).\n\n")
	}
	if len(r.fo) > 0 {
		fmt.Fprintf(&b, "## (d) Failover: group offset translation\n\n")
		fmt.Fprintf(&b, "Topic `fo`, %d partitions × %d records, mirrored first; then group `%s` reads the source and commits at %v records behind the end of each partition (mid-batch); the contender syncs the group to the target (waited for until every partition has a target commit unchanged for 8 s); the contender stops and the application resumes on the target with the same group.\n\n",
			len(failoverLags), o.failoverRecords, failoverGroup, failoverLags)
		b.WriteString("| contender | consumed on source | left to consume | re-delivered | skipped | partitions with the exact offset | synced after s |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
		for _, n := range names {
			f, ok := r.fo[n]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d of %d | %.1f |\n", n, f.consumed, f.remaining, f.redelivered, f.skipped, f.exact, f.partitions, f.syncedAfter.Seconds())
		}
		b.WriteString("\n")
		for _, n := range names {
			if f, ok := r.fo[n]; ok {
				fmt.Fprintf(&b, "- %s: %s\n", n, f.detail)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString(renderCompressed(o, r.cp))
	r.renderWAN(&b)
	r.renderWANExtras(&b)
	r.renderTargets(&b)
	if len(r.settings) > 0 {
		b.WriteString("## Settings\n\n")
		b.WriteString("As run in the throughput phase (the other phases differ only in the topic pattern, and in the failover phase group sync is on: kmirror `group_offsets: {enabled: true, interval: 1s}`; MM2 `emit.checkpoints.enabled`, `sync.group.offsets.enabled`, `emit.offset-syncs.enabled` true with 1 s intervals, `dst.offset.flush.interval.ms = 1000`, `offset.lag.max` default 100). Both leave topic config sync on (kmirror every 30 s, MM2 every 600 s) and ACL sync off; checkpoints, group sync and offset syncs (MM2) / group sync (kmirror) are off outside the failover phase. kmirror always records its offset index and progress (no switch).")
		if len(r.wan) > 0 {
			b.WriteString(" A contender without a throughput run shows the settings of its first WAN run, whose source bootstrap is the latency proxy's address.")
		}
		b.WriteString("\n\n")
		for _, n := range names {
			if s, ok := r.settings[n]; ok {
				fmt.Fprintf(&b, "### %s\n\n```\n%s\n```\n\n", n, strings.TrimSpace(s))
			}
		}
	}
	if failed != nil {
		fmt.Fprintf(&b, "\n**FAILED:** %v\n", failed)
	}
	return b.String()
}

func (r *report) renderTargets(b *strings.Builder) {
	km, mm, lim := "kmirror", "mm2", "limit"
	type row struct{ target, kmirror, other, ratio, verdict string }
	var rows []row
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	if k, ok := r.tp[km]; ok {
		if m, ok := r.tp[mm]; ok {
			x := k.recordsPerSec() / m.recordsPerSec()
			rows = append(rows, row{"throughput ≥ 2× MM2", fmt.Sprintf("%.0f rec/s", k.recordsPerSec()), fmt.Sprintf("MM2 %.0f rec/s", m.recordsPerSec()), fmt.Sprintf("%.2f×", x), verdict(x >= 2)})
			kc := cpuPerGB(k.cpuWindow, k.windowRecords, r.o.valueSize)
			mc := cpuPerGB(m.cpuWindow, m.windowRecords, r.o.valueSize)
			rows = append(rows, row{"CPU per GB ≤ ½ MM2", fmt.Sprintf("%.2f s/GB", kc), fmt.Sprintf("MM2 %.2f s/GB", mc), fmt.Sprintf("%.2f×", kc/mc), verdict(kc <= mc/2)})
			rows = append(rows, row{"peak RSS ≤ ¼ MM2 (throughput)", mib(k.peakRSS) + " MiB", "MM2 " + mib(m.peakRSS) + " MiB", fmt.Sprintf("%.2f×", float64(k.peakRSS)/float64(m.peakRSS)), verdict(4*k.peakRSS <= m.peakRSS)})
		}
		if l, ok := r.tp[lim]; ok {
			x := k.recordsPerSec() / l.recordsPerSec()
			rows = append(rows, row{"throughput ≥ 0.9× the limit", fmt.Sprintf("%.0f rec/s", k.recordsPerSec()), fmt.Sprintf("limit %.0f rec/s", l.recordsPerSec()), fmt.Sprintf("%.2f×", x), verdict(x >= 0.9)})
		}
	}
	for _, n := range []string{km, km + "-eos"} {
		t, ok := r.tp[n]
		if !ok || t.verify == nil {
			continue
		}
		target := "verify ≥ 0.8× the copy's records/s"
		if n != km {
			target = "exactly-once: verify ≥ 0.8× the copy's records/s"
		}
		x := t.verify.recordsPerSec() / t.recordsPerSec()
		rows = append(rows, row{target, fmt.Sprintf("%.0f rec/s", t.verify.recordsPerSec()), fmt.Sprintf("%s copy %.0f rec/s", n, t.recordsPerSec()), fmt.Sprintf("%.2f×", x), verdict(x >= 0.8)})
	}
	if k, ok := r.lat[km]; ok {
		if m, ok := r.lat[mm]; ok {
			x := float64(k.p99) / float64(m.p99)
			rows = append(rows, row{fmt.Sprintf("p99 latency at %d/s ≤ ½ MM2", r.o.rate), ms(k.p99) + " ms", "MM2 " + ms(m.p99) + " ms", fmt.Sprintf("%.2f×", x), verdict(x <= 0.5)})
			rows = append(rows, row{"peak RSS ≤ ¼ MM2 (latency)", mib(k.peakRSS) + " MiB", "MM2 " + mib(m.peakRSS) + " MiB", fmt.Sprintf("%.2f×", float64(k.peakRSS)/float64(m.peakRSS)), verdict(4*k.peakRSS <= m.peakRSS)})
		}
	}
	if k, ok := r.st[km]; ok {
		if m, ok := r.st[mm]; ok {
			x := k.took.Seconds() / m.took.Seconds()
			rows = append(rows, row{fmt.Sprintf("startup with %d topics ≤ ⅓ MM2", r.o.startupTopics), fmt.Sprintf("%.2f s", k.took.Seconds()), fmt.Sprintf("MM2 %.2f s", m.took.Seconds()), fmt.Sprintf("%.2f×", x), verdict(x <= 1.0/3)})
			rows = append(rows, row{"peak RSS ≤ ¼ MM2 (startup)", mib(k.peakRSS) + " MiB", "MM2 " + mib(m.peakRSS) + " MiB", fmt.Sprintf("%.2f×", float64(k.peakRSS)/float64(m.peakRSS)), verdict(4*k.peakRSS <= m.peakRSS)})
		}
	}
	if k, ok := r.tp[km+"-eos"]; ok {
		if m, ok := r.tp[mm+"-eos"]; ok {
			x := k.recordsPerSec() / m.recordsPerSec()
			rows = append(rows, row{"exactly-once throughput ≥ 2× MM2 exactly-once", fmt.Sprintf("%.0f rec/s", k.recordsPerSec()), fmt.Sprintf("MM2 %.0f rec/s", m.recordsPerSec()), fmt.Sprintf("%.2f×", x), verdict(x >= 2)})
			kc := cpuPerGB(k.cpuWindow, k.windowRecords, r.o.valueSize)
			mc := cpuPerGB(m.cpuWindow, m.windowRecords, r.o.valueSize)
			rows = append(rows, row{"exactly-once CPU per GB (reported)", fmt.Sprintf("%.2f s/GB", kc), fmt.Sprintf("MM2 %.2f s/GB", mc), fmt.Sprintf("%.2f×", kc/mc), "-"})
		}
		if a, ok := r.tp[km]; ok {
			x := k.recordsPerSec() / a.recordsPerSec()
			rows = append(rows, row{"exactly-once throughput ≥ 0.85× at-least-once", fmt.Sprintf("%.0f rec/s", k.recordsPerSec()), fmt.Sprintf("kmirror %.0f rec/s", a.recordsPerSec()), fmt.Sprintf("%.2f×", x), verdict(x >= 0.85)})
		}
	}
	if k, ok := r.lat[km+"-eos"]; ok {
		if m, ok := r.lat[mm+"-eos"]; ok {
			x := float64(k.p99) / float64(m.p99)
			rows = append(rows, row{fmt.Sprintf("exactly-once p99 latency at %d/s ≤ 0.2× MM2 exactly-once", r.o.rate), ms(k.p99) + " ms", "MM2 " + ms(m.p99) + " ms", fmt.Sprintf("%.2f×", x), verdict(x <= 0.2)})
		}
	}
	if two, ok := r.tp[km+"-eos-2w"]; ok {
		if one, ok := r.tp[km+"-eos"]; ok {
			// One machine: a second worker shows the cost of
			// coordinating, not scaling out (reported, no goal).
			rows = append(rows, row{"exactly-once, two workers vs one (reported; one 2-core machine)", fmt.Sprintf("%.0f rec/s", two.recordsPerSec()), fmt.Sprintf("one worker %.0f rec/s", one.recordsPerSec()), fmt.Sprintf("%.2f×", two.recordsPerSec()/one.recordsPerSec()), "-"})
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("## Targets (issues 4, 12, 25 and 26)\n\n| target | kmirror | compared with | ratio | verdict |\n|---|---:|---:|---:|---|\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", r.target, r.kmirror, r.other, r.ratio, r.verdict)
	}
	b.WriteString("\n")
}

// renderWAN is the WAN phase's table (wan.go): rows by partition count,
// contender and round trip.
func (r *report) renderWAN(b *strings.Builder) {
	if len(r.wan) == 0 {
		return
	}
	o := r.o
	fmt.Fprintf(b, "## (f) WAN: the source behind a latency proxy; a backlog of %d records, then %d records/s\n\n", o.wanRecords, o.rate)
	b.WriteString("| contender | partitions | RTT ms | records/s | records/s of each run | × at 0 ms | p99 ms at " + fmt.Sprint(o.rate) + "/s | CPU s/GB | copy window s | connections via proxy | most in flight KiB (window KiB) | load before → after (copy) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, parts := range o.wanPartitions {
		for _, n := range o.contenders {
			for _, w := range r.wan[n] {
				if w.partitions != parts {
					continue
				}
				window := fmt.Sprintf("%.1f", w.tp.window.Seconds())
				if w.bounded {
					window += "*"
				}
				fmt.Fprintf(b, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %d | %s | %s |\n",
					n, parts, w.rtt.Milliseconds(), w.rate()+stopMark(w), repeatsList(w), wanRatio(r.wan[n], w), w.p99(),
					w.cpuPerGB(o.valueSize), window, w.conns, inFlightKiB(w), w.tp.load)
			}
		}
	}
	repeats := "Each cell is measured once (-wan-repeats 1)."
	if o.wanRepeats > 1 {
		repeats = fmt.Sprintf("A copy that finished inside the window takes seconds, so its records/s moves from run to run with whatever else the machine does: it is measured %d times (-wan-repeats), each a fresh topic and contender process as above, and the row is the run with the median records/s (of an even count, the lower middle), with that run's CPU, latency, connections and load; \"records/s of each run\" lists every run's records/s in run order (\"-\": the first run's copy was bounded by the window, stalled, behind or stopped, so the cell ran once), and the other runs' topics are then deleted. A run that stopped copying (below) ends its cell and is its row, whatever the runs before it measured: \"stopped\" closes its list.", o.wanRepeats)
	}
	fmt.Fprintf(b, "\nThe contender reaches the source through a latency proxy (e2e/kafkatest/faultproxy, running in this harness's process, so its CPU is not the contender's) that passes each request to the broker RTT/2 after it arrived and each response's bytes to the contender RTT/2 after they arrived from the broker, as they arrive (cut-through, in chunks of what each read brought, at most 64 KiB: the first bytes of a 55 MB Fetch response are on their way while the broker still sends the rest, as on a link); frames a client pipelines stay overlapped, as on a link. It rewrites the broker addresses in the responses that carry them (Metadata, FindCoordinator, DescribeCluster), reading those whole, so clients stay behind it; it offers Fetch up to v15, whose responses carry no addresses (v16's KIP-951 leader hints would need every Fetch response read whole to rewrite them; a client then learns a new leader from Metadata, as before v16); at the end of each copy window the bench counts the contender's TCP connections (/proc) and fails the run if any goes to the source directly (\"connections via proxy\": those through it; the Java client's too). The target, the bench's producers, its checks and the latency reader use the clusters directly. One pair of clusters per contender and partition count, whose brokers first write and read %d records each (their JIT warmed up: the 0 ms run, the ratios' base, comes first); for each round trip a fresh topic of %d records is preloaded (synced, then 2 s) and a fresh contender process, started with the proxy at that round trip, copies it (MM2, restarted on the pair, first runs the previous run's tasks for a few seconds: before the window): records/s and CPU s/GB (the contender's CPU per 10^9 B copied) over the window from the first record visible at the target to the last, or to %v after the first (marked *: the backlog was not done, so records/s is what arrived in that window); then the proxy's latency is lifted so that the rest copies at loopback speed, and the target must hold exactly the source's records per partition. Then the same process, caught up, is measured on a second topic of as many partitions (mirrored from the start, idle during the copy; MM2's tasks.max counts both topics' partitions, so the copy keeps a task per partition), through the proxy at the same round trip: p99 from produce to arrival at the target at %d records/s for %v after a 1 s warm-up, as in the latency phase; then the contender stops and both copies are checked. \"behind\": the backlog's copy ran below that rate, so the contender would fall further behind every second and its p99 would only say how long the test ran; not measured. A contender that brought nothing to the target within %v of its start (a Java consumer whose fetch responses, at its window per round trip, take longer than its request.timeout.ms, retries them forever) shows 0 records/s over that wait. A contender whose count at the target, once records arrived, did not grow for %v while the bench waited for the rest with the latency lifted (a window longer than that also ends after as long flat) (a MirrorMaker 2 task that died, as of an OutOfMemoryError: Connect does not restart a failed task, so its partitions are never copied) stopped copying: the bench gives up on the copy and goes on to the next, and its row says \"stopped copying at N of M records\" (those at the target then, of the backlog) instead of records/s, with no ratio (its own or kmirror's over it), no CPU s/GB and no latency (\"not measured\"), and its copy unchecked; the log has the first ERROR lines of its log. %s × at 0 ms: records/s over the same contender's at 0 ms with as many partitions (of the rows shown, so the medians where a cell ran more than once); the 0 ms rows go through the proxy too, so the ratio isolates the added round trips.\n\n",
		warmupRecords, o.wanRecords, o.wanWindow, o.rate, o.wanLatencyDuration, wanStall, wanStopped, repeats)
	renderWANVersusMM2(b, o.contenders, r.wan)
	b.WriteString("mm2-defaults is MirrorMaker 2 with its defaults, as a deployment that tuned nothing runs: tasks.max 1 (one task, so one consumer and one connection per broker for every partition) and the Java producer and consumer as they come (batch.size 16384). mm2 runs a task per partition and kmirror's batching (batch.size 1 MiB), as everywhere in this bench, which favours MM2.\n\n")
	b.WriteString("mm2-wan is MirrorMaker 2 with the tuning operators apply to a high-latency link (its properties under Settings say what and why): the source consumer's receive.buffer.bytes -1 (the OS default, auto-tuned) instead of Java's 64 KiB, max.partition.fetch.bytes 16 MiB instead of 1 MiB, the producer's buffer.memory 8 MiB instead of 32 MiB (a producer per task: the heap is MM2's 1 GiB), tasks.max as many as partitions (as mm2: MirrorSourceConnector runs min(tasks.max, partitions) tasks, so more tasks add nothing, and with one partition no task count helps).\n\n")
	b.WriteString("Receive windows: across a real link a TCP connection carries at most its receiver's window per round trip (a byte is acknowledged a round trip after it left), which loopback never binds; so the proxy applies it. Each connection's response bytes leave (and arrive RTT/2 later) only as the window the contender's socket advertises to the proxy allows (TCP_INFO's snd_wnd, read before each chunk of at most 64 KiB): fixed where the client set SO_RCVBUF (the Java consumer's receive.buffer.bytes, 64 KiB by default, which Linux doubles and advertises as 79 to 122 KiB on loopback here), grown by the kernel's auto-tuning up to net.ipv4.tcp_rmem's maximum where the client left it to the kernel (kmirror, as Go's net package does; mm2-wan's receive.buffer.bytes -1). \"most in flight\" is the most bytes one connection had on their way over the copy window, with the window it advertised then. Not modelled: the source brokers' send buffers (Kafka's socket.send.buffer.bytes, 100 KiB by default, would bind every client alike on a real link; Kafka's documentation advises raising it, with the clients' buffers, for a cluster read across a WAN, and the figures assume that was done), the congestion window (slow start, and its cuts on loss), bandwidth limits, loss and retransmits; and auto-tuning grows a window here in microseconds where a real link takes round trips. A lossy link would slow every contender further.\n\n")
}

// repeatsList is the records/s of every run of w's cell, in run order,
// "stopped" last for a kept run that stopped copying (keptRun); "-" when
// it ran once.
func repeatsList(w wanRun) string {
	if len(w.repeats) == 0 {
		return "-"
	}
	s := make([]string, len(w.repeats))
	for i, x := range w.repeats {
		s[i] = fmt.Sprintf("%.0f", x)
	}
	if w.stopped {
		s = append(s, "stopped")
	}
	return strings.Join(s, ", ")
}

// inFlightKiB is a WAN run's most bytes in flight on one connection and
// the receive window then; "-" at 0 ms, where no window applies.
func inFlightKiB(w wanRun) string {
	if w.rtt == 0 || w.wnd == 0 {
		return "-"
	}
	return fmt.Sprintf("%d (%d)", w.inFlight>>10, w.wnd>>10)
}

// renderWANVersusMM2 is kmirror's records/s over each MirrorMaker 2
// contender's at the same partitions and round trip (issue 27's goal: ≥ 3×
// MM2 with its defaults at 80 ms); nothing without kmirror or an MM2 run,
// and "-" where either copy stopped (no rate to compare).
func renderWANVersusMM2(b *strings.Builder, contenders []string, wan map[string][]wanRun) {
	var mm2s []string
	for _, n := range contenders {
		if strings.HasPrefix(n, "mm2") && len(wan[n]) > 0 {
			mm2s = append(mm2s, n)
		}
	}
	if len(wan["kmirror"]) == 0 || len(mm2s) == 0 {
		return
	}
	b.WriteString("kmirror's records/s over each MirrorMaker 2 contender's, same partitions and round trip:\n\n| partitions | RTT ms |")
	for _, n := range mm2s {
		fmt.Fprintf(b, " ÷ %s |", n)
	}
	b.WriteString("\n|---:|---:|" + strings.Repeat("---:|", len(mm2s)) + "\n")
	for _, k := range wan["kmirror"] {
		fmt.Fprintf(b, "| %d | %d |", k.partitions, k.rtt.Milliseconds())
		for _, n := range mm2s {
			i := slices.IndexFunc(wan[n], func(m wanRun) bool { return m.partitions == k.partitions && m.rtt == k.rtt })
			if i < 0 || k.stopped || wan[n][i].stopped || wan[n][i].tp.recordsPerSec() <= 0 {
				b.WriteString(" - |")
				continue
			}
			fmt.Fprintf(b, " %.2f× |", k.tp.recordsPerSec()/wan[n][i].tp.recordsPerSec())
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// wanRatio is w's records/s over those of the same contender's run at
// 0 ms with as many partitions, "-" without one, or where either copy
// stopped.
func wanRatio(runs []wanRun, w wanRun) string {
	if w.stopped {
		return "-"
	}
	for _, z := range runs {
		if z.partitions == w.partitions && z.rtt == 0 && !z.stopped && z.tp.recordsPerSec() > 0 {
			return fmt.Sprintf("%.2f", w.tp.recordsPerSec()/z.tp.recordsPerSec())
		}
	}
	return "-"
}

// renderVerify is the throughput phase's `kmirror verify` runs (verify.go).
func (r *report) renderVerify(b *strings.Builder) {
	var rows []string
	var command string
	for _, n := range r.o.contenders {
		t, ok := r.tp[n]
		if !ok || t.verify == nil {
			continue
		}
		v := t.verify
		command = v.command
		rows = append(rows, fmt.Sprintf("| %s | %d | %d | %.2f | %.0f | %.0f | %.2f× | %.2f | %.2f | %s | %.1f | %s |\n",
			n, v.matched, v.read, v.took.Seconds(), v.recordsPerSec(), t.recordsPerSec(), v.recordsPerSec()/t.recordsPerSec(),
			v.cpu.Seconds(), cpuPerGB(v.cpu, v.matched, r.o.valueSize), mib(v.peakRSS), v.brokerCPU.Seconds(), v.load))
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("### Verify: `kmirror verify` over the copy (issue 26)\n\n")
	b.WriteString("| contender | records compared | records read | verify s | verify records/s | copy records/s | verify ÷ copy | CPU s | CPU s/GB | peak RSS MiB | broker CPU s | load before → after |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, row := range rows {
		b.WriteString(row)
	}
	fmt.Fprintf(b, "\nOnce the copy is done and checked and the contender stopped, the same clusters are compared record by record (key, value, headers, timestamp) through kmirror's offset index by `%s` (the contender's config, as in Settings), which must exit 0 with its total matched equal to the records copied, else the phase fails. verify s: the command's wall clock, process start (config, clients, reading the progress topic and the index) to exit, so unlike the copy's window it includes start-up. verify records/s: records compared (matched) per second of it; records read counts both sides. CPU s and peak RSS: the verify process's own (its rusage); CPU s/GB per 10^9 B of the records compared (one side, as the copy's CPU s/GB), so the two compare. broker CPU: both brokers over the command. -verify=false skips it.\n\n", command)
}

// renderWANExtras is kmirror's rate limit and outage runs (wanextra.go),
// after the WAN table.
func (r *report) renderWANExtras(b *strings.Builder) {
	x := r.wanExtras
	if x == nil || x.rate == nil && len(x.outages) == 0 {
		return
	}
	o := r.o
	rtt := x.rtt.Milliseconds()
	fmt.Fprintf(b, "### kmirror at a rate limit and after an outage (issue 27, goals 3 and 4): %d partitions, %d ms round trip\n\n", x.partitions, rtt)
	fmt.Fprintf(b, "kmirror with its defaults (compression: source), through the latency proxy at %d ms, on a fresh pair of clusters (brokers warmed up as above); each run a fresh kmirror process and a fresh topic of %d partitions, checked afterwards (the target holds exactly the source's records per partition), then deleted. Bytes are the source's wire bytes: the records copied times the source log's bytes per record (its .log segments over its records: a fetch returns the batches as stored, so this is what the limit counts, batch headers included).\n\n", rtt, x.partitions)
	if w := x.rate; w != nil && w.window > 0 {
		verdict := "met"
		if d := w.ratio() - 1; d > 0.05 || d < -0.05 {
			verdict = "**missed**"
		}
		if !w.saturated {
			verdict = "**not saturated**: the backlog ran out within the window"
		}
		fmt.Fprintf(b, "**Rate limit** (goal 3: it holds within 5%% over 30 s on a saturated source): `rate_limit: %s` (%d B/s); a backlog of %d records (%.0f MB, %.1f B per record on the wire) preloaded, then kmirror started; the window opened %v after the first record reached the target and lasted %v.\n\n",
			o.wanRateLimit, w.limit, w.records, float64(w.records)*w.recordBytes/1e6, w.recordBytes, w.warmup, o.wanRateWindow)
		b.WriteString("| limit MB/s | copied MB/s | ÷ limit | verdict | link MB/s | link ÷ limit | records in the window | window s | throttled s (mirror limit) | throttled s (topic limits) | kmirror_rate_limit_bytes_per_second | CPU s | connections via proxy | load before → after |\n")
		b.WriteString("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		fmt.Fprintf(b, "| %.2f | %.2f | %.3f | %s | %.2f | %.3f | %d | %.2f | %.1f | %.1f | %.0f | %.1f | %d | %s |\n\n",
			float64(w.limit)/1e6, w.bytesPerSec()/1e6, w.ratio(), verdict, w.linkBytesPerSec()/1e6, w.linkBytesPerSec()/float64(w.limit),
			w.windowRecords, w.window.Seconds(), w.throttled, w.topicThrottled, w.metricLimit, w.cpu.Seconds(), w.conns, w.load)
		b.WriteString("copied MB/s: the records copied in the window (the target's end offsets polled every 20 ms, at the polls that opened and closed it) × the bytes per record, over the window's length; MB = 10^6 B; the verdict is on it. link MB/s: the bytes of every response the proxy sent kmirror over the window (faultproxy's ResponseBytes), so also what kmirror fetched and did not copy (a batch the broker cut at the fetch's size, fetched again whole) and the responses' own framing: above copied MB/s by that waste. throttled s: the growth of kmirror's `kmirror_throttled_seconds_total` over the window (from its /metrics), the time the limit held fetches back: a fetch in flight is not held back, so across a round trip it stays below the window's length even when the limit sets the pace, and near 0 the link or the machine, not the limit, set it. After the window the rest of the backlog is copied, still at the limit, and checked.\n\n")
	}
	if len(x.outages) > 0 {
		fmt.Fprintf(b, "**Catch-up after an outage** (goal 4): a producer writes %d records/s of %d B values (linger 5 ms) to the source throughout; kmirror copies them through the proxy; after 10 s of steady copying the link goes down for %v (faultproxy's SetDown: every connection through the proxy is reset, and every new one, until it is back; the producer writes to the source directly and goes on), then comes back. Timed from the link's return: *backlog copied*, until the target held every record the source had at the return; *caught up*, until kmirror was as far behind as before the outage (the lag, source minus target end offsets polled every 100 ms, at most the larger of a second of records and twice the most it lagged over the last 5 s before the outage). Under a steady load through the link (%d ms round trip) the lag never reaches 0: the records written over the last round trip and fetch are always on their way. Once caught up the producer stops, the rest is copied and the copy checked.\n\n",
			o.wanOutageRate, o.valueSize, o.wanOutage, rtt)
		b.WriteString("| run | outage s | backlog records | backlog MB | B/record | steady lag before | caught-up lag ≤ | backlog copied s | caught up s | copy MB/s (catch-up) | link MB/s (catch-up) | incoming MB/s | expected at the limit s | caught up ÷ expected | throttled s | connections reset | load at down | load return → caught up |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
		for _, w := range x.outages {
			run, exp, ratio := "no rate limit", "-", "-"
			if w.limit > 0 {
				run = fmt.Sprintf("rate_limit %s", o.wanRateLimit)
				if d := w.expected(); d > 0 {
					exp, ratio = fmt.Sprintf("%.1f", d.Seconds()), fmt.Sprintf("%.2f", w.caughtUp.Seconds()/d.Seconds())
				}
			}
			fmt.Fprintf(b, "| %s | %.0f | %d | %.0f | %.1f | %d | %d | %.1f | %.1f | %.2f | %.2f | %.2f | %s | %s | %.1f | %d | %s | %s |\n",
				run, w.outage.Seconds(), w.backlog, w.backlogBytes()/1e6, w.recordBytes, w.steadyLag, w.threshold, w.drained.Seconds(), w.caughtUp.Seconds(),
				w.copyBytesPerSec()/1e6, w.linkBytesPerSec()/1e6, w.incomingBytesPerSec()/1e6, exp, ratio, w.throttled, w.resets, w.loadDown, w.load)
		}
		b.WriteString("\nbacklog: source minus target end offsets when the link came back; MB at the run's bytes per record (its source log over its records, measured once the producer stopped). copy MB/s: the records copied from the link's return to caught up, over that time; link MB/s: the bytes of the responses the proxy sent kmirror meanwhile, over that time; incoming MB/s: those the producer wrote meanwhile. expected at the limit: backlog bytes ÷ (limit − incoming bytes/s), the time a copy at exactly the limit takes. throttled s: the growth of `kmirror_throttled_seconds_total{limit=\"mirror\"}` over the catch-up. connections reset: kmirror's connections the proxy reset while the link was down (those open when it went down and each reconnect). A link that drops packets silently, where clients notice only by their timeouts, is not modelled; nor is bandwidth (see above: receive windows are).\n\n")
	}
	if x.settings != "" {
		fmt.Fprintf(b, "kmirror's settings in the rate limit run (the outage runs differ only in the topic, and the first has no `rate_limit`):\n\n```\n%s\n```\n\n", strings.TrimSpace(x.settings))
	}
}
