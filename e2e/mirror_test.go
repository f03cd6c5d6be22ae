//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCopyPreservesRecords: records are copied partition to partition,
// byte-identical: key, value (nil vs empty), headers (order, duplicate keys,
// nil values), timestamp.
func TestCopyPreservesRecords(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 3})
		orders := e.topic("orders")
		createTopic(t, e.srcCl, orders, 3, nil)
		recs := richRecords(orders, 3, 1000)
		produce(t, e.srcCl, recs...)
		want := byPartition(recs)

		w := e.startWorker(e.writeConfig(e.defaultConfig()))
		got := e.waitTargetAtLeast(45*time.Second, "src."+orders, want)

		// A first start creates kmirror's internal topics: a broker
		// that does not list them at once is not an error.
		if ls := w.logLines("level=ERROR"); len(ls) > 0 {
			t.Errorf("a first start on fresh clusters logged errors:\n%s", strings.Join(ls, "\n"))
		}
		if len(got) != 3 {
			t.Errorf("target topic src.%s has %d partitions, want 3", orders, len(got))
		}
		for p := int32(0); p < 3; p++ {
			if d := diffRecords(p, want[p], got[p]); d != "" {
				t.Errorf("target src.%s differs from source %s:\n%s", orders, orders, d)
			}
		}
	})
}

// TestTransactionsReadCommitted: aborted transactional records never reach
// the target; committed and plain records do, in order. Checked both for
// data present before kmirror starts and for data written while it runs.
func TestTransactionsReadCommitted(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		payments := e.topic("payments")
		createTopic(t, e.srcCl, payments, 2, nil)
		before := produceTransactions(t, e.src.Addrs(), payments, "before", 2)

		e.startWorker(e.writeConfig(e.defaultConfig()))
		e.waitTargetValues(45*time.Second, "src."+payments, before)

		during := produceTransactions(t, e.src.Addrs(), payments, "during", 2)
		e.waitTargetValues(30*time.Second, "src."+payments, appendWant(before, during))
	})
}

// TestNewTopicDiscovered: a topic created at the source while kmirror runs
// is picked up by the first control pass after its creation and shows up
// on the target with its records. Latency is counted in passes, not
// seconds (see checkSeenWithinPasses); that the passes follow
// refresh_interval is checked on their mean period.
func TestNewTopicDiscovered(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		first, second := e.topic("first"), e.topic("second")
		createTopic(t, e.srcCl, first, 1, nil)
		recs, want := seqRecords(first, "first", 1, 5)
		produce(t, e.srcCl, recs...)

		cfg := e.defaultConfig()
		cfg.RefreshInterval = time.Second
		w := e.startWorker(e.writeConfig(cfg))
		addr := w.httpAddr(t)
		e.waitTargetValues(45*time.Second, "src."+first, want)

		begin := time.Now()
		createTopic(t, e.srcCl, second, 2, nil)
		created, p0 := time.Now(), controlPasses(t, addr, cfg.Name)
		recs, want = seqRecords(second, "second", 2, 5)
		produce(t, e.srcCl, recs...)
		e.waitFor(45*time.Second, "/api/v1/status to list "+second, func() (bool, string) {
			got, err := mirroredTopics(addr, cfg.Name)
			if err != nil {
				return false, err.Error()
			}
			_, ok := got[second]
			return ok, fmt.Sprintf("lists %v", sortedTopicSet(got))
		})
		checkSeenWithinPasses(t, "the new source topic in /api/v1/status", p0, controlPasses(t, addr, cfg.Name))
		e.waitTargetValues(45*time.Second, "src."+second, want)
		t.Logf("topic created at the source appeared with its records on the target %v after its creation began (refresh_interval %v)",
			time.Since(begin).Round(10*time.Millisecond), cfg.RefreshInterval)

		// The passes run every refresh_interval (1s here), not at the
		// default 10s: over a few passes their mean period is far below
		// the default, even with slow passes on a loaded machine.
		const passes = 3
		var p1 float64
		e.waitFor(60*time.Second, fmt.Sprintf("%d more control passes", passes), func() (bool, string) {
			p1 = controlPasses(t, addr, cfg.Name)
			return p1 >= p0+passes, fmt.Sprintf("%v passes since the topic was created", p1-p0)
		})
		period := time.Since(created) / time.Duration(p1-p0)
		t.Logf("mean time between control passes: %v (refresh_interval %v)", period.Round(time.Millisecond), cfg.RefreshInterval)
		if period > 5*time.Second {
			t.Errorf("control passes ran every %v on average; want about refresh_interval %v (the default would be 10s)", period.Round(time.Millisecond), cfg.RefreshInterval)
		}
	})
}

// TestPartitionIncrease: 3 -> 5 partitions at the source becomes 5
// partitions at the target, and records in the new partitions land in the
// same partitions, from their first offset.
func TestPartitionIncrease(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		clicks := e.topic("clicks")
		createTopic(t, e.srcCl, clicks, 3, nil)
		recs, want := seqRecords(clicks, "a", 3, 20)
		produce(t, e.srcCl, recs...)

		e.startWorker(e.writeConfig(e.defaultConfig()))
		e.waitTargetValues(45*time.Second, "src."+clicks, want)

		ctx := ctxTimeout(t, 60*time.Second)
		resp, err := e.srcAdm.UpdatePartitions(ctx, 5, clicks)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("increase source partitions to 5: %v", err)
		}
		waitFor(t, 30*time.Second, "source "+clicks+" to have 5 partitions", func() (bool, string) {
			n, err := partitionCount(ctx, e.srcCl, clicks)
			if err != nil {
				return false, err.Error()
			}
			return n == 5, fmt.Sprintf("%d partitions", n)
		})

		// A fresh producer, so its metadata knows all 5 partitions.
		prod := newClient(t, e.src.Addrs())
		more, wantMore := seqRecords(clicks, "b", 5, 20)
		produce(t, prod, more...)
		e.waitTargetValues(30*time.Second, "src."+clicks, appendWant(want, wantMore))
	})
}

// TestTopicSelectionRules: include/exclude regexes are honoured, and
// internal topics and cycles are never mirrored, even when included.
func TestTopicSelectionRules(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		// Every name carries the test's id where it does not change
		// what the name means, so that on shared clusters the patterns
		// below select nothing of other tests.
		id := e.id
		mirrored := "app.orders-" + id
		never := []string{
			"app.secret-" + id,      // excluded by regex
			"misc-" + id,            // not included
			"__foo-" + id,           // internal: leading __
			".hidden-" + id,         // internal: leading .
			"x-" + id + ".internal", // internal: .internal suffix
			"y-" + id + "-internal", // internal: -internal suffix
			"dst.loop-" + id,        // cycle: came from the target cluster dst
			"east.dst.loop-" + id,   // cycle: its upstream dst.loop came from dst
		}
		for _, topic := range append([]string{mirrored}, never...) {
			createTopic(t, e.srcCl, topic, 1, nil)
		}
		var recs []*kgo.Record
		for _, topic := range append([]string{mirrored}, never...) {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("v-" + topic)})
		}
		produce(t, e.srcCl, recs...)

		cfg := e.defaultConfig()
		cfg.Include = []string{`app\..*-` + id, `dst\..*-` + id, `east\..*-` + id, `__.*-` + id, `\..*-` + id, `x-` + id + `\..*`, `y-` + id + `-.*`}
		cfg.Exclude = []string{`app\.secret.*`}
		w := e.startWorker(e.writeConfig(cfg))
		addr := w.httpAddr(t)
		e.waitTargetValues(45*time.Second, "src."+mirrored, map[int32][]string{0: {"v-" + mirrored}})

		// Everything was discovered in the same pass as app.orders; watch
		// the target over a few more control passes.
		ctx := ctxTimeout(t, 90*time.Second)
		unexpected := map[string]bool{}
		p0 := controlPasses(t, addr, cfg.Name)
		deadline := time.Now().Add(60 * time.Second)
		for {
			done := controlPasses(t, addr, cfg.Name) >= p0+4 // 3 passes ended: list once more
			topics, err := listTopics(ctx, e.dstCl)
			if err != nil {
				t.Fatalf("list target topics: %v", err)
			}
			for _, topic := range topics {
				if e.mine(topic) && topic != "src."+mirrored && !isBookkeepingTopic(topic) {
					unexpected[topic] = true
				}
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("mirror %s ran fewer than 3 control passes in 60s", cfg.Name)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if len(unexpected) > 0 {
			t.Errorf("target has topics that must not be mirrored: %v (only src.%s and kmirror's own kmirror.* topics are allowed; source topics %q must never be mirrored)",
				mapKeysSorted(unexpected), mirrored, never)
		}
	})
}

// isBookkeepingTopic reports topics a target may hold besides mirrored
// ones: kmirror's own (kmirror.*) and the broker's own.
func isBookkeepingTopic(topic string) bool {
	return strings.HasPrefix(topic, "kmirror.") ||
		topic == "__consumer_offsets" || topic == "__transaction_state"
}

func mapKeysSorted(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestIdentityPolicy: with the identity policy target topics keep their
// source names.
func TestIdentityPolicy(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		orders, events := e.topic("orders"), e.topic("events")
		createTopic(t, e.srcCl, orders, 3, nil)
		createTopic(t, e.srcCl, events, 1, nil)
		orderRecs, wantOrders := seqRecords(orders, "orders", 3, 10)
		eventRecs, wantEvents := seqRecords(events, "events", 1, 10)
		produce(t, e.srcCl, append(orderRecs, eventRecs...)...)

		cfg := e.defaultConfig()
		cfg.Policy = "identity"
		e.startWorker(e.writeConfig(cfg))
		e.waitTargetValues(45*time.Second, orders, wantOrders)
		e.waitTargetValues(30*time.Second, events, wantEvents)

		topics, err := listTopics(ctxTimeout(t, 10*time.Second), e.dstCl)
		if err != nil {
			t.Fatal(err)
		}
		for _, topic := range topics {
			if e.mine(topic) && topic != orders && topic != events && !isBookkeepingTopic(topic) {
				t.Errorf("identity policy: unexpected target topic %q", topic)
			}
		}
	})
}

// TestKillRestartAtLeastOnce: kill -9 while records stream in, restart, and
// every source record ends up on the target (duplicates allowed), with each
// partition's first occurrences in source order.
func TestKillRestartAtLeastOnce(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		stream := e.topic("stream")
		createTopic(t, e.srcCl, stream, 3, nil)
		prod := startProducer(t, e.src.Addrs(), stream, 3)

		cfg := e.defaultConfig()
		cfgPath := e.writeConfig(cfg)
		w1 := e.startWorker(cfgPath)
		ctx := ctxTimeout(t, 120*time.Second)
		// Kill mid-stream, once the worker has copied for a while and
		// stored a position: on a loaded machine 1.5s may pass before the
		// copy even starts, so the stored position is waited for.
		progress := "kmirror." + cfg.Name + ".progress.internal"
		e.waitFor(45*time.Second, "the first worker to copy at least 1000 records for 1.5s and store a position", func() (bool, string) {
			cnt, _, err := recordCount(ctx, e.dstCl, "src."+stream)
			if err != nil {
				return false, err.Error()
			}
			up := time.Since(w1.start)
			if cnt < 1000 || up < 1500*time.Millisecond {
				return false, fmt.Sprintf("%d records on the target after %v", cnt, up.Round(time.Millisecond))
			}
			stored, err := storedPositions(ctx, e.dst.Addrs(), progress, stream)
			if err != nil {
				return false, err.Error()
			}
			return stored > 0, fmt.Sprintf("%d records on the target, %d positions of %s stored", cnt, stored, stream)
		})
		w1.kill(t)
		atKill, _, err := recordCount(ctx, e.dstCl, "src."+stream)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("killed worker 1 after %v with %d records on the target, %d produced so far",
			time.Since(w1.start).Round(time.Millisecond), atKill, prod.count())
		time.Sleep(300 * time.Millisecond)

		e.startWorker(cfgPath)
		e.waitFor(45*time.Second, "the restarted worker to copy 1000 more records", func() (bool, string) {
			cnt, _, err := recordCount(ctx, e.dstCl, "src."+stream)
			if err != nil {
				return false, err.Error()
			}
			return cnt >= atKill+1000, fmt.Sprintf("%d records on the target", cnt)
		})
		prod.stop(t)

		src, err := readTopic(ctx, e.src.Addrs(), stream)
		if err != nil {
			t.Fatalf("read source: %v", err)
		}
		want := values(src)
		total := 0
		for _, vs := range want {
			total += len(vs)
		}
		var got map[int32][]string
		e.waitFor(45*time.Second, fmt.Sprintf("all %d source records on the target", total), func() (bool, string) {
			n, recs, err := e.targetSnapshot(ctx, "src."+stream, int64(total))
			if err != nil {
				return false, err.Error()
			}
			if recs == nil {
				return false, "fewer offsets on the target than source records"
			}
			got = values(recs)
			if n != 3 {
				return false, fmt.Sprintf("target has %d partitions", n)
			}
			if d := missing(want, got); d != "" {
				return false, d
			}
			return true, ""
		})

		dups := 0
		for p := int32(0); p < 3; p++ {
			srcSet := make(map[string]bool, len(want[p]))
			for _, v := range want[p] {
				srcSet[v] = true
			}
			seen := map[string]bool{}
			var first []string
			for _, v := range got[p] {
				if !srcSet[v] {
					t.Errorf("partition %d: target has %q, which is not in source partition %d", p, v, p)
					continue
				}
				if seen[v] {
					dups++
					continue
				}
				seen[v] = true
				first = append(first, v)
			}
			if d := diffValues(map[int32][]string{p: want[p]}, map[int32][]string{p: first}); d != "" {
				t.Errorf("first occurrences on the target are not in source order:\n%s", d)
			}
		}
		t.Logf("%d source records, %d duplicates on the target after kill -9 and restart", total, dups)
		// Everything replayed means no progress was stored in 1.5s of
		// copying with progress_interval 200ms.
		if int64(dups) >= atKill {
			t.Errorf("the restart replayed all %d records copied before the kill (%d duplicates): progress was not persisted while running",
				atKill, dups)
		}
	})
}

// storedPositions counts the position records (not index chunks) of topic's
// partitions in a mirror's progress topic.
func storedPositions(ctx context.Context, addrs []string, progressTopic, topic string) (int, error) {
	recs, err := readTopic(ctx, addrs, progressTopic)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rs := range recs {
		for _, r := range rs {
			var k struct {
				Topic string `json:"topic"`
				Chunk *int64 `json:"chunk"`
			}
			if json.Unmarshal(r.Key, &k) == nil && k.Topic == topic && k.Chunk == nil && r.Value != nil {
				n++
			}
		}
	}
	return n, nil
}

// missing describes, per partition, source values absent on the target.
func missing(want, got map[int32][]string) string {
	var b strings.Builder
	for _, p := range mapsKeys(want) {
		have := make(map[string]bool, len(got[p]))
		for _, v := range got[p] {
			have[v] = true
		}
		var miss []string
		for _, v := range want[p] {
			if !have[v] {
				miss = append(miss, v)
			}
		}
		if len(miss) > 0 {
			fmt.Fprintf(&b, "partition %d: %d of %d source records missing on the target (first: %q); ", p, len(miss), len(want[p]), miss[0])
		}
	}
	return b.String()
}

// outOfOrder describes the first target record (by partition) that came
// before one it follows at the source: after a fault, records may be
// copied again (a run of them repeats), but the first copy of each must be
// in the source's order.
func outOfOrder(want, got map[int32][]string) string {
	var b strings.Builder
	for _, p := range mapsKeys(want) {
		pos := make(map[string]int, len(want[p]))
		for i, v := range want[p] {
			pos[v] = i
		}
		seen := make(map[string]bool, len(got[p]))
		last := -1
		for i, v := range got[p] {
			at, ok := pos[v]
			if !ok || seen[v] {
				continue
			}
			seen[v] = true
			if at < last {
				fmt.Fprintf(&b, "partition %d: target offset %d holds source record %d (%q), first copied after source record %d; ", p, i, at, v, last)
				break
			}
			last = at
		}
	}
	return b.String()
}

// TestCleanStopRestart: SIGTERM exits 0 within 10s after persisting
// progress, and a restart continues exactly where it stopped: no duplicates,
// nothing missing.
func TestCleanStopRestart(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		ledger := e.topic("ledger")
		createTopic(t, e.srcCl, ledger, 3, nil)
		recs, want := seqRecords(ledger, "first", 3, 100)
		produce(t, e.srcCl, recs...)

		cfg := e.defaultConfig()
		cfgPath := e.writeConfig(cfg)
		w1 := e.startWorker(cfgPath)
		e.waitTargetValues(45*time.Second, "src."+ledger, want)

		code, took := w1.stop(t, syscall.SIGTERM)
		if code != 0 {
			t.Errorf("kmirror exited with code %d after SIGTERM, want 0", code)
		}
		t.Logf("worker 1 exited %v after SIGTERM", took.Round(time.Millisecond))
		if took > 10*time.Second {
			t.Errorf("a clean stop took %v; want at most 10s (nothing was left to deliver)", took.Round(time.Millisecond))
		}

		ctx := ctxTimeout(t, 30*time.Second)
		progress := "kmirror." + cfg.Name + ".progress.internal"
		if _, err := partitionCount(ctx, e.dstCl, progress); err != nil {
			t.Errorf("progress topic %q on the target: %v", progress, err)
		} else if rcs, err := e.dstAdm.DescribeTopicConfigs(ctx, progress); err != nil {
			t.Errorf("describe %q: %v", progress, err)
		} else if rc, err := rcs.On(progress, nil); err != nil {
			t.Errorf("describe %q: %v", progress, err)
		} else {
			policy := "<unset>"
			for _, c := range rc.Configs {
				if c.Key == "cleanup.policy" {
					policy = c.MaybeValue()
				}
			}
			if !strings.Contains(policy, "compact") {
				t.Errorf("progress topic %q has cleanup.policy=%s, want compact", progress, policy)
			}
		}

		more, wantMore := seqRecords(ledger, "second", 3, 70)
		produce(t, e.srcCl, more...)
		e.startWorker(cfgPath)
		e.waitTargetValues(45*time.Second, "src."+ledger, appendWant(want, wantMore))

		// Anything replayed would have arrived before the last new record;
		// look once more after a few progress intervals.
		time.Sleep(time.Second)
		if d := diffValues(appendWant(want, wantMore), values(e.readTarget("src."+ledger))); d != "" {
			t.Errorf("after a clean restart the target differs from the source:\n%s", d)
		}
	})
}

// bgProducer keeps producing records with unique values to every partition
// of a topic until stopped.
type bgProducer struct {
	stopCh chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	n      int
	err    error
}

func startProducer(t testing.TB, addrs []string, topic string, partitions int) *bgProducer {
	t.Helper()
	cl := newClient(t, addrs)
	bp := &bgProducer{stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(bp.done)
		for i := 0; ; i += 20 {
			select {
			case <-bp.stopCh:
				return
			default:
			}
			var recs []*kgo.Record
			for j := i; j < i+20; j++ {
				for p := int32(0); p < int32(partitions); p++ {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(val("bg", p, j))})
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := cl.ProduceSync(ctx, recs...).FirstErr()
			cancel()
			bp.mu.Lock()
			if err != nil {
				bp.err = err
				bp.mu.Unlock()
				return
			}
			bp.n += len(recs)
			bp.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(func() {
		select {
		case <-bp.stopCh:
		default:
			close(bp.stopCh)
		}
		<-bp.done
	})
	return bp
}

func (bp *bgProducer) count() int {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	return bp.n
}

// stop stops producing and fails the test if producing failed.
func (bp *bgProducer) stop(t testing.TB) {
	t.Helper()
	close(bp.stopCh)
	<-bp.done
	bp.mu.Lock()
	defer bp.mu.Unlock()
	if bp.err != nil {
		t.Fatalf("background producer: %v", bp.err)
	}
}

// waitTargetAtLeast waits until every partition of the target topic holds at
// least as many records as want has for it, and returns that snapshot.
func (e *env) waitTargetAtLeast(timeout time.Duration, topic string, want map[int32][]*kgo.Record) map[int32][]*kgo.Record {
	e.t.Helper()
	var total int64
	for _, rs := range want {
		total += int64(len(rs))
	}
	ctx := ctxTimeout(e.t, timeout+30*time.Second)
	var snap map[int32][]*kgo.Record
	e.waitFor(timeout, fmt.Sprintf("target topic %q to hold %d records", topic, total), func() (bool, string) {
		n, recs, err := e.targetSnapshot(ctx, topic, total)
		if err != nil {
			return false, err.Error()
		}
		if recs == nil {
			return false, fmt.Sprintf("fewer than %d offsets (%d partitions)", total, n)
		}
		for p, rs := range want {
			if len(recs[p]) < len(rs) {
				return false, fmt.Sprintf("partition %d has %d of %d records", p, len(recs[p]), len(rs))
			}
		}
		snap = recs
		return true, ""
	})
	return snap
}
