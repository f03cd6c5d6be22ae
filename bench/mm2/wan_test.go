package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

func TestParseRTTs(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		in   string
		want []time.Duration
	}{
		{"0,40,80,150ms", []time.Duration{0, 40 * ms, 80 * ms, 150 * ms}},
		{" 0, 80ms ", []time.Duration{0, 80 * ms}},
		{"10ms,1s", []time.Duration{10 * ms, time.Second}},
		{"0.5,1s", []time.Duration{500 * ms, time.Second}},
		{"0", []time.Duration{0}},
	} {
		got, err := parseRTTs(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("parseRTTs(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "40,80", "0,,80ms", "-40ms", "80,80ms", "fast"} {
		if got, err := parseRTTs(in); err == nil {
			t.Errorf("parseRTTs(%q) = %v, want an error", in, got)
		}
	}
}

func TestParsePartitions(t *testing.T) {
	got, err := parsePartitions("1, 16")
	if err != nil || !slices.Equal(got, []int{1, 16}) {
		t.Errorf("parsePartitions = %v, %v", got, err)
	}
	for _, in := range []string{"", "0", "1,x", "4,4", "-1"} {
		if got, err := parsePartitions(in); err == nil {
			t.Errorf("parsePartitions(%q) = %v, want an error", in, got)
		}
	}
}

// A /proc/net/tcp6 excerpt: a listener, two established connections of
// the process (inodes 101 and 102, remote ports 0x2328 = 9000 and 9000),
// one of another process (inode 200) and one of the process in TIME_WAIT.
const procNetTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 100 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:A1B2 0000000000000000FFFF00000100007F:2328 01 00000000:00000000 00:00000000 00000000     0        0 101 1 0000000000000000 20 4 30 10 -1
   2: 0000000000000000FFFF00000100007F:A1B3 0000000000000000FFFF00000100007F:2328 01 00000000:00000000 00:00000000 00000000     0        0 102 1 0000000000000000 20 4 30 10 -1
   3: 0000000000000000FFFF00000100007F:A1B4 0000000000000000FFFF00000100007F:2329 01 00000000:00000000 00:00000000 00000000     0        0 200 1 0000000000000000 20 4 30 10 -1
   4: 0000000000000000FFFF00000100007F:A1B5 0000000000000000FFFF00000100007F:232A 06 00000000:00000000 00:00000000 00000000     0        0 103 1 0000000000000000 20 4 30 10 -1
`

func TestParseProcNetTCP(t *testing.T) {
	mine := map[uint64]bool{100: true, 101: true, 102: true, 103: true}
	got := parseProcNetTCP([]byte(procNetTCP6), mine)
	if want := map[int]int{9000: 2}; !maps.Equal(got, want) {
		t.Errorf("parseProcNetTCP = %v, want %v", got, want)
	}
	ipv4 := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:C350 0100007F:2328 01 00000000:00000000 00:00000000 00000000     0        0 101 1 0000000000000000 20 4 30 10 -1\n"
	if got := parseProcNetTCP([]byte(ipv4), mine); !maps.Equal(got, map[int]int{9000: 1}) {
		t.Errorf("parseProcNetTCP(IPv4) = %v", got)
	}
}

func TestContenderRuns(t *testing.T) {
	byName := func(n string) contender {
		return allContenders[slices.IndexFunc(allContenders, func(c contender) bool { return c.name == n })]
	}
	all := []string{"throughput", "latency", "startup", "failover", "compressed", "wan"}
	for name, want := range map[string][]string{
		"limit":          {"throughput", "latency", "startup", "compressed", "wan"},
		"kmirror":        all,
		"mm2":            all,
		"mm2-wan":        {"wan"},
		"mm2-defaults":   {"wan"},
		"kmirror-eos":    {"throughput", "latency", "compressed"},
		"mm2-eos":        {"throughput", "latency", "compressed"},
		"kmirror-eos-2w": {"throughput"},
	} {
		var got []string
		for _, p := range all {
			if byName(name).runs(p) {
				got = append(got, p)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s runs %v, want %v", name, got, want)
		}
	}
}

func TestPhaseDefaults(t *testing.T) {
	none := map[string]bool{}
	for _, c := range []struct {
		phases                  []string
		set                     map[string]bool
		contenders, out         string
		wantContenders, wantOut string
	}{
		{[]string{"wan"}, none, defaultContenders, defaultOut, wanContenders, wanOut},
		{[]string{"wan"}, map[string]bool{"out": true}, defaultContenders, "/tmp/x.md", wanContenders, "/tmp/x.md"},
		{[]string{"wan"}, map[string]bool{"contenders": true, "out": true}, "kmirror", "", "kmirror", ""},
		{[]string{"throughput", "wan"}, none, defaultContenders, defaultOut, defaultContenders, defaultOut},
		{[]string{"latency"}, none, defaultContenders, defaultOut, defaultContenders, defaultOut},
	} {
		gc, gout := phaseDefaults(c.phases, c.set, c.contenders, c.out)
		if gc != c.wantContenders || gout != c.wantOut {
			t.Errorf("phaseDefaults(%v, %v) = %q, %q; want %q, %q", c.phases, c.set, gc, gout, c.wantContenders, c.wantOut)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"20MB": 20e6, "20000000": 20e6, " 16MiB": 16 << 20, "1GB": 1e9, "512KiB": 512 << 10, "100B": 100} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1MB", "20 mb", "fast", "1.5MB"} {
		if got, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", in, got)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP kmirror_throttled_seconds_total Seconds a rate limit held ...
# TYPE kmirror_throttled_seconds_total counter
kmirror_throttled_seconds_total{limit="mirror",mirror="bench"} 12.5
kmirror_throttled_seconds_total{limit="topic",mirror="bench"} 0
kmirror_rate_limit_bytes_per_second{mirror="bench"} 2e+07
kmirror_throttled_seconds_totally{limit="mirror"} 99
kmirror_records_total{mirror="bench"} 5
`
	got, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`kmirror_throttled_seconds_total{limit="mirror"}`: 12.5,
		`kmirror_throttled_seconds_total{limit="topic"}`:  0,
		"kmirror_rate_limit_bytes_per_second":             2e7,
	}
	if !maps.Equal(got, want) {
		t.Errorf("parseMetrics = %v, want %v", got, want)
	}
	if _, err := parseMetrics(strings.NewReader("kmirror_records_total 1\n")); err == nil {
		t.Error("no throttle series: want an error")
	}
}

func TestOutageFigures(t *testing.T) {
	p := lagPoll{src: map[int32]int64{0: 100, 1: 50}, dst: map[int32]int64{0: 90, 1: 60}}
	if got := p.lag(); got != 10 {
		t.Errorf("lag = %d, want 10 (a partition ahead counts 0)", got)
	}
	if !covers(map[int32]int64{0: 5, 1: 7}, map[int32]int64{0: 5, 1: 6}) || covers(map[int32]int64{0: 5}, map[int32]int64{0: 5, 1: 1}) {
		t.Error("covers")
	}
	// 1,000,000 records of 1,000 B behind; 10 MB/s incoming over a 20 MB/s
	// limit: 1 GB at 10 MB/s spare, 100 s.
	w := wanOutageRun{limit: 20e6, recordBytes: 1000, backlog: 1e6, caughtUp: 50 * time.Second, incoming: 500000, copied: 1500000}
	if got := w.expected(); got != 100*time.Second {
		t.Errorf("expected = %v, want 100s", got)
	}
	if got := w.copyBytesPerSec(); got != 30e6 {
		t.Errorf("copyBytesPerSec = %v, want 30e6", got)
	}
	w.limit = 0
	if got := w.expected(); got != 0 {
		t.Errorf("expected without a limit = %v, want 0", got)
	}
}

func TestKmirrorConfigExtras(t *testing.T) {
	p := &pair{src: &kafkatest.Cluster{}, dst: &kafkatest.Cluster{}}
	plain := kmirrorConfig(p, spec{topics: "t", via: "127.0.0.1:1"})
	if !strings.Contains(plain, "compression: none") || strings.Contains(plain, "rate_limit") {
		t.Errorf("the other phases' config changed:\n%s", plain)
	}
	cfg := kmirrorConfig(p, spec{topics: "t", via: "127.0.0.1:1", rateLimit: "20MB", kmirrorDefaults: true})
	if strings.Contains(cfg, "compression") || !strings.Contains(cfg, "\n    rate_limit: 20MB\n") {
		t.Errorf("want rate_limit 20MB and the default compression:\n%s", cfg)
	}
}

func TestRenderWANExtras(t *testing.T) {
	o := &options{wanRateLimit: "20MB", wanRateWindow: 30 * time.Second, wanOutage: 5 * time.Minute, wanOutageRate: 10000, valueSize: 1024}
	x := &wanExtras{partitions: 16, rtt: 80 * time.Millisecond, settings: "kmirror run --config kmirror.yaml",
		rate: &wanRateRun{limit: 20e6, records: 900000, recordBytes: 1063, warmup: 5 * time.Second, window: 30 * time.Second,
			windowRecords: 560000, saturated: true, throttled: 14, linkBytes: 600e6, load: "1 → 2"},
		outages: []wanOutageRun{
			{rate: 10000, outage: 5 * time.Minute, recordBytes: 1077, backlog: 3e6, caughtUp: 100 * time.Second, drained: 90 * time.Second, copied: 4e6, incoming: 1e6},
			{limit: 20e6, rate: 10000, outage: 5 * time.Minute, recordBytes: 1077, backlog: 3e6, caughtUp: 400 * time.Second, drained: 200 * time.Second, copied: 7e6, incoming: 4e6},
		}}
	var b strings.Builder
	(&report{o: o, wanExtras: x}).renderWANExtras(&b)
	out := b.String()
	for _, want := range []string{"| 20.00 | 19.84 | 0.992 | met | 20.00 | 1.000 |", "| no rate limit | 300 | 3000000 |", "| rate_limit 20MB | 300 |", "kmirror run --config kmirror.yaml"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "%!") {
		t.Errorf("a formatting error in:\n%s", out)
	}
	x.rate.saturated = false
	b.Reset()
	(&report{o: o, wanExtras: x}).renderWANExtras(&b)
	if !strings.Contains(b.String(), "**not saturated**") {
		t.Error("an unsaturated window is not flagged")
	}
}

func TestRenderWANVersusMM2(t *testing.T) {
	run := wanRunAt
	wan := map[string][]wanRun{
		"kmirror":      {run(1, 0, 90_000), run(16, 80*time.Millisecond, 120_000)},
		"mm2-defaults": {run(1, 0, 30_000), run(16, 80*time.Millisecond, 20_000)},
		"mm2":          {run(16, 80*time.Millisecond, 48_000)},
	}
	var b strings.Builder
	renderWANVersusMM2(&b, []string{"limit", "kmirror", "mm2-defaults", "mm2"}, wan)
	for _, want := range []string{
		"| partitions | RTT ms | ÷ mm2-defaults | ÷ mm2 |",
		"| 1 | 0 | 3.00× | - |",
		"| 16 | 80 | 6.00× | 2.50× |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
	b.Reset()
	renderWANVersusMM2(&b, []string{"kmirror"}, wan)
	if b.Len() != 0 {
		t.Errorf("no MM2 contender, yet:\n%s", b.String())
	}
}

// wanRunAt is a WAN run at records records/s (records over a 1 s window).
func wanRunAt(parts int, rtt time.Duration, records int64) wanRun {
	return wanRun{partitions: parts, rtt: rtt, tp: throughput{windowRecords: records, window: time.Second}}
}

func TestMedianRun(t *testing.T) {
	for _, c := range []struct {
		records []int64
		want    int
	}{
		{[]int64{132_000}, 0},
		{[]int64{174_000, 132_000, 274_000}, 0},
		{[]int64{274_000, 132_000, 174_000}, 2},
		{[]int64{147_000, 274_000, 132_000, 174_000}, 0}, // the lower middle
		{[]int64{274_000, 174_000, 132_000, 147_000}, 3},
		{[]int64{150_000, 150_000, 150_000}, 1},
	} {
		var runs []wanRun
		var wantRPS []float64
		for _, n := range c.records {
			runs = append(runs, wanRunAt(1, 0, n))
			wantRPS = append(wantRPS, float64(n))
		}
		got, rps := medianRun(runs)
		if got != c.want || !slices.Equal(rps, wantRPS) {
			t.Errorf("medianRun(%v) = %d, %v; want %d, %v (run order)", c.records, got, rps, c.want, wantRPS)
		}
	}
}

func TestWANRunNames(t *testing.T) {
	var names []string
	for _, rtt := range []time.Duration{0, 80 * time.Millisecond} {
		for i := 1; i <= 3; i++ {
			backlog, steady := wanTopics(wanRunName(rtt, i))
			names = append(names, wanRunName(rtt, i), backlog, steady)
		}
	}
	if got := names[:3]; !slices.Equal(got, []string{"0ms", "wan-0ms", "wanlat-0ms"}) {
		t.Errorf("the first run's names changed: %v", got)
	}
	if got := names[3:6]; !slices.Equal(got, []string{"0ms-r2", "wan-0ms-r2", "wanlat-0ms-r2"}) {
		t.Errorf("the second run's names: %v", got)
	}
	if u := slices.Compact(slices.Sorted(slices.Values(names))); len(u) != len(names) {
		t.Errorf("a name twice: %v", names)
	}
}

func TestRenderWANRepeats(t *testing.T) {
	o := &options{wanRecords: 500000, rate: 5000, wanPartitions: []int{1}, contenders: []string{"kmirror"}, wanRepeats: 3, valueSize: 1024}
	once := wanRunAt(1, 80*time.Millisecond, 60_000)
	once.bounded = true
	runs := []wanRun{wanRunAt(1, 0, 174_000), wanRunAt(1, 0, 132_400), wanRunAt(1, 0, 274_100)}
	m, rps := medianRun(runs)
	med := runs[m]
	med.repeats = rps
	var b strings.Builder
	(&report{o: o, wan: map[string][]wanRun{"kmirror": {med, once}}}).renderWAN(&b)
	checkWANTable(t, b.String(), []string{
		"| records/s | records/s of each run | × at 0 ms |",
		"| kmirror | 1 | 0 | 174000 | 174000, 132400, 274100 | 1.00 |",
		"| kmirror | 1 | 80 | 60000 | - | 0.34 |",
		"measured 3 times (-wan-repeats)",
	}, "|")
}

// checkWANTable fails t unless the rendered WAN report out holds every
// one of wants, has no formatting error, and every line starting with
// one of rows has the 12 columns of the contenders' table.
func checkWANTable(t *testing.T, out string, wants []string, rows ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "%!") {
		t.Errorf("a formatting error in:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		for _, row := range rows {
			if strings.HasPrefix(line, row) {
				if strings.Count(line, "|") != 13 {
					t.Errorf("not 12 columns: %q", line)
				}
				break
			}
		}
	}
}

// mm2-defaults runs MirrorMaker 2 as it comes: no tasks.max, no client
// tuning; mm2 keeps its task per partition and kmirror's batching.
func TestMM2DefaultsProperties(t *testing.T) {
	p := &pair{src: &kafkatest.Cluster{}, dst: &kafkatest.Cluster{}}
	s := spec{topics: "t", partitions: 16, via: "127.0.0.1:1"}
	tuned := mm2Properties(p, s, 0)
	s.defaultTasks = true
	defaults := mm2Properties(p, s, 0)
	for _, k := range []string{"tasks.max = 16", "producer.batch.size", "consumer.fetch.max.bytes"} {
		if !strings.Contains(tuned, k) {
			t.Errorf("mm2 lacks %q:\n%s", k, tuned)
		}
		if strings.Contains(defaults, k) {
			t.Errorf("mm2-defaults sets %q:\n%s", k, defaults)
		}
	}
}

// stopsAt feeds a progress the count at each poll of a wait (polls every
// 100 ms from 0, as wanRest's, for length) and returns the time of the
// poll at which it first called the copy stopped, or -1.
func stopsAt(counts func(at time.Duration) int64, length time.Duration) time.Duration {
	var p progress
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for at := time.Duration(0); at <= length; at += 100 * time.Millisecond {
		if p.stopped(t0.Add(at), counts(at), wanStopped) {
			return at
		}
	}
	return -1
}

func TestProgressStopped(t *testing.T) {
	for _, c := range []struct {
		name   string
		counts func(at time.Duration) int64
		want   time.Duration // -1: never stopped
	}{
		// MM2 at its defaults at 150 ms: a batch of a few hundred
		// records every few seconds, for ten minutes.
		{"slow but steady", func(at time.Duration) int64 { return 1000 + 300*int64(at/(3*time.Second)) }, -1},
		// A record just inside every limit: slow, not stopped.
		{"grows just inside the limit", func(at time.Duration) int64 { return 1 + int64(at/(wanStopped-100*time.Millisecond)) }, -1},
		// The wait began with the window's records there, and a task
		// died: flat from the first poll, timed from it.
		{"flat from the first poll", func(time.Duration) int64 { return 1_905_827 }, wanStopped},
		// The other tasks copy their partitions for about 6 s, then
		// the count stays short of the backlog: stopped a limit after
		// the last poll that saw it grow (5.9 s), not before.
		{"flat after growing", func(at time.Duration) int64 { return min(1_900_000+int64(at/time.Millisecond), 1_905_827) }, 5900*time.Millisecond + wanStopped},
		// Nothing ever arrived: not this check's to decide (stalled).
		{"never started", func(time.Duration) int64 { return 0 }, -1},
		// Nothing for a while, then records, then flat: timed from the
		// first records.
		{"started late, then flat", func(at time.Duration) int64 {
			if at < 2*time.Minute {
				return 0
			}
			return 10
		}, 2*time.Minute + wanStopped},
		// A poll that reads fewer (never in practice) is no growth.
		{"a lower count is no growth", func(at time.Duration) int64 {
			if at == 30*time.Second {
				return 5
			}
			return 10
		}, wanStopped},
	} {
		if got := stopsAt(c.counts, 10*time.Minute); got != c.want {
			t.Errorf("%s: stopped at %v, want %v (-1: never)", c.name, got, c.want)
		}
	}
}

// The boundary: flat for just under the limit goes on; flat for the limit,
// timed from the last growth, stops.
func TestProgressStoppedBoundary(t *testing.T) {
	var p progress
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if p.stopped(t0, 7, wanStopped) {
		t.Fatal("stopped at the first poll")
	}
	if p.stopped(t0.Add(wanStopped-time.Nanosecond), 7, wanStopped) {
		t.Error("stopped before the limit")
	}
	if p.stopped(t0.Add(wanStopped), 8, wanStopped) {
		t.Error("stopped at a poll whose count grew")
	}
	if p.stopped(t0.Add(2*wanStopped-time.Nanosecond), 8, wanStopped) {
		t.Error("the limit was not timed from the last growth")
	}
	if !p.stopped(t0.Add(2*wanStopped), 8, wanStopped) {
		t.Error("flat for the limit after records arrived, and not stopped")
	}
}

func TestKeptRun(t *testing.T) {
	stopped := wanRunAt(1, 0, 9_000)
	stopped.stopped, stopped.arrived = true, 60_000
	for _, c := range []struct {
		name string
		runs []wanRun
		want int
		rps  []float64
	}{
		{"no run stopped: the median", []wanRun{wanRunAt(1, 0, 174_000), wanRunAt(1, 0, 132_000), wanRunAt(1, 0, 274_000)}, 0, []float64{174_000, 132_000, 274_000}},
		{"the first run stopped", []wanRun{stopped}, 0, nil},
		{"a repeat stopped", []wanRun{wanRunAt(1, 0, 150_000), stopped}, 1, []float64{150_000}},
	} {
		got, rps := keptRun(c.runs)
		if got != c.want || !slices.Equal(rps, c.rps) {
			t.Errorf("%s: keptRun = %d, %v; want %d, %v", c.name, got, rps, c.want, c.rps)
		}
	}
}

func TestRenderWANStopped(t *testing.T) {
	o := &options{wanRecords: 2_000_000, rate: 5000, wanPartitions: []int{16}, contenders: []string{"kmirror", "mm2-wan"}, wanRepeats: 3, valueSize: 1024}
	rtt := 80 * time.Millisecond
	// mm2-wan's task for one partition died: 1,905,827 records arrived.
	dead := wanRunAt(16, rtt, 40_000)
	dead.tp.records, dead.tp.cpuWindow, dead.bounded, dead.stopped, dead.arrived = 2_000_000, 3*time.Second, true, true, 1_905_827
	// kmirror's 0 ms run stopped in its second run, after 150,000/s in
	// its first.
	base := wanRunAt(16, 0, 20_000)
	base.tp.records, base.stopped, base.arrived, base.repeats = 2_000_000, true, 1_999_000, []float64{150_000}
	wan := map[string][]wanRun{
		"kmirror": {base, wanRunAt(16, rtt, 120_000)},
		"mm2-wan": {wanRunAt(16, 0, 60_000), dead},
	}
	var b strings.Builder
	(&report{o: o, wan: wan}).renderWAN(&b)
	checkWANTable(t, b.String(), []string{
		"| mm2-wan | 16 | 80 | - (stopped copying at 1905827 of 2000000 records) | - | - | not measured | - | 1.0* |",
		"| mm2-wan | 16 | 0 | 60000 | - | 1.00 | - |",
		"| kmirror | 16 | 0 | - (stopped copying at 1999000 of 2000000 records) | 150000, stopped | - | not measured | - |",
		// No ratio over a base that stopped.
		"| kmirror | 16 | 80 | 120000 | - | - |",
		// kmirror over mm2-wan: 2.00 at 0 ms were it not stopped; none
		// over mm2-wan's stopped copy at 80 ms.
		"| 16 | 0 | - |",
		"| 16 | 80 | - |",
		"did not grow for 1m0s",
	}, "| kmirror", "| mm2", "| contender")
	if got := dead.p99(); got != "not measured" {
		t.Errorf("p99 of a stopped copy = %q", got)
	}
}
