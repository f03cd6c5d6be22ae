package data

import (
	"sync"
	"time"
)

// A partition's lag is the source's end (its last stable offset, as a
// fetch or a listing last gave it) minus what the target acknowledged. An
// end that could not be read since (the source down or frozen, a fetch or
// a listing refused) makes the lag unknown, not the figure last known:
// a source that stopped answering would otherwise show a lag of 0 while
// nothing is copied.

// Lag is the records the source committed that the target has not
// acknowledged (transaction markers count), 0 before the source's end was
// first read. unknownSince is when reading the end first failed since it
// was last read (zero: known); records is then the last known figure.
func (p *PartitionState) Lag() (records int64, unknownSince time.Time) {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	if p.t != nil {
		unknownSince = p.t.endUnread
	}
	return lagOf(p.Acked, p.End), unknownSince
}

func lagOf(acked, end int64) int64 {
	if end < 0 {
		return 0
	}
	if acked < 0 {
		return end
	}
	return max(0, end-acked)
}

// LearnEnd records end, just read from the source (a listing). p.Mu must
// be held.
func (p *PartitionState) LearnEnd(end int64) {
	p.End = max(p.End, end)
	p.endRead()
}

// fetchedEnd records the end a fetch response gave: its last stable
// offset, or its high watermark from a broker that gives none. p.Mu must
// be held.
func (p *PartitionState) fetchedEnd(lso, hw int64) {
	if lso > p.End {
		p.End = lso
	} else if hw > p.End && lso <= 0 {
		p.End = hw
	}
	p.endRead()
}

// endRead ends an unknown end. A partition's end is read at every fetch
// and listing while it being unknown is rare, so when it is, it is kept
// with the partition's other troubles. p.Mu must be held.
func (p *PartitionState) endRead() {
	if p.t != nil && !p.t.endUnread.IsZero() {
		p.t.endUnread = time.Time{}
		p.dropTroubleIfOver()
	}
}

// EndUnread records that the source's end could not be read at t. p.Mu
// must be held.
func (p *PartitionState) EndUnread(t time.Time) {
	if tr := p.trouble(); tr.endUnread.IsZero() {
		tr.endUnread = t
	}
}

// unreadEnds are the partitions whose fetch failed since the poll loop
// last looked: the batch path notes them under its own lock, which a
// partition's may not be taken under, and the poll loop marks them
// (applyUnreadEnds).
type unreadEnds struct {
	mu sync.Mutex
	at map[TopicPartition]time.Time
}

// endUnread notes that tp's fetch failed now.
func (c *Copier) endUnread(tp TopicPartition) {
	u := &c.unread
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.at == nil {
		u.at = make(map[TopicPartition]time.Time)
	}
	if _, ok := u.at[tp]; !ok {
		u.at[tp] = time.Now()
	}
}

// applyUnreadEnds marks the partitions whose fetch failed as having an
// unknown end. Called on the poll loop, before the fetched partitions are
// handled: a fetch that answered after the failure reads the end again.
func (c *Copier) applyUnreadEnds() {
	u := &c.unread
	u.mu.Lock()
	at := u.at
	u.at = nil
	u.mu.Unlock()
	for tp, t := range at {
		if ps := c.Partition(tp); ps != nil {
			ps.Mu.Lock()
			ps.EndUnread(t)
			ps.Mu.Unlock()
		}
	}
}
