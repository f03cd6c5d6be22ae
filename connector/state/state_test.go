package state_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector/state"
	"github.com/kmirror/kmirror/internal/kfaketest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEnsureCompactedJustCreated: a state topic just created, or that the
// controller says exists, is listed again until the broker knows it (a
// KRaft broker's listing lags its controller for a moment, which failed
// every fresh mirror's first start with UNKNOWN_TOPIC_OR_PARTITION). One
// just created that is still not listed after ListWait has the count its
// creation answered; one that existed is an error (never a guess), which
// NotListedYet recognises.
func TestEnsureCompactedJustCreated(t *testing.T) {
	// Not parallel: it shortens state.ListWait.
	defer func(w time.Duration) { state.ListWait = w }(state.ListWait)
	state.ListWait = 300 * time.Millisecond
	_, dst := kfaketest.Clusters(t)
	adm := kadm.NewClient(kfaketest.Client(t, dst))
	ctx := context.Background()
	// The metadata listing does not know any topic for its first
	// `hidden` answers, as a broker whose metadata is catching up answers.
	var listings, hidden atomic.Int32
	dst.ControlKey(int16(kmsg.Metadata), func(r kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		req := r.(*kmsg.MetadataRequest)
		if len(req.Topics) == 0 || listings.Add(1) > hidden.Load() {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewMetadataResponseTopic()
			st.Topic = rt.Topic
			st.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	hidden.Store(3)
	n, err := state.EnsureCompacted(ctx, adm, "kmirror.m.progress.internal", 7, -1)
	if err != nil || n != 7 || listings.Load() != 4 {
		t.Fatalf("just created, hidden from 3 listings: %d partitions, %v after %d listings; want 7, no error, 4 listings", n, err, listings.Load())
	}

	listings.Store(0)
	hidden.Store(1 << 30)
	n, err = state.EnsureCompacted(ctx, adm, "kmirror.m.metadata.internal", 5, -1)
	if err != nil || n != 5 || listings.Load() < 2 {
		t.Fatalf("just created, never listed: %d partitions, %v after %d listings; want the creation's 5, no error, listed again", n, err, listings.Load())
	}
	// It exists now: its count comes from a listing, which fails here.
	n, err = state.EnsureCompacted(ctx, adm, "kmirror.m.progress.internal", 3, -1)
	if err == nil || !state.NotListedYet(err) {
		t.Fatalf("existing topic, never listed: %d partitions, %v; want an error NotListedYet recognises", n, err)
	}
}
