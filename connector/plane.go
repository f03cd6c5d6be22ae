package connector

import (
	"github.com/twmb/franz-go/pkg/kgo"

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
	assign(as []assignment, srcOpts []kgo.Opt) (started bool, err error)
	unassign(tps []topicPartition)
	parkedState(tp topicPartition) (ps *partitionState, settled bool)
	dropParked(tps []topicPartition) map[topicPartition]*index.Partition
	// partition is the state of a partition copied here, nil otherwise.
	partition(tp topicPartition) *partitionState
	// snapshot is every partition copied here.
	snapshot() []*partitionState
	// inFlight counts records produced and not yet acknowledged.
	inFlight() int
}

var _ dataPlane = (*copier)(nil)
