package kafkatest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseKafkaAppOutput(t *testing.T) {
	out := "acked 1 0 k0 v0\nfailed k1 TimeoutException: Expiring 1 record(s)\nacked 0 5 k2 v two\n"
	if got, want := ParseAcked(out), []AppRecord{{1, 0, "k0", "v0"}, {0, 5, "k2", "v two"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("ParseAcked: %v, want %v", got, want)
	}
	if got := ParseFailed(out); got["k1"] != "TimeoutException: Expiring 1 record(s)" || len(got) != 1 {
		t.Errorf("ParseFailed: %v", got)
	}
	out = "position 1 4\nposition 0 7\nrecord 0 7 k7 v7\nposition 0 9\nrecord 1 4 k4 v4\ncommit 0 8\ncommit 1 5\ndone 2\n"
	pos, recs := ParseConsumed(out)
	if want := map[int32]int64{0: 7, 1: 4}; !reflect.DeepEqual(pos, want) {
		t.Errorf("positions %v, want %v", pos, want)
	}
	if want := []AppRecord{{0, 7, "k7", "v7"}, {1, 4, "k4", "v4"}}; !reflect.DeepEqual(recs, want) {
		t.Errorf("records %v, want %v", recs, want)
	}
	if got := ParseConsumeCommits(out); !reflect.DeepEqual(got, map[int32]int64{0: 8, 1: 5}) {
		t.Errorf("commits %v", got)
	}
	if ParseDone(out) != 2 || ParseDone("") != -1 {
		t.Errorf("ParseDone")
	}
	if got := ParseNoCommittedOffset("error no-committed-offset 1\nerror no-committed-offset 0\n"); !reflect.DeepEqual(got, []int32{0, 1}) {
		t.Errorf("ParseNoCommittedOffset: %v", got)
	}
	if got := ParseCommitted("committed a 0 3\ncommitted a 1 4\ncommitted b 0 1\n"); !reflect.DeepEqual(got, map[string]map[int32]int64{"a": {0: 3, 1: 4}, "b": {0: 1}}) {
		t.Errorf("ParseCommitted: %v", got)
	}
}

// TestKafkaApp runs the Java application against a real broker (it skips
// without java and the cached jars, and fails so with CI=true): 20 acked
// records on two partitions; a group without committed offsets is refused
// (auto.offset.reset=none); 10 consumed and committed; the next run resumes
// at exactly the committed offsets and reads the other 10, none twice and
// none skipped; offsets prints what was committed.
func TestKafkaApp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JVM")
	}
	c := StartForTest(t, "app")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	app, err := CachedRuntime(t).CompileKafkaApp(ctx, filepath.Join(t.TempDir(), "app"))
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := c.Addr(PLAINTEXT)
	const topic = "orders"
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		t.Helper()
		begin := time.Now()
		out, err := app.Run(ctx, args...)
		t.Logf("KafkaApp %v (%v):\n%s", args, time.Since(begin).Round(time.Millisecond), out)
		return out, err
	}

	out, err := run("produce", "--bootstrap", bootstrap, "--topic", topic, "--count", "20", "--key-prefix", "P", "--value-prefix", "V", "--idempotent")
	if err != nil {
		t.Fatal(err)
	}
	acked := ParseAcked(out)
	if len(acked) != 20 {
		t.Fatalf("%d acked records, want 20", len(acked))
	}
	ackedAt := map[[2]int64]AppRecord{}
	perPartition := map[int32]int64{}
	for i, r := range acked {
		if r.Key != fmt.Sprint("P", i) || r.Value != fmt.Sprint("V", i) {
			t.Errorf("acked record %d is %v", i, r)
		}
		ackedAt[[2]int64{int64(r.Partition), r.Offset}] = r
		perPartition[r.Partition]++
	}
	if len(ackedAt) != 20 || len(perPartition) != 2 {
		t.Fatalf("acked offsets not distinct or not on both partitions: %v", acked)
	}
	for p, n := range perPartition {
		for o := range n {
			if _, ok := ackedAt[[2]int64{int64(p), o}]; !ok {
				t.Errorf("partition %d: offset %d not acked (offsets 0..%d expected)", p, o, n-1)
			}
		}
	}

	// The records carry the header and the producer's timestamp.
	fetch, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	fetched := 0
	for fetched < 20 && ctx.Err() == nil {
		fs := fetch.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			fetched++
			if len(r.Headers) != 1 || r.Headers[0].Key != "app" || string(r.Headers[0].Value) != "kmirror-e2e" {
				t.Errorf("record %s: headers %v", r.Key, r.Headers)
			}
			if r.Attrs.TimestampType() != 0 || time.Since(r.Timestamp) > 10*time.Minute || time.Until(r.Timestamp) > time.Minute {
				t.Errorf("record %s: timestamp %v (type %d), want the producer's create time", r.Key, r.Timestamp, r.Attrs.TimestampType())
			}
		})
	}
	fetch.Close()

	consume := func(max int, extra ...string) (string, error) {
		return run(append([]string{"consume", "--bootstrap", bootstrap, "--topic", topic, "--group", "g", "--max", fmt.Sprint(max), "--timeout-ms", "30000"}, extra...)...)
	}
	// No committed offsets yet, and auto.offset.reset=none.
	out, err = consume(10, "--commit")
	if ExitCode(err) != 3 {
		t.Fatalf("a group without committed offsets: exit %d (%v), want 3", ExitCode(err), err)
	}
	if got := ParseNoCommittedOffset(out); !reflect.DeepEqual(got, []int32{0, 1}) {
		t.Errorf("partitions without a committed offset: %v, want [0 1]", got)
	}
	if _, recs := ParseConsumed(out); len(recs) != 0 {
		t.Errorf("records read without committed offsets: %v", recs)
	}

	// The first run starts from the beginning and commits after 10 records.
	out, err = consume(10, "--commit", "--reset", "earliest")
	if err != nil {
		t.Fatal(err)
	}
	pos1, recs1 := ParseConsumed(out)
	if !reflect.DeepEqual(pos1, map[int32]int64{0: 0, 1: 0}) || len(recs1) != 10 || ParseDone(out) != 10 {
		t.Fatalf("first run: positions %v, %d records, done %d; want both partitions at 0 and 10 records", pos1, len(recs1), ParseDone(out))
	}
	commits := ParseConsumeCommits(out)
	checkRun := func(name string, pos map[int32]int64, recs []AppRecord, wantCommit map[int32]int64) {
		t.Helper()
		next := map[int32]int64{}
		for p, o := range pos {
			next[p] = o
		}
		for _, r := range recs {
			if want, ok := next[r.Partition]; !ok || r.Offset != want {
				t.Errorf("%s: record %v, want partition %d's next offset %d", name, r, r.Partition, want)
			}
			next[r.Partition] = r.Offset + 1
			if a, ok := ackedAt[[2]int64{int64(r.Partition), r.Offset}]; !ok || a.Key != r.Key || a.Value != r.Value {
				t.Errorf("%s: record %v, acked %v", name, r, a)
			}
		}
		if wantCommit != nil && !reflect.DeepEqual(wantCommit, next) {
			t.Errorf("%s: committed %v, want %v", name, wantCommit, next)
		}
	}
	checkRun("first run", pos1, recs1, commits)

	offsets := func() map[int32]int64 {
		t.Helper()
		out, err := run("offsets", "--bootstrap", bootstrap, "--group", "g")
		if err != nil {
			t.Fatal(err)
		}
		got := ParseCommitted(out)
		if len(got) != 1 {
			t.Errorf("committed offsets of other topics: %v", got)
		}
		return got[topic]
	}
	if got := offsets(); !reflect.DeepEqual(got, commits) {
		t.Errorf("offsets after the first run: %v, want what it committed %v", got, commits)
	}

	// The second run resumes exactly at the committed offsets and reads the rest.
	out, err = consume(10, "--commit")
	if err != nil {
		t.Fatal(err)
	}
	pos2, recs2 := ParseConsumed(out)
	if !reflect.DeepEqual(pos2, commits) {
		t.Errorf("second run resumed at %v, want the committed offsets %v", pos2, commits)
	}
	if len(recs2) != 10 || ParseDone(out) != 10 {
		t.Errorf("second run: %d records, done %d; want 10", len(recs2), ParseDone(out))
	}
	checkRun("second run", pos2, recs2, ParseConsumeCommits(out))
	seen := map[string]int{}
	for _, r := range append(recs1, recs2...) {
		seen[r.Key]++
	}
	for _, r := range acked {
		if seen[r.Key] != 1 {
			t.Errorf("acked %v read %d times by the two runs, want once", r, seen[r.Key])
		}
	}
	if got := offsets(); !reflect.DeepEqual(got, perPartition) {
		t.Errorf("offsets after the second run: %v, want the end offsets %v", got, perPartition)
	}

	// A cluster that is gone: the consumer is never assigned and says so.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	out, err = run("consume", "--bootstrap", dead, "--topic", topic, "--group", "g", "--max", "1", "--timeout-ms", "3000")
	if ExitCode(err) != 4 || !strings.Contains(out, "error not-assigned") {
		t.Errorf("consume from a dead cluster: exit %d (%v), want 4 and error not-assigned", ExitCode(err), err)
	}

	// A pinned partition, acks=1 without idempotence.
	out, err = run("produce", "--bootstrap", bootstrap, "--topic", topic, "--count", "2", "--partition", "1", "--acks", "1", "--key-prefix", "x")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ParseAcked(out), []AppRecord{{1, perPartition[1], "x0", "v0"}, {1, perPartition[1] + 1, "x1", "v1"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("pinned produce acked %v, want %v", got, want)
	}
}
