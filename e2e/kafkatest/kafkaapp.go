package kafkatest

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

//go:embed java/KafkaApp.java
var kafkaAppSource []byte

// KafkaApp is an application on the real Java clients (KafkaProducer,
// KafkaConsumer, Admin, from the same jars as the brokers): what a
// disaster-recovery test runs against either cluster to see what an
// application sees. java/KafkaApp.java documents its commands and output;
// the Parse functions below read the output.
type KafkaApp struct {
	r       *Runtime
	classes string
}

// CompileKafkaApp compiles the program into dir. The error wraps
// ErrUnavailable when there is no javac.
func (r *Runtime) CompileKafkaApp(ctx context.Context, dir string) (*KafkaApp, error) {
	classes, err := r.compileJava(ctx, dir, "KafkaApp.java", kafkaAppSource)
	if err != nil {
		return nil, err
	}
	return &KafkaApp{r: r, classes: classes}, nil
}

// Run runs the program with args, e.g. "produce", "--bootstrap", addr,
// "--topic", "t", "--count", "20", and returns its stdout, also when it
// fails: a produce with failed sends exits 1 after printing every acked
// and failed record, a consume of a partition without a committed offset
// exits 3 after printing the error lines. The error then holds the tail of
// stderr (the clients' WARN logging) and wraps the *exec.ExitError (see
// ExitCode). Every request in the program is bounded by about 10 s; ctx
// bounds the whole run.
func (a *KafkaApp) Run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, a.r.Java, append([]string{
		"-Xmx256m",
		"-Dlog4j2.configurationFile=" + filepath.Join(a.r.configDir(), "tools-log4j2.properties"),
		"-cp", a.r.classPath(a.classes),
		"kmirror.e2e.KafkaApp",
	}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kafkatest: KafkaApp %v: %w\n%s", args, err, tail(stderr.String(), 20))
	}
	return stdout.String(), nil
}

// ExitCode is the exit status of the program in Run's error: 0 for nil, 1
// for a failed send or any other failure, 2 for bad arguments, 3 for a
// consume that found a partition without a committed offset, 4 for a
// consume that was assigned no partition before its timeout ("error
// not-assigned": a dead cluster, say); -1 when the program did not exit by
// itself (killed, or not started).
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// AppRecord is one record in KafkaApp's output.
type AppRecord struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
}

func (r AppRecord) String() string {
	return fmt.Sprintf("%d@%d %s=%s", r.Partition, r.Offset, r.Key, r.Value)
}

// appLines yields the fields of out's lines that start with word: n fields
// at most, the last one holding the rest of the line.
func appLines(out, word string, n int) [][]string {
	var lines [][]string
	for _, l := range strings.Split(out, "\n") {
		f := strings.SplitN(strings.TrimRight(l, "\r"), " ", n)
		if len(f) == n && f[0] == word {
			lines = append(lines, f)
		}
	}
	return lines
}

func parseAppRecord(f []string) (AppRecord, bool) {
	p, err1 := strconv.ParseInt(f[1], 10, 32)
	o, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return AppRecord{}, false
	}
	return AppRecord{Partition: int32(p), Offset: o, Key: f[3], Value: f[4]}, true
}

// ParseAcked returns produce's acknowledged records ("acked PARTITION
// OFFSET KEY VALUE"), in send order.
func ParseAcked(out string) []AppRecord {
	var recs []AppRecord
	for _, f := range appLines(out, "acked", 5) {
		if r, ok := parseAppRecord(f); ok {
			recs = append(recs, r)
		}
	}
	return recs
}

// ParseFailed returns produce's failed sends ("failed KEY ERROR"): key to
// error.
func ParseFailed(out string) map[string]string {
	failed := map[string]string{}
	for _, f := range appLines(out, "failed", 3) {
		failed[f[1]] = f[2]
	}
	return failed
}

// ParseConsumed returns consume's output: the position each partition was
// assigned at ("position PARTITION OFFSET"; the first one when a partition
// was assigned more than once) and the records ("record PARTITION OFFSET
// KEY VALUE") in the order they were read.
func ParseConsumed(out string) (positions map[int32]int64, records []AppRecord) {
	positions = map[int32]int64{}
	for _, f := range appLines(out, "position", 3) {
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if _, seen := positions[int32(p)]; !seen {
			positions[int32(p)] = o
		}
	}
	for _, f := range appLines(out, "record", 5) {
		if r, ok := parseAppRecord(f); ok {
			records = append(records, r)
		}
	}
	return positions, records
}

// ParseConsumeCommits returns what consume --commit committed ("commit
// PARTITION OFFSET"), the last commit of each partition.
func ParseConsumeCommits(out string) map[int32]int64 {
	commits := map[int32]int64{}
	for _, f := range appLines(out, "commit", 3) {
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 == nil && err2 == nil {
			commits[int32(p)] = o
		}
	}
	return commits
}

// ParseNoCommittedOffset returns the partitions consume found without a
// committed offset ("error no-committed-offset PARTITION"; it exits 3),
// sorted.
func ParseNoCommittedOffset(out string) []int32 {
	var parts []int32
	for _, f := range appLines(out, "error", 3) {
		if f[1] != "no-committed-offset" {
			continue
		}
		if p, err := strconv.ParseInt(f[2], 10, 32); err == nil {
			parts = append(parts, int32(p))
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	return parts
}

// ParseDone returns consume's record count ("done COUNT"), or -1 when it
// did not finish.
func ParseDone(out string) int {
	for _, f := range appLines(out, "done", 2) {
		if n, err := strconv.Atoi(f[1]); err == nil {
			return n
		}
	}
	return -1
}

// ParseCommitted returns offsets' output ("committed TOPIC PARTITION
// OFFSET"): topic to partition to committed offset.
func ParseCommitted(out string) map[string]map[int32]int64 {
	committed := map[string]map[int32]int64{}
	for _, f := range appLines(out, "committed", 4) {
		p, err1 := strconv.ParseInt(f[2], 10, 32)
		o, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if committed[f[1]] == nil {
			committed[f[1]] = map[int32]int64{}
		}
		committed[f[1]][int32(p)] = o
	}
	return committed
}
