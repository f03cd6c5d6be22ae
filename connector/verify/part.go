package verify

import (
	"bytes"
	"fmt"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
)

// part is one partition being compared: its ranges (set by plan before
// reading starts) and, under mu, what each side delivered and not yet
// compared.
type part struct {
	out     Partition
	pos     data.Position
	ix      *index.Partition
	samples int

	// runs are the index's runs clipped to [out.SourceFrom, out.SourceTo).
	runs []index.Run
	// Source records are read from SourceFrom up to srcEnd (the position,
	// or the source's last stable offset when that is lower); target
	// records from tRead up to at least the covered TargetTo, and on up
	// to tEnd (the target's last stable offset) while a gap's records
	// wait for their window (gaps.go).
	srcEnd, tRead, tEnd int64
	// skip: nothing to read (an empty range, or an error found planning).
	skip bool

	mu                 sync.Mutex
	srcQ               []*kgo.Record
	dstQ               []mapped
	srcBytes, dstBytes int
	srcDone, dstDone   bool
	srcNext, dstNext   int64 // the offset after the last record seen
	srcRun, dstRun     int   // cursors into runs
	srcPaused          bool
	dstPaused          bool
	srcRemoved         bool // no longer fetched
	dstRemoved         bool
	gaps               gaps
	finished           bool
}

// mapped is a target record with the source offset the index maps to it.
type mapped struct {
	r   *kgo.Record
	src int64
}

func (p *part) fail(format string, args ...any) {
	if p.out.Error == "" {
		p.out.Error = fmt.Sprintf(format, args...)
	}
	p.skip = true
}

func (p *part) note(d Difference) {
	if len(p.out.Differences) < p.samples {
		p.out.Differences = append(p.out.Differences, d)
	}
}

// plan sets the partition's ranges from the listed offsets (see the
// package comment).
func (p *part) plan(src, dst offsetsOf, since kadm.ListedOffsets) {
	st, tt, n := p.out.SourceTopic, p.out.TargetTopic, p.out.Partition
	p.out.SourceTo = p.pos.Next
	if absent, err := src.topicErr(st); absent {
		p.fail("the source topic %s does not exist: nothing to compare with", st)
		return
	} else if err != nil {
		p.fail("the source cannot describe topic %s: %v", st, err)
		return
	}
	if id := src.topics[st].ID.String(); p.pos.TopicID != "" && p.pos.TopicID != id {
		p.fail("the source topic %s was recreated since it was copied (topic ID %s, the stored position's %s)", st, id, p.pos.TopicID)
		return
	}
	start, err := src.lookup(src.start, st, n)
	if err != nil {
		p.fail("the source cannot list the log start of %s/%d: %v", st, n, err)
		return
	}
	end, err := src.lookup(src.end, st, n)
	if err != nil {
		p.fail("the source cannot list the end of %s/%d: %v", st, n, err)
		return
	}
	from := start
	if floor, ok := p.ix.Floor(); ok {
		from = max(from, floor.Src)
	}
	if o := p.ix.OldestSource(); o >= 0 {
		from = max(from, o)
	}
	if since != nil {
		s, err := src.lookup(since, st, n)
		if err != nil {
			p.fail("the source cannot list the --since offset of %s/%d: %v", st, n, err)
			return
		}
		from = max(from, s)
	}
	p.out.SourceFrom = min(from, p.pos.Next)
	p.srcEnd = min(p.pos.Next, end)
	for _, r := range p.ix.Runs() {
		lo, hi := max(r.Src, p.out.SourceFrom), min(r.SrcEnd(), p.out.SourceTo)
		if lo < hi {
			p.runs = append(p.runs, index.Run{Src: lo, Dst: r.Dst + lo - r.Src, N: hi - lo})
		}
	}
	if len(p.runs) > 0 {
		last := p.runs[len(p.runs)-1]
		p.out.TargetFrom, p.out.TargetTo = p.runs[0].Dst, last.Dst+last.N
	} else if to, err := p.ix.Translate(p.out.SourceFrom); err == nil {
		p.out.TargetFrom, p.out.TargetTo = to, to
	}
	p.srcNext, p.dstNext = p.out.SourceFrom, p.out.TargetFrom
	p.tRead = p.out.TargetFrom
	if absent, err := dst.topicErr(tt); err != nil {
		p.fail("the target cannot describe topic %s: %v", tt, err)
		return
	} else if absent {
		p.dstDone = true // an answer: every mapped record is missing
	} else {
		tstart, err := dst.lookup(dst.start, tt, n)
		if err != nil {
			p.fail("the target cannot list the log start of %s/%d: %v", tt, n, err)
			return
		}
		if p.tEnd, err = dst.lookup(dst.end, tt, n); err != nil {
			p.fail("the target cannot list the end of %s/%d: %v", tt, n, err)
			return
		}
		p.tRead = max(p.tRead, tstart)
		p.dstDone = p.tRead >= min(p.out.TargetTo, p.tEnd)
	}
	p.srcDone = p.out.SourceFrom >= p.srcEnd
	if p.srcDone && p.dstDone {
		p.merge()
		p.skip = true
	}
}

// Flow control: a side's queue of a partition beyond these is paused
// until the other side catches up.
const (
	maxQueued      = 8192
	maxQueuedBytes = 8 << 20
)

func recordBytes(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value) + 64
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// addSource takes source records (in offset order); pause says the
// partition should no longer be fetched from the source for now.
func (p *part) addSource(rs []*kgo.Record) (pause bool) {
	for _, r := range rs {
		if p.srcDone || r.Offset < p.srcNext {
			continue
		}
		if r.Offset >= p.srcEnd {
			p.srcDone = true
			break
		}
		p.srcNext = r.Offset + 1
		if !r.Attrs.IsControl() {
			p.srcQ = append(p.srcQ, r)
			p.srcBytes += recordBytes(r)
		}
		if p.srcNext >= p.srcEnd {
			p.srcDone = true
		}
	}
	p.merge()
	if !p.srcDone && !p.srcPaused && (len(p.srcQ) > maxQueued || p.srcBytes > maxQueuedBytes) {
		p.srcPaused = true
		return true
	}
	return false
}

// addTarget takes target records (in offset order).
func (p *part) addTarget(rs []*kgo.Record) (pause bool) {
	for _, r := range rs {
		if p.dstDone || r.Offset < p.dstNext {
			continue
		}
		if r.Offset >= p.tEnd {
			p.dstDone = true
			break
		}
		p.dstNext = r.Offset + 1
		if !r.Attrs.IsControl() {
			p.target(r)
		}
		if p.dstNext >= p.tEnd || (p.dstNext >= p.out.TargetTo && !p.gaps.open()) {
			p.dstDone = true
		}
	}
	p.merge()
	if !p.dstDone && !p.dstPaused && (len(p.dstQ) > maxQueued || p.dstBytes > maxQueuedBytes) {
		p.dstPaused = true
		return true
	}
	return false
}

// target sorts one target record: mapped by the index (queued for the
// comparison), in a gap of the covered range (an extra or a duplicate),
// or past the covered range (only a duplicate's window reads those).
func (p *part) target(r *kgo.Record) {
	for p.dstRun < len(p.runs) && p.runs[p.dstRun].Dst+p.runs[p.dstRun].N <= r.Offset {
		p.dstRun++
	}
	if p.dstRun < len(p.runs) && p.runs[p.dstRun].Dst <= r.Offset {
		p.gaps.follow(r, false)
		run := p.runs[p.dstRun]
		p.dstQ = append(p.dstQ, mapped{r: r, src: run.Src + r.Offset - run.Dst})
		p.dstBytes += recordBytes(r)
		return
	}
	inGap := r.Offset >= p.out.TargetFrom && r.Offset < p.out.TargetTo
	p.gaps.follow(r, inGap)
	if inGap {
		p.gaps.add(r)
	}
}

// srcMapping is the target offset the index maps source offset s to.
func (p *part) srcMapping(s int64) (int64, bool) {
	for p.srcRun < len(p.runs) && p.runs[p.srcRun].SrcEnd() <= s {
		p.srcRun++
	}
	if p.srcRun < len(p.runs) && p.runs[p.srcRun].Src <= s {
		run := p.runs[p.srcRun]
		return run.Dst + s - run.Src, true
	}
	return 0, false
}

// merge compares what both sides delivered as far as it can: source and
// mapped target records meet in source offset order.
func (p *part) merge() {
	for {
		if len(p.srcQ) > 0 {
			s := p.srcQ[0]
			d, ok := p.srcMapping(s.Offset)
			switch {
			case !ok:
				p.out.Missing++
				p.note(Difference{Kind: "missing", SourceOffset: s.Offset, TargetOffset: -1, Reason: "the offset index has no entry for this source record"})
				p.popSource()
				continue
			case len(p.dstQ) > 0:
				t := p.dstQ[0]
				switch {
				case t.src == s.Offset:
					if fields := compare(s, t.r); len(fields) == 0 {
						p.out.Matched++
					} else {
						p.out.Different++
						p.note(Difference{Kind: "different", SourceOffset: s.Offset, TargetOffset: t.r.Offset, Fields: fields})
					}
					p.popSource()
					p.popTarget()
				case t.src < s.Offset:
					// The source no longer has the record this
					// target record copied (compacted, or removed
					// by retention while reading): not comparable.
					p.popTarget()
				default:
					p.missing(s.Offset, d)
					p.popSource()
				}
				continue
			case p.dstDone:
				p.missing(s.Offset, d)
				p.popSource()
				continue
			}
			return
		}
		if p.srcDone && len(p.dstQ) > 0 {
			p.popTarget()
			continue
		}
		return
	}
}

func (p *part) missing(s, d int64) {
	p.out.Missing++
	p.note(Difference{Kind: "missing", SourceOffset: s, TargetOffset: d, Reason: "the target has no record at the offset the index names"})
}

func (p *part) popSource() {
	p.srcBytes -= recordBytes(p.srcQ[0])
	p.srcQ[0] = nil
	p.srcQ = p.srcQ[1:]
	if len(p.srcQ) == 0 {
		p.srcQ = nil // let the backing array go
	}
}

func (p *part) popTarget() {
	p.dstBytes -= recordBytes(p.dstQ[0].r)
	p.dstQ[0] = mapped{}
	p.dstQ = p.dstQ[1:]
	if len(p.dstQ) == 0 {
		p.dstQ = nil
	}
}

// complete reports whether both sides are read and compared; it then
// settles the gaps.
func (p *part) complete() bool {
	if !p.srcDone || !p.dstDone || len(p.srcQ) > 0 || len(p.dstQ) > 0 {
		return false
	}
	p.settle()
	return true
}

// settle counts what the gaps left (called once, when the partition ends
// or gives up).
func (p *part) settle() {
	if p.finished {
		return
	}
	p.finished = true
	for _, off := range p.gaps.close(&p.out.Counts) {
		p.note(Difference{Kind: "extra", SourceOffset: -1, TargetOffset: off, Reason: "no indexed source record maps to this target record, and it is no copy of the records after it"})
	}
	sortDifferences(p.out.Differences)
}

func sortDifferences(ds []Difference) {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		ka, kb := a.SourceOffset, b.SourceOffset
		if ka < 0 || kb < 0 {
			ka, kb = a.TargetOffset, b.TargetOffset
		}
		return ka < kb
	})
}

// compare returns the fields in which target record t differs from source
// record s.
func compare(s, t *kgo.Record) []string {
	var fields []string
	if !sameBytes(s.Key, t.Key) {
		fields = append(fields, "key")
	}
	if !sameBytes(s.Value, t.Value) {
		fields = append(fields, "value")
	}
	if !sameHeaders(s.Headers, t.Headers) {
		fields = append(fields, "headers")
	}
	if s.Timestamp.UnixMilli() != t.Timestamp.UnixMilli() {
		fields = append(fields, "timestamp")
	}
	if s.Attrs.TimestampType() != t.Attrs.TimestampType() {
		fields = append(fields, "timestamp_type")
	}
	return fields
}

// sameBytes: equal bytes, and null only where the other is null.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func sameHeaders(a, b []kgo.RecordHeader) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !sameBytes(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// Same reports whether target record t is a copy of source record s: the
// same key, value, headers, timestamp and timestamp type (what verify
// compares).
func Same(s, t *kgo.Record) bool { return len(compare(s, t)) == 0 }
