package data

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/state"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/offsets"
)

// Progress and the offset index live in one compacted topic on the target
// cluster, kmirror.<mirror>.progress.internal (the source is only read).
// Two kinds of record, told apart by their key:
//
//	progress     key {"topic":"orders","partition":0}
//	             value {"next_offset":1234,"topic_id":"<base64 source topic ID>",
//	                    "mm2_adopted":{"source":1000,"target":990}}
//	index chunk  key {"topic":"orders","partition":0,"chunk":3}
//	             value: runs of the offset index (package index)
//
// Every value is wrapped in the offset envelope (connector/offsets); a
// progress value written before the envelope existed is bare JSON, which
// the envelope reads as its legacy form.
//
// next_offset is the first source offset not yet on the target; a restart
// resumes reading there. topic_id (absent when the source broker has no
// topic IDs) ties the position to one incarnation of the source topic.
//
// Index chunks and progress share the topic's single partition on purpose:
// a partition's chunks are produced before its progress record, and the
// idempotent producer keeps a partition's log in produce order with no
// gaps, so any progress record that reached the log has the index covering
// it there too. A crash can never leave progress ahead of the index, which
// would make translation skip records.
type progressKey struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Chunk     *int64 `json:"chunk,omitempty"`
}

type progressValue struct {
	NextOffset int64  `json:"next_offset"`
	TopicID    string `json:"topic_id,omitempty"`
	// SourceEnd is the source partition's last stable offset as last
	// seen when the position was written: with the source gone, how
	// many records were never copied (the recovery point) as far as
	// kmirror knows. Absent (0) when not seen yet.
	SourceEnd  int64         `json:"source_end,omitempty"`
	MM2Adopted *adoptedValue `json:"mm2_adopted,omitempty"`
}

type adoptedValue struct {
	Source int64 `json:"source"`
	Target int64 `json:"target"`
}

// position is a stored progress value.
type Position struct {
	Next    int64
	TopicID string
	// SourceEnd is the source's end as last seen at the write (0:
	// unknown); only a failover reads it.
	SourceEnd int64
	Floor     *index.Run // the index's floor (index.Partition.floor), or nil
}

// sealer wraps record values in the offset envelope with the configured
// codec, or with none when compressing would not make the value smaller
// (tiny progress records): the envelope names the codec per record, so
// readers need no configuration.
type Sealer struct{ codec offsets.Codec }

// minSealedBytes is the smallest payload a Sealer tries to compress: a
// progress record (about 60 bytes of JSON) never gets smaller, and trying
// cost half a second of CPU when 100,000 partitions wrote theirs after a
// restart.
const minSealedBytes = 256

// NewSealer seals with codec.
func NewSealer(codec offsets.Codec) Sealer { return Sealer{codec} }

func (s Sealer) Seal(payload []byte) []byte {
	plain, err := offsets.Encode(offsets.CodecNone, payload)
	if err != nil || s.codec == offsets.CodecNone || len(payload) < minSealedBytes {
		return plain
	}
	if packed, err := offsets.Encode(s.codec, payload); err == nil && len(packed) < len(plain) {
		return packed
	}
	return plain
}

func EncodeProgress(tp TopicPartition, pos Position) (key, value []byte) {
	// Marshalling these two small structs cannot fail.
	key, _ = json.Marshal(progressKey{Topic: tp.Topic, Partition: tp.Partition})
	v := progressValue{NextOffset: pos.Next, TopicID: pos.TopicID, SourceEnd: max(pos.SourceEnd, 0)}
	if f := pos.Floor; f != nil {
		v.MM2Adopted = &adoptedValue{Source: f.Src, Target: f.Dst}
	}
	value, _ = json.Marshal(v)
	return key, value
}

func IndexChunkKey(tp TopicPartition, chunk int64) []byte {
	key, _ := json.Marshal(progressKey{Topic: tp.Topic, Partition: tp.Partition, Chunk: &chunk})
	return key
}

// DecodeProgress decodes a progress record's key and value (unwrapped).
func DecodeProgress(key, value []byte) (TopicPartition, Position, error) {
	k, err := decodeProgressKey(key)
	if err != nil {
		return TopicPartition{}, Position{}, err
	}
	pos, err := decodeProgressValue(k, value)
	if err != nil {
		return TopicPartition{}, Position{}, err
	}
	return TopicPartition{k.Topic, k.Partition}, pos, nil
}

// loaded is what a mirror finds in its progress topic at start.
type Loaded struct {
	Positions map[TopicPartition]Position
	Indexes   map[TopicPartition]*index.Partition
}

// resume returns a with the position and index ld holds for its
// partition, and takes them out of ld (a partition resumes from what was
// loaded once; assigned again later, it is the copier's own state that
// counts). The control plane has no positions of its own: one of an
// earlier topic of the same name, or an index without a position, starts
// over, and an index adopted from MM2 drops the stale chunks.
func (ld Loaded) Resume(a Assignment) Assignment {
	pos, ok := ld.Positions[a.TP]
	switch ix := ld.Indexes[a.TP]; {
	case ok && (pos.TopicID == "" || a.TopicID == "" || pos.TopicID == a.TopicID):
		a.Next, a.Index = pos.Next, ix
	case ix != nil && a.Index == nil:
		a.Next, a.Index = -1, ix.Replacement()
	case ix != nil && a.Index.Adopted():
		floor, _ := a.Index.Floor()
		a.Index = index.NewAdopted(ix, floor.Src, floor.Dst)
	}
	delete(ld.Positions, a.TP)
	delete(ld.Indexes, a.TP)
	return a
}

// Drained reports that every loaded partition was resumed: a Go map keeps
// its buckets after its entries are deleted, so the holder drops ld then
// (at 100,000 partitions the two maps are 15 MB).
func (ld Loaded) Drained() bool {
	return len(ld.Positions) == 0 && len(ld.Indexes) == 0
}

// loadProgress reads the progress topic to its end. It is bounded by ctx.
// A record it cannot read stops the load and names the record: guessing
// would restart that partition from the beginning (duplicates) or skip
// records.
func LoadProgress(ctx context.Context, log *slog.Logger, targetOpts []kgo.Opt, adm *kadm.Client, topic string) (Loaded, error) {
	st := newProgressState()
	if err := state.Read(ctx, log, targetOpts, adm, topic, -1, st.apply); err != nil {
		return Loaded{}, err
	}
	return st.loaded(), nil
}

// progressState is the progress topic folded: the last position and the
// index chunks of every source partition, by topic and then by partition
// number. A map entry per partition (with its own copy of the topic's
// name, decoded from each key) made a worker's fold of 100,000 partitions
// 33 MB; by topic it is a third of that.
type progressState struct {
	topics map[string]*topicProgress
	keep   func(TopicPartition) bool // nil: every partition
	// ids interns the topic IDs of positions: one string per topic, not
	// one per partition.
	ids map[string]string
}

// topicProgress is one source topic's partitions, indexed by partition
// number (at most maxFoldPartition).
type topicProgress struct {
	pos []Position
	has []bool // pos[i] is set
	// chunks holds each partition's stored index chunks by number,
	// sorted: a slice rather than a map per partition (most have one or
	// two chunks).
	chunks [][]index.Chunk
	n      int // partitions with a position or a chunk
}

// maxFoldPartition bounds the partition numbers a progress key may name:
// the fold holds a slot for every number up to the largest, and a key
// naming partition 2^31-1 (written by something else) would otherwise
// make it allocate gigabytes rather than stop the load and name the key.
const maxFoldPartition = 1 << 20

func newProgressState() *progressState {
	return &progressState{topics: make(map[string]*topicProgress), ids: make(map[string]string)}
}

// topic returns tp's topic, made (and grown to hold tp) when grow is set;
// nil when it has nothing and grow is not set.
func (st *progressState) topic(tp TopicPartition, grow bool) *topicProgress {
	t := st.topics[tp.Topic]
	if !grow {
		if t == nil || int(tp.Partition) >= len(t.pos) {
			return nil
		}
		return t
	}
	if t == nil {
		t = &topicProgress{}
		st.topics[tp.Topic] = t
	}
	if n := int(tp.Partition) + 1; n > len(t.pos) {
		// Exactly as long as needed: append's doubling left most of a
		// 10-partition topic's slices empty.
		t.pos = grown(t.pos, n)
		t.has = grown(t.has, n)
		t.chunks = grown(t.chunks, n)
	}
	return t
}

// grown returns s lengthened to n with zero values, in an array of
// exactly n.
func grown[T any](s []T, n int) []T {
	out := make([]T, n)
	copy(out, s)
	return out
}

// settle counts partition p in or out of t.n after a change (had: it held
// something before), and drops the topic once none of its partitions
// holds anything.
func (st *progressState) settle(name string, t *topicProgress, p int32, had bool) {
	has := t.has[p] || len(t.chunks[p]) > 0
	switch {
	case has && !had:
		t.n++
	case !has && had:
		t.n--
		if t.n == 0 {
			delete(st.topics, name)
		}
	}
}

func (t *topicProgress) any(p int32) bool { return t.has[p] || len(t.chunks[p]) > 0 }

// position returns tp's stored position.
func (st *progressState) position(tp TopicPartition) (Position, bool) {
	if t := st.topic(tp, false); t != nil && t.has[tp.Partition] {
		return t.pos[tp.Partition], true
	}
	return Position{}, false
}

// setPosition stores tp's position, or deletes it (del).
func (st *progressState) setPosition(tp TopicPartition, pos Position, del bool) {
	t := st.topic(tp, !del)
	if t == nil {
		return
	}
	had := t.any(tp.Partition)
	t.pos[tp.Partition], t.has[tp.Partition] = pos, !del
	st.settle(tp.Topic, t, tp.Partition, had)
}

// setChunk stores chunk n of tp's index, or deletes it when runs is nil.
func (st *progressState) setChunk(tp TopicPartition, n int64, runs []index.Run) {
	t := st.topic(tp, runs != nil)
	if t == nil {
		return
	}
	had := t.any(tp.Partition)
	cs := t.chunks[tp.Partition]
	i, found := slices.BinarySearchFunc(cs, n, func(c index.Chunk, n int64) int { return cmp.Compare(c.K, n) })
	switch {
	case runs == nil && !found:
		return
	case runs == nil:
		cs = slices.Delete(cs, i, i+1)
	case found:
		cs[i].Runs = runs
	default:
		cs = slices.Insert(cs, i, index.Chunk{K: n, Runs: runs})
	}
	if len(cs) == 0 {
		cs = nil
	}
	t.chunks[tp.Partition] = cs
	st.settle(tp.Topic, t, tp.Partition, had)
}

// each calls f for every partition with a position or chunks.
func (st *progressState) each(f func(tp TopicPartition, pos Position, has bool, cs []index.Chunk)) {
	for name, t := range st.topics {
		for p := range t.pos {
			if t.any(int32(p)) {
				f(TopicPartition{name, int32(p)}, t.pos[p], t.has[p], t.chunks[p])
			}
		}
	}
}

// apply folds the progress topic's next committed record in.
func (st *progressState) apply(key, value []byte) error {
	k, err := decodeProgressKey(key)
	if err != nil {
		return err
	}
	if k.Partition < 0 || k.Partition > maxFoldPartition {
		return fmt.Errorf("progress key %q: partition %d out of range", key, k.Partition)
	}
	tp := TopicPartition{k.Topic, k.Partition}
	if st.keep != nil && !st.keep(tp) {
		return nil
	}
	if k.Chunk != nil && value == nil {
		st.setChunk(tp, *k.Chunk, nil)
		return nil
	}
	if value == nil {
		st.setPosition(tp, Position{}, true)
		return nil
	}
	payload, _, err := offsets.Decode(value)
	if err != nil {
		return fmt.Errorf("key %s: %w", key, err)
	}
	if k.Chunk == nil {
		pos, err := decodeProgressValue(k, payload)
		if err != nil {
			return err
		}
		if id, ok := st.ids[pos.TopicID]; ok {
			pos.TopicID = id
		} else if st.ids != nil {
			st.ids[pos.TopicID] = pos.TopicID
		}
		st.setPosition(tp, pos, false)
		return nil
	}
	runs, err := index.DecodeChunk(payload)
	if err != nil {
		return fmt.Errorf("key %s: %w", key, err)
	}
	if runs == nil {
		runs = []index.Run{} // an empty chunk is stored, not a deletion
	}
	st.setChunk(tp, *k.Chunk, runs)
	return nil
}

// copyOf is a copy of the partitions keep selects (nil: all), whose
// records apply folds in only for those partitions. The chunks' runs are
// shared: nothing changes a decoded chunk.
func (st *progressState) copyOf(keep func(TopicPartition) bool) *progressState {
	out := newProgressState()
	out.keep = keep
	st.each(func(tp TopicPartition, pos Position, has bool, cs []index.Chunk) {
		if keep != nil && !keep(tp) {
			return
		}
		if has {
			out.setPosition(tp, pos, false)
		}
		for _, c := range cs {
			out.setChunk(tp, c.K, c.Runs)
		}
	})
	return out
}

// loaded assembles the indexes: what a slot or a worker starts from.
func (st *progressState) loaded() Loaded {
	out := Loaded{Positions: make(map[TopicPartition]Position), Indexes: make(map[TopicPartition]*index.Partition)}
	st.each(func(tp TopicPartition, pos Position, has bool, cs []index.Chunk) {
		var ix *index.Partition
		if len(cs) > 0 {
			ix = index.Assemble(cs)
		}
		if has {
			out.Positions[tp] = pos
			if pos.Floor != nil {
				if ix == nil {
					ix = index.New()
				}
				ix.SetFloor(pos.Floor.Src, pos.Floor.Dst)
			}
		}
		if ix != nil {
			out.Indexes[tp] = ix
		}
	})
	return out
}

// topicID asks a client of its own for the topic's ID: a client keeps the
// ID it first saw for a topic's name, and one deleted and created again
// would look the same to it.
func (l *ProgressLog) topicID(ctx context.Context) (kadm.TopicID, error) {
	cl, err := kgo.NewClient(l.opts...)
	if err != nil {
		return kadm.TopicID{}, err
	}
	defer cl.Close()
	tds, err := kadm.NewClient(cl).ListTopics(ctx, l.topic)
	if err == nil {
		err = tds.Error()
	}
	if err != nil {
		return kadm.TopicID{}, fmt.Errorf("describe %s: %w", l.topic, err)
	}
	return tds[l.topic].ID, nil
}

// progressLog is a member's copy of its mirror's progress topic, read
// from the start once and then kept current: each read continues where
// the last one stopped. A slot takeover and the group sync's translation
// need every slot's committed progress and index; reading the whole topic
// each time made a takeover take as long as the topic is long (20 s after
// 30 minutes of the chaos soak, bench/results/chaos.md).
type ProgressLog struct {
	topic string
	opts  []kgo.Opt
	log   *slog.Logger

	mu     sync.Mutex // one read at a time; guards what follows
	state  *progressState
	reader *state.Reader
	id     kadm.TopicID // the topic's ID when it was first read
}

func NewProgressLog(log *slog.Logger, opts []kgo.Opt, topic string) *ProgressLog {
	l := &ProgressLog{topic: topic, opts: opts, log: log}
	l.reset()
	return l
}

func (l *ProgressLog) reset() {
	l.state = newProgressState()
	l.reader = state.NewReader(l.topic, l.state.apply)
}

// stored returns the partitions of tps (by target topic) that have a
// position in what was read so far: copied by kmirror before. It waits
// for a read in progress.
func (l *ProgressLog) Stored(tps map[string][]TopicPartition) []TopicPartition {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []TopicPartition
	for _, ps := range tps {
		for _, tp := range ps {
			if _, ok := l.state.position(tp); ok {
				out = append(out, tp)
			}
		}
	}
	return out
}

// current reads what was committed since the last read (everything, the
// first time) and returns the progress of the partitions keep selects
// (nil: all) as of the topic's end when the call started: what a one-off
// loadProgress would return. A topic that was created again is read again
// from its start. A failed read keeps what was read; the next continues
// from there.
func (l *ProgressLog) Current(ctx context.Context, adm *kadm.Client, keep func(TopicPartition) bool) (Loaded, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id, err := l.topicID(ctx)
	if err != nil {
		return Loaded{}, err
	}
	if l.id != (kadm.TopicID{}) && id != l.id {
		err = fmt.Errorf("its topic ID changed from %s to %s: %w", l.id, id, state.ErrShrank)
	} else {
		err = l.reader.ReadToEnd(ctx, l.log, l.opts, adm, -1)
	}
	if errors.Is(err, state.ErrShrank) {
		l.log.Warn("the progress topic was created again: reading it from its start", "progress_topic", l.topic, "err", err)
		l.reset()
		err = l.reader.ReadToEnd(ctx, l.log, l.opts, adm, -1)
	}
	l.id = id
	if err != nil {
		return Loaded{}, err
	}
	// What follows a transaction still open counts as a one-off read
	// would count it: the open transaction's records do not (its owner's
	// successor aborts it), the committed ones behind it do.
	view := l.state.copyOf(keep)
	if err := l.reader.HeldBack(view.apply); err != nil {
		return Loaded{}, err
	}
	return view.loaded(), nil
}

// Decided reports whether what the previous read saw of producer pid's
// records up to offsets (per progress partition) is decided: see
// state.Reader.Decided.
func (l *ProgressLog) Decided(pid int64, offsets map[int32]int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, off := range offsets {
		if !l.reader.Decided(pid, p, off) {
			return false
		}
	}
	return true
}

// Undecided is what the last read saw of a producer's records up to given
// offsets (per progress partition) that is still undecided: the progress
// partitions holding such records, and the source partitions those records
// are about (their progress or index chunks), whose records on the target
// the same transaction wrote. Beyond says the producer also has undecided
// records past those offsets there: it wrote again since.
type Undecided struct {
	Partitions []int32
	Sources    []TopicPartition
	Beyond     bool
}

// Undecided reports what of producer pid's records up to offsets is still
// undecided in what the previous read saw (see Decided).
func (l *ProgressLog) Undecided(pid int64, offsets map[int32]int64) (Undecided, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var u Undecided
	seen := make(map[TopicPartition]bool)
	for _, p := range slices.Sorted(maps.Keys(offsets)) {
		if l.reader.Decided(pid, p, offsets[p]) {
			continue
		}
		u.Partitions = append(u.Partitions, p)
		for _, r := range l.reader.Pending(pid, p) {
			if r.Offset > offsets[p] {
				u.Beyond = true
				continue
			}
			k, err := decodeProgressKey(r.Key)
			if err != nil {
				return Undecided{}, fmt.Errorf("%s partition %d offset %d: %w", l.topic, p, r.Offset, err)
			}
			if tp := (TopicPartition{k.Topic, k.Partition}); !seen[tp] {
				seen[tp] = true
				u.Sources = append(u.Sources, tp)
			}
		}
	}
	return u, nil
}

// progressWriter persists, per partition, the index chunks that changed and
// the acked position, in that order.
type ProgressWriter struct {
	topic string
	// partitions is the progress topic's partition count: a source
	// partition's progress and index chunks go to state.PartitionFor.
	partitions int32
	dst        *kgo.Client
	c          *Copier
	sealer     Sealer
	// failed counts and logs (rate-limited) a write the target did not
	// acknowledge; the write is retried on the next tick.
	failed func(kind string, tp TopicPartition, err error)
	// failures counts the writes the target refused, so writeSync can
	// tell a flushed write from an acknowledged one; firstFailure is the
	// first refusal since takeFailures.
	failures     atomic.Int64
	failureMu    sync.Mutex
	firstFailure error
	// outstanding holds a token per record produced and not yet answered:
	// a worker starting on 100,000 partitions writes two records for each,
	// and the producer would otherwise buffer them all (its record
	// bound is franz-go's 10,000; 16 slots held 40 MB of them).
	outstanding chan struct{}
	// txnWrites are, in a transaction (exactly_once), what the open
	// transaction wrote: the partitions whose progress or index went
	// into it, and per progress partition the highest offset the target
	// acknowledged for it (TxnFence.Commit names them).
	txnMu     sync.Mutex
	txnWrites TxnWrites
}

// TxnWrites is what a transaction wrote to the progress topic: the source
// partitions whose progress or index chunks it holds, and per progress
// partition the offset of the last of its records there. A worker taking
// a slot over reads the progress topic until the transaction that the
// slot's committed offset names is decided at those offsets (its commit
// markers land on each partition after the commit returns).
type TxnWrites struct {
	Partitions []TopicPartition
	Offsets    map[int32]int64
}

// Mark is what a slot's committed offset in the group says of the
// transaction that committed it (TxnFence), as JSON in the offset's
// metadata (well below Kafka's offset.metadata.max.bytes, 4,096, for a
// progress topic of a hundred partitions): the producer and worker that
// wrote it, and per progress partition the offset of its last record
// there. A new owner of the slot fences the worker's transactional ID if
// that member left the group (its open transaction would hold the slot
// until the transaction timeout), and reads the progress topic until those
// records are decided (ProgressLog.Decided).
type Mark struct {
	Version       int             `json:"v"`
	ProducerID    int64           `json:"pid"`
	TransactionID string          `json:"txn"`
	Member        string          `json:"member"`
	Offsets       map[int32]int64 `json:"progress"`
}

// markVersion is the version of the marks this kmirror writes.
const markVersion = 1

// String encodes the mark as the offset's metadata.
func (m Mark) String() string {
	m.Version = markVersion
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // ints and strings always marshal
	}
	return string(b)
}

// ParseMark decodes a mark; metadata written by anything else is an
// error naming it.
func ParseMark(s string) (Mark, error) {
	var m Mark
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Mark{}, fmt.Errorf("slot offset metadata %q: %w", s, err)
	}
	if dec.More() {
		return Mark{}, fmt.Errorf("slot offset metadata %q: more after the mark", s)
	}
	if m.Version != markVersion {
		return Mark{}, fmt.Errorf("slot offset metadata %q: version %d, this kmirror reads %d", s, m.Version, markVersion)
	}
	for p, off := range m.Offsets {
		if p < 0 || off < 0 {
			return Mark{}, fmt.Errorf("slot offset metadata %q: progress partition %d at offset %d", s, p, off)
		}
	}
	return m, nil
}

// takeTxnWrites returns what was written since its last call and starts
// again.
func (w *ProgressWriter) takeTxnWrites() TxnWrites {
	w.txnMu.Lock()
	defer w.txnMu.Unlock()
	out := w.txnWrites
	w.txnWrites = TxnWrites{}
	return out
}

// txnTouched notes that the open transaction holds progress or index
// writes about tp (none outside a transaction).
func (w *ProgressWriter) txnTouched(tp TopicPartition) {
	if w.c.txn == nil {
		return
	}
	w.txnMu.Lock()
	w.txnWrites.Partitions = append(w.txnWrites.Partitions, tp)
	w.txnMu.Unlock()
}

// txnAcked notes a write the target acknowledged at offset off of progress
// partition partition.
func (w *ProgressWriter) txnAcked(partition int32, off int64) {
	if w.c.txn == nil {
		return
	}
	w.txnMu.Lock()
	defer w.txnMu.Unlock()
	if w.txnWrites.Offsets == nil {
		w.txnWrites.Offsets = make(map[int32]int64)
	}
	if cur, ok := w.txnWrites.Offsets[partition]; !ok || off > cur {
		w.txnWrites.Offsets[partition] = off
	}
}

// progressMaxOutstanding bounds the records one writer has produced and
// not yet seen answered. The producer sends them as they come, so a bound
// of a few produce requests' worth costs no speed.
const progressMaxOutstanding = 1024

// NewProgressWriter writes the progress of c's partitions to topic, which
// has partitions partitions, with dst, sealing every value with s; failed
// counts and logs a write the target refused (it is retried on the next
// tick).
func NewProgressWriter(topic string, partitions int32, dst *kgo.Client, c *Copier, s Sealer, failed func(kind string, tp TopicPartition, err error)) *ProgressWriter {
	return &ProgressWriter{topic: topic, partitions: partitions, dst: dst, c: c, sealer: s, failed: failed,
		outstanding: make(chan struct{}, progressMaxOutstanding)}
}

// produce writes r, first waiting while progressMaxOutstanding records are
// unanswered. A cancelled ctx does not wait: franz-go then fails r at once,
// through promise, as every failed write is.
func (w *ProgressWriter) produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	select {
	case w.outstanding <- struct{}{}:
	case <-ctx.Done():
		w.dst.Produce(ctx, r, promise)
		return
	}
	w.dst.Produce(ctx, r, func(r *kgo.Record, err error) {
		<-w.outstanding
		if err == nil {
			w.txnAcked(r.Partition, r.Offset)
		}
		promise(r, err)
	})
}

// takeFailures returns the refusals since its last call and the first of
// them, and starts counting again.
func (w *ProgressWriter) takeFailures() (int64, error) {
	w.failureMu.Lock()
	defer w.failureMu.Unlock()
	first := w.firstFailure
	w.firstFailure = nil
	return w.failures.Swap(0), first
}

// partition is where the records about tp go in the progress topic.
func (w *ProgressWriter) partition(tp TopicPartition) int32 {
	return state.PartitionFor(w.partitions, tp.Topic, tp.Partition)
}

func (w *ProgressWriter) fail(kind string, tp TopicPartition, err error) {
	w.failureMu.Lock()
	if w.firstFailure == nil {
		w.firstFailure = fmt.Errorf("%s of %s/%d: %w", kind, tp.Topic, tp.Partition, err)
	}
	w.failures.Add(1)
	w.failureMu.Unlock()
	w.c.changes.Add(1) // written again on the next tick
	if w.failed != nil {
		w.failed(kind, tp, err)
	}
}

// writeAsync produces the changed index chunks and position of every
// partition whose position moved. Promises mark what was persisted; a
// failed write is retried on the next tick. It blocks while the producer's
// buffer is full (TryProduce could fail a chunk and then take the progress
// after it, putting progress ahead of the index); a shutdown unblocks it by
// cancelling ctx. It returns what it produced, for a transaction that
// aborts to write it again (see txn.go).
func (w *ProgressWriter) WriteAsync(ctx context.Context) []partitionWrites {
	var out []partitionWrites
	for _, ps := range w.c.Persistable() {
		ps.Mu.Lock()
		acked, persisted, end, endBefore := ps.Acked, ps.Persisted, ps.End, ps.endWritten
		// A partition that copies nothing while the source grows (the
		// target refuses it, say) writes its position again for the
		// new end: a failover's recovery point counts on it.
		endMoved := end > endBefore
		if acked >= 0 && (acked != persisted || endMoved) {
			ps.endWritten = end
		}
		var writes []index.Chunk
		ix := ps.Index
		var floor *index.Run
		if ix != nil {
			if f, ok := ix.Floor(); ok {
				floor = &f
			}
			writes = ix.Changes()
		}
		ps.Mu.Unlock()
		if len(writes) > 0 {
			out = append(out, partitionWrites{ps, writes})
		}
		if len(writes) > 0 || (acked >= 0 && (acked != persisted || endMoved)) {
			w.txnTouched(ps.TP)
		}
		for _, cw := range writes {
			var value []byte
			if cw.Runs != nil {
				value = w.sealer.Seal(index.EncodeChunk(cw.Runs))
			}
			w.produce(ctx, &kgo.Record{Topic: w.topic, Partition: w.partition(ps.TP), Key: IndexChunkKey(ps.TP, cw.K), Value: value}, func(_ *kgo.Record, err error) {
				if err == nil {
					if cw.Runs != nil {
						ps.Mu.Lock()
						if ps.Index == ix { // not replaced meanwhile
							// Durable now, or at the commit of
							// the transaction it belongs to.
							ix.ChunkAcked(cw.K, w.c.txn == nil)
						}
						ps.Mu.Unlock()
					}
					return
				}
				w.fail(WriteIndex, ps.TP, err)
				ps.unwrite(cw)
			})
		}
		if acked < 0 || (acked == persisted && !endMoved) {
			continue
		}
		k, v := EncodeProgress(ps.TP, Position{Next: acked, TopicID: ps.TopicID, SourceEnd: end, Floor: floor})
		w.produce(ctx, &kgo.Record{Topic: w.topic, Partition: w.partition(ps.TP), Key: k, Value: w.sealer.Seal(v)}, func(_ *kgo.Record, err error) {
			if err != nil {
				w.fail(WriteProgress, ps.TP, err) // written again on the next tick
				ps.Mu.Lock()
				if ps.endWritten == end {
					ps.endWritten = endBefore // the end too
				}
				ps.Mu.Unlock()
				return
			}
			ps.Mu.Lock()
			if acked > ps.Persisted {
				ps.Persisted = acked
			}
			ps.Mu.Unlock()
		})
	}
	return out
}

// partitionWrites are the index writes produced for one partition.
type partitionWrites struct {
	ps     *PartitionState
	writes []index.Chunk
}

// unwrite makes an index write that did not reach the target (refused, or
// in a transaction that aborted) pending again.
func (ps *PartitionState) unwrite(cw index.Chunk) {
	ps.Mu.Lock()
	defer ps.Mu.Unlock()
	ps.changed()
	ps.Index.Unwrite(cw)
}

// writeSync writes every change and waits for the target to acknowledge
// it; used on shutdown.
func (w *ProgressWriter) WriteSync(ctx context.Context) error {
	before := w.failures.Load()
	w.WriteAsync(ctx)
	if err := w.dst.Flush(ctx); err != nil {
		return fmt.Errorf("flush progress to %s: %w", w.topic, err)
	}
	// A flush ends when every record is settled, failed ones too.
	if n := w.failures.Load() - before; n > 0 {
		return fmt.Errorf("the target refused %d progress or index writes to %s", n, w.topic)
	}
	return nil
}

// progressTick is how often the writer checks, bounded below so a tiny
// configured interval cannot spin.
func ProgressTick(d time.Duration) time.Duration { return max(d, 10*time.Millisecond) }

// persistGate decides whether a tick of the progress writer (or of the
// index budget) walks the partitions: only when the copier's change
// counter moved since the last walk (with 100,000 idle partitions, a walk
// every second was most of an idle worker's CPU),
// and at least every PersistFullWalk whatever the counter says, so that a
// change that forgot to count is written late rather than never.
type PersistGate struct {
	last   uint64
	walked time.Time
}

var PersistFullWalk = 10 * time.Second // a var for tests

// due reports whether to walk now, given the counter read before the walk
// (a change during the walk moves it again: the next tick walks too).
func (g *PersistGate) Due(changes uint64, now time.Time) bool {
	if !g.walked.IsZero() && changes == g.last && now.Sub(g.walked) < PersistFullWalk {
		return false
	}
	g.last, g.walked = changes, now
	return true
}
