package connector

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestEOSFencesDepartedCommitter guards fenceDeparted: a worker killed
// (kill -9) between its TxnOffsetCommit and its EndTxn leaves a commit of
// its slots pending in the group, and its transaction open, until its
// transaction coordinator aborts it at the transaction timeout. The new
// owner must not wait that long: the slot's last committed mark names the
// dead worker's transactional ID and member, the member is no longer in
// the group, so the new owner fences the ID, which aborts the open
// transaction at once (and with it what it held back from read_committed
// consumers).
//
// The dead worker is played by a producer with a 10-minute transaction
// timeout: without the fence the takeover (bounded by a minute) would
// never finish within the test.
func TestEOSFencesDepartedCommitter(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	s := newEOSSource(t, src, "orders", 1)
	s.produce("a", 20)
	w1 := startClusterWorker(t, src, dst, 1)
	s.exactlyOnce(dst, "the first worker")
	w1.shutdown(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const deadID = "kmirror.m.worker-dead"
	dead := kfaketest.Client(t, dst, kgo.TransactionalID(deadID), kgo.MaxVersions(data.ClassicTransactions()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(10*time.Minute))
	pid, _, err := dead.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Its last commit of slot 0, done, under a member the group no
	// longer has; then its next transaction, the slot's commit in it
	// pending, never ended.
	mark := data.Mark{ProducerID: pid, TransactionID: deadID, Member: "kgo-dead-member", Offsets: map[int32]int64{}}
	commitSlotZero(t, ctx, dead, deadID, "src.orders", "a committed record of the dead worker", mark)
	if err := dead.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	commitSlotZero(t, ctx, dead, deadID, "src.orders", "zombie", mark)

	s.produce("b", 20)
	logs := &kfaketest.LockedBuffer{}
	begin := time.Now()
	w2 := startClusterWorker(t, src, dst, 1, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	kfaketest.WaitFor(t, func() bool { return len(w2.owned()) == 1 }, "the new worker takes slot 0 over")
	t.Logf("slot 0 taken over in %v", time.Since(begin).Round(time.Millisecond))
	if logs.Count("fenced a worker that left the group") == 0 {
		t.Fatalf("the new owner did not say it fenced the departed worker; its log:\n%s", logs.String())
	}
	if err := dead.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the departed worker's transaction committed after the new owner took its slot over: it was not fenced")
	}
	// The dead worker's committed record lies between what the first
	// worker copied and what the new one copies.
	s.want[0] = append(append(append([]string(nil), s.want[0][:20]...), "a committed record of the dead worker"), s.want[0][20:]...)
	s.exactlyOnce(dst, "after the departed worker was fenced (its open transaction's record never visible)")
}

// commitSlotZero begins a transaction of cl (transactional ID id), writes
// value to partition 0 of topic and commits slot 0 of the group kmirror.m in
// it with mark, under no member (generation -1: Kafka takes such a commit
// unchecked), leaving the transaction open.
func commitSlotZero(t *testing.T, ctx context.Context, cl *kgo.Client, id, topic, value string, mark data.Mark) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, pid, epoch, "kmirror.m"
	if resp, err := add.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v, %+v", err, resp)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = id, "kmirror.m", pid, epoch, -1
	md := mark.String()
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = policy.InternalTopic("m", "slots")
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = 0, 0, -1, &md
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit of slot 0: %v, %+v", err, resp)
	}
}
