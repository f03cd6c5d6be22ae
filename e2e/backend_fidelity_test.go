//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBackendFidelity checks the harness and the backend, without kmirror:
// what the mirror tests produce comes back from readTopic unchanged (nil vs
// empty, headers, timestamps), and read_committed hides aborted records. If
// this fails, the other tests' failures say nothing about kmirror.
func TestBackendFidelity(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})

		rich := e.topic("rich")
		createTopic(t, e.srcCl, rich, 3, nil)
		recs := richRecords(rich, 3, 300)
		produce(t, e.srcCl, recs...)
		got, err := readTopic(ctxTimeout(t, 30*time.Second), e.src.Addrs(), rich)
		if err != nil {
			t.Fatal(err)
		}
		want := byPartition(recs)
		for p := int32(0); p < 3; p++ {
			if d := diffRecords(p, want[p], got[p]); d != "" {
				t.Errorf("round trip through the backend changed records:\n%s", d)
			}
		}

		txn := e.topic("txn")
		createTopic(t, e.srcCl, txn, 2, nil)
		txWant := produceTransactions(t, e.src.Addrs(), txn, "fid", 2)
		got, err = readTopic(ctxTimeout(t, 30*time.Second), e.src.Addrs(), txn)
		if err != nil {
			t.Fatal(err)
		}
		if d := diffValues(txWant, values(got)); d != "" {
			t.Errorf("read_committed through the backend:\n%s", d)
		}
	})
}

// produceTransactions writes to partitions 0..partitions-1 of topic, in this
// order: a committed transaction, plain (non-transactional) records, an
// aborted transaction, and another committed transaction. It returns the
// values a read_committed reader must see, per partition, in order.
func produceTransactions(t testing.TB, addrs []string, topic, prefix string, partitions int) map[int32][]string {
	t.Helper()
	ctx := ctxTimeout(t, 60*time.Second)
	txCl := newClient(t, addrs, kgo.TransactionalID("e2e-"+prefix+"-"+topic), kgo.TransactionTimeout(30*time.Second))
	plainCl := newClient(t, addrs)

	want := make(map[int32][]string)
	batch := func(tag string, n int) []*kgo.Record {
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			for p := int32(0); p < int32(partitions); p++ {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(val(prefix+"-"+tag, p, i))})
			}
		}
		return recs
	}
	remember := func(recs []*kgo.Record) {
		for _, r := range recs {
			want[r.Partition] = append(want[r.Partition], string(r.Value))
		}
	}
	txn := func(tag string, n int, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := txCl.BeginTransaction(); err != nil {
			t.Fatalf("begin transaction: %v", err)
		}
		recs := batch(tag, n)
		if err := txCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("transactional produce: %v", err)
		}
		if err := txCl.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end transaction (commit=%v): %v", commit, err)
		}
		if commit == kgo.TryCommit {
			remember(recs)
		}
	}

	txn("committed1", 10, kgo.TryCommit)
	plain := batch("plain", 3)
	if err := plainCl.ProduceSync(ctx, plain...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	remember(plain)
	txn("aborted", 10, kgo.TryAbort)
	txn("committed2", 10, kgo.TryCommit)
	return want
}
