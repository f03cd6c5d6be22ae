package history

import (
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/kmirror/kmirror/connector"
)

func status(name string, lag *int64, topics ...connector.TopicStatus) connector.Status {
	return connector.Status{Name: name, Lag: lag, Topics: topics}
}

func topic(name string, copied int64, lag *int64) connector.TopicStatus {
	return connector.TopicStatus{SourceTopic: name, Copied: copied, Lag: lag}
}

func lagOf(p Point) string {
	if p.Lag == nil {
		return "unknown"
	}
	return fmt.Sprint(*p.Lag)
}

// TestSamplerMirror: a mirror's records per second come from two
// readings of its topics' copied records, its lag from the status (unknown
// kept unknown); the ring keeps the last MirrorPoints; a mirror gone from
// the statuses is forgotten.
func TestSamplerMirror(t *testing.T) {
	s := NewSampler(Options{Interval: 10 * time.Second, MirrorPoints: 3, TopicEvery: 1, TopicPoints: 2})
	t0 := time.Unix(1_700_000_000, 0)
	copied := []int64{0, 100, 300, 300, 1300, 1200}
	lags := []*int64{new(int64(5)), new(int64(7)), nil, new(int64(0)), new(int64(9)), new(int64(1))}
	for i := range copied {
		s.Sample(t0.Add(time.Duration(i)*10*time.Second), []connector.Status{
			status("m", lags[i], topic("a", copied[i]/2, nil), topic("b", copied[i]-copied[i]/2, nil)),
		})
	}
	got, ok := s.Mirror("m")
	if !ok {
		t.Fatal("no series for mirror m")
	}
	// Samples 3..5 (the first has no rate): 0/s, 100/s, and a partition
	// handed away (1300 -> 1200): 0/s, not negative.
	want := []string{"0/s lag 0", "100/s lag 9", "0/s lag 1"}
	if len(got.Points) != len(want) || got.IntervalSeconds != 10 {
		t.Fatalf("series %+v, want %d points every 10 s", got, len(want))
	}
	for i, p := range got.Points {
		if s := fmt.Sprintf("%g/s lag %s", p.RecordsPerSecond, lagOf(p)); s != want[i] {
			t.Errorf("point %d: %s, want %s", i, s, want[i])
		}
		if wantAt := t0.Add(time.Duration(i+3) * 10 * time.Second); !p.Time.Equal(wantAt) {
			t.Errorf("point %d at %v, want %v", i, p.Time, wantAt)
		}
	}
	s.Sample(t0.Add(time.Minute), []connector.Status{status("other", nil)})
	if _, ok := s.Mirror("m"); ok {
		t.Error("mirror m is still sampled after it left the statuses")
	}
	if names := s.Mirrors(); len(names) != 1 || names[0] != "other" {
		t.Errorf("mirrors %v, want [other]", names)
	}
}

// TestSamplerTopics: topics are sampled every TopicEvery-th sample; a
// topic's rate is over its own interval, an unknown lag stays unknown, a
// lag too large for the ring saturates, and a topic gone is forgotten.
func TestSamplerTopics(t *testing.T) {
	s := NewSampler(Options{Interval: 10 * time.Second, TopicEvery: 3, TopicPoints: 2})
	t0 := time.Unix(1_700_000_000, 0)
	sample := func(i int, ts ...connector.TopicStatus) {
		s.Sample(t0.Add(time.Duration(i)*10*time.Second), []connector.Status{status("m", nil, ts...)})
	}
	// Topic samples at i = 0, 3, 6, 9 (every 30 s).
	for i := range 10 {
		c := int64(i) * 600 // 60 records/s
		var lag *int64
		switch i {
		case 6:
			lag = nil
		case 9:
			lag = new(int64(math.MaxInt64))
		default:
			lag = new(int64(i))
		}
		sample(i, topic("a", c, lag), topic("b", 2*c, new(int64(1))))
	}
	got, ok := s.Topic("m", "a")
	if !ok {
		t.Fatal("no series for topic a")
	}
	// Two points kept (TopicPoints): the samples at 60 s and 90 s.
	want := []string{"60/s lag unknown", fmt.Sprintf("60/s lag %d", uint32(math.MaxUint32-1))}
	if len(got.Points) != 2 || got.IntervalSeconds != 30 {
		t.Fatalf("series %+v, want 2 points every 30 s", got)
	}
	for i, p := range got.Points {
		if s := fmt.Sprintf("%g/s lag %s", p.RecordsPerSecond, lagOf(p)); s != want[i] {
			t.Errorf("point %d: %s, want %s", i, s, want[i])
		}
	}
	if b, _ := s.Topic("m", "b"); len(b.Points) != 2 || b.Points[1].RecordsPerSecond != 120 {
		t.Errorf("topic b: %+v, want 2 points, the last at 120/s", b)
	}
	// A new topic has no point until its second sample; the topics are
	// sampled again at the 13th sample.
	for i := 10; i <= 12; i++ {
		sample(i, topic("a", 7200, nil), topic("c", 5, nil))
	}
	if c, ok := s.Topic("m", "c"); !ok || len(c.Points) != 0 {
		t.Errorf("topic c after its first sample: %+v, %v; want known, no points", c, ok)
	}
	if _, ok := s.Topic("m", "b"); ok {
		t.Error("topic b is still sampled after it left the status")
	}
	if _, ok := s.Topic("nope", "a"); ok {
		t.Error("a topic of an unknown mirror has a series")
	}
}

// TestTopicMemory measures what a full hour of 10,000 topics costs, the
// figure Sampler's comment gives, and bounds it at 8 MB.
func TestTopicMemory(t *testing.T) {
	const topics = 10_000
	ts := make([]connector.TopicStatus, topics)
	for i := range ts {
		ts[i] = topic(fmt.Sprintf("orders.region-%05d", i), 0, new(int64(0)))
	}
	sts := []connector.Status{status("m", new(int64(0)), ts...)}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := NewSampler(Options{})
	t0 := time.Unix(1_700_000_000, 0)
	for i := range (defaultTopicPoints + 1) * DefaultTopicEvery { // every ring full
		for j := range ts {
			ts[j].Copied += 10
		}
		s.Sample(t0.Add(time.Duration(i)*DefaultInterval), sts)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	used := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("an hour of %d topics: %.1f MB, %d bytes a topic", topics, float64(used)/1e6, used/topics)
	if got, _ := s.Topic("m", ts[0].SourceTopic); len(got.Points) != defaultTopicPoints {
		t.Fatalf("topic has %d points, want a full ring of %d", len(got.Points), defaultTopicPoints)
	}
	if used > 8e6 {
		t.Errorf("an hour of %d topics takes %d bytes, want at most 8 MB", topics, used)
	}
	runtime.KeepAlive(sts)
}
