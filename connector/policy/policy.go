// Package policy names mirrored topics and recognises topics that must never
// be mirrored. It is a leaf package (standard library only) so that tools and
// plugin authors can import it cheaply, the way MM2's mirror-client is split
// from the connectors.
package policy

import (
	"fmt"
	"strings"
)

// ReplicationPolicy maps a source topic to its name on the target cluster and
// back. Implementations are pure and deterministic: they are called on every
// discovery pass.
type ReplicationPolicy interface {
	// FormatRemoteTopic returns the target-cluster name of topic mirrored
	// from the cluster sourceAlias.
	FormatRemoteTopic(sourceAlias, topic string) string
	// TopicSource returns the alias of the cluster topic was mirrored from,
	// or ok=false when the name does not say (a local topic, or a policy
	// like identity that keeps names unchanged).
	TopicSource(topic string) (alias string, ok bool)
	// UpstreamTopic returns the name topic had one hop upstream, or
	// ok=false when topic is not a mirrored name.
	UpstreamTopic(topic string) (upstream string, ok bool)
}

// Default is MM2's DefaultReplicationPolicy: "<source alias><separator><topic>".
type Default struct {
	// Separator goes between the source alias and the topic; "." if empty.
	Separator string
}

var _ ReplicationPolicy = Default{}

func (d Default) sep() string {
	if d.Separator == "" {
		return "."
	}
	return d.Separator
}

// FormatRemoteTopic implements ReplicationPolicy.
func (d Default) FormatRemoteTopic(sourceAlias, topic string) string {
	return sourceAlias + d.sep() + topic
}

// TopicSource implements ReplicationPolicy: the prefix before the first
// separator, when there is one.
func (d Default) TopicSource(topic string) (string, bool) {
	if _, ok := d.UpstreamTopic(topic); !ok {
		return "", false
	}
	return topic[:strings.Index(topic, d.sep())], true
}

// UpstreamTopic implements ReplicationPolicy: the name after the first separator.
func (d Default) UpstreamTopic(topic string) (string, bool) {
	i := strings.Index(topic, d.sep())
	if i <= 0 || i+len(d.sep()) >= len(topic) {
		return "", false
	}
	return topic[i+len(d.sep()):], true
}

// Identity keeps topic names unchanged (MM2's IdentityReplicationPolicy).
// Names carry no provenance, so cycles cannot be detected by name: an
// identity mirror in both directions between two clusters loops forever.
type Identity struct{}

var _ ReplicationPolicy = Identity{}

// FormatRemoteTopic implements ReplicationPolicy.
func (Identity) FormatRemoteTopic(_, topic string) string { return topic }

// TopicSource implements ReplicationPolicy; names never say where they came from.
func (Identity) TopicSource(string) (string, bool) { return "", false }

// UpstreamTopic implements ReplicationPolicy; names never change.
func (Identity) UpstreamTopic(string) (string, bool) { return "", false }

// New returns the policy for a config type name ("default" or "identity").
func New(typ, separator string) (ReplicationPolicy, error) {
	switch typ {
	case "", "default":
		return Default{Separator: separator}, nil
	case "identity":
		return Identity{}, nil
	default:
		return nil, fmt.Errorf("unknown replication policy type %q (want default or identity)", typ)
	}
}

// maxHops bounds the walk up a chain of mirrored names; a name longer than
// this many hops is treated as a cycle rather than walked forever.
const maxHops = 64

// IsCycle reports whether topic, seen on a source cluster, came from
// targetAlias: mirroring it would send it back where it came from. It walks
// the chain of upstream names (a.b.topic -> b.topic -> topic), as MM2's
// MirrorSourceConnector.isCycle does, and stops where the policy cannot say.
func IsCycle(p ReplicationPolicy, targetAlias, topic string) bool {
	for range maxHops {
		source, ok := p.TopicSource(topic)
		if !ok {
			return false
		}
		if source == targetAlias {
			return true
		}
		upstream, ok := p.UpstreamTopic(topic)
		if !ok || upstream == topic {
			return false
		}
		topic = upstream
	}
	return true
}

// InternalTopicPrefix starts the name of every topic kmirror itself keeps on
// a target cluster; IsInternalTopic rejects them so a chain A->B->C never
// copies B's bookkeeping to C.
const InternalTopicPrefix = "kmirror."

// InternalTopicSuffix ends the name of every topic kmirror keeps.
const InternalTopicSuffix = ".internal"

// InternalTopic returns the name of one of kmirror's own topics for a mirror,
// e.g. InternalTopic("east-to-west", "progress") = "kmirror.east-to-west.progress.internal".
func InternalTopic(mirror, kind string) string {
	return InternalTopicPrefix + mirror + "." + kind + InternalTopicSuffix
}

// IsInternalTopic reports whether topic must never be mirrored: Kafka's and
// other tools' internal topics (names starting with "__" or ".", or ending in
// ".internal" or "-internal", as MM2 decides) and kmirror's own topics.
func IsInternalTopic(topic string) bool {
	return strings.HasPrefix(topic, "__") ||
		strings.HasPrefix(topic, ".") ||
		strings.HasSuffix(topic, ".internal") ||
		strings.HasSuffix(topic, "-internal") ||
		(strings.HasPrefix(topic, InternalTopicPrefix) && strings.HasSuffix(topic, InternalTopicSuffix))
}
