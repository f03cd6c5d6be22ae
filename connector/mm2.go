package connector

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/state"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// MirrorMaker 2 compatibility (config mirrors[].mm2, docs/migration.md):
//
//   - adoption: a partition kmirror has no progress for starts where MM2
//     stopped, read from MM2's Connect offsets topic on the target;
//   - heartbeats and checkpoints in MM2's binary formats, so that MM2's
//     clients (RemoteClusterUtils, MirrorClient) work against a target
//     kmirror writes.

// mm2SourceConnector is the name MM2's dedicated mode gives its source
// connector (the class's simple name), the default of
// mirrors[].mm2.source_connector: its positions are committed under keys
// naming it.
const mm2SourceConnector = "MirrorSourceConnector"

// mm2OffsetsPartition is the source partition of a Connect offset key:
// ["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}].
type mm2OffsetsPartition struct {
	Cluster   *string `json:"cluster"`
	Topic     string  `json:"topic"`
	Partition *int32  `json:"partition"`
}

// parseMM2OffsetKey decodes a Connect offsets key: the connector's name
// and, for a key of an MM2 source connector (a partition with a cluster),
// the source cluster and partition. ok is false for a key of another kind
// (MM2's checkpoint and heartbeat connectors commit into the same topic);
// a key that is no Connect key at all is an error.
func parseMM2OffsetKey(key []byte) (connector, cluster string, tp data.TopicPartition, ok bool, err error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(key, &parts); err != nil || len(parts) != 2 {
		return "", "", data.TopicPartition{}, false, fmt.Errorf("key %q is not a Connect offset key [connector, partition]", key)
	}
	if err := json.Unmarshal(parts[0], &connector); err != nil {
		return "", "", data.TopicPartition{}, false, fmt.Errorf("key %q: the connector name is not a string", key)
	}
	var p mm2OffsetsPartition
	if err := json.Unmarshal(parts[1], &p); err != nil || p.Cluster == nil {
		return connector, "", data.TopicPartition{}, false, nil
	}
	if p.Topic == "" || p.Partition == nil {
		return "", "", data.TopicPartition{}, false, fmt.Errorf("key %q: want {\"cluster\",\"topic\",\"partition\"}", key)
	}
	return connector, *p.Cluster, data.TopicPartition{Topic: p.Topic, Partition: *p.Partition}, true, nil
}

// mm2Positions are the positions in MM2's offsets topic of one source
// cluster alias, by source connector name.
type mm2Positions map[string]map[data.TopicPartition]int64

// readMM2Positions reads MM2's offsets topic on the target to its end and
// returns, per source connector and partition of the source cluster
// alias, the next source offset to copy: MM2 commits the offset of the
// LAST record it copied ({"offset":N}), so kmirror resumes at N+1. The
// last value of a key wins; a null value deletes it. A topic that does not
// exist is an error naming the setting, never "MM2 copied nothing".
func readMM2Positions(ctx context.Context, log *slog.Logger, opts []kgo.Opt, adm *kadm.Client, topic, alias string) (mm2Positions, error) {
	exists, err := state.TopicExists(ctx, adm, topic, "MirrorMaker 2's offsets topic")
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, fmt.Errorf("MirrorMaker 2's offsets topic %s does not exist on the target (mirrors[].mm2.offsets_topic: MM2's offset.storage.topic, mm2-offsets.<source alias>.internal by default); set mirrors[].mm2.adopt: false to copy every topic from its start", topic)
	}
	out := make(mm2Positions)
	err = state.Read(ctx, log, opts, adm, topic, -1, func(key, value []byte) error {
		connector, cluster, tp, ok, err := parseMM2OffsetKey(key)
		if err != nil {
			return err
		}
		if !ok || cluster != alias {
			return nil
		}
		if value == nil {
			delete(out[connector], tp)
			return nil
		}
		var v struct {
			Offset *int64 `json:"offset"`
		}
		if err := json.Unmarshal(value, &v); err != nil || v.Offset == nil || *v.Offset < 0 {
			return fmt.Errorf("key %s: value %q is not {\"offset\":N} with N >= 0", key, value)
		}
		if out[connector] == nil {
			out[connector] = make(map[data.TopicPartition]int64)
		}
		out[connector][tp] = *v.Offset + 1
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// others names the connectors other than connector that hold a position
// for tp, sorted.
func (ps mm2Positions) others(connector string, tp data.TopicPartition) []string {
	var out []string
	for name, next := range ps {
		if _, ok := next[tp]; ok && name != connector {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// adoption is what a mirror with mm2.adopt decided, per partition, about
// MM2's positions. Guarded by Mirror.mu.
type adoption struct {
	// mm2 is what MM2's offsets topic said (nil until read), mm2Next
	// the positions of the configured source connector in it.
	mm2     mm2Positions
	mm2Next map[data.TopicPartition]int64
	// decided: the floor a partition's copy starts from (source offset
	// src is target offset dst), or nil: from the source's start. A
	// partition not in it waits for the decision.
	decided map[data.TopicPartition]*index.Run
}

// adoptionCandidates are the partitions assignments() would start without
// a stored position and whose adoption is not decided yet, by target topic.
// The caller holds m.mu.
func (m *Mirror) adoptionCandidates(tl targetListing) map[string][]data.TopicPartition {
	out := make(map[string][]data.TopicPartition)
	for _, ts := range m.topics {
		have, ok := tl.partitions[ts.target]
		if !ok || ts.fatal != nil {
			continue
		}
		for p := ts.assigned; p < min(have, ts.partitions); p++ {
			tp := data.TopicPartition{Topic: ts.source, Partition: p}
			if _, done := m.adopt.decided[tp]; !done {
				out[ts.target] = append(out[ts.target], tp)
			}
		}
	}
	return out
}

// decideAdoption decides, for every partition about to start without a
// stored position, where it starts: at MM2's position, paired with the
// target topic's end offset (MM2 wrote exactly the records it copied),
// or from the start when MM2 never copied it. When MM2's positions or the
// target's end offsets cannot be read, those partitions are not started
// (an error, retried on the next pass): copying everything again is what
// adoption exists to avoid.
func (m *Mirror) decideAdoption(ctx context.Context, c *clients, tl targetListing) error {
	m.mu.Lock()
	cands := m.adoptionCandidates(tl)
	m.mu.Unlock()
	if len(cands) == 0 {
		return nil
	}
	// A partition kmirror copied before resumes from its own stored
	// progress (the slot that owns it applies it): it is decided without
	// MM2, whose offsets topic may be gone once the move is done.
	if stored := m.slots.progress.Stored(cands); len(stored) > 0 {
		m.mu.Lock()
		for _, tp := range stored {
			m.adopt.decided[tp] = nil
		}
		cands = m.adoptionCandidates(tl)
		m.mu.Unlock()
		if len(cands) == 0 {
			return nil
		}
	}
	m.mu.Lock()
	need := m.adopt.mm2 == nil
	m.mu.Unlock()
	err := func() error {
		if need {
			all, err := readMM2Positions(ctx, m.log, m.cfg.TargetOpts, c.dstAdm, m.cfg.MM2.OffsetsTopic, m.cfg.MM2.SourceAlias)
			if err != nil {
				return m.dstErr(err)
			}
			next := all[m.cfg.MM2.SourceConnector]
			m.log.Info("read MirrorMaker 2's positions", "offsets_topic", m.cfg.MM2.OffsetsTopic, "source_alias", m.cfg.MM2.SourceAlias, "source_connector", m.cfg.MM2.SourceConnector, "partitions", len(next))
			m.mu.Lock()
			m.adopt.mm2, m.adopt.mm2Next = all, next
			m.mu.Unlock()
		}
		targets := make([]string, 0, len(cands))
		for t := range cands {
			targets = append(targets, t)
		}
		ends, err := c.dstAdm.ListEndOffsets(ctx, targets...)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return fmt.Errorf("list the end offsets of the target topics: %w", m.dstErr(err))
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		sort.Strings(targets)
		foreign := make(map[string]bool) // connectors holding positions of partitions left waiting
		var waiting []data.TopicPartition
		for _, target := range targets {
			var adopted, fresh int
			for _, tp := range cands[target] {
				next, ok := m.adopt.mm2Next[tp]
				var others []string
				if !ok {
					others = m.adopt.mm2.others(m.cfg.MM2.SourceConnector, tp)
				}
				end, listed := ends.Lookup(target, tp.Partition)
				switch {
				case !listed:
					continue // undecided: the next pass looks again
				case len(others) > 0:
					// MM2 copied it under another connector name:
					// starting it over would copy it all again.
					for _, name := range others {
						foreign[name] = true
					}
					waiting = append(waiting, tp)
				case !ok:
					m.adopt.decided[tp] = nil // MM2 never copied it
					fresh++
				case end.Offset == 0 && next > 0:
					// MM2 copied records that the target topic does
					// not have: it was deleted and created again.
					m.log.Warn("MirrorMaker 2 committed a position for a partition whose target is empty; copying it from its start", "topic", tp.Topic, "partition", tp.Partition, "target_topic", target, "mm2_next_offset", next)
					m.adopt.decided[tp] = nil
					fresh++
				default:
					m.adopt.decided[tp] = &index.Run{Src: next, Dst: end.Offset}
					adopted++
				}
			}
			m.metrics.addMM2Adopted(adopted)
			if adopted > 0 {
				m.log.Info("adopting MirrorMaker 2's positions: copying continues where MM2 stopped", "topic", cands[target][0].Topic, "target_topic", target, "partitions", adopted)
			}
			if fresh > 0 {
				m.log.Info("MirrorMaker 2 has no position for these partitions; copying them from their start", "topic", cands[target][0].Topic, "target_topic", target, "partitions", fresh)
			}
		}
		if len(waiting) > 0 {
			return foreignConnectorErr(m.cfg.MM2, foreign, waiting)
		}
		return nil
	}()
	if err == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.metrics.incMM2AdoptErrors()
	for _, tps := range cands {
		if ts := m.topics[tps[0].Topic]; ts != nil {
			ts.err = errAdoptionPending
		}
	}
	return adoptionError(err)
}

// errAdoptionPending is the own error of a topic waiting for MM2's
// positions: why it waits is the same for every topic and long (the
// offsets topic, the setting, what to do), so the mirror's last pass error
// says it once rather than every topic's row.
var errAdoptionPending = errors.New("waiting for MirrorMaker 2's positions: see the mirror's last pass error")

// adoptionError is why the partitions to adopt wait, as run and plan say it.
func adoptionError(err error) error {
	return fmt.Errorf("adopt MirrorMaker 2's positions (mirrors[].mm2.adopt): %w; the topics wait rather than being copied from their start", err)
}

// planAdoption is what decideAdoption would say on run about the topics
// kmirror has not copied yet (their stored state is not mirroring: a topic
// kmirror copies resumes from its own progress, without MM2's offsets
// topic), or nil when they would start. It reads MM2's positions as run
// does; the target's end offsets it leaves to run (a topic plan would
// create has none yet).
func (m *Mirror) planAdoption(ctx context.Context, c *clients) *PlanBlocker {
	if m.adopt == nil {
		return nil
	}
	var tps []data.TopicPartition
	m.mu.Lock()
	for _, ts := range m.topics {
		if ts.fatal == nil && m.metaPersisted[ts.target][MetaState] != string(StateMirroring) {
			for p := range ts.partitions {
				tps = append(tps, data.TopicPartition{Topic: ts.source, Partition: p})
			}
		}
	}
	m.mu.Unlock()
	if len(tps) == 0 {
		return nil
	}
	all, err := readMM2Positions(ctx, m.log, m.cfg.TargetOpts, c.dstAdm, m.cfg.MM2.OffsetsTopic, m.cfg.MM2.SourceAlias)
	if err != nil {
		return &PlanBlocker{Topics: topicsOf(tps), Error: adoptionError(m.dstErr(err)).Error()}
	}
	// As decideAdoption: a partition MM2 copied only under another
	// connector name waits, one it never copied starts from its start.
	foreign := make(map[string]bool)
	var waiting []data.TopicPartition
	for _, tp := range tps {
		if _, ok := all[m.cfg.MM2.SourceConnector][tp]; ok {
			continue
		}
		if others := all.others(m.cfg.MM2.SourceConnector, tp); len(others) > 0 {
			for _, name := range others {
				foreign[name] = true
			}
			waiting = append(waiting, tp)
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	slices.SortFunc(waiting, func(a, b data.TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return &PlanBlocker{Topics: topicsOf(waiting), Error: adoptionError(foreignConnectorErr(m.cfg.MM2, foreign, waiting)).Error()}
}

// topicsOf are the topics of tps, sorted, each once.
func topicsOf(tps []data.TopicPartition) []string {
	var out []string
	for _, tp := range tps {
		out = append(out, tp.Topic)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// foreignConnectorErr says that partitions wait because MM2's offsets topic
// holds their positions only under other source connector names than the
// configured one (an MM2 run under another name), and which key to set.
func foreignConnectorErr(mc *MM2Config, foreign map[string]bool, waiting []data.TopicPartition) error {
	names := make([]string, 0, len(foreign))
	for name := range foreign {
		names = append(names, strconv.Quote(name))
	}
	sort.Strings(names)
	return fmt.Errorf("MirrorMaker 2's offsets topic %s holds the positions of %d partitions (%s/%d first) under the source connector name %s, not %q: set mirrors[].mm2.source_connector to the name MM2's source connector ran under (or mirrors[].mm2.adopt: false to copy these topics from their start)",
		mc.OffsetsTopic, len(waiting), waiting[0].Topic, waiting[0].Partition, strings.Join(names, ", "), mc.SourceConnector)
}

// adoptedStart is where tp starts when it has no stored position: wait
// is true while the adoption is undecided; otherwise floor is MM2's
// position (nil: from the start). The caller holds m.mu.
func (m *Mirror) adoptedStart(tp data.TopicPartition) (floor *index.Run, wait bool) {
	if m.adopt == nil {
		return nil, false
	}
	f, ok := m.adopt.decided[tp]
	return f, !ok
}

// forgetAdoption makes tp start from the source's start if it starts
// again without a stored position (its target topic is gone: what MM2
// copied went with it). The caller holds m.mu.
func (m *Mirror) forgetAdoption(tp data.TopicPartition) {
	if m.adopt != nil {
		m.adopt.decided[tp] = nil
	}
}

// MM2's binary formats (connect/mirror-client Heartbeat.java and
// Checkpoint.java): Kafka protocol types, big-endian, a STRING being an
// int16 length and UTF-8 bytes. Keys are the key struct alone; values are
// a header struct {version int16} (0) and the value struct.

func appendMM2String(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// mm2Version is the only version of both value schemas.
const mm2Version = 0

// encodeMM2Heartbeat: key {sourceClusterAlias, targetClusterAlias}, value
// {version}{timestamp int64, milliseconds}.
func encodeMM2Heartbeat(source, target string, ts time.Time) (key, value []byte) {
	key = appendMM2String(appendMM2String(nil, source), target)
	value = binary.BigEndian.AppendUint16(nil, mm2Version)
	value = binary.BigEndian.AppendUint64(value, uint64(ts.UnixMilli()))
	return key, value
}

// mm2Checkpoint is one Checkpoint record: topic is the TARGET topic (MM2's
// MirrorCheckpointTask renames the upstream topic with the replication
// policy before writing, and RemoteClusterUtils.translateOffsets returns
// the key's partition as it is).
type mm2Checkpoint struct {
	group      string
	topic      string
	partition  int32
	upstream   int64
	downstream int64
	metadata   string
}

// encodeMM2Checkpoint: key {group, topic, partition int32}, value
// {version}{upstreamOffset int64, offset int64, metadata}.
func encodeMM2Checkpoint(cp mm2Checkpoint) (key, value []byte) {
	key = appendMM2String(appendMM2String(nil, cp.group), cp.topic)
	key = binary.BigEndian.AppendUint32(key, uint32(cp.partition))
	value = binary.BigEndian.AppendUint16(nil, mm2Version)
	value = binary.BigEndian.AppendUint64(value, uint64(cp.upstream))
	value = binary.BigEndian.AppendUint64(value, uint64(cp.downstream))
	value = appendMM2String(value, cp.metadata)
	return key, value
}

// mm2HeartbeatsTopic and mm2CheckpointsTopic are MM2's names (its
// DefaultReplicationPolicy and IdentityReplicationPolicy agree on them).
const mm2HeartbeatsTopic = "heartbeats"

func mm2CheckpointsTopic(sourceAlias string) string { return sourceAlias + ".checkpoints.internal" }

// ensureMM2Topic creates one of MM2's topics as MM2 does: compacted, one
// partition.
func (m *Mirror) ensureMM2Topic(ctx context.Context, c *clients, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := state.EnsureCompacted(ctx, c.dstAdm, topic, 1, m.cfg.ReplicationFactor)
	return err
}

// heartbeats writes a Heartbeat every interval, as MM2's heartbeat
// connector does, until ctx ends. A failed write is counted and logged
// (rate-limited); the next one is due an interval later anyway.
func (m *Mirror) heartbeats(ctx context.Context, c *clients) {
	mc := m.cfg.MM2
	created := false
	every(ctx, mc.HeartbeatsInterval, func() {
		if !m.ownsControl() {
			return
		}
		if !created {
			if err := m.ensureMM2Topic(ctx, c, mm2HeartbeatsTopic); err != nil {
				m.metrics.data().IncInternalWriteErrors(writeMM2Heartbeat)
				m.logEvery.Warn(m.log, "mm2-heartbeats", "cannot create MirrorMaker 2's heartbeats topic on the target; retrying", "topic", mm2HeartbeatsTopic, "err", m.dstErr(err))
				return
			}
			created = true
		}
		now := time.Now()
		k, v := encodeMM2Heartbeat(mc.SourceAlias, m.cfg.TargetAlias, now)
		m.dstProduce(c.dst, &kgo.Record{Topic: mm2HeartbeatsTopic, Key: k, Value: v, Timestamp: now}, func(_ *kgo.Record, err error) {
			if err != nil {
				m.metrics.data().IncInternalWriteErrors(writeMM2Heartbeat)
				m.logEvery.Warn(m.log, "mm2-heartbeats", "the target did not acknowledge a MirrorMaker 2 heartbeat; the next one follows", "topic", mm2HeartbeatsTopic, "err", err)
				return
			}
			m.metrics.incMM2Heartbeats()
		})
	})
}

// mm2Checkpointer writes MM2 Checkpoint records from the group sync's
// exact translations. Only the group sync goroutine uses it.
type mm2Checkpointer struct {
	topic   string
	created bool
	last    time.Time
	// written is the checkpoint the target acknowledged per group and
	// target partition: an unchanged one is not written again.
	mu      sync.Mutex // guards written against the promises
	written map[mm2CheckpointKey]mm2Checkpoint
}

type mm2CheckpointKey struct {
	group, topic string
	partition    int32
}

func newMM2Checkpointer(sourceAlias string) *mm2Checkpointer {
	return &mm2Checkpointer{topic: mm2CheckpointsTopic(sourceAlias), written: make(map[mm2CheckpointKey]mm2Checkpoint)}
}

// mm2Checkpoints are the checkpoints of the groups' last translations:
// every partition translated exactly (a behind one too: it points at the
// end of the copy, as the target group does), none that is untranslatable.
func mm2Checkpoints(groups []GroupStatus) []mm2Checkpoint {
	var out []mm2Checkpoint
	for _, g := range groups {
		for _, p := range g.Partitions {
			if p.Untranslatable || p.TargetOffset < 0 {
				continue
			}
			out = append(out, mm2Checkpoint{group: g.Group, topic: p.TargetTopic, partition: p.Partition, upstream: p.SourceOffset, downstream: p.TargetOffset})
		}
	}
	return out
}

// emit writes the checkpoints that changed, when the interval has passed
// since the last emission.
func (w *mm2Checkpointer) emit(ctx context.Context, m *Mirror, c *clients) {
	if time.Since(w.last) < m.cfg.MM2.CheckpointsInterval && !w.last.IsZero() {
		return
	}
	if !w.created {
		if err := m.ensureMM2Topic(ctx, c, w.topic); err != nil {
			m.metrics.data().IncInternalWriteErrors(writeMM2Checkpoint)
			m.logEvery.Warn(m.log, "mm2-checkpoints", "cannot create MirrorMaker 2's checkpoints topic on the target; retrying on the next group sync", "topic", w.topic, "err", m.dstErr(err))
			return
		}
		w.created = true
	}
	w.last = time.Now()
	for _, cp := range mm2Checkpoints(m.Groups()) {
		key := mm2CheckpointKey{cp.group, cp.topic, cp.partition}
		w.mu.Lock()
		prev, ok := w.written[key]
		w.mu.Unlock()
		if ok && prev == cp {
			continue
		}
		k, v := encodeMM2Checkpoint(cp)
		m.dstProduce(c.dst, &kgo.Record{Topic: w.topic, Key: k, Value: v, Timestamp: w.last}, func(_ *kgo.Record, err error) {
			if err != nil {
				m.metrics.data().IncInternalWriteErrors(writeMM2Checkpoint)
				m.logEvery.Warn(m.log, "mm2-checkpoints", "the target did not acknowledge a MirrorMaker 2 checkpoint; writing it again at the next interval", "topic", w.topic, "group", cp.group, "err", err)
				return
			}
			m.metrics.incMM2Checkpoints()
			w.mu.Lock()
			w.written[key] = cp
			w.mu.Unlock()
		})
	}
}
