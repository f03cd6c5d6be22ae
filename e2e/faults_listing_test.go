//go:build e2e

package e2e

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest/faultproxy"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// proxyTarget puts a fault proxy (e2e/kafkatest/faultproxy) in front of the
// target cluster and returns it: from then on defaultConfig and kmConfigFor
// give kmirror the proxy's addresses as the target's bootstrap servers, so
// every request kmirror sends to the target passes the proxy's hooks. The
// test's own clients (e.dstCl, readTarget) still talk to the target
// directly and see no fault. Call it before building the config.
//
// It is the same on every backend: a test writes its fault once (SetHook,
// SetAnswer, the ready-made faultproxy.TopicError, ProduceError,
// OffsetFetchError) and it runs against kfake and real Kafka alike. kfake
// gets the proxy too rather than its ControlKey: a control function answers
// instead of the cluster and never sees the cluster's own response, so
// "the real Metadata response with one topic's error set" cannot be built
// on it, and one code path for both backends means a fault that passes on
// kfake is the fault real Kafka gets.
//
// The proxy closes when the test ends (after the workers were stopped:
// remove a Silence hook before that, or the worker's shutdown waits on its
// held responses), and the test fails if the proxy met a protocol error.
func (e *env) proxyTarget() *faultproxy.Proxy {
	e.t.Helper()
	if e.dstProxy != nil {
		return e.dstProxy
	}
	p, err := faultproxy.New(e.dst.Addrs())
	if err != nil {
		e.t.Fatalf("fault proxy in front of the target: %v", err)
	}
	t := e.t
	t.Cleanup(func() {
		if err := p.Err(); err != nil {
			t.Errorf("fault proxy: %v", err)
		}
		if err := p.Close(); err != nil {
			t.Errorf("fault proxy: %v", err)
		}
	})
	e.dstProxy = p
	return p
}

// targetAddrs are the target's bootstrap servers for kmirror: the fault
// proxy's when the test has one.
func (e *env) targetAddrs() []string {
	if e.dstProxy != nil {
		return e.dstProxy.Addrs()
	}
	return e.dst.Addrs()
}

// TestTargetTopicListedWithError: the target's Metadata lists the mirrored
// target topic with LEADER_NOT_AVAILABLE (as during a controller move or a
// broker restart) for about 15 s, about 15 discovery passes at the 1s
// refresh, while records keep arriving at the source. After the fault the
// target holds every source record exactly once: kmirror neither forgot
// the topic's progress nor copied it again (issue 11 item 2).
func TestTargetTopicListedWithError(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		p := e.proxyTarget()
		orders := e.topic("orders")
		target := "src." + orders
		createTopic(t, e.srcCl, orders, 2, nil)
		recs, want := seqRecords(orders, "before", 2, 100)
		produce(t, e.srcCl, recs...)

		w := e.startWorker(e.writeConfig(e.defaultConfig()))
		e.waitTargetValues(45*time.Second, target, want)

		// listed counts the Metadata responses to kmirror that listed the
		// target topic, each with the error.
		var listed atomic.Int64
		fault := faultproxy.TopicError(target, kerr.LeaderNotAvailable.Code)
		p.SetHook(kmsg.Metadata, func(req kmsg.Request, resp kmsg.Response) faultproxy.Action {
			if listsTopic(resp, target) {
				listed.Add(1)
			}
			return fault(req, resp)
		})
		faultBegin := time.Now()
		recs, during := seqRecords(orders, "during", 2, 100)
		produce(t, e.srcCl, recs...)
		const faultFor = 15 * time.Second
		e.waitFor(faultFor+45*time.Second, fmt.Sprintf("the fault to last %v and to be seen by kmirror's listings", faultFor), func() (bool, string) {
			n := listed.Load()
			return time.Since(faultBegin) >= faultFor && n >= 3,
				fmt.Sprintf("%v into the fault, target topic listed with the error %d times", time.Since(faultBegin).Round(time.Second), n)
		})
		p.SetHook(kmsg.Metadata, nil)
		t.Logf("target topic %s listed with LEADER_NOT_AVAILABLE %d times in %v", target, listed.Load(), time.Since(faultBegin).Round(time.Second))

		recs, after := seqRecords(orders, "after", 2, 100)
		produce(t, e.srcCl, recs...)
		all := appendWant(appendWant(want, during), after)
		// Nothing lost, no duplicate, in order: a topic listed with an
		// error is unknown for the pass, never deleted.
		e.waitTargetValues(60*time.Second, target, all)
		if n := w.countLog("disappeared"); n > 0 {
			t.Errorf("kmirror logged %q %d times for a topic only listed with an error", "disappeared", n)
		}
		if n := w.countLog("from its start", orders); n > 0 {
			t.Errorf("kmirror restarted the copy of %s (%d log lines)", orders, n)
		}
	})
}

// listsTopic reports whether resp is a Metadata response listing topic.
func listsTopic(resp kmsg.Response, topic string) bool {
	r, ok := resp.(*kmsg.MetadataResponse)
	if !ok {
		return false
	}
	for _, t := range r.Topics {
		if t.Topic != nil && *t.Topic == topic {
			return true
		}
	}
	return false
}
