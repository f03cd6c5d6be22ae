package data

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kmirror/kmirror/connector/uncached"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaderCache caches one cluster's partition leaders and topic IDs for
// the batch paths of a worker's copiers: every slot's copier asks about
// the same topics, and 16 caches (with their Metadata responses) cost
// 58 MB at 100,000 partitions where one costs 4, and asked the brokers 16
// times as often.
//
// Metadata is asked for many topics at once (refreshLeaders, up to
// ptMetaTopicsPerRequest a request): with 10,000 topics, one request per
// topic made the first fetch wait for 10,000 round trips, and the
// refreshes every ptMetaMaxAge kept a steady stream of them going at idle.
type LeaderCache struct {
	mu sync.Mutex
	// topics holds each topic's leaders, ID and age in one map entry
	// (one map a field cost several times the memory).
	topics map[string]ptTopicMeta
	// byID is the reverse of the IDs, every ID a topic had: responses
	// name topics by ID (Fetch and Produce v13+), and a batch path may
	// still use a recreated topic's old one.
	byID map[[16]byte]string
}

// NewLeaderCache returns an empty cache.
func NewLeaderCache() *LeaderCache {
	return &LeaderCache{topics: make(map[string]ptTopicMeta), byID: make(map[[16]byte]string)}
}

// ptMeta is one batch path's view of a cluster's LeaderCache. A topic
// keeps the ID this batch path first saw it with (pins) until purge
// forgets it: like franz-go's own clients, the batch path never adopts the
// ID of a topic deleted and recreated under the same name, which would
// copy the new topic's records into the old one's target (or write into a
// new target topic the control plane has not vetted). The control plane
// notices the new ID and decides. The cache itself follows the cluster;
// a leader is used only while the cache's ID is the pinned one.
//
// Its methods are called with the passthrough's mu held (which guards
// pins); they lock the cache inside.
type ptMeta struct {
	cache *LeaderCache
	pins  map[string][16]byte
}

// ptTopicMeta is what a LeaderCache knows of a topic.
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

// init makes m a view of cache, of a new one when cache is nil.
func (m *ptMeta) init(cache *LeaderCache) {
	if cache == nil {
		cache = NewLeaderCache()
	}
	m.cache, m.pins = cache, make(map[string][16]byte)
}

// forget drops the pins of topics and makes their leaders read again: a
// topic added again is met with the ID it has then.
func (m *ptMeta) forget(topics []string) {
	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	for _, t := range topics {
		delete(m.pins, t)
		m.cache.markStaleLocked(t)
	}
}

// markStale makes the next look at topic's leaders read them again.
func (m *ptMeta) markStale(topic string) {
	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	m.cache.markStaleLocked(topic)
}

func (c *LeaderCache) markStaleLocked(topic string) {
	if tm, ok := c.topics[topic]; ok {
		tm.at = 0
		c.topics[topic] = tm
	}
}

// fresh reports whether tm's leaders were read less than ptMetaMaxAge
// before now.
func (tm ptTopicMeta) fresh(now time.Time) bool {
	return tm.at != 0 && now.Sub(time.Unix(0, tm.at)) < ptMetaMaxAge
}

// id is topic's ID as this batch path first saw it (zero: not known).
func (m *ptMeta) id(topic string) [16]byte { return m.pins[topic] }

// current returns the cache's entry for topic if its ID is the one this
// batch path pinned. With none pinned, a fresh entry's ID is pinned (as a
// refresh would have); a stale one is read again first. m.cache.mu is
// held.
func (m *ptMeta) current(topic string) (ptTopicMeta, bool) {
	tm, ok := m.cache.topics[topic]
	if !ok {
		return tm, false
	}
	pin, pinned := m.pins[topic]
	if !pinned {
		if !tm.fresh(time.Now()) {
			return tm, false
		}
		if tm.id != ([16]byte{}) {
			m.pins[topic] = tm.id
		}
		return tm, true
	}
	return tm, pin == tm.id
}

// stale returns the topics of topics whose leaders are unknown or older
// than ptMetaMaxAge, or belong to another ID than the pinned one.
func (m *ptMeta) stale(topics map[string]bool) []string {
	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	now := time.Now()
	var out []string
	for t := range topics {
		if tm, ok := m.current(t); !ok || !tm.fresh(now) {
			out = append(out, t)
		}
	}
	return out
}

// leader is tp's cached leader, -1 if none (or the topic's ID is not the
// pinned one).
func (m *ptMeta) leader(tp TopicPartition) int32 {
	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	tm, ok := m.current(tp.Topic)
	return leaderOf(tm, ok, tp)
}

func leaderOf(tm ptTopicMeta, ok bool, tp TopicPartition) int32 {
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(tm.leaders) {
		return -1
	}
	return tm.leaders[tp.Partition]
}

// forgetLeader drops tp's cached leader (an error fetching it).
func (m *ptMeta) forgetLeader(tp TopicPartition) {
	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	if ls := m.cache.topics[tp.Topic].leaders; tp.Partition >= 0 && int(tp.Partition) < len(ls) {
		ls[tp.Partition] = -1
	}
}

// cachedLeader returns a partition's leader when it is cached and fresh.
func (m *ptMeta) cachedLeader(tp TopicPartition, now time.Time) (int32, bool) {
	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	tm, ok := m.current(tp.Topic)
	leader := leaderOf(tm, ok, tp)
	if leader < 0 || !tm.fresh(now) {
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
		answered := make(map[string][16]byte, len(resp.Topics))
		now := time.Now()
		m.cache.mu.Lock()
		for _, rt := range resp.Topics {
			if rt.Topic == nil {
				continue
			}
			topic := *rt.Topic
			if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
				errs[topic] = err
				continue
			}
			answered[topic] = rt.TopicID
			tm := ptTopicMeta{id: rt.TopicID, at: now.UnixNano()}
			m.cache.byID[rt.TopicID] = topic
			for _, rp := range rt.Partitions {
				if rp.Partition < 0 || rp.Partition >= 1<<20 {
					continue // not a partition number
				}
				for int(rp.Partition) >= len(tm.leaders) {
					tm.leaders = append(tm.leaders, -1)
				}
				if rp.ErrorCode == 0 || rp.Leader >= 0 {
					tm.leaders[rp.Partition] = rp.Leader
				}
			}
			m.cache.topics[topic] = tm
		}
		m.cache.mu.Unlock()
		p.mu.Lock()
		for topic, id := range answered {
			switch pin, pinned := m.pins[topic]; {
			case !pinned:
				m.pins[topic] = id
			case pin != id:
				errs[topic] = fmt.Errorf("topic %s: %w", topic, errTopicRecreated)
			}
		}
		p.mu.Unlock()
		for _, topic := range chunk {
			if _, ok := answered[topic]; !ok && errs[topic] == nil {
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
	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	return m.cache.byID[id]
}
