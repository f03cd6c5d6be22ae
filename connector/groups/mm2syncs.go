package groups

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/state"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Offsets older than an adopted partition's floor (index.Partition.floor)
// point at records MirrorMaker 2 copied; kmirror's index does not map
// them. They are translated as MM2 translates them, from MM2's offset
// syncs: sparse pairs "source record u is target record d" that MM2's
// source task wrote while it copied. The result is MM2-accurate, not
// exact: between two syncs a consumer may read again the records after
// the sync (never skip one), as it would after an MM2 failover.
//
// The syncs below a floor never change once MM2 stopped, so they are
// read once (the first time a group offset needs them) and kept; a read
// that fails is tried again at a later group sync.

// mm2Sync is one of MM2's offset syncs of a partition: source record
// upstream was written at target offset downstream.
type mm2Sync struct {
	upstream, downstream int64
}

// decodeMM2OffsetSync decodes an offset-syncs record (connect/mirror
// OffsetSync.java): key {topic STRING, partition INT32}, value
// {upstreamOffset INT64, offset INT64}, Kafka protocol types, big-endian,
// with no version header (unlike heartbeats and checkpoints). The topic is
// the SOURCE topic.
func decodeMM2OffsetSync(key, value []byte) (data.TopicPartition, mm2Sync, error) {
	if len(key) < 2 {
		return data.TopicPartition{}, mm2Sync{}, fmt.Errorf("offset sync key %x: shorter than a topic name's length", key)
	}
	n := int(binary.BigEndian.Uint16(key))
	if n == 0 || n > 249 || len(key) != 2+n+4 {
		return data.TopicPartition{}, mm2Sync{}, fmt.Errorf("offset sync key %x: want {topic (int16 length, 1-249 bytes), partition int32}", key)
	}
	tp := data.TopicPartition{Topic: string(key[2 : 2+n]), Partition: int32(binary.BigEndian.Uint32(key[2+n:]))}
	if len(value) != 16 {
		return data.TopicPartition{}, mm2Sync{}, fmt.Errorf("offset sync of %s/%d: value %x is not {upstreamOffset int64, offset int64}", tp.Topic, tp.Partition, value)
	}
	s := mm2Sync{upstream: int64(binary.BigEndian.Uint64(value)), downstream: int64(binary.BigEndian.Uint64(value[8:]))}
	if tp.Partition < 0 || s.upstream < 0 || s.downstream < 0 {
		return data.TopicPartition{}, mm2Sync{}, fmt.Errorf("offset sync of %s/%d: negative partition or offset (upstream %d, downstream %d)", tp.Topic, tp.Partition, s.upstream, s.downstream)
	}
	return tp, s, nil
}

// maxMM2Syncs bounds the syncs kept per partition. MM2 writes one every
// offset.lag.max (100) records at most, so a partition of 100,000 records
// below its floor has up to 1,000. Beyond the bound every other kept sync
// is dropped (the newest stays): the whole range stays covered, with
// syncs half as dense, so a translation may re-read more records but
// never skips one.
const maxMM2Syncs = 1024

// keepMM2Sync adds s, read in the topic's order, to syncs (sorted, both
// offsets strictly increasing) of a partition whose floor is at source
// offset floor. A sync that does not advance both offsets means MM2
// copied records again (it restarted, or the target topic was created
// again): like the offset index, the newer copy wins and the kept syncs
// it contradicts are dropped. Syncs at or above the floor are not kept:
// kmirror's index translates those offsets exactly.
func keepMM2Sync(syncs []mm2Sync, s mm2Sync, floor int64) []mm2Sync {
	i := len(syncs)
	for i > 0 && (syncs[i-1].upstream >= s.upstream || syncs[i-1].downstream >= s.downstream) {
		i--
	}
	syncs = syncs[:i]
	if s.upstream >= floor {
		return syncs
	}
	syncs = append(syncs, s)
	if len(syncs) > maxMM2Syncs {
		// Thin out: keep every other one, ending with the newest.
		k := 0
		for j := (len(syncs) - 1) % 2; j < len(syncs); j += 2 {
			syncs[k] = syncs[j]
			k++
		}
		syncs = syncs[:k]
	}
	return syncs
}

// ErrNoMM2Sync: MM2 wrote no offset sync at or before the source offset
// (or compaction removed it), so MM2 cannot translate it either.
var ErrNoMM2Sync = errors.New("no MirrorMaker 2 offset sync at or before the source offset")

// translateMM2Syncs translates source offset s below floor as MM2's
// OffsetSyncStore.translateDownstream does: with the latest sync at or
// before s, its target offset when s is the synced record, else the
// offset after it (MM2 cannot know how many records between the sync
// and s reached the target; assuming more could skip records). The result
// never passes floor.Dst, where kmirror's copy starts.
func translateMM2Syncs(syncs []mm2Sync, floor index.Run, s int64) (int64, error) {
	i := sort.Search(len(syncs), func(i int) bool { return syncs[i].upstream > s })
	if i == 0 {
		return 0, ErrNoMM2Sync
	}
	sy := syncs[i-1]
	t := sy.downstream
	if sy.upstream < s {
		t++
	}
	return min(t, floor.Dst), nil
}

// MM2SyncsMissingError: MM2's offset-syncs topic does not exist where the
// config says (offset_syncs_location, offset_syncs_topic).
type MM2SyncsMissingError struct {
	Topic, Cluster string
}

func (e *MM2SyncsMissingError) Error() string {
	return fmt.Sprintf("MirrorMaker 2's offset-syncs topic %s does not exist on the %s cluster (mirrors[].mm2.offset_syncs_topic and offset_syncs_location)", e.Topic, e.Cluster)
}

// readMM2OffsetSyncs reads partition 0 of MM2's offset-syncs topic (the
// only one MM2 writes and reads) to its end and returns the syncs below
// each floor (source offset, by partition) of the partitions in floors;
// others are skipped. A missing topic is a *MM2SyncsMissingError; a
// topic listed with an error, or a record that is no offset sync, is
// that error: never "no syncs".
func readMM2OffsetSyncs(ctx context.Context, log *slog.Logger, opts []kgo.Opt, adm *kadm.Client, topic, cluster string, floors map[data.TopicPartition]int64) (map[data.TopicPartition][]mm2Sync, error) {
	exists, err := state.TopicExists(ctx, adm, topic, "MirrorMaker 2's offset-syncs topic")
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, &MM2SyncsMissingError{Topic: topic, Cluster: cluster}
	}
	out := make(map[data.TopicPartition][]mm2Sync)
	err = state.Read(ctx, log, opts, adm, topic, 0, func(key, value []byte) error {
		if value == nil {
			return nil // a tombstone: MM2 writes none, compaction may keep one
		}
		tp, s, err := decodeMM2OffsetSync(key, value)
		if err != nil {
			return fmt.Errorf("%s: %w", topic, err)
		}
		if floor, ok := floors[tp]; ok {
			out[tp] = keepMM2Sync(out[tp], s, floor)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read MirrorMaker 2's offset-syncs topic %s: %w", topic, err)
	}
	return out, nil
}

// mm2SyncsReadTimeout bounds one read of the offset-syncs topic.
const mm2SyncsReadTimeout = 2 * time.Minute

// mm2SyncStore holds the offset syncs of the adopted partitions. The
// group sync goroutine and Translate use it.
type mm2SyncStore struct {
	mu sync.Mutex
	// syncs by partition, below the floor in covered.
	syncs map[data.TopicPartition][]mm2Sync
	// covered are the partitions (with their floor's source offset) the
	// last successful read kept syncs for.
	covered map[data.TopicPartition]int64
	// pass counts group syncs; a read that failed (err) in pass errPass
	// is tried again in a later one, not for every partition.
	pass, errPass int64
	err           error
}

func newMM2SyncStore() *mm2SyncStore { return &mm2SyncStore{errPass: -1} }

// nextPass starts a group sync pass.
func (st *mm2SyncStore) nextPass() {
	st.mu.Lock()
	st.pass++
	st.mu.Unlock()
}

// translateBelowFloor translates source offset so of tp, below its floor,
// from MM2's offset syncs. floors lists every adopted partition's floor
// (source offset), for a read to cover them all at once; the syncs are
// read when tp is not covered yet, at most once per pass after a failure.
func (s *Syncer) translateBelowFloor(ctx context.Context, c Clients, tp data.TopicPartition, floor index.Run, so int64, floors func() map[data.TopicPartition]int64) (int64, error) {
	st := s.mm2
	st.mu.Lock()
	defer st.mu.Unlock()
	if f, ok := st.covered[tp]; !ok || f != floor.Src {
		if st.err != nil && st.errPass == st.pass {
			return 0, st.err
		}
		mc := s.cfg.MM2OffsetSyncs
		opts, adm, cluster, explain := s.cfg.SourceOpts, c.SrcAdm, "source", s.mirror.SrcErr
		if mc.OnTarget {
			opts, adm, cluster, explain = s.cfg.TargetOpts, c.DstAdm, "target", s.mirror.DstErr
		}
		fl := floors()
		fl[tp] = floor.Src
		rctx, cancel := context.WithTimeout(ctx, mm2SyncsReadTimeout)
		syncs, err := readMM2OffsetSyncs(rctx, s.cfg.Log, opts, adm, mc.Topic, cluster, fl)
		cancel()
		if err != nil {
			var missing *MM2SyncsMissingError
			if !errors.As(err, &missing) {
				err = explain(err)
			}
			st.err, st.errPass = err, st.pass
			return 0, err
		}
		n := 0
		for _, ss := range syncs {
			n += len(ss)
		}
		s.cfg.Log.Info("read MirrorMaker 2's offset syncs: group offsets older than the adopted positions translate from them", "offset_syncs_topic", mc.Topic, "cluster", cluster, "partitions", len(fl), "syncs", n)
		st.syncs, st.covered, st.err = syncs, fl, nil
	}
	return translateMM2Syncs(st.syncs[tp], floor, so)
}

// mm2SyncsReason says why an offset below tp's floor has no translation
// from MM2's offset syncs (err is translateBelowFloor's error).
func mm2SyncsReason(floor index.Run, s int64, err error) string {
	below := fmt.Sprintf("source offset %d is older than source offset %d, where kmirror took over from MirrorMaker 2 (mirrors[].mm2.adopt)", s, floor.Src)
	if errors.Is(err, ErrNoMM2Sync) {
		return below + ": MM2's offset syncs have none at or before it, so MM2 could not translate it either"
	}
	return below + ", and MM2's offset syncs that translate it cannot be read (tried again at the next group sync): " + err.Error()
}

// mm2SyncsNote marks a translation from MM2's offset syncs.
const mm2SyncsNote = "translated from MirrorMaker 2's offset syncs (MM2-accurate, not exact: a consumer may read again some records MM2 copied, never skip one)"

// translateFromMM2 sets gp, whose source offset is below tp's floor, from
// MM2's offset syncs: Approximate with the translation, or untranslatable
// with why not.
func (s *Syncer) translateFromMM2(ctx context.Context, c Clients, gp *Partition, tp data.TopicPartition, floor index.Run, floors func() map[data.TopicPartition]int64) {
	to, err := s.translateBelowFloor(ctx, c, tp, floor, gp.SourceOffset, floors)
	if err != nil {
		gp.TargetOffset, gp.Untranslatable, gp.Reason = -1, true, mm2SyncsReason(floor, gp.SourceOffset, err)
		return
	}
	gp.TargetOffset, gp.Behind, gp.Untranslatable, gp.Approximate, gp.Reason = to, false, false, true, mm2SyncsNote
}

// planeFloors lists the floors of the adopted partitions copied by dp.
func planeFloors(dp DataPlane) func() map[data.TopicPartition]int64 {
	return func() map[data.TopicPartition]int64 {
		out := make(map[data.TopicPartition]int64)
		for _, ps := range dp.Snapshot() {
			ps.Mu.Lock()
			if ps.Index != nil && ps.Index.Adopted() {
				out[ps.TP] = floorSource(ps.Index)
			}
			ps.Mu.Unlock()
		}
		return out
	}
}

// indexFloors lists the floors of the adopted partitions in indexes.
func indexFloors(indexes map[data.TopicPartition]*index.Partition) func() map[data.TopicPartition]int64 {
	return func() map[data.TopicPartition]int64 {
		out := make(map[data.TopicPartition]int64)
		for tp, ix := range indexes {
			if ix.Adopted() {
				out[tp] = floorSource(ix)
			}
		}
		return out
	}
}

// floorSource is the source offset an adopted partition's copy started
// from (see index.NewAdopted).
func floorSource(ix *index.Partition) int64 {
	floor, _ := ix.Floor()
	return floor.Src
}
