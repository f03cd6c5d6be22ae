package chaos

import (
	"fmt"
	"strings"
)

// Record is a record of a partition as the checker sees it: its value
// (unique at the source: the soak's producer never writes a value twice)
// and its offset.
type Record struct {
	Value  string
	Offset int64
}

// PartitionCheck is what the checker found in one partition.
type PartitionCheck struct {
	Topic     string // the source topic
	Partition int32
	Source    int // records at the source
	Target    int // records on the target (copies, duplicates included)
	// Missing: source records without a copy; Duplicates: copies beyond
	// the first; Extra: target records that are no source record.
	Missing, Duplicates, Extra int
	// Details name offsets: the first missing record, the first
	// duplicate, the first copy out of order, the first place the
	// target differs from the source.
	Details []string
	// OutOfOrder: a first copy came after the first copy of a record
	// that follows it at the source.
	OutOfOrder bool
	// Exact: the target is the source, record for record.
	Exact bool
}

// Failed reports whether the partition breaks the delivery guarantee:
// exactly once (the target is the source), or at least once (nothing
// missing, nothing foreign, first copies in the source's order;
// duplicates are only counted).
func (c PartitionCheck) Failed(exactlyOnce bool) bool {
	if exactlyOnce {
		return !c.Exact
	}
	return c.Missing > 0 || c.Extra > 0 || c.OutOfOrder
}

// CheckPartition compares a target partition with its source partition.
func CheckPartition(topic string, partition int32, src, dst []Record) PartitionCheck {
	c := PartitionCheck{Topic: topic, Partition: partition, Source: len(src), Target: len(dst)}
	pos := make(map[string]int, len(src))
	for i, r := range src {
		if _, ok := pos[r.Value]; !ok {
			pos[r.Value] = i
		}
	}
	copies := make(map[string]int, len(dst))
	last := -1
	for _, r := range dst {
		i, ok := pos[r.Value]
		if !ok {
			if c.Extra == 0 {
				c.Details = append(c.Details, fmt.Sprintf("target offset %d holds %q, no source record", r.Offset, r.Value))
			}
			c.Extra++
			continue
		}
		copies[r.Value]++
		if copies[r.Value] > 1 {
			if c.Duplicates == 0 {
				c.Details = append(c.Details, fmt.Sprintf("target offset %d is a second copy of source offset %d (%q)", r.Offset, src[i].Offset, r.Value))
			}
			c.Duplicates++
			continue
		}
		if i < last && !c.OutOfOrder {
			c.OutOfOrder = true
			c.Details = append(c.Details, fmt.Sprintf("target offset %d holds source offset %d (%q), first copied after source offset %d", r.Offset, src[i].Offset, r.Value, src[last].Offset))
		}
		last = max(last, i)
	}
	for _, r := range src {
		if copies[r.Value] == 0 {
			if c.Missing == 0 {
				c.Details = append(c.Details, fmt.Sprintf("source offset %d (%q) is not on the target", r.Offset, r.Value))
			}
			c.Missing++
		}
	}
	c.Exact = len(src) == len(dst)
	for i := 0; c.Exact && i < len(src); i++ {
		c.Exact = src[i].Value == dst[i].Value
	}
	if !c.Exact && len(c.Details) == 0 {
		i := 0
		for i < len(src) && i < len(dst) && src[i].Value == dst[i].Value {
			i++
		}
		c.Details = append(c.Details, fmt.Sprintf("the target differs from record %d on", i))
	}
	return c
}

// CopyCheck sums the partitions' checks.
type CopyCheck struct {
	Partitions                                             []PartitionCheck
	Source, Target, Missing, Duplicates, Extra, OutOfOrder int
	Failed                                                 []PartitionCheck
}

// Check checks every partition, exactly once or at least once.
func Check(exactlyOnce bool, parts ...PartitionCheck) CopyCheck {
	var c CopyCheck
	for _, p := range parts {
		c.Partitions = append(c.Partitions, p)
		c.Source += p.Source
		c.Target += p.Target
		c.Missing += p.Missing
		c.Duplicates += p.Duplicates
		c.Extra += p.Extra
		if p.OutOfOrder {
			c.OutOfOrder++
		}
		if p.Failed(exactlyOnce) {
			c.Failed = append(c.Failed, p)
		}
	}
	return c
}

// Problems describes the failed partitions, one line each.
func (c CopyCheck) Problems() string {
	var b strings.Builder
	for _, p := range c.Failed {
		fmt.Fprintf(&b, "%s/%d: %d source records, %d on the target: %d missing, %d duplicates, %d foreign, out of order %v: %s\n",
			p.Topic, p.Partition, p.Source, p.Target, p.Missing, p.Duplicates, p.Extra, p.OutOfOrder, strings.Join(p.Details, "; "))
	}
	return b.String()
}
