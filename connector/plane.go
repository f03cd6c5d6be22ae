package connector

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
)

// dataPlane is what the control plane drives: the partitions being copied,
// parked or assigned. A slotPlane (cluster.go) routes each partition to the
// copier of the slot that owns it, and knows nothing of partitions whose
// slot another worker owns, and resumes each partition from the progress
// its slot loaded (loaded.resume: the control plane holds no positions); a
// copier is one slot's (and, wrapped to resume partitions the same way,
// the unit tests' whole data plane).
type dataPlane interface {
	// assign starts copying partitions; started reports that a copier's
	// poll loop may start (a slotPlane runs its copiers' loops itself).
	Assign(as []data.Assignment, srcOpts []kgo.Opt) (started bool, err error)
	Unassign(tps []data.TopicPartition)
	ParkedState(tp data.TopicPartition) (ps *data.PartitionState, settled bool)
	DropParked(tps []data.TopicPartition) map[data.TopicPartition]*index.Partition
	// partition is the state of a partition copied here, nil otherwise.
	Partition(tp data.TopicPartition) *data.PartitionState
	// snapshot is every partition copied here.
	Snapshot() []*data.PartitionState
	// inFlight counts records produced and not yet acknowledged.
	InFlight() int
}

var _ dataPlane = (*data.Copier)(nil)
