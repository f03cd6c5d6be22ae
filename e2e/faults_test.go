//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/e2e/kafkatest/faultproxy"
)

// Faults of issue 11, each on both backends: what production brings must
// never cost a duplicate, a re-copy or a hang.

// reload rewrites the worker's config file and sends SIGHUP, then waits for
// kmirror to log that it reloaded.
func (e *env) reload(w *worker, path string, cfg mirrorConfig, x extConfig) {
	e.t.Helper()
	before := w.countLog("config reloaded")
	e.writeExtConfig(path, cfg, x)
	w.signal(syscall.SIGHUP)
	e.waitFor(30*time.Second, "kmirror to log `config reloaded` after SIGHUP", func() (bool, string) {
		return w.countLog("config reloaded") > before, "not yet"
	})
}

// TestReselectedTopicNotCopiedTwice: a topic excluded by a config reload,
// written to meanwhile, and included again continues from where its copy
// stopped: the target holds every source record exactly once.
func TestReselectedTopicNotCopiedTwice(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		orders := e.topic("orders")
		createTopic(t, e.srcCl, orders, 2, nil)
		recs, want := seqRecords(orders, "a", 2, 300)
		produce(t, e.srcCl, recs...)

		cfg := e.defaultConfig()
		path := e.writeExtConfig("", cfg, extConfig{})
		w := e.startWorker(path)
		addr := w.httpAddr(t)
		e.waitTargetValues(45*time.Second, "src."+orders, want)

		excluded := cfg
		excluded.Exclude = []string{orders}
		e.reload(w, path, excluded, extConfig{})
		e.waitFor(30*time.Second, orders+" to leave the mirror", func() (bool, string) {
			doc, _, err := getStatus(addr)
			if err != nil {
				return false, err.Error()
			}
			_, _, listed := topicStatus(doc, cfg.Name, orders)
			return !listed, "still listed"
		})
		more, wantMore := seqRecords(orders, "b", 2, 250)
		produce(t, e.srcCl, more...)

		e.reload(w, path, cfg, extConfig{})
		all := appendWant(want, wantMore)
		e.waitTargetValues(45*time.Second, "src."+orders, all)
		// Settled (nothing in flight), and still exactly once.
		e.waitFor(30*time.Second, "no lag", func() (bool, string) {
			v, err := metricSum(addr, "kmirror_replication_lag_records", cfg.Name)
			return err == nil && v == 0, fmt.Sprintf("lag %v (%v)", v, err)
		})
		e.waitTargetValues(30*time.Second, "src."+orders, all)
		if ls := w.logLines("from its start", orders); len(ls) > 0 {
			t.Errorf("kmirror restarted the copy: %s", ls[0])
		}
	})
}

// refuseWrites makes the target refuse every write from kmirror with
// NOT_ENOUGH_REPLICAS (a retriable refusal: the producer keeps retrying and
// its buffer fills) until the returned func is called, through the fault
// proxy on both backends. Call it before building the config. refused
// counts the refused Produce requests that carried records of a topic.
func (e *env) refuseWrites() (refused func(topic string) int64, recover func()) {
	e.t.Helper()
	p := e.proxyTarget()
	var mu sync.Mutex
	byName, byID := map[string]int64{}, map[[16]byte]int64{} // Produce v13+ names topics by ID
	refuse := faultproxy.ProduceError(kerr.NotEnoughReplicas.Code)
	p.SetAnswer(kmsg.Produce, func(req kmsg.Request, resp kmsg.Response) faultproxy.Action {
		if pr, ok := req.(*kmsg.ProduceRequest); ok {
			mu.Lock()
			for _, t := range pr.Topics {
				if t.Topic != "" {
					byName[t.Topic]++
				} else {
					byID[t.TopicID]++
				}
			}
			mu.Unlock()
		}
		return refuse(req, resp)
	})
	refused = func(topic string) int64 {
		var id [16]byte
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if tds, err := e.dstAdm.ListTopics(ctx, topic); err == nil {
			id = tds[topic].ID
		}
		mu.Lock()
		defer mu.Unlock()
		return byName[topic] + byID[id]
	}
	return refused, func() { p.SetAnswer(kmsg.Produce, nil) }
}

// TestShutdownBoundedWhileTargetRefuses: with the target refusing every
// write and the producer's buffer full, SIGTERM ends kmirror within
// shutdown_timeout + 5 s, non-zero, naming the abandoned records; once the
// target accepts writes again, a restart completes the copy with nothing
// lost and nothing duplicated.
func TestShutdownBoundedWhileTargetRefuses(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		orders := e.topic("orders")
		createTopic(t, e.srcCl, orders, 1, nil)
		// 40 MB: more than the producer's 32 MiB buffer.
		const n, size = 40_000, 1 << 10
		recs := make([]*kgo.Record, 0, n)
		want := map[int32][]string{}
		for i := range n {
			v := fmt.Sprintf("%08d-", i) + strings.Repeat("x", size-9)
			recs = append(recs, &kgo.Record{Topic: orders, Partition: 0, Value: []byte(v)})
			want[0] = append(want[0], v)
		}
		produce(t, e.srcCl, recs...)
		refused, recover := e.refuseWrites()

		const timeout = 3 * time.Second
		cfg := e.defaultConfig()
		path := e.writeExtConfig("", cfg, extConfig{TopRaw: fmt.Sprintf("shutdown_timeout: %v", timeout)})
		w := e.startWorker(path)
		addr := w.httpAddr(t)
		e.waitFor(45*time.Second, "kmirror to be copying "+orders, func() (bool, string) {
			v, err := metricSum(addr, "kmirror_replication_lag_records", cfg.Name)
			return err == nil && v >= n, fmt.Sprintf("lag %v (%v)", v, err)
		})
		// Records of the topic are in flight (the producer retries them)
		// once a write of theirs was refused: the shutdown must abandon
		// them, however slow the machine.
		e.waitFor(45*time.Second, "a write of src."+orders+" refused by the target", func() (bool, string) {
			n := refused("src." + orders)
			return n > 0, fmt.Sprintf("%d refused", n)
		})
		// Let the copier fill the producer's buffer (it blocks then).
		time.Sleep(3 * time.Second)
		code, took := w.stop(t, syscall.SIGTERM)
		t.Logf("SIGTERM: exit %d after %v", code, took.Round(time.Millisecond))
		if took > timeout+5*time.Second {
			t.Errorf("kmirror took %v to exit with shutdown_timeout %v", took, timeout)
		}
		if code == 0 {
			t.Error("kmirror exited 0 after abandoning records")
		}
		if ls := w.logLines("abandoning them", "records="); len(ls) == 0 {
			t.Error("kmirror did not log how many records it abandoned")
		}

		// A second signal exits at once, whatever is in flight.
		w = e.startWorker(path)
		addr = w.httpAddr(t)
		e.waitFor(45*time.Second, "kmirror to be copying "+orders+" again", func() (bool, string) {
			v, err := metricSum(addr, "kmirror_replication_lag_records", cfg.Name)
			return err == nil && v > 0, fmt.Sprintf("lag %v (%v)", v, err)
		})
		w.signal(syscall.SIGTERM)
		e.waitFor(10*time.Second, "kmirror to log the shutdown", func() (bool, string) {
			return w.countLog("shutting down") > 0, "not yet"
		})
		code, took = w.stop(t, syscall.SIGTERM)
		t.Logf("second SIGTERM: exit %d after %v", code, took.Round(time.Millisecond))
		if code != 1 || took > 2*time.Second {
			t.Errorf("second SIGTERM: exit %d after %v, want 1 at once", code, took)
		}

		recover()
		e.startWorker(path)
		e.waitTargetValues(120*time.Second, "src."+orders, want)
	})
}

// TestRecordTargetNeverAccepts: a record larger than the target topic's
// max.message.bytes fails its partition with the reason (status, metric)
// and nothing after it is copied; with mirrors[].dead_letter the record
// goes there, with headers naming its origin, and the partition moves on.
func TestRecordTargetNeverAccepts(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		for _, eos := range []bool{false, true} {
			t.Run(fmt.Sprintf("exactly_once=%v", eos), func(t *testing.T) {
				t.Parallel()
				testRecordTargetNeverAccepts(t, b, eos)
			})
		}
	})
}

func testRecordTargetNeverAccepts(t *testing.T, b Backend, eos bool) {
	e := newEnv(t, b, ClusterSpec{Brokers: 1})
	orders := e.topic("orders")
	createTopic(t, e.srcCl, orders, 1, nil)
	createTopic(t, e.dstCl, "src."+orders, 1, map[string]*string{"max.message.bytes": kadm.StringPtr("20000")})
	big := make([]byte, 60<<10)
	rand.Read(big) // incompressible
	var recs []*kgo.Record
	want := map[int32][]string{}
	for i := range 41 {
		v := fmt.Sprintf("r-%d", i)
		if i == 20 {
			recs = append(recs, &kgo.Record{Topic: orders, Value: append([]byte(v), big...)})
			continue
		}
		recs = append(recs, &kgo.Record{Topic: orders, Value: []byte(v)})
		want[0] = append(want[0], v)
	}
	produce(t, e.srcCl, recs...)

	cfg := e.defaultConfig()
	// The target's limit is the test's: no config sync.
	noSync := "    sync: {topic_configs: {enabled: false}}"
	if eos {
		// The dead letter is written inside the slot's transaction.
		noSync += "\n    exactly_once: true\n    cluster: {slots: 2, session_timeout: 6s, commit_interval: 100ms}"
	}
	path := e.writeExtConfig("", cfg, extConfig{MirrorRaw: noSync})
	w := e.startWorker(path)
	addr := w.httpAddr(t)
	e.waitFor(60*time.Second, orders+" failed at the refused record", func() (bool, string) {
		doc, _, err := getStatus(addr)
		if err != nil {
			return false, err.Error()
		}
		state, msg, _ := topicStatus(doc, cfg.Name, orders)
		return state == "failed" && strings.Contains(msg, "offset 20") && strings.Contains(msg, "MESSAGE_TOO_LARGE"), fmt.Sprintf("state %q, error %q", state, msg)
	})
	// The gauge follows the status at the next progress tick.
	e.waitFor(10*time.Second, "kmirror_failed_partitions 1", func() (bool, string) {
		v, err := metricSum(addr, "kmirror_failed_partitions", cfg.Name)
		return err == nil && v == 1, fmt.Sprintf("%v (%v)", v, err)
	})
	e.waitTargetValues(30*time.Second, "src."+orders, map[int32][]string{0: want[0][:20]})
	if ls := w.logLines("refuses a record for good", orders); len(ls) == 0 {
		t.Error("kmirror did not log the refused record")
	}
	if code, _ := w.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d, want 0: nothing was in flight", code)
	}

	dlq := e.topic("dead-letters")
	e.writeExtConfig(path, cfg, extConfig{MirrorRaw: noSync + "\n    dead_letter: {topic: " + dlq + "}"})
	w = e.startWorker(path)
	addr = w.httpAddr(t)
	e.waitTargetValues(60*time.Second, "src."+orders, want)
	got := e.readTarget(dlq)
	if len(got[0]) != 1 {
		t.Fatalf("dead-letter topic holds %d records, want 1", len(got[0]))
	}
	hs := map[string]string{}
	for _, h := range got[0][0].Headers {
		hs[h.Key] = string(h.Value)
	}
	if hs["kmirror.source.topic"] != orders || hs["kmirror.source.partition"] != "0" || hs["kmirror.source.offset"] != "20" ||
		!strings.Contains(hs["kmirror.error"], "MESSAGE_TOO_LARGE") || hs["kmirror.truncated"] != "true" {
		t.Errorf("dead-letter record headers = %v", hs)
	}
	if v, err := metricSum(addr, "kmirror_dead_letter_records_total", cfg.Name); err != nil || v != 1 {
		t.Errorf("kmirror_dead_letter_records_total = %v (%v), want 1", v, err)
	}
	e.waitFor(30*time.Second, orders+" mirroring again", func() (bool, string) {
		doc, _, err := getStatus(addr)
		if err != nil {
			return false, err.Error()
		}
		state, msg, _ := topicStatus(doc, cfg.Name, orders)
		return state == "mirroring", fmt.Sprintf("state %q, error %q", state, msg)
	})
}

// TestDeliveryTimeout: with producer.delivery_timeout, records the target
// keeps refusing (a retriable refusal, retried by the producer) fail after
// that time instead of waiting forever: the partition is reported failed
// and retried from its last acknowledged offset, and once the target takes
// writes again the copy completes exactly once.
func TestDeliveryTimeout(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		orders := e.topic("orders")
		createTopic(t, e.srcCl, orders, 1, nil)
		recs, want := seqRecords(orders, "a", 1, 200)
		produce(t, e.srcCl, recs...)
		_, recover := e.refuseWrites()

		cfg := e.defaultConfig()
		path := e.writeExtConfig("", cfg, extConfig{MirrorRaw: "    producer: {delivery_timeout: 1s}"})
		w := e.startWorker(path)
		addr := w.httpAddr(t)
		e.waitFor(45*time.Second, "records to fail after the delivery timeout", func() (bool, string) {
			v, err := metricSum(addr, "kmirror_produce_errors_total", cfg.Name)
			return err == nil && v > 0, fmt.Sprintf("produce errors %v (%v)", v, err)
		})
		e.waitFor(20*time.Second, orders+" reported failed", func() (bool, string) {
			doc, _, err := getStatus(addr)
			if err != nil {
				return false, err.Error()
			}
			state, msg, _ := topicStatus(doc, cfg.Name, orders)
			return state == "failed" && strings.Contains(msg, "delivery_timeout"), fmt.Sprintf("state %q, error %q", state, msg)
		})
		recover()
		e.waitTargetValues(60*time.Second, "src."+orders, want)
	})
}
