package history

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/kmirror/kmirror/connector"
)

// Defaults: a mirror every 10 s, its topics every minute, each for an
// hour.
const (
	DefaultInterval    = 10 * time.Second
	DefaultTopicEvery  = 6
	DefaultMirrorSpan  = time.Hour
	defaultTopicPoints = 60
)

// Options size a Sampler. Zero values take the defaults.
type Options struct {
	// Interval is the time between two samples of the mirrors.
	Interval time.Duration
	// TopicEvery: the topics are sampled at every TopicEvery-th sample of
	// the mirrors (coarser: there are thousands of them).
	TopicEvery int
	// MirrorPoints and TopicPoints are the samples kept of each.
	MirrorPoints, TopicPoints int
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.TopicEvery <= 0 {
		o.TopicEvery = DefaultTopicEvery
	}
	if o.MirrorPoints <= 0 {
		o.MirrorPoints = int(DefaultMirrorSpan / o.Interval)
	}
	if o.TopicPoints <= 0 {
		o.TopicPoints = defaultTopicPoints
	}
	return o
}

// Point is one sample: the records copied per second since the previous
// sample and the lag (records) then, null when it was unknown.
type Point struct {
	Time             time.Time `json:"time"`
	RecordsPerSecond float64   `json:"records_per_second"`
	Lag              *int64    `json:"lag"`
}

// Series is a mirror's or a topic's samples, oldest first.
type Series struct {
	IntervalSeconds float64 `json:"interval_seconds"`
	Points          []Point `json:"points"`
}

// Sampler samples every mirror's and topic's copied records and lag.
//
// Memory: a mirror keeps MirrorPoints samples of 24 bytes (360 at 10 s
// for an hour: 8.6 KB). A topic keeps TopicPoints samples of 8 bytes (the
// records copied in the interval and the lag, each a saturating uint32)
// plus about 100 bytes of bookkeeping and its name: with the defaults
// (60 samples, one a minute) about 0.6 KB a topic, 6 MB for 10,000 topics
// (TestTopicMemory measures it).
type Sampler struct {
	opts Options

	mu      sync.Mutex
	samples int // of the mirrors, so far
	// topicTimes are the Unix times (ms) of the topics' samples; one
	// more than TopicPoints, so that each kept sample has the start of
	// its interval.
	topicTimes Ring[int64]
	mirrors    map[string]*mirrorHist
}

type mirrorHist struct {
	points     Ring[mirrorPoint]
	lastCopied int64
	lastAt     int64 // Unix ms; 0 before the first sample
	topics     map[string]*topicHist
}

type mirrorPoint struct {
	at       int64 // Unix ms
	lag      int64
	rps      float32
	lagKnown bool
}

type topicHist struct {
	lastCopied int64
	seen       int // the sample that last saw the topic
	points     Ring[topicPoint]
}

// topicPoint is a topic's sample: records copied since the previous one
// and the lag, saturated at math.MaxUint32-1; a lag of lagUnknown is
// unknown.
type topicPoint struct {
	records, lag uint32
}

const lagUnknown = math.MaxUint32

func saturate(n int64) uint32 {
	return uint32(min(max(n, 0), math.MaxUint32-1))
}

// NewSampler returns an empty Sampler.
func NewSampler(o Options) *Sampler {
	o = o.withDefaults()
	return &Sampler{opts: o, topicTimes: NewRing[int64](o.TopicPoints + 1), mirrors: map[string]*mirrorHist{}}
}

// Interval is the time between two samples of the mirrors.
func (s *Sampler) Interval() time.Duration { return s.opts.Interval }

// Run samples statuses at once and then every Interval until ctx ends.
func (s *Sampler) Run(ctx context.Context, statuses func() []connector.Status) {
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		s.Sample(time.Now(), statuses())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample adds one sample of sts, taken at now. Mirrors and topics no
// longer in sts are forgotten.
func (s *Sampler) Sample(now time.Time, sts []connector.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := now.UnixMilli()
	topicTick := s.samples%s.opts.TopicEvery == 0
	s.samples++
	if topicTick {
		s.topicTimes.Push(at)
	}
	seen := make(map[string]bool, len(sts))
	for _, st := range sts {
		seen[st.Name] = true
		m := s.mirrors[st.Name]
		if m == nil {
			m = &mirrorHist{points: NewRing[mirrorPoint](s.opts.MirrorPoints), topics: map[string]*topicHist{}}
			s.mirrors[st.Name] = m
		}
		var copied int64
		for _, t := range st.Topics {
			copied += t.Copied
		}
		if m.lastAt != 0 && at > m.lastAt {
			// Copied counts this worker's partitions: one handed to
			// another worker takes its count along, never below 0.
			rps := float32(max(0, copied-m.lastCopied)) / (float32(at-m.lastAt) / 1000)
			p := mirrorPoint{at: at, rps: rps, lagKnown: st.Lag != nil}
			if st.Lag != nil {
				p.lag = *st.Lag
			}
			m.points.Push(p)
		}
		m.lastCopied, m.lastAt = copied, at
		if topicTick {
			s.sampleTopics(m, st.Topics)
		}
	}
	for name := range s.mirrors {
		if !seen[name] {
			delete(s.mirrors, name)
		}
	}
}

// sampleTopics adds a sample of each topic; a topic seen for the first
// time gets its first at the next tick (a rate needs two readings).
func (s *Sampler) sampleTopics(m *mirrorHist, ts []connector.TopicStatus) {
	tick := s.samples
	for _, t := range ts {
		h := m.topics[t.SourceTopic]
		if h == nil {
			m.topics[t.SourceTopic] = &topicHist{lastCopied: t.Copied, seen: tick, points: NewRing[topicPoint](s.opts.TopicPoints)}
			continue
		}
		p := topicPoint{records: saturate(t.Copied - h.lastCopied), lag: lagUnknown}
		if t.Lag != nil {
			p.lag = saturate(*t.Lag)
		}
		h.points.Push(p)
		h.lastCopied, h.seen = t.Copied, tick
	}
	for name, h := range m.topics {
		if h.seen != tick {
			delete(m.topics, name)
		}
	}
}

// Mirror returns a mirror's samples, false when it has none.
func (s *Sampler) Mirror(name string) (Series, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.mirrors[name]
	if m == nil {
		return Series{}, false
	}
	out := Series{IntervalSeconds: s.opts.Interval.Seconds(), Points: make([]Point, 0, m.points.Len())}
	for _, p := range m.points.Values() {
		pt := Point{Time: time.UnixMilli(p.at), RecordsPerSecond: float64(p.rps)}
		if p.lagKnown {
			pt.Lag = &p.lag
		}
		out.Points = append(out.Points, pt)
	}
	return out, true
}

// Mirrors returns the names of the mirrors sampled.
func (s *Sampler) Mirrors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.mirrors))
	for name := range s.mirrors {
		out = append(out, name)
	}
	return out
}

// Topic returns a topic's samples, false when it has none.
func (s *Sampler) Topic(mirror, topic string) (Series, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.mirrors[mirror]
	if m == nil {
		return Series{}, false
	}
	h := m.topics[topic]
	if h == nil {
		return Series{}, false
	}
	times := s.topicTimes.Values()
	pts := h.points.Values()
	out := Series{IntervalSeconds: s.opts.Interval.Seconds() * float64(s.opts.TopicEvery), Points: make([]Point, 0, len(pts))}
	// The topic's samples are its last ones, at the last times; each
	// one's interval began at the time before.
	off := len(times) - len(pts)
	for i, p := range pts {
		end, start := times[off+i], times[off+i-1]
		pt := Point{Time: time.UnixMilli(end)}
		if end > start {
			pt.RecordsPerSecond = float64(p.records) / (float64(end-start) / 1000)
		}
		if p.lag != lagUnknown {
			lag := int64(p.lag)
			pt.Lag = &lag
		}
		out.Points = append(out.Points, pt)
	}
	return out, true
}
