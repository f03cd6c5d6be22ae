package connector

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/verify"
	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// verifyRecords are records with every shape a copy must keep: null and
// empty keys and values, headers with duplicate keys and a null value,
// and explicit timestamps.
func verifyRecords(topic string, p int32, n int, tag string) []*kgo.Record {
	var recs []*kgo.Record
	base := time.UnixMilli(1_700_000_000_000)
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: p, Timestamp: base.Add(time.Duration(i) * time.Millisecond),
			Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s-%d-%d", tag, p, i)}
		switch i % 5 {
		case 1:
			r.Key = nil
		case 2:
			r.Value = nil // a tombstone
		case 3:
			r.Key, r.Value = []byte{}, []byte{}
		case 4:
			r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte("1")}, {Key: "h", Value: nil}, {Key: "", Value: []byte{}}}
		}
		recs = append(recs, r)
	}
	return recs
}

func produceAll(t testing.TB, cl *kgo.Client, recs []*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readAll reads a partition read_committed to its end.
func readAll(t *testing.T, c *kfake.Cluster, topic string, p int32) []*kgo.Record {
	t.Helper()
	cl := kfaketest.Client(t, c, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, p)
	var out []*kgo.Record
	for next := int64(0); next < end.Offset; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s/%d: %v", topic, p, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	return out
}

// rewriteTarget deletes topic on c and creates it again with the records
// keep returns (nil: empty), produced in order with their own timestamps:
// a target changed behind kmirror's back. Kafka cannot change a record in
// place, so this is how a record of the copy comes to differ.
func rewriteTarget(t *testing.T, c *kfake.Cluster, topic string, recs []*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := kfaketest.Client(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if _, err := adm.DeleteTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool {
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
		return err == nil && resp.Err == nil
	}, "the target topic created again")
	for i, r := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}
	}
	if len(recs) > 0 {
		produceAll(t, cl, recs)
	}
}

func verifyPartition(rep VerifyReport, topic string, p int32) verify.Partition {
	for _, vp := range rep.Partitions {
		if vp.SourceTopic == topic && vp.Partition == p {
			return vp
		}
	}
	return verify.Partition{}
}

// TestVerify copies topics (one with transactions, committed and aborted)
// and verifies the copy: every record matched; then a record written to
// the target behind kmirror's back is extra, a target rewritten with one
// record changed is different in that field, and a target emptied is
// missing every record. Never an error.
func TestVerify(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	kfaketest.CreateTopic(t, src, "orders", 3)
	kfaketest.CreateTopic(t, src, "ledger", 1)
	srcCl := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var want int64
	for p := range int32(3) {
		recs := verifyRecords("orders", p, 40, "a")
		produceAll(t, srcCl, recs)
		want += int64(len(recs))
	}
	ledger := verifyRecords("ledger", 0, 12, "l")
	produceAll(t, srcCl, ledger)
	want += int64(len(ledger))
	// Transactions on orders/2: one committed (copied), one aborted (not).
	txn := kfaketest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("verify-test"))
	for _, commit := range []bool{true, false} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produceAll(t, txn, verifyRecords("orders", 2, 7, fmt.Sprint("txn", commit)))
		if err := txn.EndTransaction(context.Background(), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	want += 7

	m, stop := runOrdersMirror(t, src, dst, func(c *Config) {
		c.Filters = []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll("orders|ledger")}}
	})
	_ = m
	cfg := m.cfg
	verifyNow := func(opts VerifyOptions) VerifyReport {
		t.Helper()
		v, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rep, err := v.Verify(ctx, opts)
		if err != nil {
			t.Logf("verify: %v", err)
		}
		return rep
	}
	var rep VerifyReport
	kfaketest.WaitFor(t, func() bool { rep = verifyNow(VerifyOptions{}); return rep.Total.Matched == want }, "every record copied and matched")
	if !rep.Clean() || rep.Total != (verify.Counts{Matched: want}) || len(rep.Partitions) != 4 {
		t.Fatalf("a clean copy: %+v", rep)
	}

	// A record written to the target behind kmirror's back, then more
	// records copied after it: it sits in the covered range, unindexed.
	dstCl := kfaketest.Client(t, dst, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceAll(t, dstCl, []*kgo.Record{{Topic: "src.orders", Partition: 0, Value: []byte("foreign")}})
	produceAll(t, srcCl, verifyRecords("orders", 0, 3, "b"))
	want += 3
	kfaketest.WaitFor(t, func() bool { rep = verifyNow(VerifyOptions{}); return rep.Total.Matched == want }, "the records after the foreign one copied")
	p0 := verifyPartition(rep, "orders", 0)
	if rep.Clean() || rep.Total.Extra != 1 || rep.Total.Different+rep.Total.Missing+rep.Total.Duplicate != 0 || rep.Errors != 0 ||
		p0.Extra != 1 || len(p0.Differences) != 1 || p0.Differences[0].Kind != "extra" || p0.Differences[0].TargetOffset != 40 {
		t.Fatalf("a foreign record on the target: %+v", rep)
	}
	stop()

	// The target's ledger rewritten with record 5's value changed.
	recs := readAll(t, dst, "src.ledger", 0)
	if len(recs) != len(ledger) || recs[len(recs)-1].Offset != int64(len(recs)-1) {
		t.Fatalf("the copy of ledger: %d records, want %d at offsets 0..", len(recs), len(ledger))
	}
	recs[5].Value = []byte("changed")
	rewriteTarget(t, dst, "src.ledger", recs)
	rep = verifyNow(VerifyOptions{Topic: "ledger"})
	l0 := verifyPartition(rep, "ledger", 0)
	if len(rep.Partitions) != 1 || rep.Total != (verify.Counts{Matched: int64(len(ledger)) - 1, Different: 1}) ||
		len(l0.Differences) != 1 || l0.Differences[0].SourceOffset != 5 || l0.Differences[0].TargetOffset != 5 || !slices.Equal(l0.Differences[0].Fields, []string{"value"}) {
		t.Fatalf("a changed record: %+v", rep)
	}

	// The target's ledger emptied: every record missing, not an error.
	rewriteTarget(t, dst, "src.ledger", nil)
	rep = verifyNow(VerifyOptions{Topic: "src.ledger"})
	if rep.Errors != 0 || rep.Total != (verify.Counts{Missing: int64(len(ledger))}) {
		t.Fatalf("an emptied target: %+v", rep)
	}
	// The other topic is as it was.
	rep = verifyNow(VerifyOptions{Topic: "orders"})
	if rep.Errors != 0 || rep.Total != (verify.Counts{Matched: want - int64(len(ledger)), Extra: 1}) {
		t.Fatalf("orders after the ledger's rewrite: %+v", rep)
	}
}

// BenchmarkVerify copies records of the bench's throughput phase (1,051
// B: a 16 B key, a 1,024 B value, one 11 B header; 8 partitions; two
// kfake clusters in this process) with a mirror, then verifies the copy,
// and reports both rates in source records a second: copy-records/s
// (the records produced before the mirror starts, over the time until the
// target holds them all) and verify-records/s (the records compared, over
// one Verify; it reads each record on both sides). KMIRROR_VERIFY_BENCH_RECORDS sets the
// count (default 200,000). Run: go test -run '^$' -bench Verify -benchtime 3x ./connector
func BenchmarkVerify(b *testing.B) {
	n := 200_000
	if s := os.Getenv("KMIRROR_VERIFY_BENCH_RECORDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	const partitions = 8
	src, dst := kfaketest.Clusters(b)
	kfaketest.CreateTopic(b, src, "orders", partitions)
	cl := kfaketest.Client(b, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	recs := make([]*kgo.Record, 0, 10_000)
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(i % partitions), Key: fmt.Appendf(nil, "key-%012d", i),
			Value: value, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("0123456789")}}})
		if len(recs) == cap(recs) || i == n-1 {
			produceAll(b, cl, recs)
			recs = recs[:0]
		}
	}
	adm := kadm.NewClient(kfaketest.Client(b, dst))
	began := time.Now()
	m, stop := runOrdersMirror(b, src, dst, func(c *Config) { c.ProgressInterval = 200 * time.Millisecond })
	for targetRecords(adm, "src.orders") < int64(n) {
		time.Sleep(5 * time.Millisecond)
	}
	copySecs := time.Since(began).Seconds()
	stop()
	b.ResetTimer()
	var verifySecs float64
	for range b.N {
		v, err := New(m.cfg)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		t0 := time.Now()
		rep, err := v.Verify(ctx, VerifyOptions{})
		verifySecs += time.Since(t0).Seconds()
		cancel()
		if err != nil || !rep.Clean() || rep.Total.Matched != int64(n) {
			b.Fatalf("verify: %v, %+v", err, rep.Total)
		}
	}
	b.ReportMetric(float64(n)/copySecs, "copy-records/s")
	b.ReportMetric(float64(n)*float64(b.N)/verifySecs, "verify-records/s")
	b.ReportMetric(0, "ns/op")
}
