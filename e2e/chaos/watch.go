package chaos

import (
	"fmt"
	"sync"
	"time"
)

// Stalls measures, per partition, how long a partition with source records
// not yet on the target went without its copy advancing. The soak feeds it
// what its producer got acknowledged and what its reader of the target saw;
// times are passed in, so that it is tested without a clock. Safe for
// concurrent use.
//
// Two figures: the raw longest stall, and the longest outside outages
// (faults that stop copying by design: Fault.Outage). During an outage no
// partition stalls, and a stall starts again no earlier than its end: what
// is left is kmirror's own recovery, which the soak bounds.
type Stalls struct {
	mu      sync.Mutex
	parts   map[string]*stallPart
	outages int
	lastEnd time.Time // of the last outage
	Raw     Stall     // the longest stall
	Bounded Stall     // the longest stall outside outages
}

// Stall is one stall: the partition, when it began and how long it lasted.
type Stall struct {
	Partition string
	Began     time.Time
	Took      time.Duration
}

func (s Stall) String() string {
	if s.Partition == "" {
		return "none"
	}
	return fmt.Sprintf("%v (%s, from %s)", s.Took.Round(100*time.Millisecond), s.Partition, s.Began.Format("15:04:05.0"))
}

type stallPart struct {
	produced, copied int64     // highest sequence numbers; -1 none
	advanced         time.Time // the copy last advanced
	behindSince      time.Time // zero: not behind
}

// NewStalls returns an empty tracker.
func NewStalls() *Stalls { return &Stalls{parts: map[string]*stallPart{}} }

func (s *Stalls) part(p string, at time.Time) *stallPart {
	sp := s.parts[p]
	if sp == nil {
		sp = &stallPart{produced: -1, copied: -1, advanced: at}
		s.parts[p] = sp
	}
	return sp
}

// Produced: the source acknowledged the records of partition p up to seq.
func (s *Stalls) Produced(p string, seq int64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.part(p, at)
	if seq > sp.produced {
		sp.produced = seq
		if sp.copied < sp.produced && sp.behindSince.IsZero() {
			sp.behindSince = at
		}
	}
}

// Copied: the target holds the records of p up to seq.
func (s *Stalls) Copied(p string, seq int64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.part(p, at)
	if seq > sp.copied {
		s.sampleLocked(at)
		sp.copied, sp.advanced = seq, at
		if sp.copied >= sp.produced {
			sp.behindSince = time.Time{}
		}
	}
}

// OutageBegin and OutageEnd bracket a fault that stops copying by design.
func (s *Stalls) OutageBegin(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sampleLocked(at)
	s.outages++
}

func (s *Stalls) OutageEnd(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sampleLocked(at)
	s.outages--
	s.lastEnd = at
}

// Sample measures every partition's stall at time at; call it often (the
// longest stall is known to within the sampling period).
func (s *Stalls) Sample(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sampleLocked(at)
}

func (s *Stalls) sampleLocked(at time.Time) {
	for name, sp := range s.parts {
		if sp.behindSince.IsZero() {
			continue
		}
		began := sp.behindSince
		if sp.advanced.After(began) {
			began = sp.advanced
		}
		if d := at.Sub(began); d > s.Raw.Took {
			s.Raw = Stall{name, began, d}
		}
		if s.outages > 0 {
			continue
		}
		if s.lastEnd.After(began) {
			began = s.lastEnd
		}
		if d := at.Sub(began); d > s.Bounded.Took {
			s.Bounded = Stall{name, began, d}
		}
	}
}

// Longest returns the raw and the bounded longest stall.
func (s *Stalls) Longest() (raw, bounded Stall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Raw, s.Bounded
}

// Takeovers measures, after each membership fault, how long until every
// slot was owned again: the first sample of the slots that began after the
// fault and found them covered. Safe for concurrent use.
type Takeovers struct {
	mu      sync.Mutex
	pending []takeover
	done    []Takeover
}

type takeover struct {
	at   time.Time
	what string
}

// Takeover is one fault's takeover time.
type Takeover struct {
	What string
	Took time.Duration
}

// Fault notes a membership fault at time at.
func (t *Takeovers) Fault(at time.Time, what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = append(t.pending, takeover{at, what})
}

// Covered: a sample of the workers' slots begun at began and ended at
// ended found every slot owned once.
func (t *Takeovers) Covered(began, ended time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	keep := t.pending[:0]
	for _, p := range t.pending {
		if p.at.Before(began) {
			t.done = append(t.done, Takeover{p.what, ended.Sub(p.at)})
			continue
		}
		keep = append(keep, p)
	}
	t.pending = keep
}

// Result returns the takeovers measured, the longest, and the faults still
// waiting for theirs.
func (t *Takeovers) Result() (all []Takeover, longest Takeover, pending []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range t.done {
		if d.Took > longest.Took {
			longest = d
		}
	}
	for _, p := range t.pending {
		pending = append(pending, p.what)
	}
	return append([]Takeover(nil), t.done...), longest, pending
}
