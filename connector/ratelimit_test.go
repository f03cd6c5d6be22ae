package connector

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/throttle"
	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// rlValue is the value size of the rate limit tests' records: the bytes
// a limit counts are at least these (the batch path counts whole batches,
// the record path keys, values and headers).
const rlValue = 1000

// rlFill writes n records of rlValue bytes to topic, in small batches (a
// fetch brings at least one whole batch, whatever it asked for),
// uncompressed (a limit counts the bytes on the wire).
func rlFill(t *testing.T, src *kfake.Cluster, topic string, n int) {
	t.Helper()
	kfaketest.CreateTopic(t, src, topic, 1)
	cl := kfaketest.Client(t, src, kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: make([]byte, rlValue)}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// rlCopied is the records of topic the mirror has copied (acknowledged).
func rlCopied(m *Mirror, topic string) int64 {
	var n int64
	for _, ps := range m.partitionStates() {
		if ps.TP.Topic == topic {
			acked, _, _ := ps.Status()
			n += max(acked, 0)
		}
	}
	return n
}

// rlBatchRoom is what a fetch under a limit may ask for whatever the
// limit: room for 16 of the largest batches (data.throttledMax), of
// rlFill's 16 KiB.
const rlBatchRoom = 16 * 16 << 10

// rlWithin fails the test when topic copied more bytes by now than a
// limit of perSec allows since start: perSec times the time, plus a
// bucket and one fetch (each at most what the limit allows in a window:
// throttle.Window, or two round trips on this loopback; or rlBatchRoom)
// plus one batch.
// Counting bytes against the time that passed is an upper bound that a
// slow machine only makes easier to meet: it cannot flake under load.
func rlWithin(t *testing.T, m *Mirror, topic string, perSec int64, start time.Time) int64 {
	t.Helper()
	copied := rlCopied(m, topic)
	slack := 2*max(perSec*int64(throttle.Window)/int64(time.Second), throttle.MinFetchBytes, rlBatchRoom) + 16<<10
	if allowed := int64(float64(perSec)*time.Since(start).Seconds()) + slack; copied*rlValue > allowed {
		t.Fatalf("%s: %d records (%d bytes) copied %v after the start, over the %d bytes a limit of %d bytes/s allows (throttle %+v)", topic, copied, copied*rlValue, time.Since(start).Round(time.Millisecond), allowed, perSec, m.throttle.Status(time.Now()))
	}
	return copied
}

// TestRateLimitHoldsAndReloads: on a saturated source, a mirror's
// rate_limit holds the bytes it copies (counted) to the limit, on the
// batch path and on the record path, and the throttle says it held
// fetches back; a reload that lifts the limit lets the rest go.
func TestRateLimitHoldsAndReloads(t *testing.T) {
	t.Parallel()
	for _, batchPath := range []bool{true, false} {
		t.Run(fmt.Sprintf("batch_path=%v", batchPath), func(t *testing.T) {
			t.Parallel()
			const records, limit = 6000, 1_000_000 // 6 MB at 1 MB/s
			src, dst := kfaketest.Clusters(t)
			rlFill(t, src, "orders", records)
			cfg := drMirror("rl", src, dst)
			cfg.SourceCompression = batchPath
			cfg.RateLimits = RateLimits{Mirror: limit}
			start := time.Now()
			m, _ := runMirror(t, context.Background(), cfg)

			// Three seconds of copying: at most the limit's worth.
			for time.Since(start) < 3*time.Second {
				rlWithin(t, m, "orders", limit, start)
				time.Sleep(50 * time.Millisecond)
			}
			kfaketest.WaitFor(t, func() bool { return rlCopied(m, "orders") > 0 }, "a first copy under the limit")
			st := m.throttle.Status(time.Now())
			if st.Mirror != limit || st.MirrorHeld <= 0 {
				t.Fatalf("throttle %+v: want the limit %d, and time held back", st, limit)
			}
			if rl := m.Status().RateLimit; rl == nil || rl.BytesPerSecond != limit || rl.ThrottledSeconds <= 0 {
				t.Fatalf("status rate_limit %+v: want the limit and the time it held fetches back", rl)
			}

			// A reload lifts it: the rest copies.
			sel := *m.selection()
			sel.RateLimits = RateLimits{}
			m.Reconfigure(sel)
			if m.throttle.Limited() {
				t.Fatal("limited after a reload without limits")
			}
			kfaketest.WaitFor(t, func() bool { return rlCopied(m, "orders") == records }, "every record copied once the limit is lifted")
		})
	}
}

// TestTopicRateLimitByLabel: a topic limit given by label holds that
// topic to it while an unlimited topic copies at full speed; a reload
// lowering it holds the topic to the new limit from then on.
func TestTopicRateLimitByLabel(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	rlFill(t, src, "bulk", 6000)
	rlFill(t, src, "orders", 6000)
	cfg := drMirror("rl", src, dst)
	cfg.SourceCompression = true
	cfg.Filters = []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll("bulk", "orders")}}
	cfg.Labels = []Label{{Match: regexp.MustCompile("^bulk$"), Set: map[string]string{"tier": "bulk"}}}
	const limit = 500_000
	cfg.RateLimits = RateLimits{Topics: []TopicRateLimit{{Labels: map[string]string{"tier": "bulk"}, BytesPerSecond: limit}}}
	start := time.Now()
	m, _ := runMirror(t, context.Background(), cfg)

	// orders is not held up by bulk's limit.
	kfaketest.WaitFor(t, func() bool {
		rlWithin(t, m, "bulk", limit, start)
		return rlCopied(m, "orders") == 6000
	}, "orders copied whole while bulk is held to its limit")
	if st := m.throttle.Status(time.Now()); st.Mirror != 0 || st.Topics["bulk"].Limit != limit || st.Topics["orders"].Limit != 0 {
		t.Fatalf("throttle %+v: want only bulk limited, to %d", st, limit)
	}
	st := m.Status()
	for _, ts := range st.Topics {
		if want := map[string]int64{"bulk": limit}[ts.SourceTopic]; ts.RateLimit != want || (want == 0 && ts.Throttled) {
			t.Fatalf("status of %s: rate_limit %d (throttled %v), want %d", ts.SourceTopic, ts.RateLimit, ts.Throttled, want)
		}
	}
	if st.RateLimit == nil || st.RateLimit.BytesPerSecond != 0 {
		t.Fatalf("status rate_limit %+v: want topic limits only", st.RateLimit)
	}

	// A reload lowers bulk's limit: from then on it holds to the new one.
	sel := *m.selection()
	sel.RateLimits = RateLimits{Topics: []TopicRateLimit{{Match: regexp.MustCompile("^bu.*$"), BytesPerSecond: limit / 5}}}
	m.Reconfigure(sel)
	if st := m.throttle.Status(time.Now()); st.Topics["bulk"].Limit != limit/5 {
		t.Fatalf("after the reload bulk's limit is %d, want %d at once", st.Topics["bulk"].Limit, limit/5)
	}
	// What the old limit had fetched by now, and its debt, are the
	// new limit's start.
	base, at := rlCopied(m, "bulk"), time.Now()
	debt := m.throttle.TopicDelay("bulk", at)
	for time.Since(at) < 2*time.Second {
		copied := rlCopied(m, "bulk") - base
		allowed := int64(float64(limit/5)*(time.Since(at)-debt).Seconds()) + 2*max(throttle.MinFetchBytes, rlBatchRoom) + 16<<10 + limit*int64(2*throttle.Window)/int64(time.Second)
		if copied*rlValue > max(allowed, 0)+limit*int64(2*throttle.Window)/int64(time.Second) {
			t.Fatalf("bulk copied %d bytes in %v after the limit was lowered to %d bytes/s", copied*rlValue, time.Since(at).Round(time.Millisecond), limit/5)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := m.throttle.Status(time.Now()); st.TopicsHeld <= 0 {
		t.Fatalf("throttle %+v: no time held back", st)
	}
}
