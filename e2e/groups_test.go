//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/e2e/kafkatest/faultproxy"
)

// Issue 8, "How it is shown": the failover test (a consumer group moves
// from the source to the target and receives exactly the records after its
// last source commit) and `kmirror translate`.

// kmContent reads a whole topic (read_committed) from addrs and returns its
// records by topic partition.
func kmContent(t testing.TB, addrs []string, topic string) map[kmTP][]*kgo.Record {
	t.Helper()
	recs, err := readTopic(ctxTimeout(t, 60*time.Second), addrs, topic)
	if err != nil {
		t.Fatalf("reading %s: %v", topic, err)
	}
	out := make(map[kmTP][]*kgo.Record, len(recs))
	for p, rs := range recs {
		out[kmTP{topic, p}] = rs
	}
	return out
}

// kmContentAtLeast is kmContent once every partition of topic holds at
// least n records: a transaction's marker reaches the partitions after
// EndTransaction returns, and until then a read_committed reader stops
// before it.
func kmContentAtLeast(t testing.TB, addrs []string, topic string, n int) map[kmTP][]*kgo.Record {
	t.Helper()
	var out map[kmTP][]*kgo.Record
	waitFor(t, 45*time.Second, fmt.Sprintf("every partition of %s to hold %d committed records", topic, n), func() (bool, string) {
		out = kmContent(t, addrs, topic)
		for tp, rs := range out {
			if len(rs) < n {
				return false, fmt.Sprintf("%v: %d records", tp, len(rs))
			}
		}
		return true, ""
	})
	return out
}

// kmGaps returns the runs of offsets missing between consecutive records
// of recs, as [first, end) pairs.
func kmGaps(recs []*kgo.Record) [][2]int64 {
	var out [][2]int64
	for i := 0; i+1 < len(recs); i++ {
		if recs[i+1].Offset > recs[i].Offset+1 {
			out = append(out, [2]int64{recs[i].Offset + 1, recs[i+1].Offset})
		}
	}
	return out
}

// kmHasOffset reports whether recs hold a record at offset o.
func kmHasOffset(recs []*kgo.Record, o int64) bool {
	return slices.ContainsFunc(recs, func(r *kgo.Record) bool { return r.Offset == o })
}

// kmGroupReadAndCommit is a consumer of group on the cluster at addrs: it
// joins the group, reads topics (read_committed, from the start) until it
// has processed every record below commits[tp] of each partition (last[tp]
// is the offset of the last such record, -1 for none), commits exactly
// commits, and leaves the group. It returns the values it processed, by
// partition.
func kmGroupReadAndCommit(t *testing.T, addrs []string, group string, topics []string, commits, last map[kmTP]int64) map[kmTP][]string {
	t.Helper()
	ctx := ctxTimeout(t, 60*time.Second)
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.MetadataMinAge(100*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	processed := map[kmTP][]string{}
	pending := map[kmTP]bool{}
	for tp, o := range last {
		if o >= 0 {
			pending[tp] = true
		}
	}
	for len(pending) > 0 {
		if ctx.Err() != nil {
			t.Fatalf("group %s on the source: still waiting for records of %v after 60s", group, slices.Collect(maps.Keys(pending)))
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				t.Fatalf("group %s on the source: fetch %s/%d: %v", group, fe.Topic, fe.Partition, fe.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			tp := kmTP{r.Topic, r.Partition}
			if r.Offset >= commits[tp] {
				return // read, not processed: the commit point is earlier
			}
			processed[tp] = append(processed[tp], string(r.Value))
			if r.Offset >= last[tp] {
				delete(pending, tp)
			}
		})
	}
	offs := map[string]map[int32]kgo.EpochOffset{}
	for tp, o := range commits {
		if offs[tp.Topic] == nil {
			offs[tp.Topic] = map[int32]kgo.EpochOffset{}
		}
		offs[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	var commitErr error
	cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			commitErr = err
			return
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					commitErr = fmt.Errorf("%s/%d: %w", rt.Topic, rp.Partition, err)
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatalf("group %s: commit %v on the source: %v", group, commits, commitErr)
	}
	cl.Close() // leaves the group
	got, err := kmCommitted(ctx, kadm.NewClient(newClient(t, addrs)), group)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, commits) {
		t.Fatalf("group %s: committed offsets on the source are %v, want %v", group, got, commits)
	}
	return processed
}

// kmExpectTargetOffsets maps committed source offsets to target offsets
// from the content of both sides (the target partition holds the source
// partition's records in order, nothing else): the target offset of the
// first source record at or after the committed offset, or the target's
// end when there is none.
func kmExpectTargetOffsets(t testing.TB, commits map[kmTP]int64, src, dst map[kmTP][]*kgo.Record, targetOf func(string) string) map[kmTP]int64 {
	t.Helper()
	out := make(map[kmTP]int64, len(commits))
	for tp, c := range commits {
		s, d := src[tp], dst[kmTP{targetOf(tp.Topic), tp.Partition}]
		if len(s) != len(d) {
			t.Fatalf("%v: %d records at the source, %d on the target", tp, len(s), len(d))
		}
		k := slices.IndexFunc(s, func(r *kgo.Record) bool { return r.Offset >= c })
		switch {
		case k >= 0:
			if string(s[k].Value) != string(d[k].Value) {
				t.Fatalf("%v: record %d is %q at the source, %q on the target", tp, k, s[k].Value, d[k].Value)
			}
			out[tp] = d[k].Offset
		case len(d) > 0:
			out[tp] = d[len(d)-1].Offset + 1
		default:
			out[tp] = 0
		}
	}
	return out
}

// kmGroupReadTarget is the failed-over consumer: it joins group on the
// cluster at addrs, reads topics from the group's committed offsets
// (start[tp], by target topic partition) until it has reached end[tp] of
// every partition, and returns the values it received, by partition. It
// commits nothing. A partition without a committed offset starts at its
// end, so a missing commit shows as missing records.
func kmGroupReadTarget(t *testing.T, addrs []string, group string, topics []string, start, end map[kmTP]int64) map[kmTP][]string {
	t.Helper()
	ctx := ctxTimeout(t, 60*time.Second)
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.DisableAutoCommit(),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[kmTP][]string{}
	pending := map[kmTP]bool{}
	for tp, e := range end {
		if start[tp] < e {
			pending[tp] = true
		}
	}
	quietSince := time.Now()
	for len(pending) > 0 || time.Since(quietSince) < 500*time.Millisecond {
		if ctx.Err() != nil {
			t.Fatalf("group %s on the target: partitions %v not read to their end within 60s (received so far: %v)", group, slices.Collect(maps.Keys(pending)), got)
		}
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				t.Fatalf("group %s on the target: fetch %s/%d: %v", group, fe.Topic, fe.Partition, fe.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			tp := kmTP{r.Topic, r.Partition}
			got[tp] = append(got[tp], string(r.Value))
			quietSince = time.Now()
			if r.Offset >= end[tp]-1 {
				delete(pending, tp)
			}
		})
	}
	return got
}

// kmDupsMissing counts duplicates, records missing and records that should
// not be there at all, comparing got with want.
func kmDupsMissing(want, got []string) (dups, missing, extra int) {
	wantSet := map[string]bool{}
	for _, v := range want {
		wantSet[v] = true
	}
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
		switch {
		case !wantSet[v]:
			extra++
		case seen[v] > 1:
			dups++
		}
	}
	for _, v := range want {
		if seen[v] == 0 {
			missing++
		}
	}
	return dups, missing, extra
}

// kmTranslateTable parses the table `kmirror translate` prints:
// [source offset, target offset] by source topic partition; the target
// offset of an untranslatable partition (printed "-") is -1.
func kmTranslateTable(out string) (map[kmTP][2]int64, error) {
	res := map[kmTP][2]int64{}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "SOURCE TOPIC") {
		return nil, fmt.Errorf("no header line in %q", out)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 6 {
			return nil, fmt.Errorf("short line %q", l)
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		so, err2 := strconv.ParseInt(f[2], 10, 64)
		to, err3 := int64(-1), error(nil)
		if f[4] != "-" {
			to, err3 = strconv.ParseInt(f[4], 10, 64)
		}
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("line %q: %v", l, err)
		}
		res[kmTP{f[0], int32(p)}] = [2]int64{so, to}
	}
	return res, nil
}

// kmTranslateJSON runs `kmirror translate -o json` (plus args) and decodes
// the group status it prints.
func kmTranslateJSON(t testing.TB, path, group string, args ...string) (int, kmGroupStatus, string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, append([]string{"translate", "--config", path, "--group", group, "-o", "json"}, args...)...)
	var st kmGroupStatus
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		return code, st, fmt.Sprintf("exit %d, stdout is not JSON (%v):\n%s\nstderr:\n%s", code, err, stdout, stderr)
	}
	return code, st, stderr
}

// TestGroupFailoverExact is the failover test. A consumer group reads part
// of three source topics and commits at arbitrary points: mid-batch on a
// plain topic (and at the very end of one partition), in a gap left by
// compaction on a compacted topic, at a transaction marker and inside an
// aborted transaction on a transactional topic. More records follow.
// kmirror (group sync every 1s) syncs the group; /api/v1/groups shows it
// synced with the exact target offsets, the target group has them
// committed, and `kmirror translate` prints the same. Then the same group
// consumes from the target and receives exactly the records after its
// last source commit, compared by content: no duplicates, none missing.
//
// Compaction: kfake compacts when told to (Cluster.Compact); real Kafka
// gets a source cluster of the test's own whose log cleaner backs off for
// only 100ms (kafkatest.FastCompactionProperties), and the topic rolls a
// segment per round of writes (segment.ms=100). The target copy does not
// get segment.ms and min.cleanable.dirty.ratio (excluded from the config
// sync), so it is not compacted behind the test's back.
func TestGroupFailoverExact(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		var e *env
		var compactNow func()
		if b.Name() == "kafka" {
			k := requireKafkaBackend(t)
			cs := kmStartKafka(t, kafkatest.Config{Name: "compacting-source", Dir: kmKafkaDir(t, "compacting-source"), Properties: kafkatest.FastCompactionProperties()})
			e = newEnvWith(t, cs[0], k.dst, true)
		} else {
			e = newEnv(t, b, ClusterSpec{Brokers: 1})
			compactNow = e.src.(*kfakeCluster).c.Compact
		}
		plain, compacted, txn := e.topic("plain"), e.topic("compacted"), e.topic("txn")
		topics := []string{plain, compacted, txn}
		group := "billing-" + e.id
		createTopic(t, e.srcCl, plain, 2, nil)
		compactCfg := map[string]*string{}
		for k, v := range kafkatest.FastCompactionTopicConfigs() {
			compactCfg[k] = kmsg.StringPtr(v)
		}
		createTopic(t, e.srcCl, compacted, 1, compactCfg)
		createTopic(t, e.srcCl, txn, 2, nil)

		// plain: three produce calls of 20 records per partition.
		for batch := range 3 {
			var recs []*kgo.Record
			for p := int32(0); p < 2; p++ {
				for i := range 20 {
					recs = append(recs, &kgo.Record{Topic: plain, Partition: p, Value: []byte(val("plain", p, batch*20+i))})
				}
			}
			produce(t, e.srcCl, recs...)
		}
		// compacted: five rounds, each overwriting keys dup-0..4 and
		// adding five keys of its own, in segments of their own.
		for r := range 5 {
			var recs []*kgo.Record
			for i := range 5 {
				recs = append(recs, &kgo.Record{Topic: compacted, Key: []byte(fmt.Sprintf("dup-%d", i)), Value: []byte(fmt.Sprintf("compacted-r%d-dup%d", r, i))})
			}
			for i := range 5 {
				recs = append(recs, &kgo.Record{Topic: compacted, Key: []byte(fmt.Sprintf("uniq-%d-%d", r, i)), Value: []byte(fmt.Sprintf("compacted-r%d-uniq%d", r, i))})
			}
			produce(t, e.srcCl, recs...)
			time.Sleep(150 * time.Millisecond) // > segment.ms: the next write rolls a segment
		}
		// txn: committed, plain, aborted, committed.
		produceTransactions(t, e.src.Addrs(), txn, "before", 2)

		if compactNow != nil {
			compactNow()
		}
		var compactedGap int64 // an offset compaction removed, with records after it
		e.waitFor(30*time.Second, "compaction of "+compacted+" at the source to leave gaps", func() (bool, string) {
			recs := kmContent(t, e.src.Addrs(), compacted)[kmTP{compacted, 0}]
			if gaps := kmGaps(recs); len(gaps) > 0 {
				compactedGap = gaps[0][0]
				return true, ""
			}
			return false, fmt.Sprintf("%d records, offsets without gaps", len(recs))
		})

		cfg := e.kmConfigFor()
		m := cfg.Mirrors[0]
		m.Groups = &kmGroups{Include: []string{".*-" + e.id}}
		m.Sync = &kmSync{
			TopicConfigs: &kmSyncItem{Exclude: append(slices.Clone(kmDefaultConfigExcludes), `segment\.ms`, `min\.cleanable\.dirty\.ratio`)},
			GroupOffsets: &kmSyncItem{Interval: "1s"},
		}
		path := e.kmWriteConfig(cfg)
		w := e.startWorker(path)
		addr := w.httpAddr(t)

		// The group reads part of every topic and commits.
		// produceTransactions leaves 10+3+10 committed records per
		// partition; "after" as many again.
		perPartition := map[string]int{plain: 60, compacted: 1, txn: 23}
		content := map[kmTP][]*kgo.Record{}
		for _, topic := range topics {
			maps.Copy(content, kmContentAtLeast(t, e.src.Addrs(), topic, perPartition[topic]))
		}
		// The offsets of transaction markers and aborted records are
		// the ones a read_committed reader skips. Kafka writes markers
		// after EndTransaction returns, so records produced right after
		// may come first: the layout is found, not assumed.
		txnGaps := func(p int32) [][2]int64 {
			gaps := kmGaps(content[kmTP{txn, p}])
			if len(gaps) == 0 {
				t.Fatalf("%s/%d: no offsets without committed records (markers, the aborted transaction)", txn, p)
			}
			return gaps
		}
		longest := func(gaps [][2]int64) [2]int64 {
			return slices.MaxFunc(gaps, func(a, b [2]int64) int { return int((a[1] - a[0]) - (b[1] - b[0])) })
		}
		abort1 := longest(txnGaps(1)) // the aborted transaction and its marker
		commits := map[kmTP]int64{
			{plain, 0}:     30, // in the middle of the second produced batch
			{plain, 1}:     60, // everything read
			{compacted, 0}: compactedGap,
			// At the first offset a read_committed reader skips: the
			// commit marker of the first transaction.
			{txn, 0}: txnGaps(0)[0][0],
			// Inside the aborted transaction.
			{txn, 1}: (abort1[0] + abort1[1]) / 2,
		}
		if abort1[1]-abort1[0] < 10 {
			t.Fatalf("%s/1: the longest run of skipped offsets is %v, shorter than the aborted transaction (10 records)", txn, abort1)
		}
		for _, tp := range []kmTP{{compacted, 0}, {txn, 0}, {txn, 1}} {
			if kmHasOffset(content[tp], commits[tp]) {
				var offs []string
				for _, r := range content[tp] {
					offs = append(offs, fmt.Sprintf("%d:%s", r.Offset, r.Value))
				}
				t.Fatalf("%v: the commit point %d should be an offset without a committed record (a gap, a marker, an aborted record); the partition holds %v", tp, commits[tp], offs)
			}
		}
		last := map[kmTP]int64{}
		for tp, c := range commits {
			last[tp] = -1
			for _, r := range content[tp] {
				if r.Offset < c {
					last[tp] = r.Offset
				}
			}
		}
		processed := kmGroupReadAndCommit(t, e.src.Addrs(), group, topics, commits, last)
		for tp, c := range commits {
			var want []string
			for _, r := range content[tp] {
				if r.Offset < c {
					want = append(want, string(r.Value))
				}
			}
			if !slices.Equal(processed[tp], want) {
				t.Fatalf("%v: the source consumer processed %q, want %q", tp, processed[tp], want)
			}
		}
		t.Logf("group %s committed %v at the source", group, commits)

		// More records after the commit.
		var more []*kgo.Record
		for p := int32(0); p < 2; p++ {
			for i := range 10 {
				more = append(more, &kgo.Record{Topic: plain, Partition: p, Value: []byte(val("plain-after", p, i))})
			}
		}
		produce(t, e.srcCl, more...)
		produceTransactions(t, e.src.Addrs(), txn, "after", 2)

		// Everything is mirrored.
		perPartition[plain], perPartition[txn] = 70, 46
		content = map[kmTP][]*kgo.Record{}
		target := map[kmTP][]*kgo.Record{}
		for _, topic := range topics {
			c := kmContentAtLeast(t, e.src.Addrs(), topic, perPartition[topic])
			maps.Copy(content, c)
			want := map[int32][]string{}
			for tp, rs := range c {
				want[tp.Partition] = nil
				for _, r := range rs {
					want[tp.Partition] = append(want[tp.Partition], string(r.Value))
				}
			}
			e.waitTargetValues(45*time.Second, "src."+topic, want)
			maps.Copy(target, kmContent(t, e.dst.Addrs(), "src."+topic))
		}
		targetOf := func(topic string) string { return "src." + topic }
		wantTarget := kmExpectTargetOffsets(t, commits, content, target, targetOf)

		// /api/v1/groups shows the group synced, and the target group
		// has the offsets.
		var synced kmGroupStatus
		e.waitFor(45*time.Second, fmt.Sprintf("/api/v1/groups to show %s synced with target offsets %v, committed on the target", group, wantTarget), func() (bool, string) {
			gs, err := kmGroupsHTTP(addr)
			if err != nil {
				return false, err.Error()
			}
			g, ok := gs[group]
			if !ok {
				return false, fmt.Sprintf("group not listed: %+v", gs)
			}
			if g.State != "synced" || g.Mirror != m.Name {
				return false, fmt.Sprintf("group %+v", g)
			}
			got := kmPartitionOffsets(g.Partitions)
			for tp, c := range commits {
				if got[tp] != [2]int64{c, wantTarget[tp]} {
					return false, fmt.Sprintf("%v: source %d -> target %d, want %d -> %d (group %+v)", tp, got[tp][0], got[tp][1], c, wantTarget[tp], g)
				}
			}
			if len(got) != len(commits) {
				return false, fmt.Sprintf("%d partitions, want %d: %+v", len(got), len(commits), g)
			}
			for _, p := range g.Partitions {
				if p.Behind || p.TargetTopic != targetOf(p.SourceTopic) {
					return false, fmt.Sprintf("partition %+v", p)
				}
			}
			committed, err := kmCommitted(ctxTimeout(t, 10*time.Second), e.dstAdm, group)
			if err != nil {
				return false, err.Error()
			}
			for tp, o := range wantTarget {
				if committed[kmTP{targetOf(tp.Topic), tp.Partition}] != o {
					return false, fmt.Sprintf("target group committed %v, want %v (by source partition)", committed, wantTarget)
				}
			}
			synced = g
			return true, ""
		})
		t.Logf("/api/v1/groups: %+v", synced)

		// kmirror translate prints the same, as JSON and as a table.
		code, st, msg := kmTranslateJSON(t, path, group)
		if code != 0 || !maps.Equal(kmPartitionOffsets(st.Partitions), kmPartitionOffsets(synced.Partitions)) {
			t.Errorf("kmirror translate -o json: exit %d, partitions %+v, want exit 0 and %+v; %s", code, st.Partitions, synced.Partitions, msg)
		}
		code, stdout, stderr := runCLI(t, "translate", "--config", path, "--group", group)
		if tab, err := kmTranslateTable(stdout); code != 0 || err != nil || !maps.Equal(tab, kmPartitionOffsets(synced.Partitions)) {
			t.Errorf("kmirror translate: exit %d, table %v (%v), want %v\nstdout:\n%s\nstderr:\n%s", code, tab, err, kmPartitionOffsets(synced.Partitions), stdout, stderr)
		}

		// Failover: the group consumes from the target.
		starts, ends := map[kmTP]int64{}, map[kmTP]int64{}
		var targets []string
		for _, topic := range topics {
			targets = append(targets, targetOf(topic))
		}
		endOffs, err := e.dstAdm.ListEndOffsets(ctxTimeout(t, 10*time.Second), targets...)
		if err != nil {
			t.Fatal(err)
		}
		endOffs.Each(func(o kadm.ListedOffset) { ends[kmTP{o.Topic, o.Partition}] = o.Offset })
		for tp, o := range wantTarget {
			starts[kmTP{targetOf(tp.Topic), tp.Partition}] = o
		}
		got := kmGroupReadTarget(t, e.dst.Addrs(), group, targets, starts, ends)
		total := 0
		for tp, c := range commits {
			var want []string
			for _, r := range content[tp] {
				if r.Offset >= c {
					want = append(want, string(r.Value))
				}
			}
			total += len(want)
			g := got[kmTP{targetOf(tp.Topic), tp.Partition}]
			dups, missing, extra := kmDupsMissing(want, g)
			if !slices.Equal(g, want) {
				t.Errorf("%v (committed at the source at %d): after failover the group received %d records (%d duplicates, %d missing, %d never after the commit), want exactly the %d after the commit\n got: %q\nwant: %q",
					tp, c, len(g), dups, missing, extra, len(want), g, want)
			}
		}
		if !t.Failed() {
			t.Logf("after failover the group received exactly the %d records after its source commits: 0 duplicates, 0 missing", total)
		}
		// The default producer.compression (source) forwards the plain
		// topic's batches as they are: the exact translation above
		// holds on the pass-through path (a silent fallback fails here).
		if n := mustScrapeMetric(t, addr, "kmirror_batches_total", map[string]string{"path": "passthrough"}); n == 0 {
			t.Errorf("kmirror_batches_total{path=passthrough} = 0: nothing was forwarded as it is")
		}
		// The compacted topic's batches (offset gaps) are recognised before
		// they are sent: the target never has to refuse one.
		if n := mustScrapeMetric(t, addr, "kmirror_passthrough_fallbacks_total", map[string]string{"reason": "target_refused"}); n != 0 {
			t.Errorf("kmirror_passthrough_fallbacks_total{reason=target_refused} = %v, want 0", n)
		}
	})
}

// TestGroupTranslateCLI: `kmirror translate --group G` prints a source
// group's exact target offsets (JSON and table) from the offset index on
// the target, with no group sync running; --apply commits them to the
// fresh target group (checked with kadm); --apply while the group has an
// active member on the target is refused (exit 1, "active members") and
// leaves the target group as it was. The active member uses the classic
// group protocol, and in a second subtest the KIP-848 consumer protocol.
func TestGroupTranslateCLI(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		ledger := e.topic("ledger")
		createTopic(t, e.srcCl, ledger, 2, nil)
		r1, w1 := seqRecords(ledger, "a", 2, 25)
		produce(t, e.srcCl, r1...)
		r2, w2 := seqRecords(ledger, "b", 2, 25)
		produce(t, e.srcCl, r2...)

		cfg := e.kmConfigFor()
		cfg.Mirrors[0].Sync = &kmSync{GroupOffsets: &kmSyncItem{Enabled: kmBool(false)}}
		path := e.kmWriteConfig(cfg)
		e.startWorker(path)
		e.waitTargetValues(45*time.Second, "src."+ledger, appendWant(w1, w2))
		content := kmContent(t, e.src.Addrs(), ledger)
		target := kmContent(t, e.dst.Addrs(), "src."+ledger)
		targetOf := func(topic string) string { return "src." + topic }

		for _, tc := range []struct {
			name    string
			commits map[kmTP]int64
			member  []kgo.Opt
		}{
			{"classic", map[kmTP]int64{{ledger, 0}: 17, {ledger, 1}: 33}, nil},
			{"consumer_protocol", map[kmTP]int64{{ledger, 0}: 8, {ledger, 1}: 41}, kmConsumerProtocol},
		} {
			t.Run(tc.name, func(t *testing.T) {
				group := "payroll-" + tc.name + "-" + e.id
				last := map[kmTP]int64{}
				for tp, c := range tc.commits {
					last[tp] = c - 1
				}
				kmGroupReadAndCommit(t, e.src.Addrs(), group, []string{ledger}, tc.commits, last)
				want := kmExpectTargetOffsets(t, tc.commits, content, target, targetOf)
				wantRows := map[kmTP][2]int64{}
				for tp, c := range tc.commits {
					wantRows[tp] = [2]int64{c, want[tp]}
				}

				// Printed, once the worker stored its progress.
				var st kmGroupStatus
				waitFor(t, 45*time.Second, fmt.Sprintf("kmirror translate -o json to print %v", wantRows), func() (bool, string) {
					code, s, msg := kmTranslateJSON(t, path, group)
					if code != 0 {
						return false, fmt.Sprintf("exit %d: %s", code, msg)
					}
					st = s
					if got := kmPartitionOffsets(s.Partitions); !maps.Equal(got, wantRows) {
						return false, fmt.Sprintf("partitions %+v", s.Partitions)
					}
					return true, ""
				})
				if st.State != "synced" || st.Group != group {
					t.Errorf("kmirror translate -o json: %+v, want group %s in state synced", st, group)
				}
				for _, p := range st.Partitions {
					if p.Behind || p.TargetTopic != targetOf(p.SourceTopic) {
						t.Errorf("kmirror translate -o json: partition %+v, want target topic %s, not behind", p, targetOf(p.SourceTopic))
					}
				}
				code, stdout, stderr := runCLI(t, "translate", "--config", path, "--group", group)
				if tab, err := kmTranslateTable(stdout); code != 0 || err != nil || !maps.Equal(tab, wantRows) {
					t.Errorf("kmirror translate: exit %d, table %v (%v), want %v\nstdout:\n%s\nstderr:\n%s", code, tab, err, wantRows, stdout, stderr)
				}

				// --apply on the fresh target group.
				ctx := ctxTimeout(t, time.Minute)
				// (kfake answers GROUP_ID_NOT_FOUND, Kafka no offsets.)
				if got, err := kmCommitted(ctx, e.dstAdm, group); (err != nil && !errors.Is(err, kerr.GroupIDNotFound)) || len(got) > 0 {
					t.Fatalf("the target group %s should not exist yet: offsets %v, err %v", group, got, err)
				}
				code, stdout, stderr = runCLI(t, "translate", "--config", path, "--group", group, "--apply")
				if code != 0 || !strings.Contains(stderr, "committed 2 partitions") {
					t.Errorf("kmirror translate --apply on a fresh group: exit %d, want 0 and \"committed 2 partitions\"\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
				}
				wantCommitted := map[kmTP]int64{}
				for tp, o := range want {
					wantCommitted[kmTP{targetOf(tp.Topic), tp.Partition}] = o
				}
				if got, err := kmCommitted(ctx, e.dstAdm, group); err != nil || !maps.Equal(got, wantCommitted) {
					t.Errorf("after kmirror translate --apply the target group has %v (err %v), want %v", got, err, wantCommitted)
				}

				// The source group moves on, so that another apply would
				// change the target group, and a member joins the group on
				// the target.
				moved := kadm.Offsets{}
				moved.Add(kadm.Offset{Topic: ledger, Partition: 0, At: 45, LeaderEpoch: -1})
				if resp, err := e.srcAdm.CommitOffsets(ctx, group, moved); err != nil || resp.Error() != nil {
					t.Fatalf("move the source group: %v %v", err, resp.Error())
				}
				kmJoinTarget(t, e.dst.Addrs(), group, []string{targetOf(ledger)}, tc.member...)
				code, stdout, stderr = runCLI(t, "translate", "--config", path, "--group", group, "--apply")
				if code != 1 || !strings.Contains(stderr, "has 1 active member on the target (") {
					t.Errorf("kmirror translate --apply while %s has an active member on the target: exit %d, want 1 and a message about its 1 active member\nstdout:\n%s\nstderr:\n%s", group, code, stdout, stderr)
				}
				if got, err := kmCommitted(ctx, e.dstAdm, group); err != nil || !maps.Equal(got, wantCommitted) {
					t.Errorf("after the refused --apply the target group has %v (err %v), want it unchanged at %v", got, err, wantCommitted)
				}
			})
		}
	})
}

// kmJoinTarget starts a member of group on the cluster at addrs, consuming
// topics without committing, and waits until it has partitions. The
// member leaves when the returned function is called (or the test ends).
func kmJoinTarget(t *testing.T, addrs []string, group string, topics []string, opts ...kgo.Opt) (leave func()) {
	t.Helper()
	assigned := make(chan struct{}, 1)
	member, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addrs...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			select {
			case assigned <- struct{}{}:
			default:
			}
		}),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			member.PollFetches(ctx)
		}
	}()
	var once bool
	leave = func() {
		if once {
			return
		}
		once = true
		stop()
		<-done
		member.Close()
	}
	t.Cleanup(leave)
	select {
	case <-assigned:
	case <-time.After(60 * time.Second):
		t.Fatalf("the member of %s on the target got no partitions within 60s", group)
	}
	return leave
}

// kmConsumerProtocol are the member options of the KIP-848 consumer
// protocol (kgo uses the classic protocol by default).
var kmConsumerProtocol = []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer())}

// TestGroupSyncLeavesActiveGroups: the group sync writes a target group
// only while it has no members there. With a member consuming on the
// target (classic protocol; in a second subtest the KIP-848 consumer
// protocol), /api/v1/groups shows the group "active" and the target
// offsets stay where they are although the source group moved; once the
// member leaves, the target group follows the source again.
func TestGroupSyncLeavesActiveGroups(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		topic := e.topic("events")
		createTopic(t, e.srcCl, topic, 1, nil)
		recs, want := seqRecords(topic, "ev", 1, 40)
		produce(t, e.srcCl, recs...)
		cfg := e.kmConfigFor()
		cfg.Mirrors[0].Sync = &kmSync{GroupOffsets: &kmSyncItem{Interval: "1s"}}
		w := e.startWorker(e.kmWriteConfig(cfg))
		addr := w.httpAddr(t)
		e.waitTargetValues(45*time.Second, "src."+topic, want)
		tp, ttp := kmTP{topic, 0}, kmTP{"src." + topic, 0}

		for _, tc := range []struct {
			name   string
			member []kgo.Opt
		}{{"classic", nil}, {"consumer_protocol", kmConsumerProtocol}} {
			t.Run(tc.name, func(t *testing.T) {
				group := "watchers-" + tc.name + "-" + e.id
				ctx := ctxTimeout(t, time.Minute)
				waitGroup := func(desc, state string, target int64) {
					t.Helper()
					waitFor(t, 45*time.Second, desc, func() (bool, string) {
						gs, err := kmGroupsHTTP(addr)
						if err != nil {
							return false, err.Error()
						}
						g := gs[group]
						if g.State != state {
							return false, fmt.Sprintf("group %+v", g)
						}
						if target < 0 {
							return true, ""
						}
						committed, err := kmCommitted(ctx, e.dstAdm, group)
						if err != nil {
							return false, err.Error()
						}
						return committed[ttp] == target, fmt.Sprintf("target group committed %v, want %s at %d; API: %+v", committed, ttp, target, g)
					})
				}
				kmGroupReadAndCommit(t, e.src.Addrs(), group, []string{topic}, map[kmTP]int64{tp: 10}, map[kmTP]int64{tp: 9})
				waitGroup("the group synced to 10 on the target", "synced", 10)

				leave := kmJoinTarget(t, e.dst.Addrs(), group, []string{ttp.Topic}, tc.member...)
				moved := kadm.Offsets{}
				moved.Add(kadm.Offset{Topic: topic, Partition: 0, At: 25, LeaderEpoch: -1})
				if resp, err := e.srcAdm.CommitOffsets(ctx, group, moved); err != nil || resp.Error() != nil {
					t.Fatalf("move the source group to 25: %v %v", err, resp.Error())
				}
				waitGroup("/api/v1/groups to show the group active while a member consumes on the target", "active", -1)
				time.Sleep(2500 * time.Millisecond) // two more syncs
				if got, err := kmCommitted(ctx, e.dstAdm, group); err != nil || got[ttp] != 10 {
					t.Errorf("while a member consumes on the target, the target group is at %v (err %v), want it left at 10", got, err)
				}
				if gs, err := kmGroupsHTTP(addr); err != nil || gs[group].State != "active" {
					t.Errorf("while a member consumes on the target, /api/v1/groups shows %+v (err %v), want state active", gs[group], err)
				}

				leave()
				waitGroup("the group to follow the source again once the member left", "synced", 25)
			})
		}
	})
}

// kmCommittedObserved is kmCommitted for a test that injects OffsetFetch
// faults aimed at kmirror: it asks with RequireStable (KIP-447), which
// kmirror never sets, so a fault can tell the test's reads from kmirror's.
// Without pending transactional commits the answer is the same.
func kmCommittedObserved(ctx context.Context, adm *kadm.Client, group string) (map[kmTP]int64, error) {
	return kmCommitted(kadm.RequireStable(ctx), adm, group)
}

// TestGroupSyncTargetOffsetFetchFault: "failed target offset fetch: no
// commit". While the target answers kmirror's OffsetFetch for a group with
// an error, the group sync cannot tell where the target group stands (the
// never-rewind guard needs it), so it commits nothing there although the
// source group moved: /api/v1/groups shows the group "error" with the
// reason, kmirror_admin_errors_total{request="fetch_offsets"} counts the
// failures, and the log says so once, not once per sync. When the fault
// ends, the target group follows the source again.
//
// Both backends: the fault proxy in front of the target answers kmirror's
// OffsetFetch with an error (on real Kafka, denying DESCRIBE on the group
// would fail its DescribeGroups as well).
func TestGroupSyncTargetOffsetFetchFault(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		// The fault is the proxy's, in front of the target for kmirror
		// only: the test's own reads of the target see no fault.
		proxy := e.proxyTarget()
		topic := e.topic("ledger")
		createTopic(t, e.srcCl, topic, 1, nil)
		recs, want := seqRecords(topic, "l", 1, 40)
		produce(t, e.srcCl, recs...)
		cfg := e.kmConfigFor()
		cfg.Mirrors[0].Sync = &kmSync{GroupOffsets: &kmSyncItem{Interval: "1s"}}
		w := e.startWorker(e.kmWriteConfig(cfg))
		addr := w.httpAddr(t)
		e.waitTargetValues(45*time.Second, "src."+topic, want)
		group := "ledger-readers-" + e.id
		ttp := kmTP{"src." + topic, 0}
		ctx := ctxTimeout(t, 2*time.Minute)
		commitSource := func(at int64) {
			t.Helper()
			os := kadm.Offsets{}
			os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
			if resp, err := e.srcAdm.CommitOffsets(ctx, group, os); err != nil || resp.Error() != nil {
				t.Fatalf("commit %d to %s at the source: %v %v", at, group, err, resp.Error())
			}
		}
		waitTarget := func(desc string, at int64, state string) {
			t.Helper()
			e.waitFor(30*time.Second, desc, func() (bool, string) {
				gs, err := kmGroupsHTTP(addr)
				if err != nil {
					return false, err.Error()
				}
				committed, err := kmCommittedObserved(ctx, e.dstAdm, group)
				if err != nil {
					return false, err.Error()
				}
				return committed[ttp] == at && gs[group].State == state, fmt.Sprintf("target group %v, API %+v", committed, gs[group])
			})
		}
		commitSource(10)
		waitTarget("the group synced to 10 on the target", 10, "synced")

		var hits atomic.Int64
		fail := faultproxy.OffsetFetchError(kerr.UnknownServerError.Code)
		proxy.SetHook(kmsg.OffsetFetch, func(req kmsg.Request, resp kmsg.Response) faultproxy.Action {
			hits.Add(1)
			return fail(req, resp)
		})
		defer proxy.SetHook(kmsg.OffsetFetch, nil)
		commitSource(25)
		e.waitFor(30*time.Second, "/api/v1/groups to show the group in error after the source moved to 25", func() (bool, string) {
			gs, err := kmGroupsHTTP(addr)
			if err != nil {
				return false, err.Error()
			}
			g := gs[group]
			ok := g.State == "error" && strings.Contains(g.Error, "cannot read the group's offsets on the target") &&
				len(g.Partitions) == 1 && g.Partitions[0].SourceOffset == 25
			return ok, fmt.Sprintf("group %+v", g)
		})
		// Two more faulted syncs after the one that showed the error.
		seen := hits.Load()
		e.waitFor(30*time.Second, "two more syncs that meet the fault", func() (bool, string) {
			return hits.Load() >= seen+2, fmt.Sprintf("%d faulted fetches, want %d", hits.Load(), seen+2)
		})
		if got, err := kmCommittedObserved(ctx, e.dstAdm, group); err != nil || got[ttp] != 10 {
			t.Errorf("while the target's OffsetFetch fails, the target group is at %v (err %v), want it left at 10", got, err)
		}
		// A sync counts its failure after the faulted answer came back:
		// wait for the count rather than read it as the fault is hit.
		e.waitMetric(addr, "kmirror_admin_errors_total", map[string]string{"mirror": cfg.Mirrors[0].Name, "request": "fetch_offsets"}, 30*time.Second,
			">= 3", func(v float64) bool { return v >= 3 })
		syncs := int(hits.Load())
		if n := len(w.logLines("cannot read the group's offsets on the target", group)); n < 1 || n >= syncs {
			t.Errorf("the failure was logged %d times over %d faulted syncs, want at least once and rate-limited", n, syncs)
		}

		proxy.SetHook(kmsg.OffsetFetch, nil)
		waitTarget("the target group to follow the source to 25 once the fault ended", 25, "synced")
	})
}

// TestGroupTranslateRewindCLI: `kmirror translate --apply` refuses to
// move a target group backwards: with the target group ahead of the
// translation (consumers moved on there), it exits 1 naming the partition
// with its current and new offsets and commits nothing; with
// --allow-rewind it applies. A partition nothing of which was copied is
// printed as untranslatable ("-" and the reason in the table,
// "untranslatable": true in JSON) and never applied. --allow-rewind
// without --apply is a usage error.
func TestGroupTranslateRewindCLI(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		topic := e.topic("refunds")
		createTopic(t, e.srcCl, topic, 2, nil)
		var recs []*kgo.Record
		var vals []string
		for i := range 50 { // partition 1 stays empty
			v := val("r", 0, i)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)})
			vals = append(vals, v)
		}
		produce(t, e.srcCl, recs...)
		cfg := e.kmConfigFor()
		cfg.Mirrors[0].Sync = &kmSync{GroupOffsets: &kmSyncItem{Enabled: kmBool(false)}}
		path := e.kmWriteConfig(cfg)
		e.startWorker(path)
		e.waitTargetValues(45*time.Second, "src."+topic, map[int32][]string{0: vals, 1: nil})
		target := "src." + topic
		commits := map[kmTP]int64{{topic, 0}: 20}
		want := kmExpectTargetOffsets(t, commits, kmContent(t, e.src.Addrs(), topic), kmContent(t, e.dst.Addrs(), target), func(s string) string { return "src." + s })
		to := want[kmTP{topic, 0}]

		group := "refunds-" + e.id
		ctx := ctxTimeout(t, 2*time.Minute)
		src := kadm.Offsets{}
		src.Add(kadm.Offset{Topic: topic, Partition: 0, At: 20, LeaderEpoch: -1})
		src.Add(kadm.Offset{Topic: topic, Partition: 1, At: 0, LeaderEpoch: -1})
		if resp, err := e.srcAdm.CommitOffsets(ctx, group, src); err != nil || resp.Error() != nil {
			t.Fatalf("commit at the source: %v %v", err, resp.Error())
		}
		ahead := to + 25
		dst := kadm.Offsets{}
		dst.Add(kadm.Offset{Topic: target, Partition: 0, At: ahead, LeaderEpoch: -1})
		if resp, err := e.dstAdm.CommitOffsets(ctx, group, dst); err != nil || resp.Error() != nil {
			t.Fatalf("commit on the target: %v %v", err, resp.Error())
		}

		// Printed once the worker stored its progress.
		waitFor(t, 30*time.Second, fmt.Sprintf("kmirror translate -o json to print %s/0 at %d and %s/1 untranslatable", topic, to, topic), func() (bool, string) {
			code, st, msg := kmTranslateJSON(t, path, group)
			if code != 0 || len(st.Partitions) != 2 {
				return false, fmt.Sprintf("exit %d, %+v: %s", code, st, msg)
			}
			p0, p1 := st.Partitions[0], st.Partitions[1]
			ok := p0.TargetOffset == to && !p0.Untranslatable && p1.Untranslatable && p1.TargetOffset == -1 && p1.Reason != "" && st.State == "partial"
			return ok, fmt.Sprintf("%+v", st)
		})
		code, stdout, stderr := runCLI(t, "translate", "--config", path, "--group", group)
		if tab, err := kmTranslateTable(stdout); code != 0 || err != nil || tab[kmTP{topic, 1}] != [2]int64{0, -1} || !strings.Contains(stdout, "untranslatable: ") {
			t.Errorf("kmirror translate: exit %d, table %v (%v), want %s/1 printed with \"-\" and an untranslatable note\nstdout:\n%s\nstderr:\n%s", code, tab, err, topic, stdout, stderr)
		}

		committed := func() map[kmTP]int64 {
			t.Helper()
			got, err := kmCommitted(ctx, e.dstAdm, group)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		code, stdout, stderr = runCLI(t, "translate", "--config", path, "--group", group, "--apply")
		wantMsg := fmt.Sprintf("%s/0 from %d to %d", target, ahead, to)
		if code != 1 || !strings.Contains(stderr, wantMsg) || !strings.Contains(stderr, "--allow-rewind") {
			t.Errorf("kmirror translate --apply over a target group that is ahead: exit %d, want 1 and %q with a hint at --allow-rewind\nstdout:\n%s\nstderr:\n%s", code, wantMsg, stdout, stderr)
		}
		if got := committed(); !maps.Equal(got, map[kmTP]int64{{target, 0}: ahead}) {
			t.Errorf("after the refused apply the target group is at %v, want it untouched at %s/0 = %d", got, target, ahead)
		}

		code, stdout, stderr = runCLI(t, "translate", "--config", path, "--group", group, "--allow-rewind")
		if code != 2 {
			t.Errorf("kmirror translate --allow-rewind without --apply: exit %d, want 2\nstderr:\n%s", code, stderr)
		}

		code, stdout, stderr = runCLI(t, "translate", "--config", path, "--group", group, "--apply", "--allow-rewind")
		if code != 0 || !strings.Contains(stderr, "committed 1 partition to group") || !strings.Contains(stderr, "1 of 2 partitions cannot be translated exactly") {
			t.Errorf("kmirror translate --apply --allow-rewind: exit %d, want 0, \"committed 1 partitions\" and the untranslatable one named\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		if got := committed(); !maps.Equal(got, map[kmTP]int64{{target, 0}: to}) {
			t.Errorf("after --apply --allow-rewind the target group is at %v, want %s/0 = %d and nothing for the untranslatable partition", got, target, to)
		}
	})
}
