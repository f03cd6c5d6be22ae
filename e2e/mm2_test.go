//go:build e2e

package e2e

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// TestKafkaMM2Takeover: kmirror takes over from MirrorMaker 2 on real
// Kafka. MM2 (dedicated mode, the Maven jars the brokers run from) copies
// N records (KMIRROR_E2E_MM2_RECORDS, default 100,000) and is stopped
// with SIGTERM; more records (and a transaction) are produced; `kmirror
// import-mm2` converts MM2's properties file and kmirror runs with it.
// Then:
//   - each target partition is exactly what MM2 copied followed by what
//     MM2 had not committed onwards: the only duplicates are the records
//     MM2 copied after its last committed position (counted, reported),
//     nothing is copied from the start, nothing is missing;
//   - MM2's own client API against the target (RemoteClusterUtils.
//     translateOffsets, over the checkpoints kmirror writes in MM2's
//     format) agrees with `kmirror translate` for a group committed
//     mid-partition, at a transaction marker and at the end, and
//     MirrorClient.replicationHops finds the source one hop away;
//   - a group committed at an offset MM2 copied (below the takeover) is
//     translated from MM2's offset syncs: MM2's rule over the syncs (read
//     by the test itself), not behind MM2's own checkpoint of the group,
//     not past the exact offset, and noted MM2-accurate.
//
// Two kmirror workers take over together (every worker is a member of the
// mirror's group): they share the slots, each adopting MM2's positions for
// its own partitions, and nothing is copied twice beyond what MM2 left.
func TestKafkaMM2Takeover(t *testing.T) {
	k := requireKafkaBackend(t)
	n := 100_000
	if v := os.Getenv("KMIRROR_E2E_MM2_RECORDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			t.Fatalf("KMIRROR_E2E_MM2_RECORDS=%q: want a number >= 1000", v)
		}
	}
	const parts = 3
	n -= n % parts // whole records per partition
	more := n / 5 / parts * parts
	begin := time.Now()
	mm2Client, err := k.rt.CompileMM2Client(ctxTimeout(t, 2*time.Minute), filepath.Join(k.base, safeName(t.Name())+"-mm2client"))
	if err != nil {
		if errors.Is(err, kafkatest.ErrUnavailable) && !inCI() {
			t.Skipf("no javac to compile the MM2 client program: %v", err)
		}
		t.Fatal(err)
	}
	e := newEnvWith(t, k.src, k.dst, true)
	// Aliases of this test's own: MM2's internal topics are named after
	// them on the shared clusters.
	srcAlias, dstAlias := "a"+e.id, "b"+e.id
	topic := e.topic("mm2")
	remote := srcAlias + "." + topic
	createTopic(t, e.srcCl, topic, parts, nil)
	produceSeq(t, e.srcCl, topic, parts, 0, n/parts)

	// 1. MirrorMaker 2 copies them.
	props := strings.Join([]string{
		"clusters = " + srcAlias + ", " + dstAlias,
		srcAlias + ".bootstrap.servers = " + k.src.Addr(kafkatest.PLAINTEXT),
		dstAlias + ".bootstrap.servers = " + k.dst.Addr(kafkatest.PLAINTEXT),
		srcAlias + "->" + dstAlias + ".enabled = true",
		srcAlias + "->" + dstAlias + ".topics = " + topic,
		dstAlias + "->" + srcAlias + ".enabled = false",
		"tasks.max = " + strconv.Itoa(parts),
		"replication.factor = 1",
		"offset.storage.replication.factor = 1",
		"config.storage.replication.factor = 1",
		"status.storage.replication.factor = 1",
		"checkpoints.topic.replication.factor = 1",
		"heartbeats.topic.replication.factor = 1",
		"offset-syncs.topic.replication.factor = 1",
		"emit.checkpoints.interval.seconds = 1",
		"refresh.topics.interval.seconds = 1",
		"refresh.groups.interval.seconds = 1",
		"sync.topic.acls.enabled = false",
		"",
	}, "\n")
	dir := t.TempDir()
	propsPath := filepath.Join(dir, "mm2.properties")
	if err := os.WriteFile(propsPath, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	mm2, err := k.rt.StartMirrorMaker(dir, propsPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ok, _ := mm2.Exited(); !ok {
			mm2.Stop(30 * time.Second)
		}
		if t.Failed() {
			t.Logf("MirrorMaker 2 log %s:\n%s", mm2.LogPath, mm2.Tail(40))
		}
	})
	waitFor(t, 3*time.Minute, fmt.Sprintf("MirrorMaker 2 to copy %d records to %s", n, remote), func() (bool, string) {
		if ok, err := mm2.Exited(); ok {
			t.Fatalf("MirrorMaker 2 exited: %v\n%s", err, mm2.Tail(40))
		}
		got, _, err := recordCount(ctxTimeout(t, 10*time.Second), e.dstCl, remote)
		if err != nil {
			return false, err.Error()
		}
		return got >= int64(n), fmt.Sprintf("%d records", got)
	})
	// A group that stays behind the takeover: committed at an offset MM2
	// copied, and checkpointed by MM2 before it stops (its answer, over
	// its own sparse syncs, is what kmirror's must not fall behind).
	gOld := e.topic("g-old")
	oldAt := int64(n/parts/2 + 3)
	commitSource(t, e.srcAdm, gOld, topic, map[int32]int64{0: oldAt})
	mm2Old := int64(-1)
	waitFor(t, 90*time.Second, "MirrorMaker 2 to checkpoint "+gOld, func() (bool, string) {
		out, err := mm2Client.Run(ctxTimeout(t, time.Minute), e.dst.Addrs()[0], srcAlias, "translate", gOld)
		if err != nil {
			return false, err.Error()
		}
		for _, l := range splitLines(out) {
			var g, tt string
			var p int32
			var off int64
			if _, err := fmt.Sscanf(l, "%s %s %d %d", &g, &tt, &p, &off); err == nil && tt == remote && p == 0 {
				mm2Old = off
				return true, ""
			}
		}
		return false, "RemoteClusterUtils: " + out
	})
	// SIGTERM: MM2 commits its positions on the way out.
	took, killed := mm2.Stop(60 * time.Second)
	if killed {
		t.Fatalf("MirrorMaker 2 did not exit within 60s of SIGTERM")
	}
	t.Logf("MirrorMaker 2 copied %d records in %v and stopped in %v", n, time.Since(begin).Round(time.Second), took.Round(time.Millisecond))
	mm2Ends := endOffsets(t, e.dstAdm, remote)
	mm2Next := readMM2Next(t, e.dst.Addrs(), "mm2-offsets."+srcAlias+".internal", srcAlias, topic)

	// 2. More records, a transaction in partition 0 and records after its
	// marker.
	produceSeq(t, e.srcCl, topic, parts, n/parts, more/parts)
	marker := produceTxn(t, e.src.Addrs(), topic, 0, "txn", 10)
	produceSeq(t, e.srcCl, topic, 1, n/parts+more/parts, 5)

	// 3. import-mm2, then kmirror.
	cfgPath := filepath.Join(dir, "kmirror.yaml")
	code, _, stderr := runCLI(t, "import-mm2", "--output", cfgPath, propsPath)
	if code != 0 && code != 3 { // 3: settings not mapped, listed
		t.Fatalf("import-mm2 exited %d:\n%s", code, stderr)
	}
	t.Logf("import-mm2 (exit %d) said:\n%s", code, stderr)
	f, err := os.OpenFile(cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("http: {listen: \"127.0.0.1:0\"}\nlog: {level: debug}\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ws := []*worker{e.startWorker(cfgPath), e.startWorker(cfgPath)}
	mirror := srcAlias + "-to-" + dstAlias
	addrs := []string{ws[0].httpAddr(t), ws[1].httpAddr(t)}
	waitFor(t, 90*time.Second, "the two workers to share the slots", func() (bool, string) {
		if ok, why := slotsCovered(ws, addrs, mirror, 16); !ok {
			return false, why
		}
		for i, a := range addrs {
			v, err := workerCluster(a, mirror)
			if err != nil {
				return false, err.Error()
			}
			if len(v.Owned) == 0 {
				return false, fmt.Sprintf("worker %d owns no slot", i)
			}
		}
		return true, ""
	})

	srcRecs, err := readTopic(ctxTimeout(t, time.Minute), e.src.Addrs(), topic)
	if err != nil {
		t.Fatal(err)
	}
	want := make(map[int32][]string, parts)
	dups := int64(0)
	for p := range int32(parts) {
		next, ok := mm2Next[p]
		if !ok {
			t.Fatalf("MirrorMaker 2 committed no position for partition %d", p)
		}
		h := mm2Ends[p]
		if next > h {
			t.Fatalf("partition %d: MM2 committed next offset %d past the target's end %d", p, next, h)
		}
		vals := values(map[int32][]*kgo.Record{p: srcRecs[p]})[p]
		want[p] = append(append([]string(nil), vals[:h]...), vals[next:]...)
		dups += h - next
	}
	e.waitTargetValues(3*time.Minute, remote, want)
	t.Logf("target == source after kmirror took over: %d records copied by MM2, %d by kmirror; duplicates %d (what MM2 copied after its last committed position; end offsets at stop %v, committed next offsets %v)",
		n, more+15+int(dups), dups, mm2Ends, mm2Next)

	// The group behind the takeover translates from MM2's offset syncs:
	// MM2's rule over the syncs MM2 wrote (read here independently), at
	// least as far as MM2's own checkpoint, never past the exact offset.
	if oldAt >= mm2Next[0] {
		t.Fatalf("group %s at %d is not below the takeover at %d", gOld, oldAt, mm2Next[0])
	}
	syncsTopic := "mm2-offset-syncs." + dstAlias + ".internal"
	wantOld := mm2SyncsTranslate(t, e.src.Addrs(), syncsTopic, topic, 0, oldAt)
	exactOld := int64(-1)
	for i, v := range want[0] {
		if v == fmt.Sprintf("p0-%d", oldAt) {
			exactOld = int64(i)
			break
		}
	}
	var old translatedPartition
	waitFor(t, 2*time.Minute, "kmirror translate "+gOld+" to answer from MM2's offset syncs", func() (bool, string) {
		ws[0].checkAlive(t)
		ws[1].checkAlive(t)
		ps, why := translateCLI(t, cfgPath, gOld)
		if len(ps) != 1 || !ps[0].Approximate {
			return false, fmt.Sprintf("%+v %s", ps, why)
		}
		old = ps[0]
		return true, ""
	})
	if old.TargetOffset != wantOld || old.TargetOffset < mm2Old || old.TargetOffset > exactOld || !strings.Contains(old.Reason, "MM2-accurate") {
		t.Fatalf("kmirror translate %s (source offset %d): %+v; want target offset %d (MM2's rule over its offset syncs in %s), between MM2's checkpoint %d and the exact %d, noted MM2-accurate",
			gOld, oldAt, old, wantOld, syncsTopic, mm2Old, exactOld)
	}
	t.Logf("group %s at source offset %d (copied by MM2): kmirror translate %d (MM2-accurate), MM2's checkpoint %d, exact %d", gOld, oldAt, old.TargetOffset, mm2Old, exactOld)

	// 4. Groups on the source: mid-partition, at the marker, at the end.
	srcEnds := endOffsets(t, e.srcAdm, topic)
	groups := map[string]map[int32]int64{
		e.topic("g-mid"):    {1: mm2Next[1] + 7, 2: mm2Next[2] + int64(more/parts/2)},
		e.topic("g-marker"): {0: marker},
		e.topic("g-end"):    srcEnds,
	}
	for g, offs := range groups {
		commitSource(t, e.srcAdm, g, topic, offs)
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)

	// kmirror translate's answers, then MM2's client over the
	// checkpoints kmirror writes.
	wantLines := func() ([]string, string) {
		dstEnds := endOffsets(t, e.dstAdm, remote)
		var lines []string
		for _, g := range names {
			ps, why := translateCLI(t, cfgPath, g)
			if ps == nil {
				return nil, why
			}
			for _, p := range ps {
				if p.Untranslatable {
					t.Fatalf("kmirror translate %s: partition %d (source offset %d) untranslatable: %s", g, p.Partition, p.SourceOffset, p.Reason)
				}
				if p.Behind && p.TargetOffset != dstEnds[p.Partition] {
					// The records are at the target (checked above), but
					// the offset index that translate reads is written
					// after them: not an answer yet. (Behind at the
					// target's end is one: g-end, at the source's end
					// offset, is answered so for good, with the right
					// target offset.)
					return nil, fmt.Sprintf("kmirror translate %s: partition %d (source offset %d) behind, at target offset %d of the copy it knows of; the target's end is %d", g, p.Partition, p.SourceOffset, p.TargetOffset, dstEnds[p.Partition])
				}
				lines = append(lines, fmt.Sprintf("%s %s %d %d", g, p.TargetTopic, p.Partition, p.TargetOffset))
			}
		}
		sort.Strings(lines)
		return lines, ""
	}
	var kmLines []string
	waitFor(t, 2*time.Minute, "kmirror translate to answer for every group", func() (bool, string) {
		ws[0].checkAlive(t)
		ws[1].checkAlive(t)
		var why string
		kmLines, why = wantLines()
		return kmLines != nil, why
	})
	var mm2Lines []string
	waitFor(t, 2*time.Minute, "RemoteClusterUtils.translateOffsets to agree with kmirror translate", func() (bool, string) {
		ws[0].checkAlive(t)
		ws[1].checkAlive(t)
		out, err := mm2Client.Run(ctxTimeout(t, time.Minute), append([]string{e.dst.Addrs()[0], srcAlias, "translate"}, names...)...)
		if err != nil {
			return false, err.Error()
		}
		mm2Lines = splitLines(out)
		return strings.Join(mm2Lines, "\n") == strings.Join(kmLines, "\n"), fmt.Sprintf("RemoteClusterUtils:\n%s\nkmirror translate:\n%s", strings.Join(mm2Lines, "\n"), strings.Join(kmLines, "\n"))
	})
	t.Logf("RemoteClusterUtils.translateOffsets == kmirror translate:\n%s", strings.Join(mm2Lines, "\n"))
	out, err := mm2Client.Run(ctxTimeout(t, time.Minute), e.dst.Addrs()[0], srcAlias, "hops")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != "hops 1" {
		t.Fatalf("MirrorClient.replicationHops(%s) against the target: %q, want hops 1", srcAlias, out)
	}

	// The metrics say what happened (summed over the two workers: each
	// adopts its own partitions; the control plane's owner writes the
	// checkpoints).
	for _, m := range []string{
		fmt.Sprintf(`kmirror_mm2_adopted_partitions_total{mirror="%s"}`, mirror),
		fmt.Sprintf(`kmirror_mm2_checkpoints_total{mirror="%s"}`, mirror),
		fmt.Sprintf(`kmirror_mm2_heartbeats_total{mirror="%s"}`, mirror),
	} {
		sum := 0.0
		for _, a := range addrs {
			_, body, err := httpGet(a, "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			v, _ := metricValue(string(body), m)
			sum += v
		}
		if sum <= 0 {
			t.Errorf("%s summed over the workers = %v, want > 0", m, sum)
		}
	}
	for i, w := range ws {
		if code, _ := w.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("kmirror worker %d exited %d", i, code)
		}
	}
	t.Logf("took %v", time.Since(begin).Round(time.Second))
}

// translatedPartition is a partition of `kmirror translate -o json`.
type translatedPartition struct {
	TargetTopic    string `json:"target_topic"`
	Partition      int32  `json:"partition"`
	SourceOffset   int64  `json:"source_offset"`
	TargetOffset   int64  `json:"target_offset"`
	Behind         bool   `json:"behind"`
	Untranslatable bool   `json:"untranslatable"`
	Approximate    bool   `json:"approximate"`
	Reason         string `json:"reason"`
}

// translateCLI runs `kmirror translate` for group: its partitions, or nil
// and why not.
func translateCLI(t *testing.T, cfgPath, group string) ([]translatedPartition, string) {
	t.Helper()
	code, out, stderr := runCLI(t, "translate", "--config", cfgPath, "--group", group, "-o", "json")
	if code != 0 {
		return nil, fmt.Sprintf("kmirror translate %s exited %d: %s", group, code, stderr)
	}
	var st struct {
		Partitions []translatedPartition `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("kmirror translate %s: %v\n%s", group, err, out)
	}
	return st.Partitions, ""
}

// commitSource commits offs of topic to group on the source.
func commitSource(t *testing.T, adm *kadm.Client, group, topic string, offs map[int32]int64) {
	t.Helper()
	commit := make(kadm.Offsets)
	for p, at := range offs {
		commit.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(ctxTimeout(t, 30*time.Second), group, commit)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit %s: %v", group, err)
	}
}

// mm2SyncsTranslate reads MM2's offset-syncs topic (its binary format,
// decoded here independently of kmirror: key {topic int16-length string,
// partition int32}, value {upstream int64, downstream int64}) and
// translates source offset s of topic/partition with MM2's rule: the
// latest sync at or before s, its downstream offset when it is s, else
// one past it.
func mm2SyncsTranslate(t *testing.T, addrs []string, syncsTopic, topic string, partition int32, s int64) int64 {
	t.Helper()
	byPart, err := readTopic(ctxTimeout(t, time.Minute), addrs, syncsTopic)
	if err != nil {
		t.Fatalf("read %s: %v", syncsTopic, err)
	}
	best, bestDown, syncs := int64(-1), int64(-1), 0
	for _, r := range byPart[0] {
		k, v := r.Key, r.Value
		if len(k) < 2 || len(v) != 16 {
			t.Fatalf("%s offset %d: key %x value %x is no offset sync", syncsTopic, r.Offset, k, v)
		}
		n := int(binary.BigEndian.Uint16(k))
		if len(k) != 2+n+4 {
			t.Fatalf("%s offset %d: key %x is no offset sync key", syncsTopic, r.Offset, k)
		}
		if string(k[2:2+n]) != topic || int32(binary.BigEndian.Uint32(k[2+n:])) != partition {
			continue
		}
		syncs++
		up, down := int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:]))
		if up <= s && up >= best {
			best, bestDown = up, down
		}
	}
	if best < 0 {
		t.Fatalf("%s: none of the %d offset syncs of %s/%d is at or before %d", syncsTopic, syncs, topic, partition, s)
	}
	t.Logf("%s: %d offset syncs of %s/%d; the latest at or before %d is %d -> %d", syncsTopic, syncs, topic, partition, s, best, bestDown)
	if best == s {
		return bestDown
	}
	return bestDown + 1
}

func splitLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

// metricValue finds the sample of series (name and labels as exposed) in a
// Prometheus text exposition.
func metricValue(body, series string) (float64, bool) {
	for _, l := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// produceSeq produces per records to each of partitions [0, parts) of
// topic, with values "p<partition>-<i>" for i from first on.
func produceSeq(t *testing.T, cl *kgo.Client, topic string, parts, first, per int) {
	t.Helper()
	const batch = 5000
	var recs []*kgo.Record
	flush := func() {
		if len(recs) > 0 {
			produce(t, cl, recs...)
			recs = recs[:0]
		}
	}
	for p := range parts {
		for i := first; i < first+per; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Value: fmt.Appendf(nil, "p%d-%d", p, i)})
			if len(recs) == batch {
				flush()
			}
		}
	}
	flush()
}

// produceTxn produces n records to one partition in a committed
// transaction and returns the offset of its commit marker.
func produceTxn(t *testing.T, addrs []string, topic string, p int32, tag string, n int) int64 {
	t.Helper()
	cl := newClient(t, addrs, kgo.TransactionalID("kmirror-e2e-"+topic), kgo.DefaultProduceTopic(topic))
	ctx := ctxTimeout(t, time.Minute)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := range n {
		r := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%s-%d", tag, i)})
		if err := r.FirstErr(); err != nil {
			t.Fatal(err)
		}
		last = r[0].Record.Offset
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	return last + 1
}

// endOffsets lists topic's end offsets by partition.
func endOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctxTimeout(t, 30*time.Second), topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int32]int64)
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// readMM2Next reads MM2's Connect offsets topic (the test's own reading,
// independent of kmirror's): per partition of topic, the next offset
// after the last one MM2 committed as copied.
func readMM2Next(t *testing.T, addrs []string, offsetsTopic, alias, topic string) map[int32]int64 {
	t.Helper()
	byPart, err := readTopic(ctxTimeout(t, time.Minute), addrs, offsetsTopic)
	if err != nil {
		t.Fatalf("read %s: %v", offsetsTopic, err)
	}
	out := make(map[int32]int64)
	for _, recs := range byPart {
		for _, r := range recs {
			var key []json.RawMessage
			if json.Unmarshal(r.Key, &key) != nil || len(key) != 2 || string(key[0]) != `"MirrorSourceConnector"` {
				continue
			}
			var part struct {
				Cluster   string `json:"cluster"`
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
			}
			if err := json.Unmarshal(key[1], &part); err != nil || part.Cluster != alias || part.Topic != topic {
				continue
			}
			var v struct {
				Offset int64 `json:"offset"`
			}
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Fatalf("%s: value %q: %v", offsetsTopic, r.Value, err)
			}
			out[part.Partition] = v.Offset + 1
		}
	}
	return out
}

// TestMM2AdoptWithoutOffsetsTopic: a config with mirrors[].mm2.adopt (as
// import-mm2 writes it) on clusters where MirrorMaker 2 never ran. plan
// reports that run would copy nothing of the topics, and why (MM2's
// offsets topic does not exist); run leaves them pending, and status says
// why once, for the mirror, the topic rows pointing there.
func TestMM2AdoptWithoutOffsetsTopic(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		orders, payments := e.topic("orders"), e.topic("payments")
		createTopic(t, e.srcCl, orders, 2, nil)
		createTopic(t, e.srcCl, payments, 1, nil)
		offsets := "mm2-offsets." + e.id + ".internal" // a cluster shared between tests has no such topic either
		path := e.writeExtConfig("", e.defaultConfig(), extConfig{MirrorRaw: "    mm2: {adopt: true, offsets_topic: " + offsets + "}"})

		code, stdout, stderr := runCLI(t, "plan", "--config", path)
		if code != 3 {
			t.Fatalf("plan with run blocked: exit %d, want 3 (a negative answer)", code)
		}
		for _, want := range []string{
			fmt.Sprintf("! run would copy nothing of %s, %s: adopt MirrorMaker 2's positions (mirrors[].mm2.adopt): ", orders, payments),
			fmt.Sprintf("MirrorMaker 2's offsets topic %s does not exist on the target", offsets),
		} {
			if !strings.Contains(stdout, want) {
				t.Fatalf("plan does not report the blocker %q:\n%s%s", want, stdout, stderr)
			}
		}

		w := e.startWorker(path)
		addr := w.httpAddr(t)
		e.waitFor(60*time.Second, "status to show the adoption error once", func() (bool, string) {
			code, out, errOut := runCLI(t, "status", "--url", addr)
			if code != 3 {
				// The mirror waits for MM2's positions: not ready.
				return false, fmt.Sprintf("exit %d, want 3 (not ready): %s", code, errOut)
			}
			once := strings.Count(out, offsets) == 1 && strings.Contains(out, "last pass failed: adopt MirrorMaker 2's positions")
			rows := strings.Count(out, "pending") == 2 && strings.Count(out, "waiting for MirrorMaker 2's positions: see the mirror's last pass error") == 2
			return once && rows, out
		})
	})
}
