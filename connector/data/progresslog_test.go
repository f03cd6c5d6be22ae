package data

import (
	"context"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/state"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProgressLogFollows: a member's progress log reads the topic once and
// then only what was written since, and each read returns what a one-off
// read of the whole topic would: a transaction open at one read and
// committed before the next counts in its place in the log, an aborted one
// never does, and a progress topic created again is read from its start.
func TestProgressLogFollows(t *testing.T) {
	_, dst := kfaketest.Clusters(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic = "kmirror.m.progress.internal"
	opts := []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}
	adm := kadm.NewClient(kfaketest.Client(t, dst))
	if _, err := state.EnsureCompacted(ctx, adm, topic, 2, 1); err != nil {
		t.Fatal(err)
	}
	write := func(cl *kgo.Client, tp TopicPartition, next int64) {
		t.Helper()
		k, v := EncodeProgress(tp, Position{Next: next})
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: state.PartitionFor(2, tp.Topic, tp.Partition), Key: k, Value: Sealer{}.Seal(v)}).FirstErr(); err != nil {
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
	l := NewProgressLog(slog.New(slog.DiscardHandler), opts, topic)
	// same checks that the log agrees with a one-off read of the whole
	// topic, and returns what the log reads.
	same := func(step string) Loaded {
		t.Helper()
		got, err := l.Current(ctx, adm, nil)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		want, err := LoadProgress(ctx, nil, opts, adm, topic)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if !maps.Equal(got.Positions, want.Positions) {
			t.Fatalf("%s: the progress log has %v, a one-off read %v", step, got.Positions, want.Positions)
		}
		return got
	}
	plain := kfaketest.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var tps []TopicPartition
	for i := range 6 {
		tps = append(tps, TopicPartition{"orders", int32(i)})
	}
	for i, tp := range tps {
		write(plain, tp, int64(100+i))
	}
	same("first read")
	if l.reader.Records != 6 {
		t.Fatalf("first read: %d records read, want 6", l.reader.Records)
	}

	open := txn("kmirror.m.slot-1")
	write(open, tps[1], 7) // open at the next read
	slot0 := txn("kmirror.m.slot-0")
	write(slot0, tps[0], 500)
	end(slot0, kgo.TryCommit)
	aborted := txn("kmirror.m.slot-2")
	write(aborted, tps[2], 9)
	end(aborted, kgo.TryAbort)
	got := same("a transaction open")
	if got.Positions[tps[1]].Next != 101 || got.Positions[tps[0]].Next != 500 {
		t.Fatalf("a transaction open: %v, want orders/1 at 101 (the open transaction not counted) and orders/0 at 500", got.Positions)
	}
	before := l.reader.Records

	write(plain, tps[1], 3) // behind the open transaction in the log: it wins once that commits
	end(open, kgo.TryCommit)
	got = same("the transaction committed")
	if got.Positions[tps[1]].Next != 3 {
		t.Fatalf("the transaction committed: orders/1 at %d, want 3 (the later plain write, in the log's order)", got.Positions[tps[1]].Next)
	}
	// The plain record and the commit marker(s), not the topic again.
	if n := l.reader.Records - before; n < 2 || n > 3 {
		t.Fatalf("the second read read %d records, want only the 2 or 3 written since", n)
	}

	// Keep selects partitions: the others are not in the result.
	sel, err := l.Current(ctx, adm, func(tp TopicPartition) bool { return tp.Partition == 4 })
	if err != nil {
		t.Fatal(err)
	}
	if len(sel.Positions) != 1 || sel.Positions[tps[4]].Next != 104 {
		t.Fatalf("selected partition 4 only: %v", sel.Positions)
	}

	// Created again: read from its start, nothing of the old one kept.
	if _, err := adm.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool {
		_, err := state.EnsureCompacted(ctx, adm, topic, 2, 1)
		return err == nil
	}, "the progress topic created again")
	// More records than the old topic had, so that only its ID tells
	// (a new producer: the old one knows the old topic's ID).
	again := kfaketest.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 20 {
		for _, tp := range tps[3:] {
			write(again, tp, int64(i))
		}
	}
	got = same("created again")
	if len(got.Positions) != 3 || got.Positions[tps[0]].Next != 0 || got.Positions[tps[5]].Next != 19 {
		t.Fatalf("created again: %v, want orders/3 to 5 alone at 19", got.Positions)
	}
}
