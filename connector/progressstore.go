package connector

import (
	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/state"
	"github.com/twmb/franz-go/pkg/kgo"
)

// newProgressWriter writes the progress and index of cp's partitions
// through dst.
func (m *Mirror) newProgressWriter(dst *kgo.Client, cp *data.Copier) *data.ProgressWriter {
	return data.NewProgressWriter(m.progressTopic, m.statePartitions(m.progressTopic), dst, cp, m.sealer, m.internalWriteFailed)
}

// deleteStoredProgress writes tombstones for a partition's progress and
// index chunks (its source topic is gone), so that a restart does not load
// them again. A failed tombstone is logged and counted; the record it
// should have deleted stays harmless (tied to the old topic's ID).
func (m *Mirror) deleteStoredProgress(dst *kgo.Client, tp data.TopicPartition, ix *index.Partition) {
	type tomb struct {
		kind string
		key  []byte
	}
	var tombs []tomb
	if ix != nil {
		for _, k := range ix.ChunksToDelete() {
			tombs = append(tombs, tomb{data.WriteIndex, data.IndexChunkKey(tp, k)})
		}
	}
	k, _ := data.EncodeProgress(tp, data.Position{})
	tombs = append(tombs, tomb{data.WriteProgress, k})
	for _, t := range tombs {
		m.dstProduce(dst, &kgo.Record{Topic: m.progressTopic, Partition: state.PartitionFor(m.statePartitions(m.progressTopic), tp.Topic, tp.Partition), Key: t.key}, func(_ *kgo.Record, err error) {
			if err != nil {
				m.metrics.data().IncInternalWriteErrors(t.kind)
				m.logEvery.Warn(m.log, "tombstone:"+tp.Topic, "could not delete the stored progress of a deleted source topic", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			}
		})
	}
}
