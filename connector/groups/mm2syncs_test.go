package groups

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/internal/kfaketest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDecodeMM2OffsetSync: byte-exact against OffsetSync.java's schemas
// (the golden hex is Python's struct.pack: '>h' length + UTF-8 for the
// topic STRING, '>i' partition, '>q' upstreamOffset and offset; no
// version header).
func TestDecodeMM2OffsetSync(t *testing.T) {
	key, _ := hex.DecodeString("00066f726465727300000003")
	value, _ := hex.DecodeString("00000000000004d200000000000004b0")
	tp, s, err := decodeMM2OffsetSync(key, value)
	if err != nil || tp != (data.TopicPartition{Topic: "orders", Partition: 3}) || s != (mm2Sync{upstream: 1234, downstream: 1200}) {
		t.Fatalf("decode: %v %v %v", tp, s, err)
	}
	for _, c := range []struct{ key, value, want string }{
		{"0006", "00000000000004d200000000000004b0", "key 0006"},
		{"00066f7264657273000000", "00000000000004d200000000000004b0", "want {topic"},
		{"00066f726465727300000003", "000000000000000004d200000000000004b0", "orders/3: value"}, // a version header is no sync
		{"00066f726465727300000003", "ffffffffffffffff00000000000004b0", "negative"},
	} {
		k, _ := hex.DecodeString(c.key)
		v, _ := hex.DecodeString(c.value)
		if _, _, err := decodeMM2OffsetSync(k, v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s/%s: %v, want an error with %q", c.key, c.value, err, c.want)
		}
	}
}

// TestTranslateMM2Syncs: MM2's rule: the synced record itself is exact,
// an offset after a sync is the target offset after it, none before the
// first sync, never past the floor.
func TestTranslateMM2Syncs(t *testing.T) {
	syncs := []mm2Sync{{10, 5}, {20, 12}, {30, 20}}
	floor := index.Run{Src: 40, Dst: 30}
	for s, want := range map[int64]int64{10: 5, 11: 6, 19: 6, 20: 12, 25: 13, 30: 20, 39: 21} {
		if got, err := translateMM2Syncs(syncs, floor, s); err != nil || got != want {
			t.Errorf("translate %d = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []int64{0, 9} {
		if _, err := translateMM2Syncs(syncs, floor, s); !errors.Is(err, ErrNoMM2Sync) {
			t.Errorf("translate %d before the first sync: %v", s, err)
		}
	}
	if _, err := translateMM2Syncs(nil, floor, 12); !errors.Is(err, ErrNoMM2Sync) {
		t.Errorf("no syncs: %v", err)
	}
	// Capped at the floor's target offset.
	if got, err := translateMM2Syncs([]mm2Sync{{30, 29}}, index.Run{Src: 40, Dst: 29}, 35); err != nil || got != 29 {
		t.Errorf("capped: %d, %v; want 29", got, err)
	}
}

// TestKeepMM2Sync: syncs at or above the floor are not kept, a sync that
// goes back (MM2 copied again) drops the ones it contradicts, and a
// partition keeps at most maxMM2Syncs, spread over the whole range.
func TestKeepMM2Sync(t *testing.T) {
	var syncs []mm2Sync
	for _, s := range []mm2Sync{{0, 0}, {100, 100}, {200, 200}, {150, 300}, {180, 330}, {500, 600}} {
		syncs = keepMM2Sync(syncs, s, 400)
	}
	want := []mm2Sync{{0, 0}, {100, 100}, {150, 300}, {180, 330}}
	if len(syncs) != len(want) {
		t.Fatalf("kept %v, want %v", syncs, want)
	}
	for i := range want {
		if syncs[i] != want[i] {
			t.Fatalf("kept %v, want %v", syncs, want)
		}
	}
	syncs = nil
	const n = 5 * maxMM2Syncs
	for i := range int64(n) {
		syncs = keepMM2Sync(syncs, mm2Sync{upstream: 10 * i, downstream: 10 * i}, 1<<40)
		if len(syncs) > maxMM2Syncs {
			t.Fatalf("%d syncs kept after %d, bound %d", len(syncs), i+1, maxMM2Syncs)
		}
	}
	if syncs[len(syncs)-1].upstream != 10*(n-1) || syncs[0].upstream > 10*8 {
		t.Fatalf("kept %d syncs from %v to %v: want the newest and one near the start", len(syncs), syncs[0], syncs[len(syncs)-1])
	}
	for i := 1; i < len(syncs); i++ {
		if syncs[i].upstream <= syncs[i-1].upstream {
			t.Fatalf("not sorted at %d: %v %v", i, syncs[i-1], syncs[i])
		}
	}
}

// offsetSync is an offset-syncs record as MM2 writes it: key {topic
// (int16 length), partition int32}, value {upstreamOffset, offset}.
func offsetSync(topic string, p int32, upstream, downstream int64) *kgo.Record {
	k := binary.BigEndian.AppendUint16(nil, uint16(len(topic)))
	k = append(k, topic...)
	k = binary.BigEndian.AppendUint32(k, uint32(p))
	v := binary.BigEndian.AppendUint64(nil, uint64(upstream))
	v = binary.BigEndian.AppendUint64(v, uint64(downstream))
	return &kgo.Record{Key: k, Value: v}
}

// writeOffsetSyncs creates MM2's offset-syncs topic on c (one partition,
// as MM2 does) and writes recs to it.
func writeOffsetSyncs(t *testing.T, c *kfake.Cluster, topic string, recs ...*kgo.Record) {
	t.Helper()
	kfaketest.WriteCompacted(t, c, topic, 1, recs...)
}

// waitSeen waits until adm's metadata (cached by the client) has topic.
func waitSeen(t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	kfaketest.WaitFor(t, func() bool {
		tds, err := adm.ListTopics(context.Background(), topic)
		return err == nil && tds.Has(topic)
	}, "the client to see "+topic)
}

func TestReadMM2OffsetSyncs(t *testing.T) {
	src, _ := kfaketest.Clusters(t)
	const topic = "mm2-offset-syncs.dst.internal"
	adm := kadm.NewClient(kfaketest.Client(t, src))
	opts := []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	floors := map[data.TopicPartition]int64{{Topic: "orders", Partition: 0}: 50}

	_, err := readMM2OffsetSyncs(ctx, nil, opts, adm, topic, "source", floors)
	var missing *MM2SyncsMissingError
	if !errors.As(err, &missing) || !strings.Contains(err.Error(), topic) || !strings.Contains(err.Error(), "offset_syncs_location") {
		t.Fatalf("missing topic: %v", err)
	}

	writeOffsetSyncs(t, src, topic,
		offsetSync("orders", 0, 0, 0),
		offsetSync("orders", 1, 0, 0), // no floor: not kept
		offsetSync("orders", 0, 20, 18),
		&kgo.Record{Key: offsetSync("orders", 0, 0, 0).Key}, // a tombstone
		offsetSync("orders", 0, 60, 55),                     // above the floor
	)
	waitSeen(t, adm, topic)
	got, err := readMM2OffsetSyncs(ctx, nil, opts, adm, topic, "source", floors)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[data.TopicPartition{Topic: "orders", Partition: 0}]) != 2 || got[data.TopicPartition{Topic: "orders", Partition: 0}][1] != (mm2Sync{20, 18}) {
		t.Fatalf("syncs %v, want orders/0 at 0->0 and 20->18", got)
	}

	// Unreadable: that error, not "no syncs" and not "missing".
	var refusing atomic.Bool
	refusing.Store(true)
	kfaketest.RefuseListOffsets(src, topic, &refusing)
	_, err = readMM2OffsetSyncs(ctx, nil, opts, adm, topic, "source", floors)
	if !errors.Is(err, kerr.TopicAuthorizationFailed) || errors.As(err, &missing) {
		t.Fatalf("unreadable topic: %v", err)
	}
	refusing.Store(false)

	// A record that is no offset sync is an error naming the topic.
	writeOffsetSyncs(t, src, topic, &kgo.Record{Key: []byte("x"), Value: []byte("y")})
	if _, err := readMM2OffsetSyncs(ctx, nil, opts, adm, topic, "source", floors); err == nil || !strings.Contains(err.Error(), topic) {
		t.Fatalf("bad record: %v", err)
	}
}

// TestGroupOffsetsBelowAdoptionFromMM2Syncs: a group committed at an
// offset MM2 copied is untranslatable (naming the topic) while MM2's
// offset-syncs topic is missing, untranslatable with the error while it
// cannot be read, and, once it can, translated from its syncs, marked
// approximate and committed; Translate (`kmirror translate`) says the same.
func TestGroupOffsetsBelowAdoptionFromMM2Syncs(t *testing.T) {
	src, dst := kfaketest.Clusters(t)
	const syncsTopic = "mm2-offset-syncs.dst.internal"
	h := newHarnessOn(t, src, dst, 1, func(c *Config) { c.MM2OffsetSyncs = &MM2OffsetSyncs{Topic: syncsTopic} })
	// orders/0 adopted at 7 -> 7 (MM2 copied the records before), nothing
	// copied since.
	h.copied(0, index.NewAdopted(nil, 7, 7), 7)
	kfaketest.CommitOffsets(t, h.srcAdm, "g", "orders", map[int32]int64{0: 3})
	sync := func() Partition {
		t.Helper()
		h.sync(t)
		for _, g := range h.s.Groups() {
			if g.Group == "g" && len(g.Partitions) == 1 {
				return g.Partitions[0]
			}
		}
		t.Fatalf("group g with one partition not in %+v", h.s.Groups())
		return Partition{}
	}

	gp := sync()
	if !gp.Untranslatable || gp.Approximate || !strings.Contains(gp.Reason, syncsTopic) {
		t.Fatalf("without MM2's offset-syncs topic: %+v", gp)
	}

	writeOffsetSyncs(t, src, syncsTopic, offsetSync("orders", 0, 0, 0), offsetSync("orders", 0, 2, 2), offsetSync("orders", 0, 5, 5))
	waitSeen(t, h.c.SrcAdm, syncsTopic)
	var refusing atomic.Bool
	refusing.Store(true)
	kfaketest.RefuseListOffsets(src, syncsTopic, &refusing)
	gp = sync()
	if !gp.Untranslatable || !strings.Contains(gp.Reason, "TOPIC_AUTHORIZATION_FAILED") || !strings.Contains(gp.Reason, "tried again") {
		t.Fatalf("unreadable offset-syncs topic: %+v", gp)
	}

	refusing.Store(false)
	gp = sync()
	if gp.Untranslatable || !gp.Approximate || gp.TargetOffset != 3 || !strings.Contains(gp.Reason, "MM2-accurate") {
		t.Fatalf("from MM2's syncs: %+v, want target offset 3 (after the sync 2->2), approximate", gp)
	}
	if got := h.targetOffsets(t, "g"); got[0] != 3 {
		t.Fatalf("target group g at %v, want 0:3", got)
	}

	// Offline, from the stored index and MM2's syncs: the progress the
	// worker stores for the adopted partition.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k, v := data.EncodeProgress(data.TopicPartition{Topic: "orders", Partition: 0}, data.Position{Next: 7, Floor: &index.Run{Src: 7, Dst: 7}})
	if err := h.c.Dst.ProduceSync(ctx, &kgo.Record{Topic: h.s.cfg.ProgressTopic, Key: k, Value: h.s.cfg.Sealer.Seal(v)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	offline := New(h.s.cfg, h.mirror)
	st, err := offline.Translate(ctx, h.c, "g", TranslateOptions{})
	if err != nil || len(st.Partitions) != 1 || !st.Partitions[0].Approximate || st.Partitions[0].TargetOffset != 3 {
		t.Fatalf("Translate: %+v, %v", st, err)
	}
	// At a synced record: its target offset.
	kfaketest.CommitOffsets(t, h.srcAdm, "g0", "orders", map[int32]int64{0: 0})
	if st, err := offline.Translate(ctx, h.c, "g0", TranslateOptions{}); err != nil || st.Partitions[0].TargetOffset != 0 || !st.Partitions[0].Approximate {
		t.Fatalf("Translate at the first sync: %+v, %v", st, err)
	}
}
