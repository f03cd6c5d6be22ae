// Package listeners is the contract for code that wants to know when the
// mirrored set changes: a topic starts or stops being mirrored, changes
// partitions, metadata or state, or a consumer group joins or leaves the
// translated set. It depends on the standard library only, so plugin
// authors import it cheaply.
//
// KIP-918 proposed TopicListener/GroupListener for MirrorMaker 2; its patch
// called listeners synchronously on every refresh, with no initial state and
// no diff. Here every call carries the full current state, the diff since
// the previous call to the same listener, and a sequence number, and the
// first call after a (re)start carries everything as added. Callers deliver
// asynchronously and coalesce: a listener that was slow or down gets one
// call with the latest state and a diff covering everything it missed.
package listeners

import "context"

// Topic is one mirrored topic: its name upstream (on the source) and
// downstream (on the target), with what the mirror knows about it.
type Topic struct {
	// Upstream is the source topic's name.
	Upstream string
	// Downstream is the target topic's name.
	Downstream string
	// Partitions is the source partition count.
	Partitions int32
	// State is "pending", "mirroring" or "failed".
	State string
	// Metadata is the topic's kmirror metadata (provenance and labels).
	Metadata map[string]string
	// SourceGaps are the latest source gap of each partition that had
	// one: offsets the source deleted (retention) before they were
	// copied. A new gap makes the topic Changed. Sorted by partition.
	SourceGaps []SourceGap
	// Divergent are the divergent tails of a mirror that copies back
	// after a failover (kmirror failback): per partition, the records
	// of the target topic (the former source) that never reached the
	// former target, the data the failover lost. They are known from
	// the mirror's fence record when its worker starts, and a change
	// makes the topic Changed. Sorted by partition; nil on any other
	// mirror.
	Divergent []DivergentTail
}

// DivergentTail is one partition's divergent tail: offsets [From, To) of
// the target partition (To - From of them) that the former target never
// got. They stay where they are on the target, below every record copied
// back.
type DivergentTail struct {
	Partition int32
	From, To  int64
}

// SourceGap is a range of a source partition's offsets deleted at the
// source before the mirror copied them: From is the next offset it
// wanted, To the log start it found (exclusive), To - From the offsets
// lost (on a compacted or transactional topic not every offset was a
// record). Failed: the partition stopped before the gap
// (on_source_gap: fail, and the topic's State is "failed"); else copying
// went on at To.
type SourceGap struct {
	Partition int32
	From, To  int64
	Failed    bool
}

// TopicsChange is one delivery to a TopicListener.
type TopicsChange struct {
	// Mirror is the mirror whose set changed.
	Mirror string
	// Sequence increases by one with every call to this listener; a
	// restarted plugin sees it continue. A gap never happens: coalesced
	// states are folded into one call, not skipped.
	Sequence uint64
	// Topics is the complete current set, sorted by Upstream.
	Topics []Topic
	// Added, Removed and Changed are the diff against the state handed to
	// this listener in its previous call (on the first call, every topic
	// is Added). Changed holds the new version of each changed topic.
	Added   []Topic
	Removed []Topic
	Changed []Topic
}

// TopicListener is told whenever a mirror's topic set changes.
type TopicListener interface {
	// TopicsChanged is called once with the current state at start, then
	// whenever something changed. An error makes the caller retry the
	// same (or a newer, coalesced) change with backoff.
	TopicsChanged(ctx context.Context, c TopicsChange) error
}

// Group is one consumer group whose offsets the mirror translates.
type Group struct {
	// Name is the group ID.
	Name string
	// Topics are the mirrored source topics the group has offsets on.
	Topics []string
}

// GroupsChange is one delivery to a GroupListener.
type GroupsChange struct {
	Mirror   string
	Sequence uint64
	// Groups is the complete current set, sorted by Name.
	Groups []Group
	// Added and Removed are the diff since this listener's previous call.
	Added   []Group
	Removed []Group
}

// GroupListener is told whenever a mirror's translated group set changes.
type GroupListener interface {
	GroupsChanged(ctx context.Context, c GroupsChange) error
}

// Configurer is implemented by listeners that take configuration; the
// caller calls Configure once before the first delivery with the map from
// the config file (listeners.<name>.config).
type Configurer interface {
	Configure(ctx context.Context, config map[string]string) error
}

// Closer is implemented by listeners that hold resources; the caller calls
// Close once on shutdown, after the last delivery.
type Closer interface {
	Close() error
}
