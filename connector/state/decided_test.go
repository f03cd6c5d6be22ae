package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/state"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestReaderDecided guards Reader.Decided, which a worker taking slots
// over asks (through data.ProgressLog.Decided) whether the progress records
// that the slots' last commit wrote have their commit marker read yet:
// Kafka answers EndTxn before it writes the markers, so the commit may be
// known (the slots stable in the group) while its progress records still
// look open. Reading positions before they are decided resumes from an
// older position, and records are copied twice.
//
// On one partition: producer A's transaction is left open, producer B's
// commits after it. A's records are not decided, B's are; an offset
// beyond what was read is not decided (the reader cannot know it).
// After A commits, the verdict holds until the reader reads again (it says
// what the previous read saw); after that read, A's records are decided.
// An aborted transaction's records are decided too (they will never
// commit).
func TestReaderDecided(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	const topic = "kmirror.m.progress.internal"
	kfaketest.CreateTopic(t, c, topic, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	txnProducer := func(id string) (*kgo.Client, int64) {
		t.Helper()
		cl := kfaketest.Client(t, c, kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		pid, _, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return cl, pid
	}
	// produce writes n records to partition 0 in cl's open transaction
	// and returns their offsets.
	produce := func(cl *kgo.Client, n int) []int64 {
		t.Helper()
		var offs []int64
		for i := range n {
			r := &kgo.Record{Topic: topic, Partition: 0, Key: []byte{byte(i)}, Value: []byte("v")}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
			offs = append(offs, r.Offset)
		}
		return offs
	}

	a, pidA := txnProducer("a")
	b, pidB := txnProducer("b")
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	offsA := produce(a, 2) // left open
	if err := b.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	offsB := produce(b, 1)
	if err := b.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	adm := kadm.NewClient(kfaketest.Client(t, c))
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	r := state.NewReader(topic, func(key, value []byte) error { return nil })
	if err := r.ReadToEnd(ctx, nil, opts, adm, -1); err != nil {
		t.Fatal(err)
	}
	end := kfaketest.EndOffsets(t, c, topic)[0]

	for _, off := range offsA {
		if r.Decided(pidA, 0, off) {
			t.Errorf("A's record at %d is decided while A's transaction is open", off)
		}
	}
	// Asked about its last record only: the earlier one is open too.
	if r.Decided(pidA, 0, offsA[len(offsA)-1]) {
		t.Errorf("A's records up to %d are decided while A's transaction is open", offsA[len(offsA)-1])
	}
	if !r.Decided(pidB, 0, offsB[0]) {
		t.Errorf("B's committed record at %d is not decided (A's open transaction is not B's)", offsB[0])
	}
	// The reader read up to end-1 (B's commit marker): beyond it, it
	// cannot know.
	if r.Decided(pidB, 0, end) {
		t.Errorf("offset %d, beyond what was read (up to %d), is decided", end, end-1)
	}
	if r.Decided(pidB, 0, end+100) {
		t.Errorf("offset %d, beyond what was read (up to %d), is decided", end+100, end-1)
	}
	// A partition nothing was read from.
	if r.Decided(pidB, 1, 0) {
		t.Error("offset 0 of partition 1, never read, is decided")
	}

	// A commits, and C's transaction (opened after) aborts.
	if err := a.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	cl, pidC := txnProducer("c")
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	offsC := produce(cl, 1)
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	// Not read yet: the verdict is the previous read's.
	if r.Decided(pidA, 0, offsA[len(offsA)-1]) {
		t.Error("A's records are decided before the reader read A's commit marker")
	}
	if err := r.ReadToEnd(ctx, nil, opts, adm, -1); err != nil {
		t.Fatal(err)
	}
	for _, off := range offsA {
		if !r.Decided(pidA, 0, off) {
			t.Errorf("A's record at %d is not decided after its commit marker was read", off)
		}
	}
	if !r.Decided(pidC, 0, offsC[0]) {
		t.Errorf("C's aborted record at %d is not decided after its abort marker was read", offsC[0])
	}
	if !r.Decided(pidB, 0, offsB[0]) {
		t.Errorf("B's committed record at %d is no longer decided", offsB[0])
	}
}

// TestReaderDecidedOpenAfterDecided: a producer's records up to an offset
// are decided only if none of them is open, whatever the ones before:
// producer A commits a transaction and opens another. Its committed
// records are decided; asked up to a record of the open one, not.
func TestReaderDecidedOpenAfterDecided(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	const topic = "progress"
	kfaketest.CreateTopic(t, c, topic, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := kfaketest.Client(t, c, kgo.TransactionalID("a"))
	pid, _, err := a.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for i, end := range []bool{true, false} {
		if err := a.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		r := &kgo.Record{Topic: topic, Value: []byte{byte(i)}}
		if err := a.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		offs = append(offs, r.Offset)
		if end {
			if err := a.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := state.NewReader(topic, func(key, value []byte) error { return nil })
	if err := r.ReadToEnd(ctx, nil, []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, kadm.NewClient(kfaketest.Client(t, c)), -1); err != nil {
		t.Fatal(err)
	}
	if !r.Decided(pid, 0, offs[0]) {
		t.Errorf("the committed record at %d is not decided", offs[0])
	}
	if r.Decided(pid, 0, offs[1]) {
		t.Errorf("the records up to %d are decided; the one at %d is in an open transaction", offs[1], offs[1])
	}
}
