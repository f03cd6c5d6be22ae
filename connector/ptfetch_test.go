package connector

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchLog records the Fetch requests a kfake cluster receives, and can
// answer the next one that continues a session with an error.
type fetchLog struct {
	mu       sync.Mutex
	reqs     []fetchSeen
	failNext int16 // an error code for the next incremental fetch; 0: none
}

type fetchSeen struct {
	at                    time.Time
	sessionID, epoch      int32
	partitions, forgotten int
}

func watchFetches(c *kfake.Cluster) *fetchLog {
	l := &fetchLog{}
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		seen := fetchSeen{at: time.Now(), sessionID: req.SessionID, epoch: req.SessionEpoch}
		for _, t := range req.Topics {
			seen.partitions += len(t.Partitions)
		}
		for _, t := range req.ForgottenTopics {
			seen.forgotten += len(t.Partitions)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.reqs = append(l.reqs, seen)
		if code := l.failNext; code != 0 && req.SessionEpoch > 0 {
			l.failNext = 0
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			resp.ErrorCode = code
			return resp, nil, true
		}
		return nil, nil, false
	})
	return l
}

func (l *fetchLog) since(t time.Time) []fetchSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []fetchSeen
	for _, r := range l.reqs {
		if !r.at.Before(t) {
			out = append(out, r)
		}
	}
	return out
}

func (l *fetchLog) fail(code int16) {
	l.mu.Lock()
	l.failNext = code
	l.mu.Unlock()
}

// runBatchPathMirror runs a mirror of "orders" on the batch path
// (producer.compression: source) until the test ends, with one slot: one
// copier fetches every partition, in one fetch session per broker.
func runBatchPathMirror(t *testing.T, src, dst *kfake.Cluster) {
	t.Helper()
	t.Cleanup(startOrdersMirror(t, src, dst, func(c *Config) {
		c.SourceCompression = true
		c.Cluster = &ClusterConfig{Slots: 1, SessionTimeout: 6 * time.Second, CommitInterval: DefaultCommitInterval}
	}))
}

// targetValues reads every record of topic on the target: values by
// partition, in offset order.
func targetValues(t *testing.T, dst *kfake.Cluster, topic string, partitions int32) map[int32][]string {
	t.Helper()
	offsets := make(map[int32]kgo.Offset)
	for p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl := newClient(t, dst, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	ends := targetEnds(t, dst, topic)
	var want int64
	for _, e := range ends {
		want += e
	}
	out := make(map[int32][]string)
	var n int64
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d target records: %v", n, want, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], string(r.Value))
			n++
		})
	}
	return out
}

func targetEnds(t *testing.T, c *kfake.Cluster, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(newClient(t, c)).ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("list %s's end offsets: %v %v", topic, err, ends.Error())
	}
	out := make(map[int32]int64)
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// copiedExactly waits until the target of "orders" holds per records in
// each of its partitions, then checks they are the source's, in order,
// each once.
func copiedExactly(t *testing.T, dst *kfake.Cluster, partitions int32, per int, tags ...string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, dst))
	want := int64(partitions) * int64(per*len(tags))
	waitFor(t, func() bool { return targetRecords(adm, "src.orders") >= want }, fmt.Sprintf("%d records on the target", want))
	got := targetValues(t, dst, "src.orders", partitions)
	for p := range partitions {
		var exp []string
		for _, tag := range tags {
			for i := range per {
				exp = append(exp, fmt.Sprintf("%s-%d-%d", tag, p, i))
			}
		}
		if fmt.Sprint(got[p]) != fmt.Sprint(exp) {
			t.Fatalf("target partition %d holds %d records %v, want the source's %d", p, len(got[p]), got[p], len(exp))
		}
	}
}

// TestFetchSessionIdle: the batch path fetches in a fetch session, so an
// idle worker's fetches name no partition (at 100,000 partitions, naming
// every one twice a second was most of an idle worker's CPU), and records
// that arrive later are still copied, each once.
func TestFetchSessionIdle(t *testing.T) {
	t.Parallel()
	src, dst := testClusters(t)
	const partitions = 8
	createTopic(t, src, "orders", partitions)
	fetches := watchFetches(src)
	produceOrders(t, src, partitions, 20, "a")
	runBatchPathMirror(t, src, dst)
	copiedExactly(t, dst, partitions, 20, "a")

	// Once the partitions whose records were taken have joined again,
	// every fetch is a session's naming nothing, for as long as nothing
	// changes.
	idleShaped := func(f fetchSeen) bool {
		return f.sessionID != 0 && f.epoch > 0 && f.partitions == 0 && f.forgotten == 0
	}
	var idleFrom time.Time
	waitFor(t, func() bool {
		fs := fetches.since(time.Time{})
		if last := fs[len(fs)-1]; idleShaped(last) {
			idleFrom = last.at
			return true
		}
		return false
	}, "a fetch naming no partition")
	time.Sleep(4 * ptFetchWait)
	idle := fetches.since(idleFrom)
	if len(idle) < 2 {
		t.Fatalf("%d fetches in %v of idling, want the long polls to go on", len(idle), 4*ptFetchWait)
	}
	for _, f := range idle {
		if !idleShaped(f) {
			t.Fatalf("idle fetch %+v: want a session's (id and epoch set) naming no partition", f)
		}
	}

	produceOrders(t, src, partitions, 20, "b")
	copiedExactly(t, dst, partitions, 20, "a", "b")
}

// TestFetchSessionEvicted: a broker that no longer holds the session
// (evicted from its cache, or restarted) answers FETCH_SESSION_ID_NOT_FOUND;
// the batch path starts a new session with a full fetch and copies on,
// nothing lost and nothing twice.
func TestFetchSessionEvicted(t *testing.T) {
	t.Parallel()
	src, dst := testClusters(t)
	const partitions = 4
	createTopic(t, src, "orders", partitions)
	fetches := watchFetches(src)
	produceOrders(t, src, partitions, 10, "a")
	runBatchPathMirror(t, src, dst)
	copiedExactly(t, dst, partitions, 10, "a")

	before := time.Now()
	fetches.fail(kerr.FetchSessionIDNotFound.Code)
	waitFor(t, func() bool {
		fetches.mu.Lock()
		defer fetches.mu.Unlock()
		return fetches.failNext == 0
	}, "an incremental fetch to be refused")
	produceOrders(t, src, partitions, 10, "b")
	copiedExactly(t, dst, partitions, 10, "a", "b")
	full := false
	for _, f := range fetches.since(before) {
		if f.sessionID == 0 && f.epoch == 0 && f.partitions == partitions {
			full = true
		}
	}
	if !full {
		t.Fatalf("no full fetch of the %d partitions after the refusal: %+v", partitions, fetches.since(before))
	}
}

func createTopic(t *testing.T, c *kfake.Cluster, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(newClient(t, c)).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestFetchJoinsBounded: a request lets at most ptMaxJoins partitions join
// its session; the others stay to be placed by the next requests, so a
// start with 100,000 partitions does not fetch (and queue, and persist)
// them all at once.
func TestFetchJoinsBounded(t *testing.T) {
	p := newPassthrough(&Copier{}, nil)
	var joins []ptWant
	for i := range ptMaxJoins + 5000 {
		tp := TopicPartition{fmt.Sprintf("t%d", i/10), int32(i % 10)}
		p.add(tp, 0, p.newGen())
		joins = append(joins, ptWant{tp, 0, p.parts[tp].gen})
	}
	named := func(req *kmsg.FetchRequest) (n int) {
		for _, t := range req.Topics {
			n += len(t.Partitions)
		}
		return n
	}
	req := p.fetchRequest(1, joins)
	if got := named(req); got != ptMaxJoins {
		t.Fatalf("first request names %d partitions, want %d", got, ptMaxJoins)
	}
	if got := len(p.toPlace); got != 5000 {
		t.Fatalf("%d partitions left to place, want 5000", got)
	}
	if got := named(p.fetchRequest(1, joins)); got != 5000 {
		t.Fatalf("second request names %d partitions, want the 5000 left", got)
	}
	if len(p.toPlace) != 0 || p.sessions[1].members != ptMaxJoins+5000 {
		t.Fatalf("after two requests: %d to place, %d members", len(p.toPlace), p.sessions[1].members)
	}
}

// TestFetchRoomBounded: partitions join only while the batches and bytes
// fetched and not yet acknowledged leave room (a restart of 100,000
// partitions of small batches otherwise held them all at once), and the
// acknowledgement that makes room wakes the fetch loop.
func TestFetchRoomBounded(t *testing.T) {
	p := newPassthrough(&Copier{}, nil)
	if got := p.room(); got != ptMaxBatches {
		t.Fatalf("room with nothing in flight = %d, want %d", got, ptMaxBatches)
	}
	p.readyBatches = ptMaxBatches / 2
	if got := p.room(); got != ptMaxBatches/2 {
		t.Fatalf("room with half the batches ready = %d, want %d", got, ptMaxBatches/2)
	}
	p.bufferedBatches = ptMaxBatches/4 + 1 // under a quarter left
	if got := p.room(); got != 0 {
		t.Fatalf("room with %d batches in flight = %d, want 0", p.readyBatches+p.bufferedBatches, got)
	}
	p.add(TopicPartition{"t", 0}, 0, p.newGen())
	<-p.kickFetch
	joins, _, full := p.place(context.Background())
	if joins != nil || !full || len(p.toPlace) != 1 {
		t.Fatalf("place with no room: joins %v, full %v, %d to place; want none, full, 1 waiting", joins, full, len(p.toPlace))
	}
	// An acknowledgement that brings the room back wakes the loop.
	p.bufferedBatches++
	u := &ptUnit{batch: make([]byte, 100)}
	p.buffered = 100
	p.release(u)
	select {
	case <-p.kickFetch:
		t.Fatal("release kicked the fetch loop with still no room")
	default:
	}
	p.buffered = 100
	p.release(u) // now a quarter is left
	if got := p.room(); got != ptMaxBatches/4 {
		t.Fatalf("room after the release = %d, want %d", got, ptMaxBatches/4)
	}
	select {
	case <-p.kickFetch:
	default:
		t.Fatal("release that made room did not kick the fetch loop")
	}
	// The bytes bound the same way.
	p.readyBatches, p.bufferedBatches = 0, 1
	p.buffered = ProducerMaxBufferedBytes*3/4 + 1
	if got := p.room(); got != 0 {
		t.Fatalf("room with %d bytes in flight = %d, want 0", p.buffered, got)
	}
}

// TestPlaceUnfetchedFirst: with room for fewer joins than wait, the
// partitions not fetched since they were added (or rewound) join before
// those rejoining after their records were taken: a start or restart waits
// for the former's records, while each idle member makes every later
// Fetch of the session cost the broker more.
func TestPlaceUnfetchedFirst(t *testing.T) {
	p := newPassthrough(&Copier{}, nil)
	const n = ptMaxBatches / 4 // the least room that lets any join
	now := time.Now()
	for i := range 2 * n {
		tp := TopicPartition{fmt.Sprintf("t%d", i), 0}
		p.add(tp, 5, p.newGen())
		p.srcMeta.topics[tp.Topic] = ptTopicMeta{leaders: []int32{1}, at: now.UnixNano()}
		if i%2 == 1 {
			p.parts[tp].taken = true // its records were taken; it rejoins
		}
	}
	p.readyBatches = ptMaxBatches - n // room for n joins
	joins, _, full := p.place(context.Background())
	if full || len(joins[1]) != n {
		t.Fatalf("placed %d (full %v), want %d", len(joins[1]), full, n)
	}
	for _, w := range joins[1] {
		if p.parts[w.tp].taken {
			t.Fatalf("%v rejoining was placed while a partition never fetched waited", w.tp)
		}
	}
	// A rewound partition is fetched again: it is first again.
	tp := TopicPartition{"t1", 0}
	p.rewind(tp, 3)
	if p.parts[tp].taken {
		t.Fatal("a rewound partition still counts as taken")
	}
}
