package data

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kmirror/kmirror/connector/uncached"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ptMeta caches one cluster's leaders and topic IDs for the batch path. A
// topic keeps the first ID it was seen with until purge forgets it: like
// franz-go's own clients, the batch path never adopts the ID of a topic
// deleted and recreated under the same name, which would copy the new
// topic's records into the old one's target (or write into a new target
// topic the control plane has not vetted). The control plane notices the
// new ID and decides.
//
// Metadata is asked for many topics at once (refreshLeaders, up to
// ptMetaTopicsPerRequest a request): with 10,000 topics, one request per
// topic made the first fetch wait for 10,000 round trips, and the
// refreshes every ptMetaMaxAge kept a steady stream of them going at idle.
type ptMeta struct {
	// topics holds each topic's leaders, ID and age in one map entry: at
	// 10,000 topics on each of 16 slots, one map a field cost 54 MB.
	topics map[string]ptTopicMeta
	byID   map[[16]byte]string // the reverse of the IDs: responses name topics by ID (Fetch and Produce v13+)
}

// ptTopicMeta is what ptMeta knows of a topic.
type ptTopicMeta struct {
	// leaders holds the partition leaders by partition (-1: none
	// known): per topic rather than per partition, a tenth of the
	// memory at 10 partitions a topic.
	leaders []int32
	id      [16]byte
	at      int64 // when the leaders were read (Unix ns); 0: stale, read again
}

// errTopicRecreated is a partition's error while its topic's metadata
// holds another ID than the one the batch path started with.
var errTopicRecreated = errors.New("the topic was deleted and recreated (a new topic ID); waiting for the control plane")

// ptMetaTopicsPerRequest bounds a Metadata request's topics: a response
// for 1,000 topics of tens of partitions is a few hundred KB.
const ptMetaTopicsPerRequest = 1000

func (m *ptMeta) init() {
	m.topics, m.byID = make(map[string]ptTopicMeta), make(map[[16]byte]string)
}

// forget drops what m knows of topics.
func (m *ptMeta) forget(topics []string) {
	for _, t := range topics {
		if tm, ok := m.topics[t]; ok && m.byID[tm.id] == t {
			delete(m.byID, tm.id)
		}
		delete(m.topics, t)
	}
}

// markStale makes the next look at topic's leaders read them again (its
// ID stays). Called with p.mu held.
func (m *ptMeta) markStale(topic string) {
	if tm, ok := m.topics[topic]; ok {
		tm.at = 0
		m.topics[topic] = tm
	}
}

// fresh reports whether tm's leaders were read less than ptMetaMaxAge
// before now.
func (tm ptTopicMeta) fresh(now time.Time) bool {
	return tm.at != 0 && now.Sub(time.Unix(0, tm.at)) < ptMetaMaxAge
}

// id is topic's ID as first seen (zero: not known). Called with p.mu
// held.
func (m *ptMeta) id(topic string) [16]byte { return m.topics[topic].id }

// stale returns the topics of topics whose leaders are unknown or older
// than ptMetaMaxAge. Called with p.mu held.
func (m *ptMeta) stale(topics map[string]bool) []string {
	now := time.Now()
	var out []string
	for t := range topics {
		if !m.topics[t].fresh(now) {
			out = append(out, t)
		}
	}
	return out
}

// leader is tp's cached leader, -1 if none. Called with p.mu held.
func (m *ptMeta) leader(tp TopicPartition) int32 {
	ls := m.topics[tp.Topic].leaders
	if tp.Partition < 0 || int(tp.Partition) >= len(ls) {
		return -1
	}
	return ls[tp.Partition]
}

// forgetLeader drops tp's cached leader (an error fetching it). Called
// with p.mu held.
func (m *ptMeta) forgetLeader(tp TopicPartition) {
	if ls := m.topics[tp.Topic].leaders; tp.Partition >= 0 && int(tp.Partition) < len(ls) {
		ls[tp.Partition] = -1
	}
}

// cachedLeader returns a partition's leader when it is cached and fresh.
// Called with p.mu held.
func (m *ptMeta) cachedLeader(tp TopicPartition, now time.Time) (int32, bool) {
	leader := m.leader(tp)
	if leader < 0 || !m.topics[tp.Topic].fresh(now) {
		return -1, false
	}
	return leader, true
}

// leader returns a partition's leader from the cache, asking the cluster
// for its topic's metadata when unknown or older than ptMetaMaxAge.
func (p *passthrough) leader(ctx context.Context, cl *kgo.Client, m *ptMeta, tp TopicPartition) (int32, error) {
	p.mu.Lock()
	leader, ok := m.cachedLeader(tp, time.Now())
	p.mu.Unlock()
	if ok {
		return leader, nil
	}
	errs, err := p.refreshLeaders(ctx, cl, m, []string{tp.Topic})
	if err != nil {
		return -1, err
	}
	if err := errs[tp.Topic]; err != nil {
		return -1, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if leader = m.leader(tp); leader < 0 {
		return -1, fmt.Errorf("no leader for %s/%d", tp.Topic, tp.Partition)
	}
	return leader, nil
}

// refreshStale refreshes, in as few requests as it takes, the topics of
// topics whose leaders are unknown or stale, so that the leader calls of a
// round that follow find them cached. A topic the refresh fails for is
// asked for again, alone, by leader, which reports its error.
func (p *passthrough) refreshStale(ctx context.Context, cl *kgo.Client, m *ptMeta, topics map[string]bool) {
	p.mu.Lock()
	stale := m.stale(topics)
	p.mu.Unlock()
	if len(stale) > 1 {
		p.refreshLeaders(ctx, cl, m, stale) //nolint:errcheck // see above
	}
}

// refreshLeaders asks cl for the metadata of topics, ptMetaTopicsPerRequest
// at a time, and caches their leaders and IDs. It returns the topics'
// own errors (a topic missing from the response is one), and the first
// request error (the topics of that request are then not cached).
func (p *passthrough) refreshLeaders(ctx context.Context, cl *kgo.Client, m *ptMeta, topics []string) (map[string]error, error) {
	errs := make(map[string]error)
	var firstErr error
	for chunk := range slices.Chunk(topics, ptMetaTopicsPerRequest) {
		req := kmsg.NewPtrMetadataRequest()
		for _, topic := range chunk {
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, t)
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := req.RequestWith(rctx, uncached.Requestor(cl))
		cancel()
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		answered := make(map[string]bool, len(resp.Topics))
		now := time.Now()
		p.mu.Lock()
		for _, rt := range resp.Topics {
			if rt.Topic == nil {
				continue
			}
			topic := *rt.Topic
			answered[topic] = true
			if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
				errs[topic] = err
				continue
			}
			tm := m.topics[topic]
			if tm.id != ([16]byte{}) && tm.id != rt.TopicID {
				errs[topic] = fmt.Errorf("topic %s: %w", topic, errTopicRecreated)
				continue
			}
			tm.id, tm.at = rt.TopicID, now.UnixNano()
			m.byID[rt.TopicID] = topic
			var leaders []int32
			for _, rp := range rt.Partitions {
				if rp.Partition < 0 || rp.Partition >= 1<<20 {
					continue // not a partition number
				}
				for int(rp.Partition) >= len(leaders) {
					leaders = append(leaders, -1)
				}
				if rp.ErrorCode == 0 || rp.Leader >= 0 {
					leaders[rp.Partition] = rp.Leader
				}
			}
			tm.leaders = leaders
			m.topics[topic] = tm
		}
		p.mu.Unlock()
		for _, topic := range chunk {
			if !answered[topic] {
				errs[topic] = fmt.Errorf("topic %s missing from the metadata response", topic)
			}
		}
	}
	return errs, firstErr
}

func (p *passthrough) forgetLeaders(m *ptMeta, topic string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m.markStale(topic)
}

func (p *passthrough) topicID(m *ptMeta, topic string) [16]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return m.id(topic)
}

func (p *passthrough) topicByID(m *ptMeta, id [16]byte) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return m.byID[id]
}
