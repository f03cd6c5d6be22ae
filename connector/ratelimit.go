package connector

import (
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/connector/throttle"
	"github.com/kmirror/kmirror/filters"
)

// RateLimits cap the bytes per second a mirror fetches from the source
// (mirrors[].rate_limit and topic_rate_limits): Mirror for all its topics
// together (0: none), Topics for single topics, the first rule a topic
// meets giving it a limit of its own. The data path holds its fetches to
// them (package throttle).
type RateLimits struct {
	Mirror int64
	Topics []TopicRateLimit
}

// TopicRateLimit gives each topic whose source name matches Match (nil:
// any) and that has every label in Labels a limit of BytesPerSecond.
type TopicRateLimit struct {
	Match          *regexp.Regexp
	Labels         map[string]string
	BytesPerSecond int64
}

// For returns the limit of topic with labels: the first rule it meets,
// or 0.
func (r RateLimits) For(topic string, labels map[string]string) int64 {
	for _, l := range r.Topics {
		if l.Match != nil && !l.Match.MatchString(topic) {
			continue
		}
		met := true
		for k, v := range l.Labels {
			if got, ok := labels[k]; !ok || got != v {
				met = false
				break
			}
		}
		if met {
			return l.BytesPerSecond
		}
	}
	return 0
}

// setRateTopics records what a pass selected (with labels) and applies
// the rate limits to it.
func (m *Mirror) setRateTopics(selected []filters.Topic) {
	m.mu.Lock()
	m.rateTopics = selected
	m.mu.Unlock()
	m.applyRateLimits()
}

// applyRateLimits gives the throttle the mirror's limit and the limit of
// each topic the last pass selected: after every pass, and at once on a
// reload (Reconfigure), with the new rules.
func (m *Mirror) applyRateLimits() {
	m.mu.Lock()
	topics := m.rateTopics
	m.mu.Unlock()
	rl := m.selection().RateLimits
	l := throttle.Limits{Mirror: rl.Mirror, Topics: make(map[string]int64)}
	for _, t := range topics {
		if r := rl.For(t.Name, t.Labels); r > 0 {
			l.Topics[t.Name] = r
		}
	}
	m.throttle.Set(l, time.Now())
}

// RateLimitStatus is a mirror's rate limits on one worker, in its status.
type RateLimitStatus struct {
	// BytesPerSecond is this worker's share of the mirror's rate_limit
	// (0: none; topics may still have limits of their own).
	BytesPerSecond int64 `json:"bytes_per_second"`
	// Throttled: a limit (the mirror's, or a topic's) holds fetches back
	// now: the mirror would copy faster without it.
	Throttled bool `json:"throttled"`
	// ThrottledSeconds is the time the mirror's limit held fetches back,
	// TopicThrottledSeconds the time topic limits did, summed over topics.
	ThrottledSeconds      float64 `json:"throttled_seconds"`
	TopicThrottledSeconds float64 `json:"topic_throttled_seconds"`
}

// rateLimitStatus is the status of the mirror's limits (nil without any),
// and marks the topics with a limit in topics.
func (m *Mirror) rateLimitStatus(topics []TopicStatus, now time.Time) *RateLimitStatus {
	st := m.throttle.Status(now)
	if st.Mirror == 0 && len(st.Topics) == 0 {
		return nil
	}
	mirrorHeld := st.Mirror > 0 && m.throttle.Delay(now) > 0
	for i := range topics {
		t := &topics[i]
		if ts, ok := st.Topics[t.SourceTopic]; ok {
			t.RateLimit = ts.Limit
			t.Throttled = m.throttle.TopicDelay(t.SourceTopic, now) > 0 && !mirrorHeld
		}
	}
	return &RateLimitStatus{BytesPerSecond: st.Mirror, Throttled: st.HeldNow,
		ThrottledSeconds: st.MirrorHeld.Seconds(), TopicThrottledSeconds: st.TopicsHeld.Seconds()}
}

// throttleCollector reports every mirror's throttle at scrape time: the
// limits in force and the seconds they held fetching back.
type throttleCollector struct {
	throttles byMirror[*throttle.Throttle]

	held, limit, topicLimit *prometheus.Desc
}

func newThrottleCollector() *throttleCollector {
	return &throttleCollector{
		held: prometheus.NewDesc("kmirror_throttled_seconds_total",
			"Seconds a rate limit held this worker's fetches from the source back: limit=\"mirror\" the mirror's rate_limit, limit=\"topic\" its topic_rate_limits, summed over the topics they held.",
			[]string{"mirror", "limit"}, nil),
		limit: prometheus.NewDesc("kmirror_rate_limit_bytes_per_second",
			"The mirror's rate_limit as this worker applies it: its share (the slots it owns over all slots) of the bytes per second fetched from the source; 0: no limit.",
			[]string{"mirror"}, nil),
		topicLimit: prometheus.NewDesc("kmirror_topic_rate_limit_bytes_per_second",
			"The bytes per second a topic may be fetched at (topic_rate_limits), for each selected topic that has a limit.",
			[]string{"mirror", "topic"}, nil),
	}
}

// watchThrottle adds a running mirror's throttle to the series, until
// the returned function is called.
func (m *Metrics) watchThrottle(mirror string, t *throttle.Throttle) (unwatch func()) {
	if m == nil {
		return func() {}
	}
	return m.throttles.throttles.add(mirror, t)
}

func (c *throttleCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.held
	ch <- c.limit
	ch <- c.topicLimit
}

func (c *throttleCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for mirror, t := range c.throttles.snapshot() {
		st := t.Status(now)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.CounterValue, st.MirrorHeld.Seconds(), mirror, "mirror")
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.CounterValue, st.TopicsHeld.Seconds(), mirror, "topic")
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(st.Mirror), mirror)
		for topic, ts := range st.Topics {
			ch <- prometheus.MustNewConstMetric(c.topicLimit, prometheus.GaugeValue, float64(ts.Limit), mirror, topic)
		}
	}
}
