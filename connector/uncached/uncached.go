// Package uncached sends metadata requests that bypass franz-go's
// metadata cache.
package uncached

import (
	"context"
	"errors"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

//
// franz-go keeps a copy of every topic that a client's own Metadata
// request, a kadm listing or a sharded request (ListOffsets) resolved, for
// its sharded requests, pruned only by later requests. At 100,000
// partitions that was ~100 MB that nothing here reads: the control plane's
// listings every pass, and the batch path's leader lookups. A request sent
// to a broker directly (kgo.Broker) is not cached.

// Requestor sends requests straight to one of cl's brokers: each in turn,
// in random order, until one answers (the seed brokers until cl has
// discovered the others), each retried on a connection error like the
// client's own requests. Its answer is the last broker's error when none
// does.
func Requestor(cl *kgo.Client) kmsg.Requestor { return brokerRequestor{cl} }

type brokerRequestor struct{ cl *kgo.Client }

func (r brokerRequestor) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	brokers := r.cl.DiscoveredBrokers()
	if len(brokers) == 0 {
		brokers = r.cl.SeedBrokers()
	}
	if len(brokers) == 0 {
		return nil, errors.New("no broker to ask")
	}
	rand.Shuffle(len(brokers), func(i, j int) { brokers[i], brokers[j] = brokers[j], brokers[i] })
	var err error
	for _, b := range brokers {
		var resp kmsg.Response
		if resp, err = b.RetriableRequest(ctx, req); err == nil || ctx.Err() != nil {
			return resp, err
		}
	}
	return nil, err
}

// ListTopics lists every topic of cl's cluster but its internal ones, as
// kadm's ListTopics does, without its cache and without the partitions'
// replica lists.
func ListTopics(ctx context.Context, cl *kgo.Client) (kadm.TopicDetails, error) {
	req := kmsg.NewPtrMetadataRequest() // no topics: all of them
	resp, err := req.RequestWith(ctx, Requestor(cl))
	if err != nil {
		return nil, err
	}
	tds := make(kadm.TopicDetails, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.IsInternal || t.Topic == nil {
			continue
		}
		err := kerr.ErrorForCode(t.ErrorCode)
		if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
			return nil, &kadm.AuthError{Err: err} // as kadm: not allowed to see a topic fails the listing
		}
		td := kadm.TopicDetail{Topic: *t.Topic, ID: t.TopicID, Partitions: make(kadm.PartitionDetails, len(t.Partitions)), IsInternal: t.IsInternal, Err: err}
		for _, p := range t.Partitions {
			// Not the replicas, ISR and offline replicas: nothing
			// reads them, and holding them kept the whole response
			// alive (24 MB at 100,000 partitions, each pass).
			td.Partitions[p.Partition] = kadm.PartitionDetail{
				Topic: td.Topic, Partition: p.Partition,
				Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Err: kerr.ErrorForCode(p.ErrorCode),
			}
		}
		tds[td.Topic] = td
	}
	return tds, nil
}
