//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// Cases that need a real broker: a target stricter than the source (a
// CreateTopicPolicy), broker-assigned timestamps, a broker restart and a
// topic deleted and recreated (new topic ID). They run only with the kafka
// backend.

// getStatus reads GET /api/v1/status.
func getStatus(addr string) (statusDoc, string, error) {
	var doc statusDoc
	code, body, err := httpGet(addr, "/api/v1/status")
	if err != nil {
		return doc, "", err
	}
	if code != 200 {
		return doc, string(body), fmt.Errorf("status %d: %s", code, body)
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return doc, string(body), fmt.Errorf("decoding %s: %v", body, err)
	}
	return doc, string(body), nil
}

// topicStatus finds a source topic in a status document.
func topicStatus(doc statusDoc, mirror, source string) (state, errMsg string, ok bool) {
	for _, m := range doc.Mirrors {
		if m.Name != mirror {
			continue
		}
		for _, tp := range m.Topics {
			if tp.SourceTopic == source {
				return tp.State, tp.Error, true
			}
		}
	}
	return "", "", false
}

// metricSum sums a metric's series for one mirror from GET /metrics.
func metricSum(addr, metric, mirror string) (float64, error) {
	code, body, err := httpGet(addr, "/metrics")
	if err != nil {
		return 0, err
	}
	if code != 200 {
		return 0, fmt.Errorf("/metrics: status %d", code)
	}
	sum, n := sumMetric(string(body), metric, "mirror", mirror)
	if n == 0 {
		return 0, fmt.Errorf("no %s series with mirror=%q", metric, mirror)
	}
	return sum, nil
}

// firstLogAt returns the time (kmirror's, from the line's time= field) and
// text of the worker's first log line at or after since that contains
// every one of subs.
func (w *worker) firstLogAt(since time.Time, subs ...string) (time.Time, string, bool) {
	since = since.Truncate(time.Millisecond) // the log's precision
	for _, l := range w.logLines(subs...) {
		f, _, _ := strings.Cut(strings.TrimPrefix(l, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, f)
		if err == nil && !at.Before(since) {
			return at, l, true
		}
	}
	return time.Time{}, "", false
}

// logLines returns the worker's log lines that contain every one of subs.
func (w *worker) logLines(subs ...string) []string {
	var out []string
	for _, l := range strings.Split(w.log.String(), "\n") {
		all := true
		for _, s := range subs {
			if !strings.Contains(l, s) {
				all = false
				break
			}
		}
		if all && l != "" {
			out = append(out, l)
		}
	}
	return out
}

// TestKafkaCreateRefusedTopic: one batch of topic creations in which the
// target refuses one topic (its config is refused by the target's
// CreateTopicPolicy; the source has no policy). The other topics are
// created and mirrored (with their configs); the refused one is reported in
// the log, as failed with the broker's error in /api/v1/status and in
// kmirror_topic_create_errors_total, keeps /readyz at 503, and is retried
// on every pass, so it is mirrored as soon as the target accepts it.
func TestKafkaCreateRefusedTopic(t *testing.T) {
	t.Parallel()
	k := requireKafkaBackend(t)
	pol, err := k.rt.CompileRefusePolicy(ctxTimeout(t, time.Minute), filepath.Join(k.base, safeName(t.Name())+"-policy"))
	if err != nil {
		if errors.Is(err, kafkatest.ErrUnavailable) && !inCI() {
			t.Skipf("no javac to compile the CreateTopicPolicy: %v", err)
		}
		t.Fatal(err)
	}
	dst := newKafkaCluster(t, "strict-target", kafkatest.Config{Properties: pol.Properties(), ClassPath: []string{pol.ClassDir}})
	e := newEnvWith(t, k.src, dst, true)

	// The refused topic's retention.ms is a value only this test uses.
	marker := strconv.Itoa(86_400_000 + rand.IntN(1_000_000))
	if err := pol.Refuse("retention.ms", marker); err != nil {
		t.Fatal(err)
	}
	good1, good2, refused := e.topic("good1"), e.topic("good2"), e.topic("refused")
	createTopic(t, e.srcCl, good1, 2, map[string]*string{"retention.ms": kmsg.StringPtr("3600000")})
	createTopic(t, e.srcCl, good2, 1, nil)
	createTopic(t, e.srcCl, refused, 2, map[string]*string{"retention.ms": kmsg.StringPtr(marker)})
	want := map[string]map[int32][]string{}
	for _, tp := range []struct {
		name string
		n    int
	}{{good1, 2}, {good2, 1}, {refused, 2}} {
		recs, w := seqRecords(tp.name, "v", tp.n, 10)
		produce(t, e.srcCl, recs...)
		want[tp.name] = w
	}

	cfg := e.defaultConfig()
	w := e.startWorker(e.writeConfig(cfg))
	addr := w.httpAddr(t)

	// The others are created (in the same first batch) and mirrored.
	e.waitTargetValues(45*time.Second, "src."+good1, want[good1])
	e.waitTargetValues(30*time.Second, "src."+good2, want[good2])
	if rcs, err := e.dstAdm.DescribeTopicConfigs(ctxTimeout(t, 10*time.Second), "src."+good1); err != nil {
		t.Errorf("describe target topic src.%s: %v", good1, err)
	} else if rc, err := rcs.On("src."+good1, nil); err != nil {
		t.Errorf("describe target topic src.%s: %v", good1, err)
	} else {
		got := "<unset>"
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" {
				got = c.MaybeValue()
			}
		}
		if got != "3600000" {
			t.Errorf("target topic src.%s has retention.ms=%s, want the source's 3600000", good1, got)
		}
	}

	// The refused one: failed in the status, with the broker's reason.
	e.waitFor(45*time.Second, fmt.Sprintf("/api/v1/status to show %s failed with the policy's error", refused), func() (bool, string) {
		doc, body, err := getStatus(addr)
		if err != nil {
			return false, err.Error()
		}
		state, msg, ok := topicStatus(doc, cfg.Name, refused)
		if !ok {
			return false, "not listed: " + body
		}
		return state == "failed" && strings.Contains(msg, "refused by this cluster's create topic policy"),
			fmt.Sprintf("state %q, error %q", state, msg)
	})
	// Logged, and retried on later passes (refresh_interval 1s).
	e.waitFor(45*time.Second, "at least 3 log lines about the refused creation (one per pass)", func() (bool, string) {
		n := len(w.logLines(refused, "refused by this cluster's create topic policy"))
		return n >= 3, fmt.Sprintf("%d lines", n)
	})
	lines := w.logLines(refused, "refused by this cluster's create topic policy")
	t.Logf("kmirror logged the refusal %d times; first: %s", len(lines), lines[0])
	if !strings.Contains(lines[0], "level=ERROR") && !strings.Contains(lines[0], "level=WARN") {
		t.Errorf("the refusal is logged below warning level: %s", lines[0])
	}
	if v, err := metricSum(addr, "kmirror_topic_create_errors_total", cfg.Name); err != nil || v < 3 {
		t.Errorf("kmirror_topic_create_errors_total = %v (%v), want >= 3 after 3 refused attempts", v, err)
	}
	if code, body, err := httpGet(addr, "/readyz"); err != nil || code != 503 {
		t.Errorf("/readyz while a topic cannot be created: status %d (%v) %s; want 503", code, err, body)
	}
	if n, err := partitionCount(ctxTimeout(t, 10*time.Second), e.dstCl, "src."+refused); err == nil {
		t.Errorf("target topic src.%s exists with %d partitions although the target refused it", refused, n)
	}

	// The target accepts it now: the next pass creates and mirrors it.
	if err := pol.Allow("retention.ms", marker); err != nil {
		t.Fatal(err)
	}
	e.waitTargetValues(30*time.Second, "src."+refused, want[refused])
	e.waitFor(30*time.Second, "/api/v1/status to show "+refused+" mirroring without error", func() (bool, string) {
		doc, _, err := getStatus(addr)
		if err != nil {
			return false, err.Error()
		}
		state, msg, _ := topicStatus(doc, cfg.Name, refused)
		return state == "mirroring" && msg == "", fmt.Sprintf("state %q, error %q", state, msg)
	})
	e.waitFor(30*time.Second, "/readyz to answer 200", func() (bool, string) {
		code, body, err := httpGet(addr, "/readyz")
		if err != nil {
			return false, err.Error()
		}
		return code == 200, fmt.Sprintf("status %d: %s", code, body)
	})
}

// TestKafkaLogAppendTime: a source topic with
// message.timestamp.type=LogAppendTime carries the timestamps its broker
// assigned, not the producer's; the target records carry exactly those.
func TestKafkaLogAppendTime(t *testing.T) {
	t.Parallel()
	e, _ := newKafkaEnv(t)
	topic := e.topic("appended")
	createTopic(t, e.srcCl, topic, 2, map[string]*string{"message.timestamp.type": kmsg.StringPtr("LogAppendTime")})
	producerTS := time.Now().Add(-20 * time.Minute).Truncate(time.Millisecond)
	var want map[int32][]string
	for batch := range 3 {
		recs, w := seqRecords(topic, fmt.Sprintf("b%d", batch), 2, 20)
		for _, r := range recs {
			r.Timestamp = producerTS
		}
		produce(t, e.srcCl, recs...)
		want = appendWant(want, w)
		time.Sleep(20 * time.Millisecond) // batches get different append times
	}
	src, err := readTopic(ctxTimeout(t, 30*time.Second), e.src.Addrs(), topic)
	if err != nil {
		t.Fatal(err)
	}
	for p, rs := range src {
		for _, r := range rs {
			if r.Timestamp.Equal(producerTS) || r.Attrs.TimestampType() != 1 {
				t.Fatalf("source partition %d offset %d: timestamp %v type %d; the broker should have set its append time (type 1)",
					p, r.Offset, r.Timestamp, r.Attrs.TimestampType())
			}
		}
	}

	w := e.startWorker(e.writeConfig(e.defaultConfig()))
	e.waitTargetValues(45*time.Second, "src."+topic, want)
	got := e.readTarget("src." + topic)
	// Forwarded as they are, LogAppendTime batches would get the target's
	// clock or the producer's timestamps: they must take the record path.
	if n := mustScrapeMetric(t, w.httpAddr(t), "kmirror_passthrough_fallbacks_total", map[string]string{"reason": "log_append_time"}); n == 0 {
		t.Errorf("kmirror_passthrough_fallbacks_total{reason=log_append_time} = 0: LogAppendTime batches were not decoded")
	}
	types := map[int8]int{}
	for p, rs := range src {
		for i, r := range rs {
			g := got[p][i]
			types[g.Attrs.TimestampType()]++
			if g.Timestamp.UnixMilli() != r.Timestamp.UnixMilli() {
				t.Errorf("partition %d record %d (%s): target timestamp %d, want the source's broker-assigned %d (producer's was %d)",
					p, i, g.Value, g.Timestamp.UnixMilli(), r.Timestamp.UnixMilli(), producerTS.UnixMilli())
			}
		}
	}
	t.Logf("target records by timestamp type (0 CreateTime, 1 LogAppendTime): %v", types)
}

// TestKafkaTargetRestart: the target broker is stopped (SIGTERM) and
// started again with the same data and ports while a producer keeps
// writing to the source. kmirror keeps running (on the batch path, its
// default, with batches of a partition in flight when the broker stops),
// and afterwards every source record is on the target, in the source's
// order (duplicates allowed, nothing lost).
func TestKafkaTargetRestart(t *testing.T) {
	t.Parallel()
	k := requireKafkaBackend(t)
	dst := newKafkaCluster(t, "restarted-target", kafkatest.Config{})
	e := newEnvWith(t, k.src, dst, true)
	stream := e.topic("stream")
	createTopic(t, e.srcCl, stream, 3, nil)
	prod := startProducer(t, e.src.Addrs(), stream, 3)

	cfg := e.defaultConfig()
	w := e.startWorker(e.writeConfig(cfg))
	addr := w.httpAddr(t)
	ctx := ctxTimeout(t, 4*time.Minute)
	e.waitFor(45*time.Second, "1000 records on the target", func() (bool, string) {
		n, _, err := recordCount(ctx, e.dstCl, "src."+stream)
		if err != nil {
			return false, err.Error()
		}
		return n >= 1000, fmt.Sprintf("%d records", n)
	})

	begin := time.Now()
	if err := dst.Stop(30 * time.Second); err != nil {
		t.Fatalf("stopping the target: %v", err)
	}
	producedAtStop := prod.count()
	t.Logf("target stopped (SIGTERM) in %v with %d records produced at the source", time.Since(begin).Round(time.Millisecond), producedAtStop)
	for range 30 { // 3s down, kmirror must stay up
		w.checkAlive(t)
		time.Sleep(100 * time.Millisecond)
	}
	begin = time.Now()
	if err := dst.Start(ctx); err != nil {
		t.Fatalf("starting the target again: %v", err)
	}
	t.Logf("target started again in %v at the same address %s; %d records produced while it was down",
		time.Since(begin).Round(time.Millisecond), dst.Addr(kafkatest.PLAINTEXT), prod.count()-producedAtStop)

	e.waitFor(60*time.Second, "kmirror to copy again after the restart", func() (bool, string) {
		n, _, err := recordCount(ctx, e.dstCl, "src."+stream)
		if err != nil {
			return false, err.Error()
		}
		return n >= int64(prod.count()), fmt.Sprintf("%d records on the target, %d produced", n, prod.count())
	})
	prod.stop(t)

	srcRecs, err := readTopic(ctx, e.src.Addrs(), stream)
	if err != nil {
		t.Fatalf("read source: %v", err)
	}
	want := values(srcRecs)
	total := 0
	for _, vs := range want {
		total += len(vs)
	}
	var got map[int32][]string
	e.waitFor(90*time.Second, fmt.Sprintf("all %d source records on the target", total), func() (bool, string) {
		_, recs, err := e.targetSnapshot(ctx, "src."+stream, int64(total))
		if err != nil {
			return false, err.Error()
		}
		if recs == nil {
			return false, "fewer offsets on the target than source records"
		}
		got = values(recs)
		if d := missing(want, got); d != "" {
			return false, d
		}
		return true, ""
	})
	n := 0
	for _, vs := range got {
		n += len(vs)
	}
	t.Logf("%d source records, %d on the target (%d duplicates)", total, n, n-total)
	if d := outOfOrder(want, got); d != "" {
		t.Errorf("records reordered across the target's restart: %s", d)
	}
	w.checkAlive(t)
	e.waitFor(30*time.Second, "/api/v1/status to show "+stream+" mirroring", func() (bool, string) {
		doc, _, err := getStatus(addr)
		if err != nil {
			return false, err.Error()
		}
		state, msg, _ := topicStatus(doc, cfg.Name, stream)
		return state == "mirroring", fmt.Sprintf("state %q, error %q", state, msg)
	})
}

// TestKafkaSourceTopicRecreated: the source topic is deleted and created
// again (a new topic ID) between two control passes while kmirror runs.
// kmirror must notice it (log line, kmirror_source_topic_recreations_total),
// must not stall silently, and must never append the new topic's records
// to the target topic that holds the old one's (neither path may follow
// the name to the new topic: the CI failure this test once had was the
// batch path doing so before the control plane noticed). It reports the
// topic as failed in /api/v1/status, saying that the target topic holds
// the old topic's records; once the operator deletes the target topic, it
// mirrors the new topic from its start.
func TestKafkaSourceTopicRecreated(t *testing.T) {
	t.Parallel()
	e, _ := newKafkaEnv(t)
	topic := e.topic("phoenix")
	createTopic(t, e.srcCl, topic, 2, nil)
	recs, wantOld := seqRecords(topic, "old", 2, 10)
	produce(t, e.srcCl, recs...)

	cfg := e.defaultConfig()
	cfg.RefreshInterval = 3 * time.Second
	w := e.startWorker(e.writeConfig(cfg))
	addr := w.httpAddr(t)
	e.waitTargetValues(45*time.Second, "src."+topic, wantOld)

	// Right after a pass, so that the next pass sees the new topic ID.
	passes, err := metricSum(addr, "kmirror_control_passes_total", cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor(30*time.Second, "the next control pass", func() (bool, string) {
		n, err := metricSum(addr, "kmirror_control_passes_total", cfg.Name)
		if err != nil {
			return false, err.Error()
		}
		return n > passes, fmt.Sprintf("%v passes", n)
	})
	begin := time.Now()
	ctx := ctxTimeout(t, 3*time.Minute)
	resp, err := e.srcAdm.DeleteTopics(ctx, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete source topic %s: %v", topic, err)
	}
	waitFor(t, 30*time.Second, "the deleted topic to leave the source metadata", func() (bool, string) {
		_, err := partitionCount(ctx, e.srcCl, topic)
		return errors.Is(err, errUnknownTopic), fmt.Sprint(err)
	})
	waitFor(t, 30*time.Second, "the topic to be created again", func() (bool, string) {
		resp, err := e.srcAdm.CreateTopic(ctx, 2, -1, nil, topic)
		if err == nil {
			err = resp.Err
		}
		return err == nil, fmt.Sprint(err)
	})
	took := time.Since(begin)
	t.Logf("deleted and recreated %s in %v (refresh_interval %v)", topic, took.Round(time.Millisecond), cfg.RefreshInterval)

	// A fresh producer: the new topic has a new ID.
	prod := newClient(t, e.src.Addrs())
	waitFor(t, 30*time.Second, "the new topic in the source metadata", func() (bool, string) {
		n, err := partitionCount(ctx, e.srcCl, topic)
		return n == 2, fmt.Sprintf("%d partitions, %v", n, err)
	})
	// More records than the old topic had, so that a consumer that kept
	// the old positions would find them valid and skip the first ones.
	newRecs, wantNew := seqRecords(topic, "new", 2, 30)
	produce(t, prod, newRecs...)

	// The new topic's records must never be appended to the old topic's
	// target (two topics mixed in one): the topic is reported as failed
	// until the operator deletes the target topic. Both paths hold it:
	// franz-go never adopts a recreated topic's ID, nor does the batch
	// path.
	const line = "deleted and recreated"
	var statusErr string
	e.waitFor(45*time.Second, "the topic reported as failed because it was recreated", func() (bool, string) {
		recs, err := readTopic(ctx, e.dst.Addrs(), "src."+topic)
		if err != nil {
			return false, err.Error()
		}
		if n := countPrefix(values(recs), "new"); n > 0 {
			t.Fatalf("%d records of the recreated topic were appended to the old topic's target src.%s", n, topic)
		}
		doc, _, err := getStatus(addr)
		if err != nil {
			return false, err.Error()
		}
		state, msg, _ := topicStatus(doc, cfg.Name, topic)
		statusErr = msg
		return state == "failed" && strings.Contains(msg, line), fmt.Sprintf("state %q, error %q", state, msg)
	})
	// The control plane's line (the batch path's retries are WARN lines,
	// franz-go's have cluster=...).
	if ls := w.logLines("level=ERROR", "topic failed", line, "topic="+topic, "mirror="+cfg.Name); len(ls) == 0 {
		t.Errorf("kmirror logged no ERROR line with %q and %s", line, topic)
	} else {
		t.Logf("kmirror logged: %s", ls[0])
	}
	if v, err := metricSum(addr, "kmirror_source_topic_recreations_total", cfg.Name); err != nil || v < 1 {
		t.Errorf("kmirror_source_topic_recreations_total = %v (%v), want >= 1", v, err)
	}
	if d := missing(wantOld, values(e.readTarget("src."+topic))); d != "" {
		t.Errorf("records of the old topic are gone from the target: %s", d)
	}
	t.Logf("behaviour: reported as failed (%s); deleting the target topic as the error says", statusErr)
	dresp, err := e.dstAdm.DeleteTopics(ctx, "src."+topic)
	if err == nil {
		err = dresp.Error()
	}
	if err != nil {
		t.Fatalf("delete target topic src.%s: %v", topic, err)
	}
	e.waitTargetValues(60*time.Second, "src."+topic, wantNew)
	e.waitFor(30*time.Second, "/api/v1/status to show "+topic+" mirroring again", func() (bool, string) {
		doc, _, err := getStatus(addr)
		if err != nil {
			return false, err.Error()
		}
		state, msg, _ := topicStatus(doc, cfg.Name, topic)
		return state == "mirroring" && msg == "", fmt.Sprintf("state %q, error %q", state, msg)
	})
}
