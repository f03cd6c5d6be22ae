// Package kfaketest holds what the tests of several packages share to run
// against kfake clusters: the clusters, clients on them, a logger (and a
// log buffer to count lines in), a bounded wait, and a few writes and
// faults (committed offsets, compacted topics, a refused ListOffsets).
package kfaketest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/recordbatch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Clusters starts a source and a target kfake cluster of one broker each,
// closed when the test ends.
func Clusters(t testing.TB) (src, dst *kfake.Cluster) {
	t.Helper()
	var err error
	src, err = kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	dst, err = kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dst.Close)
	return src, dst
}

// Client is a client of c with a short metadata age (kfake topics come
// and go quickly in tests), closed when the test ends.
func Client(t testing.TB, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.MetadataMinAge(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Logger discards what it is given, unless KMIRROR_TEST_LOG is set ("debug"
// for debug lines, anything else for info): then it writes to stderr.
func Logger() *slog.Logger {
	switch os.Getenv("KMIRROR_TEST_LOG") {
	case "":
	case "debug":
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	default:
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// WaitFor polls cond every 100ms for up to 60s: generous, for a loaded
// machine (a pass against kfake under -race can take seconds there).
func WaitFor(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// CreateTopic creates topic on c with partitions partitions, or fails the
// test.
func CreateTopic(t testing.TB, c *kfake.Cluster, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(Client(t, c)).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
}

// ConsumeFrom reads a partition read_committed from offset from up to its
// last stable offset.
func ConsumeFrom(t testing.TB, addrs []string, topic string, partition int32, from int64) map[int64]string {
	t.Helper()
	// Control records (transaction markers) are kept, so that the reader
	// reaches the end even when the partition ends with a marker; they are
	// not returned.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, partition)
	out := map[int64]string{}
	for next := from; next < end.Offset; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s/%d from %d: only up to %d of %d within 60s", topic, partition, from, next, end.Offset)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = max(next, r.Offset+1)
			if !r.Attrs.IsControl() {
				out[r.Offset] = string(r.Value)
			}
		})
	}
	return out
}

// LastOffset is the highest offset of m, -1 when it is empty.
func LastOffset(m map[int64]string) int64 {
	last := int64(-1)
	for o := range m {
		last = max(last, o)
	}
	return last
}

// ReadCommitted returns the values of a target partition, read_committed.
func ReadCommitted(t testing.TB, c *kfake.Cluster, topic string, p int32) []string {
	t.Helper()
	got := ConsumeFrom(t, c.ListenAddrs(), topic, p, 0)
	var out []string
	for off := range LastOffset(got) + 1 {
		if v, ok := got[off]; ok {
			out = append(out, v)
		}
	}
	return out
}

// EndOffsets lists the end offset of each partition of topic.
func EndOffsets(t testing.TB, c *kfake.Cluster, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(Client(t, c)).ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("list %s's end offsets: %v %v", topic, err, ends.Error())
	}
	out := make(map[int32]int64)
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// RawLog reads every batch of a partition as it is stored, control
// batches and aborted ones too (read_uncommitted).
func RawLog(t testing.TB, c *kfake.Cluster, topic string, partition int32) [][]byte {
	t.Helper()
	cl := Client(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end := EndOffsets(t, c, topic)[partition]
	var out [][]byte
	for pos := int64(0); pos < end; {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MaxBytes = 100, 64<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, topics[topic].ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, pos, 64<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("fetch %s/%d at %d: %v", topic, partition, pos, err)
		}
		batches, hs, err := recordbatch.Split(resp.Topics[0].Partitions[0].RecordBatches)
		if err != nil {
			t.Fatal(err)
		}
		if len(batches) == 0 {
			t.Fatalf("fetch %s/%d at %d of %d: no batch", topic, partition, pos, end)
		}
		for i, b := range batches {
			if hs[i].Base+int64(hs[i].LastDelta) < pos {
				continue
			}
			out = append(out, append([]byte(nil), b...))
			pos = hs[i].Base + int64(hs[i].LastDelta) + 1
		}
	}
	return out
}
