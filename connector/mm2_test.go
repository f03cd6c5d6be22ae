package connector

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/groups"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/internal/kfaketest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/filters"
)

// TestMM2Encodings: byte-exact against Kafka's protocol types as
// Heartbeat.java and Checkpoint.java write them (the golden hex is
// Python's struct.pack of the same fields: '>h' length + UTF-8 for a
// STRING, '>h' version 0, '>q' INT64, '>i' INT32).
func TestMM2Encodings(t *testing.T) {
	k, v := encodeMM2Heartbeat("A", "B", time.UnixMilli(1700000000123))
	if got := hex.EncodeToString(k); got != "000141000142" {
		t.Errorf("heartbeat key %s", got)
	}
	if got := hex.EncodeToString(v); got != "00000000018bcfe5687b" {
		t.Errorf("heartbeat value %s", got)
	}
	k, v = encodeMM2Checkpoint(mm2Checkpoint{group: "orders-app", topic: "A.orders", partition: 3, upstream: 1234, downstream: 1200, metadata: "meta"})
	if got := hex.EncodeToString(k); got != "000a6f72646572732d6170700008412e6f726465727300000003" {
		t.Errorf("checkpoint key %s", got)
	}
	if got := hex.EncodeToString(v); got != "000000000000000004d200000000000004b000046d657461" {
		t.Errorf("checkpoint value %s", got)
	}
}

func TestParseMM2OffsetKey(t *testing.T) {
	for _, c := range []struct {
		key       string
		connector string
		cluster   string
		tp        data.TopicPartition
		ok        bool
		err       bool
	}{
		{key: `["MirrorSourceConnector",{"cluster":"A","partition":3,"topic":"orders"}]`, connector: "MirrorSourceConnector", cluster: "A", tp: data.TopicPartition{Topic: "orders", Partition: 3}, ok: true},
		// Field order is Connect's JSON converter's business.
		{key: `["MirrorSourceConnector",{"topic":"orders","cluster":"A","partition":0}]`, connector: "MirrorSourceConnector", cluster: "A", tp: data.TopicPartition{Topic: "orders", Partition: 0}, ok: true},
		// A source connector under another name (Connect's name=).
		{key: `["mm2-a-to-b",{"cluster":"A","partition":1,"topic":"orders"}]`, connector: "mm2-a-to-b", cluster: "A", tp: data.TopicPartition{Topic: "orders", Partition: 1}, ok: true},
		{key: `["MirrorCheckpointConnector",{"group":"g","topic":"t","partition":0}]`, connector: "MirrorCheckpointConnector"},
		{key: `["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]`, connector: "MirrorHeartbeatConnector"},
		{key: `not json`, err: true},
		{key: `["MirrorSourceConnector",{"cluster":"A","topic":"orders"}]`, err: true},
		{key: `["MirrorSourceConnector"]`, err: true},
	} {
		connector, cluster, tp, ok, err := parseMM2OffsetKey([]byte(c.key))
		if (err != nil) != c.err || ok != c.ok || connector != c.connector || cluster != c.cluster || tp != c.tp {
			t.Errorf("%s: got %q %q %v %v %v", c.key, connector, cluster, tp, ok, err)
		}
	}
}

// mm2Key is a Connect offsets key of MM2's source connector.
func mm2Key(cluster, topic string, p int32) []byte {
	return fmt.Appendf(nil, `["MirrorSourceConnector",{"cluster":%q,"partition":%d,"topic":%q}]`, cluster, p, topic)
}

// writeMM2Offsets creates MM2's offsets topic on c (Connect's default has
// 25 partitions; 3 do here) and writes records to it, a nil value being a
// tombstone.
func writeMM2Offsets(t *testing.T, c *kfake.Cluster, topic string, recs ...*kgo.Record) {
	t.Helper()
	kfaketest.WriteCompacted(t, c, topic, 3, recs...)
}

func offsetValue(n int64) []byte { return fmt.Appendf(nil, `{"offset":%d}`, n) }

func TestReadMM2Positions(t *testing.T) {
	_, dst := kfaketest.Clusters(t)
	const topic = "mm2-offsets.A.internal"
	writeMM2Offsets(t, dst, topic,
		&kgo.Record{Key: mm2Key("A", "orders", 0), Value: offsetValue(99)},
		&kgo.Record{Key: mm2Key("A", "orders", 1), Value: offsetValue(10)},
		&kgo.Record{Key: []byte(`["MirrorCheckpointConnector",{"group":"g","partition":0,"topic":"orders"}]`), Value: offsetValue(5)},
		&kgo.Record{Key: mm2Key("B", "orders", 0), Value: offsetValue(7)},   // another flow's
		&kgo.Record{Key: mm2Key("A", "orders", 1), Value: nil},              // deleted
		&kgo.Record{Key: mm2Key("A", "orders", 0), Value: offsetValue(149)}, // the last wins
		&kgo.Record{Key: []byte(`["mm2-a-to-b",{"cluster":"A","partition":2,"topic":"orders"}]`), Value: offsetValue(3)},
	)
	adm := kadm.NewClient(kfaketest.Client(t, dst))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := readMM2Positions(ctx, nil, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, adm, topic, "A")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[mm2SourceConnector]) != 1 || got[mm2SourceConnector][data.TopicPartition{Topic: "orders", Partition: 0}] != 150 {
		t.Fatalf("positions %v, want orders/0 at 150 (MM2's last copied offset 149, plus one)", got)
	}
	if len(got["mm2-a-to-b"]) != 1 || got["mm2-a-to-b"][data.TopicPartition{Topic: "orders", Partition: 2}] != 4 {
		t.Fatalf("positions %v, want mm2-a-to-b's orders/2 at 4 (a source connector under another name)", got)
	}
	if others := got.others(mm2SourceConnector, data.TopicPartition{Topic: "orders", Partition: 2}); fmt.Sprint(others) != "[mm2-a-to-b]" {
		t.Fatalf("connectors other than %s holding orders/2: %v", mm2SourceConnector, others)
	}

	// A value that is not {"offset":N} is an error naming the key.
	writeMM2Offsets(t, dst, topic, &kgo.Record{Key: mm2Key("A", "orders", 2), Value: []byte(`{"pos":1}`)})
	if _, err := readMM2Positions(ctx, nil, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, adm, topic, "A"); err == nil || !strings.Contains(err.Error(), `"partition":2`) {
		t.Fatalf("bad value: %v", err)
	}
	// No such topic: an error naming it and the setting.
	_, err = readMM2Positions(ctx, nil, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, adm, "mm2-offsets.X.internal", "X")
	if err == nil || !strings.Contains(err.Error(), "mm2-offsets.X.internal") || !strings.Contains(err.Error(), "mirrors[].mm2.offsets_topic") || !strings.Contains(err.Error(), "adopt: false") {
		t.Fatalf("missing topic: %v", err)
	}
	// Listed with an error: that error, not "does not exist".
	dst.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.MetadataRequest)
		if len(req.Topics) != 1 || req.Topics[0].Topic == nil || *req.Topics[0].Topic != topic {
			dst.KeepControl()
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr(topic)
		rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	_, err = readMM2Positions(ctx, nil, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, adm, topic, "A")
	if !errors.Is(err, kerr.TopicAuthorizationFailed) || strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("offsets topic listed with an error: %v", err)
	}
}

// mm2Setup is MM2's state after it copied part of "orders" (2 partitions,
// 10 records each at the source): partition 0's first 7 records on the
// target and its position committed (offset 6); partition 1 never copied.
func mm2Setup(t *testing.T, src, dst *kfake.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(kfaketest.Client(t, src)).CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produceOrders(t, src, 2, 10, "x")
	dcl := kfaketest.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if _, err := kadm.NewClient(dcl).CreateTopic(ctx, 2, 1, nil, "src.orders"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 7 {
		recs = append(recs, &kgo.Record{Topic: "src.orders", Partition: 0, Value: fmt.Appendf(nil, "x-0-%d", i)})
	}
	if err := dcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func adoptConfig() Config {
	return Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		Filters:          []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll("orders")}},
		RefreshInterval:  100 * time.Millisecond,
		ProgressInterval: 50 * time.Millisecond,
		MM2:              &MM2Config{Adopt: true},
		Logger:           kfaketest.Logger(),
	}
}

// TestAdoptionContinuesWhereMM2Stopped: the copy of an adopted partition
// starts after MM2's last copied record (no duplicate, nothing skipped), a
// partition MM2 never copied starts from its beginning, and the offset
// index starts at the adopted position: below it is untranslatable (with
// the reason), at and above it exact, also after a restart.
func TestAdoptionContinuesWhereMM2Stopped(t *testing.T) {
	src, dst := kfaketest.Clusters(t)
	mm2Setup(t, src, dst)
	writeMM2Offsets(t, dst, "mm2-offsets.src.internal", &kgo.Record{Key: mm2Key("src", "orders", 0), Value: offsetValue(6)})

	cfg := adoptConfig()
	cfg.SourceOpts = []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)}
	cfg.TargetOpts = []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	adm := kadm.NewClient(kfaketest.Client(t, dst))
	kfaketest.WaitFor(t, func() bool { return targetRecords(adm, "src.orders") >= 20 }, "20 records on the target")
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of the stop")
	}
	for p, recs := range byPartition(consumeRecords(t, dst.ListenAddrs(), "src.orders")) {
		if len(recs) != 10 {
			t.Fatalf("partition %d holds %d records, want 10 (no duplicate, none missing)", p, len(recs))
		}
		for i, r := range recs {
			if want := fmt.Sprintf("x-%d-%d", p, i); string(r.Value) != want {
				t.Fatalf("partition %d offset %d holds %s, want %s", p, i, r.Value, want)
			}
		}
	}

	// The stored progress carries the floor; an offset below it has no
	// exact translation (package groups says why to the operator).
	lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ld, err := data.LoadProgress(lctx, nil, cfg.TargetOpts, adm, m.progressTopic)
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := data.TopicPartition{Topic: "orders", Partition: 0}, data.TopicPartition{Topic: "orders", Partition: 1}
	if f := ld.Positions[p0].Floor; f == nil || *f != (index.Run{Src: 7, Dst: 7}) {
		t.Fatalf("partition 0 floor %v, want source 7 = target 7", f)
	}
	if f := ld.Positions[p1].Floor; f != nil {
		t.Fatalf("partition 1 was never copied by MM2 but has floor %v", f)
	}
	ix := ld.Indexes[p0]
	if _, _, err := groups.TranslateOffset(ix, ld.Positions[p0].Next, 3); !errors.Is(err, index.ErrBelowAdopted) {
		t.Fatalf("offset 3 (copied by MM2): %v, want it below the adopted position", err)
	}
	for s, want := range map[int64]int64{7: 7, 9: 9, 10: 10} {
		got, _, err := groups.TranslateOffset(ix, ld.Positions[p0].Next, s)
		if err != nil || got != want {
			t.Fatalf("translate %d = %d, %v; want %d", s, got, err, want)
		}
	}
	if _, err := ix.Translate(6); !errors.Is(err, index.ErrBelowAdopted) {
		t.Fatalf("translate 6: %v", err)
	}
}

func byPartition(recs []*kgo.Record) map[int32][]*kgo.Record {
	out := make(map[int32][]*kgo.Record)
	for _, r := range recs {
		out[r.Partition] = append(out[r.Partition], r)
	}
	return out
}

// TestAdoptionFaults: while MM2's offsets topic is missing or cannot be
// read, the partitions to adopt are not started (never from the
// beginning): the pass fails naming the cause, the topic's status shows it
// and the metric counts it; once readable, they start at MM2's position.
func TestAdoptionFaults(t *testing.T) {
	src, dst := kfaketest.Clusters(t)
	mm2Setup(t, src, dst)
	h := newPassHarnessFor(t, src, dst, adoptConfig())
	const offsets = "mm2-offsets.src.internal"
	p0 := data.TopicPartition{Topic: "orders", Partition: 0}

	err := h.pass(t)
	if err == nil || !strings.Contains(err.Error(), offsets) || !strings.Contains(err.Error(), "adopt: false") {
		t.Fatalf("pass without MM2's offsets topic: %v", err)
	}
	if ps := h.cp.Partition(p0); ps != nil {
		t.Fatalf("partition started (at %d) without MM2's position", ps.Acked)
	}
	// Said once, by the mirror; the topic's row points there.
	st := h.m.Status()
	if !strings.Contains(st.LastPassError, offsets) || len(st.Topics) != 1 || st.Topics[0].State != StatePending || st.Topics[0].Error != errAdoptionPending.Error() {
		t.Fatalf("status (last pass error %q) %+v: want the adoption error once, on the mirror", st.LastPassError, st.Topics)
	}

	// The topic exists but cannot be read (a refused ListOffsets).
	writeMM2Offsets(t, dst, offsets, &kgo.Record{Key: mm2Key("src", "orders", 0), Value: offsetValue(6)})
	// The mirror's own admin client, whose metadata cache (franz-go's, up
	// to a second) still holds the topic as unknown, is the one to wait on.
	kfaketest.WaitFor(t, func() bool {
		tds, err := h.c.dstAdm.ListTopics(context.Background(), offsets)
		return err == nil && tds.Has(offsets)
	}, "the mirror to see "+offsets)
	var refusing atomic.Bool
	refusing.Store(true)
	kfaketest.RefuseListOffsets(dst, offsets, &refusing)
	err = h.pass(t)
	if err == nil || !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("pass with an unreadable offsets topic: %v", err)
	}
	if ps := h.cp.Partition(p0); ps != nil {
		t.Fatalf("partition started (at %d) without MM2's position", ps.Acked)
	}

	refusing.Store(false)
	h.mustPass(t)
	ps := h.cp.Partition(p0)
	if ps == nil {
		t.Fatal("partition 0 not started once MM2's position could be read")
	}
	ps.Mu.Lock()
	acked := ps.Acked
	floor, adopted := ps.Index.Floor()
	ps.Mu.Unlock()
	if acked != 7 || !adopted || floor != (index.Run{Src: 7, Dst: 7}) {
		t.Fatalf("partition 0 starts at %d with floor %v, want 7 with floor 7->7", acked, floor)
	}
	if ps := h.cp.Partition(data.TopicPartition{Topic: "orders", Partition: 1}); ps == nil || ps.Acked != -1 {
		t.Fatalf("partition 1 (never copied by MM2) should start from the beginning: %+v", ps)
	}
	if st := h.m.Status(); st.Topics[0].Error != "" {
		t.Fatalf("the adoption error is still shown: %s", st.Topics[0].Error)
	}
}

// TestAdoptionForeignConnector: MM2's offsets topic holding the positions
// of partitions to adopt only under another source connector name (an MM2
// run under a Connect name= of its own) does not make them "never copied":
// they wait, the pass fails naming the connector found and the setting,
// status shows it and the mirror is not ready; with
// mirrors[].mm2.source_connector set to that name they start at its
// positions.
func TestAdoptionForeignConnector(t *testing.T) {
	src, dst := kfaketest.Clusters(t)
	mm2Setup(t, src, dst)
	const offsets = "mm2-offsets.src.internal"
	writeMM2Offsets(t, dst, offsets,
		&kgo.Record{Key: []byte(`["mm2-src-to-dst",{"cluster":"src","partition":0,"topic":"orders"}]`), Value: offsetValue(6)},
		&kgo.Record{Key: []byte(`["MirrorCheckpointConnector",{"group":"g","partition":0,"topic":"orders"}]`), Value: offsetValue(5)},
	)
	p0, p1 := data.TopicPartition{Topic: "orders", Partition: 0}, data.TopicPartition{Topic: "orders", Partition: 1}

	h := newPassHarnessFor(t, src, dst, adoptConfig())
	err := h.pass(t)
	for _, want := range []string{offsets, `"mm2-src-to-dst"`, `"MirrorSourceConnector"`, "mirrors[].mm2.source_connector"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("pass with MM2's positions under another connector name: %v; want it to name %s", err, want)
		}
	}
	if ps := h.cp.Partition(p0); ps != nil {
		t.Fatalf("partition 0 started (at %d) although MM2 copied it under another connector name", ps.Acked)
	}
	st := h.m.Status()
	if !strings.Contains(st.LastPassError, "mm2-src-to-dst") || len(st.Topics) != 1 || st.Topics[0].Error != errAdoptionPending.Error() || st.Ready {
		t.Fatalf("status (last pass error %q) %+v (ready %v) does not show the refusal once", st.LastPassError, st.Topics, st.Ready)
	}

	cfg := adoptConfig()
	cfg.MM2.SourceConnector = "mm2-src-to-dst"
	h = newPassHarnessFor(t, src, dst, cfg)
	h.mustPass(t)
	ps := h.cp.Partition(p0)
	if ps == nil {
		t.Fatal("partition 0 not started with source_connector set")
	}
	ps.Mu.Lock()
	acked := ps.Acked
	ps.Mu.Unlock()
	if acked != 7 {
		t.Fatalf("partition 0 starts at %d, want MM2's position 7", acked)
	}
	if ps := h.cp.Partition(p1); ps == nil || ps.Acked != -1 {
		t.Fatalf("partition 1 (never copied by MM2) should start from the beginning: %+v", ps)
	}
}

// TestMM2Checkpoints: the checkpoints are the translatable partitions of
// the groups, keyed by target topic.
func TestMM2Checkpoints(t *testing.T) {
	got := mm2Checkpoints([]GroupStatus{{Group: "g", Partitions: []GroupPartition{
		{SourceTopic: "orders", TargetTopic: "src.orders", Partition: 0, SourceOffset: 10, TargetOffset: 8},
		{SourceTopic: "orders", TargetTopic: "src.orders", Partition: 1, SourceOffset: 3, TargetOffset: -1, Untranslatable: true},
	}}})
	want := []mm2Checkpoint{{group: "g", topic: "src.orders", partition: 0, upstream: 10, downstream: 8}}
	if len(got) != 1 || got[0] != want[0] {
		t.Fatalf("checkpoints %+v, want %+v", got, want)
	}
}

// TestRestartWithoutMM2Offsets: once kmirror copied a partition, its own
// stored progress says where it resumes, and MirrorMaker 2's offsets are
// not needed again. An operator who deletes MM2's offsets topic after the
// move (MM2's internal topics are what a migration cleans up) restarts the
// mirror, and it goes on from where it stopped: nothing waits, nothing is
// copied twice. Before, every start asked MM2's offsets for every
// partition (the control plane did not see the positions the slots load),
// and a missing offsets topic made every topic wait.
func TestRestartWithoutMM2Offsets(t *testing.T) {
	src, dst := kfaketest.Clusters(t)
	mm2Setup(t, src, dst)
	const offsetsTopic = "mm2-offsets.src.internal"
	writeMM2Offsets(t, dst, offsetsTopic, &kgo.Record{Key: mm2Key("src", "orders", 0), Value: offsetValue(6)})
	adm := kadm.NewClient(kfaketest.Client(t, dst))
	run := func(records int64) {
		t.Helper()
		m, stop := runOrdersMirror(t, src, dst, func(c *Config) { c.MM2 = &MM2Config{Adopt: true} })
		defer stop()
		kfaketest.WaitFor(t, func() bool {
			st := m.Status()
			return targetRecords(adm, "src.orders") >= records && len(st.Topics) == 1 && st.Topics[0].Error == "" && st.Topics[0].Lag != nil && *st.Topics[0].Lag == 0
		}, fmt.Sprintf("%d records on the target, the topic without error", records))
	}
	run(20)
	if _, err := adm.DeleteTopic(context.Background(), offsetsTopic); err != nil {
		t.Fatal(err)
	}
	produceOrders(t, src, 2, 5, "y")
	run(30)
	for p, recs := range byPartition(consumeRecords(t, dst.ListenAddrs(), "src.orders")) {
		var got []string
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
		var want []string
		for i := range 10 {
			want = append(want, fmt.Sprintf("x-%d-%d", p, i))
		}
		for i := range 5 {
			want = append(want, fmt.Sprintf("y-%d-%d", p, i))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("partition %d holds %v,\nwant %v (each once, in order)", p, got, want)
		}
	}
}
