package connector

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestCutoverTimeoutReportsLag: the gate's time running out while one of
// its requests is in flight (a source slow to answer, as under load) is
// the gate's own refusal, with what its last look saw, and not the
// request's "context deadline exceeded"; nothing is fenced. (CI: the
// cutover of the disaster recovery day failed with "list the source's
// end offsets: context deadline exceeded" instead of the lag.)
func TestCutoverTimeoutReportsLag(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	kfaketest.CreateTopic(t, src, "orders", 2)
	cl := kfaketest.Client(t, src)
	for i := range 10 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "orders", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	fwd := drMirror("fwd", src, dst)
	m, stop := runMirror(t, context.Background(), fwd)
	kfaketest.WaitFor(t, func() bool { return rlCopied(m, "orders") == 10 }, "the copy")
	stop()

	// Every ListOffsets of the source now takes 1.5 s: the gate's looks
	// (one a second with a long quiet period) are in flight most of the
	// time, and the deadline falls in one of them.
	var slow atomic.Bool
	slow.Store(true)
	src.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		if slow.Load() {
			src.SleepControl(func() { time.Sleep(1500 * time.Millisecond) })
		}
		return nil, nil, false
	})
	t.Cleanup(func() { slow.Store(false) })
	cm, err := New(fwd)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	rep, err := cm.Cutover(ctx, CutoverOptions{Quiet: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "not caught up within the timeout") || strings.Contains(err.Error(), "deadline") {
		t.Fatalf("cutover out of time during a look: %v; want the gate's refusal (not caught up), not the request's error", err)
	}
	if rep.Fence != "" || rep.OK {
		t.Fatalf("cutover report %+v: want no fence", rep)
	}
}
