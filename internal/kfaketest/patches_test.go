package kfaketest_test

import (
	"context"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRequireStablePerPartition checks the vendored kfake's patch 4
// (third_party/kfake/PATCHES.md): while a transaction holds a pending
// offset commit for one partition of a group, OffsetFetch with
// RequireStable answers UNSTABLE_OFFSET_COMMIT for that partition only, as
// Kafka 4.3.1 does (docs/design/one-producer-per-worker.md, "Checked on
// Kafka 4.3.1"); published kfake answered it for every partition of the
// group.
func TestRequireStablePerPartition(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	const group, topic = "g", "slots"
	kfaketest.CreateTopic(t, c, topic, 2)
	kfaketest.CreateTopic(t, c, "data", 1)
	adm := kfaketest.Client(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	td, err := kadm.NewClient(adm).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	topicID := td[topic].ID

	// A member of the group, as the slots group's members would be: its
	// generation and member ID go into the commit.
	assigned := make(chan struct{}, 1)
	member := kfaketest.Client(t, c, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			select {
			case assigned <- struct{}{}:
			default:
			}
		}))
	pollCtx, stopPoll := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pollCtx.Err() == nil {
			member.PollFetches(pollCtx)
		}
	}()
	defer func() { stopPoll(); <-polled }()
	select {
	case <-assigned:
	case <-ctx.Done():
		t.Fatal("the member got no assignment")
	}
	memberID, generation := member.GroupMetadata()

	pr := kfaketest.Client(t, c, kgo.TransactionalID("w1"))
	if err := pr.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	// A record, so that franz-go ends the transaction with an EndTxn (it
	// sends none for a transaction it added no partition to).
	if err := pr.ProduceSync(ctx, &kgo.Record{Topic: "data", Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := pr.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "w1", pid, epoch, group
	if resp, err := add.RequestWith(ctx, pr); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = "w1", group, pid, epoch
	commit.Generation, commit.MemberID = generation, memberID
	md := "seq=1"
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic, ct.TopicID = topic, topicID
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.Metadata = 0, 0, &md
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	resp, err := commit.RequestWith(ctx, pr)
	if err != nil {
		t.Fatal(err)
	}
	if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(ec))
	}

	if got := fetchStable(t, ctx, adm, group, topic, topicID); got[0] != kerr.UnstableOffsetCommit.Code || got[1] != 0 {
		t.Fatalf("with the transaction open: partition 0 %v, partition 1 %v; want UNSTABLE_OFFSET_COMMIT and no error",
			kerr.ErrorForCode(got[0]), kerr.ErrorForCode(got[1]))
	}
	if err := pr.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := fetchStable(t, ctx, adm, group, topic, topicID); got[0] != 0 || got[1] != 0 {
		t.Fatalf("after the commit: partition 0 %v, partition 1 %v; want no errors", kerr.ErrorForCode(got[0]), kerr.ErrorForCode(got[1]))
	}
}

// fetchStable is OffsetFetch with RequireStable for partitions 0 and 1 of
// topic: each partition's error code.
func fetchStable(t *testing.T, ctx context.Context, cl *kgo.Client, group, topic string, topicID [16]byte) map[int32]int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = true
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.TopicID, gt.Partitions = topic, topicID, []int32{0, 1}
	g.Topics = append(g.Topics, gt)
	req.Groups = append(req.Groups, g)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version < 8 || len(resp.Groups) != 1 {
		t.Fatalf("OffsetFetch v%d with %d groups: want v8+ and one group", resp.Version, len(resp.Groups))
	}
	if ec := resp.Groups[0].ErrorCode; ec != 0 {
		t.Fatalf("OffsetFetch: %v", kerr.ErrorForCode(ec))
	}
	out := make(map[int32]int16)
	for _, rt := range resp.Groups[0].Topics {
		for _, p := range rt.Partitions {
			out[p.Partition] = p.ErrorCode
		}
	}
	if len(out) != 2 {
		t.Fatalf("OffsetFetch answered %v: want partitions 0 and 1", out)
	}
	return out
}
