package connector

import (
	"context"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/state"
	"github.com/kmirror/kmirror/internal/kfaketest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLoadProgressPastOpenTransaction: every slot writes its progress into
// the same progress partitions. A transaction another slot left open (its
// worker paused, or killed and not yet fenced) must not hide the progress a
// slot committed after it: the new owner would resume from an older
// position and copy again what was committed. Records of the open
// transaction, and of an aborted one, never count.
func TestLoadProgressPastOpenTransaction(t *testing.T) {
	_, dst := kfaketest.Clusters(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic = "kmirror.m.progress.internal"
	adm := kadm.NewClient(kfaketest.Client(t, dst))
	if _, err := state.EnsureCompacted(ctx, adm, topic, 1, 1); err != nil {
		t.Fatal(err)
	}
	write := func(cl *kgo.Client, tp data.TopicPartition, next int64) {
		t.Helper()
		k, v := data.EncodeProgress(tp, data.Position{Next: next})
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Key: k, Value: data.Sealer{}.Seal(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	txn := func(id string) *kgo.Client {
		cl := kfaketest.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID(id), kgo.TransactionTimeout(time.Minute))
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		return cl
	}
	end := func(cl *kgo.Client, how kgo.TransactionEndTry) {
		t.Helper()
		if err := cl.EndTransaction(ctx, how); err != nil {
			t.Fatal(err)
		}
	}
	plain := kfaketest.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	a, b, c := data.TopicPartition{Topic: "orders", Partition: 0}, data.TopicPartition{Topic: "orders", Partition: 1}, data.TopicPartition{Topic: "orders", Partition: 2}

	write(plain, a, 100) // a single worker's progress, before cluster mode

	open := txn("kmirror.m.slot-1")
	write(open, b, 7) // left open: slot 1's worker paused

	slot0 := txn("kmirror.m.slot-0")
	write(slot0, a, 500)
	end(slot0, kgo.TryCommit)

	aborted := txn("kmirror.m.slot-2")
	write(aborted, c, 9)
	end(aborted, kgo.TryAbort)

	ld, err := data.LoadProgress(ctx, nil, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	if pos, ok := ld.Positions[a]; !ok || pos.Next != 500 {
		t.Fatalf("orders/0: position %+v (found %v), want next 500, committed behind slot 1's open transaction", pos, ok)
	}
	if pos, ok := ld.Positions[b]; ok {
		t.Fatalf("orders/1: position %+v from a transaction still open, want none", pos)
	}
	if pos, ok := ld.Positions[c]; ok {
		t.Fatalf("orders/2: position %+v from an aborted transaction, want none", pos)
	}

	// Once the open transaction commits, its record counts, in the
	// log's order: a later plain write of the same key wins over it.
	write(plain, b, 3)
	end(open, kgo.TryCommit)
	ld, err = data.LoadProgress(ctx, nil, []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	if pos := ld.Positions[b]; pos.Next != 3 {
		t.Fatalf("orders/1: next %d, want 3 (the later plain write)", pos.Next)
	}
}

// TestStateTopicRolls: a state topic kmirror creates rolls its segments
// every few minutes, so that the broker compacts it (it compacts closed
// segments only); with the broker's 1 GiB default a busy progress topic
// went uncompacted for hours and every takeover read all of it.
func TestStateTopicRolls(t *testing.T) {
	_, dst := kfaketest.Clusters(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(kfaketest.Client(t, dst))
	const topic = "kmirror.m.progress.internal"
	if _, err := state.EnsureCompacted(ctx, adm, topic, 2, 1); err != nil {
		t.Fatal(err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	if got["cleanup.policy"] != "compact" || got["segment.ms"] != "300000" {
		t.Fatalf("state topic configs: cleanup.policy=%q segment.ms=%q, want compact and 300000", got["cleanup.policy"], got["segment.ms"])
	}
}
