//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// verifyOutput is what `kmirror verify -o json` prints (the fields the
// test reads).
type verifyOutput struct {
	Partitions []struct {
		SourceTopic string `json:"source_topic"`
		Partition   int32  `json:"partition"`
		Matched     int64  `json:"matched"`
		Different   int64  `json:"different"`
		Missing     int64  `json:"missing"`
		Extra       int64  `json:"extra"`
		Differences []struct {
			Kind         string   `json:"kind"`
			SourceOffset int64    `json:"source_offset"`
			TargetOffset int64    `json:"target_offset"`
			Fields       []string `json:"fields"`
		} `json:"differences"`
		Error string `json:"error"`
	} `json:"partitions"`
	Total struct {
		Matched, Different, Missing, Extra, Duplicate int64
	} `json:"total"`
	Errors int `json:"errors"`
}

func runVerify(t *testing.T, path string) (int, verifyOutput, string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, "verify", "--config", path, "-o", "json")
	var out verifyOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil && stdout != "" {
		t.Fatalf("verify -o json: %v\n%s", err, stdout)
	}
	return code, out, stderr
}

// TestKafkaVerify: on real Kafka, `kmirror verify` exits 0 on a clean
// copy with every record matched; a record written to the target behind
// kmirror's back is extra, and a target partition rewritten with one
// record changed (Kafka cannot change a record in place: the target topic
// is deleted and written again) is different in its value; exit 3 (the
// copy differs: not 1, an error).
func TestKafkaVerify(t *testing.T) {
	t.Parallel()
	e, _ := newKafkaEnv(t)
	orders, ledger := e.topic("audited"), e.topic("ledger")
	createTopic(t, e.srcCl, orders, 2, nil)
	createTopic(t, e.srcCl, ledger, 1, nil)
	recs, _ := seqRecords(orders, "a", 2, 50)
	lrecs, _ := seqRecords(ledger, "l", 1, 20)
	produce(t, e.srcCl, append(recs, lrecs...)...)
	path := e.writeConfig(e.defaultConfig())
	w := e.startWorker(path)

	var out verifyOutput
	e.waitFor(30*time.Second, "a clean verify", func() (bool, string) {
		code, o, stderr := runVerify(t, path)
		out = o
		return code == 0 && o.Total.Matched == 120, fmt.Sprintf("exit %d, %+v, %s", code, o.Total, stderr)
	})
	if out.Errors != 0 || out.Total.Different+out.Total.Missing+out.Total.Extra != 0 || len(out.Partitions) != 3 {
		t.Fatalf("a clean copy: %+v", out)
	}

	// A record on the target behind kmirror's back, then more copied.
	produce(t, e.dstCl, &kgo.Record{Topic: "src." + orders, Partition: 0, Value: []byte("foreign")})
	more, _ := seqRecords(orders, "b", 1, 5)
	produce(t, e.srcCl, more...)
	var code int
	e.waitFor(30*time.Second, "the records after the foreign one verified", func() (bool, string) {
		c, o, stderr := runVerify(t, path)
		code, out = c, o
		return o.Total.Matched == 125, fmt.Sprintf("exit %d, %+v, %s", c, o.Total, stderr)
	})
	if code != 3 || out.Total.Extra != 1 || out.Total.Different+out.Total.Missing != 0 || out.Errors != 0 {
		t.Fatalf("a foreign record: exit %d (want 3: differences), %+v", code, out)
	}
	if code, _ := w.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("worker exit %d", code)
	}

	// The ledger's copy written again with record 7's value changed.
	target := "src." + ledger
	got := e.readTarget(target)[0]
	if len(got) != 20 || got[19].Offset != 19 {
		t.Fatalf("the copy of %s: %d records", ledger, len(got))
	}
	ctx := ctxTimeout(t, 45*time.Second)
	if resp, err := e.dstAdm.DeleteTopics(ctx, target); err != nil || resp.Error() != nil {
		t.Fatalf("delete %s: %v %v", target, err, resp.Error())
	}
	e.waitFor(30*time.Second, "the target topic created again", func() (bool, string) {
		resp, err := e.dstAdm.CreateTopic(ctx, 1, 1, nil, target)
		if err == nil {
			err = resp.Err
		}
		return err == nil, fmt.Sprint(err)
	})
	var again []*kgo.Record
	for i, r := range got {
		v := r.Value
		if i == 7 {
			v = []byte("changed")
		}
		again = append(again, &kgo.Record{Topic: target, Partition: 0, Key: r.Key, Value: v, Headers: r.Headers, Timestamp: r.Timestamp})
	}
	produce(t, e.dstCl, again...)

	code, out, stderr := runVerify(t, path)
	var diff []string
	for _, p := range out.Partitions {
		for _, d := range p.Differences {
			diff = append(diff, fmt.Sprintf("%s/%d %s %d->%d %v", p.SourceTopic, p.Partition, d.Kind, d.SourceOffset, d.TargetOffset, d.Fields))
		}
	}
	slices.Sort(diff)
	want := []string{
		fmt.Sprintf("%s/0 different 7->7 [value]", ledger),
		fmt.Sprintf("%s/0 extra -1->50 []", orders),
	}
	slices.Sort(want)
	if code != 3 || out.Errors != 0 || out.Total.Extra != 1 || out.Total.Different != 1 || out.Total.Missing != 0 || !slices.Equal(diff, want) {
		t.Fatalf("exit %d, %+v\ndifferences %q, want %q\nstderr: %s", code, out.Total, diff, want, stderr)
	}
	if !strings.Contains(stderr, "1 different, 0 missing, 1 extra") {
		t.Errorf("stderr does not sum the differences up: %s", stderr)
	}
}
