package connector

import (
	"log/slog"
	"testing"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestEOSNewOwnerCompletesCommitWithLostMarkers guards completeLostCommit
// (chaos seed 3673521089659424442 on Kafka 4.3.1): the target's only
// broker, shutting down, committed a worker's transaction without writing
// its markers ("Couldn't find leader endpoint for partitions ... can be
// skipped"), and completed it: the slots' commit in the group counted,
// while the progress records and the target records of that transaction
// stayed open for good. Every new owner of the slots then waited for that
// progress to be decided until its takeover timed out, so the slots were
// never copied again, and read_committed consumers of their target
// partitions stopped before the open records.
//
// kfake is told to drop the first worker's markers (DropTxnMarkers) from
// its copy of the second records on, through its last commit when it
// stops. The new owner must complete that commit through the first
// worker's transactional ID, then resume after those records: the target
// holds every record once, read committed, the second records included.
func TestEOSNewOwnerCompletesCommitWithLostMarkers(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	s := newEOSSource(t, src, "orders", 1)
	s.produce("a", 20)
	w1 := startClusterWorker(t, src, dst, 1)
	s.exactlyOnce(dst, "the first worker")

	before := kfaketest.EndOffsets(t, dst, "src.orders")[0]
	dst.DropTxnMarkers(func(int64, string, int32) bool { return true })
	s.produce("b", 20)
	kfaketest.WaitFor(t, func() bool { return kfaketest.EndOffsets(t, dst, "src.orders")[0] >= before+20 }, "the first worker to write the second records")
	w1.shutdown(t) // its last commit, of the slot too, loses its markers as well
	dst.DropTxnMarkers(nil)
	// What the lost markers left: the second records are open for good.
	if got := kfaketest.ReadCommitted(t, dst, "src.orders", 0); len(got) != 20 {
		t.Fatalf("read committed after the markers were dropped: %d records, want the first 20 only (the second ones open)", len(got))
	}

	logs := &kfaketest.LockedBuffer{}
	startClusterWorker(t, src, dst, 1, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	s.produce("c", 20)
	s.exactlyOnce(dst, "after the new owner completed the commit whose markers were lost")
	if logs.Count("completed a slot's last commit whose transaction markers Kafka did not write") == 0 {
		t.Fatalf("the new owner did not say it completed the lost commit; its log:\n%s", logs.String())
	}
}
