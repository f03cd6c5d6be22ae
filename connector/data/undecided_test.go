package data

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/state"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestProgressLogUndecided guards what a new owner completing a slot's
// last commit whose markers Kafka lost (connector's completeLostCommit)
// learns from the progress log: the progress partitions still holding the
// commit's records open up to the mark's offsets, and the source partitions
// those records are about, whose target partitions hold the commit's
// records open too. Records of that producer past the mark's offsets, open
// as well, are reported (Beyond): they are a later transaction's, and
// committing again would commit them with it. Another producer's open
// records are not that producer's. Once the producer's transaction ends,
// nothing is undecided.
func TestProgressLogUndecided(t *testing.T) {
	t.Parallel()
	_, dst := kfaketest.Clusters(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic = "kmirror.m.progress.internal"
	opts := []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}
	adm := kadm.NewClient(kfaketest.Client(t, dst))
	if _, err := state.EnsureCompacted(ctx, adm, topic, 1, 1); err != nil {
		t.Fatal(err)
	}
	txn := func(id string) (*kgo.Client, int64) {
		t.Helper()
		cl := kfaketest.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID(id), kgo.TransactionTimeout(time.Minute))
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		pid, _, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return cl, pid
	}
	write := func(cl *kgo.Client, tp TopicPartition) int64 {
		t.Helper()
		k, v := EncodeProgress(tp, Position{Next: 10})
		r := &kgo.Record{Topic: topic, Partition: 0, Key: k, Value: Sealer{}.Seal(v)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		return r.Offset
	}
	l := NewProgressLog(slog.New(slog.DiscardHandler), opts, topic)
	undecided := func(step string, pid int64, offsets map[int32]int64) Undecided {
		t.Helper()
		if _, err := l.Current(ctx, adm, nil); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		u, err := l.Undecided(pid, offsets)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return u
	}

	p, pid := txn("p")
	other, _ := txn("other")
	write(p, TopicPartition{"orders", 1})
	write(other, TopicPartition{"orders", 2})
	mark := map[int32]int64{0: write(p, TopicPartition{"orders", 0})}
	u := undecided("the commit's records open", pid, mark)
	if !slices.Equal(u.Partitions, []int32{0}) || u.Beyond {
		t.Fatalf("the commit's records open: partitions %v, beyond %v; want [0], false", u.Partitions, u.Beyond)
	}
	want := []TopicPartition{{"orders", 1}, {"orders", 0}}
	if !slices.Equal(u.Sources, want) {
		t.Fatalf("the commit's records open: sources %v, want %v (orders/2 is another producer's)", u.Sources, want)
	}

	write(p, TopicPartition{"orders", 3})
	if u := undecided("a later record of the producer open too", pid, mark); !u.Beyond || !slices.Equal(u.Sources, want) {
		t.Fatalf("a later record of the producer open too: beyond %v, sources %v; want true, %v", u.Beyond, u.Sources, want)
	}

	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if u := undecided("the producer's transaction ended", pid, mark); len(u.Partitions) != 0 || len(u.Sources) != 0 || u.Beyond {
		t.Fatalf("the producer's transaction ended: %+v undecided, want nothing", u)
	}
}
