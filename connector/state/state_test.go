package state_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/kmirror/kmirror/connector/state"
	"github.com/kmirror/kmirror/internal/kfaketest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEnsureCompactedJustCreated: a state topic just created is not listed
// again for its partition count (its creation's answer has it): a KRaft
// broker's listing may not know the topic for a moment after creating it,
// which failed a fresh mirror's first start. One that exists is listed.
func TestEnsureCompactedJustCreated(t *testing.T) {
	t.Parallel()
	_, dst := kfaketest.Clusters(t)
	adm := kadm.NewClient(kfaketest.Client(t, dst))
	ctx := context.Background()
	// The metadata listing does not know any topic yet, as a broker
	// whose metadata is catching up answers.
	var listings atomic.Int32
	dst.ControlKey(int16(kmsg.Metadata), func(r kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		req := r.(*kmsg.MetadataRequest)
		if len(req.Topics) == 0 {
			return nil, nil, false
		}
		listings.Add(1)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewMetadataResponseTopic()
			st.Topic = rt.Topic
			st.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	n, err := state.EnsureCompacted(ctx, adm, "kmirror.m.progress.internal", 7, -1)
	if err != nil || n != 7 {
		t.Fatalf("just created: %d partitions, %v; want 7 and no error", n, err)
	}
	if listings.Load() != 0 {
		t.Fatalf("a just created topic was listed %d times", listings.Load())
	}
	// It exists now: its count comes from a listing, which fails here
	// (an error, never a guess).
	if n, err := state.EnsureCompacted(ctx, adm, "kmirror.m.progress.internal", 3, -1); err == nil || listings.Load() == 0 {
		t.Fatalf("existing topic: %d partitions, %v after %d listings; want the listing's error", n, err, listings.Load())
	}
}
