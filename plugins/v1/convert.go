package v1

import (
	"fmt"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
	"github.com/kmirror/kmirror/plugins/v1/internal/pb"
)

// Conversion between the Go contract types and protocol v1 messages, after
// terraform-plugin-go's toproto/fromproto: every function accepts the zero
// value (toproto) or a nil message (fromproto). Empty repeated and map fields
// come back as nil: protobuf does not tell nil from empty, and neither does
// the contract. Maps are shared, not copied: a message lives only for one
// call.

func nilIfEmpty[M ~map[K]V, K comparable, V any](m M) M {
	if len(m) == 0 {
		return nil
	}
	return m
}

func nilIfEmptySlice[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

// --- PluginInfo ---

var capabilityToProtoMap = map[Capability]pb.Capability{
	CapabilityTopicFilter:   pb.Capability_CAPABILITY_TOPIC_FILTER,
	CapabilityGroupFilter:   pb.Capability_CAPABILITY_GROUP_FILTER,
	CapabilityTopicListener: pb.Capability_CAPABILITY_TOPIC_LISTENER,
	CapabilityGroupListener: pb.Capability_CAPABILITY_GROUP_LISTENER,
}

func capabilityToProto(c Capability) pb.Capability {
	return capabilityToProtoMap[c] // unknown: CAPABILITY_UNSPECIFIED
}

func capabilityFromProto(c pb.Capability) Capability {
	for k, v := range capabilityToProtoMap {
		if v == c {
			return k
		}
	}
	return Capability(fmt.Sprintf("unknown_%d", int32(c)))
}

func infoToProto(i Info) *pb.PluginInfoResponse {
	out := &pb.PluginInfoResponse{Name: i.Name, Version: i.Version, ProtocolMinor: i.ProtocolMinor}
	for _, c := range i.Capabilities {
		if pc := capabilityToProto(c); pc != pb.Capability_CAPABILITY_UNSPECIFIED {
			out.Capabilities = append(out.Capabilities, pc)
		}
	}
	return out
}

func infoFromProto(m *pb.PluginInfoResponse) Info {
	if m == nil {
		return Info{}
	}
	out := Info{Name: m.GetName(), Version: m.GetVersion(), ProtocolMinor: m.GetProtocolMinor()}
	for _, c := range m.GetCapabilities() {
		if c == pb.Capability_CAPABILITY_UNSPECIFIED {
			continue
		}
		out.Capabilities = append(out.Capabilities, capabilityFromProto(c))
	}
	return out
}

// --- Configure ---

func configureToProto(config map[string]string) *pb.ConfigureRequest {
	return &pb.ConfigureRequest{Config: config}
}

func configureFromProto(m *pb.ConfigureRequest) map[string]string {
	return nilIfEmpty(m.GetConfig())
}

// --- TopicFilter ---

func filterTopicToProto(t filters.Topic) *pb.FilterTopic {
	return &pb.FilterTopic{Name: t.Name, Partitions: t.Partitions, Configs: t.Configs, Labels: t.Labels}
}

func filterTopicFromProto(m *pb.FilterTopic) filters.Topic {
	if m == nil {
		return filters.Topic{}
	}
	return filters.Topic{
		Name:       m.GetName(),
		Partitions: m.GetPartitions(),
		Configs:    nilIfEmpty(m.GetConfigs()),
		Labels:     nilIfEmpty(m.GetLabels()),
	}
}

func topicRequestToProto(r filters.TopicRequest) *pb.FilterTopicsRequest {
	out := &pb.FilterTopicsRequest{Mirror: r.Mirror, Properties: r.Properties}
	if r.Topics != nil {
		out.Topics = make([]*pb.FilterTopic, len(r.Topics))
		for i, t := range r.Topics {
			out.Topics[i] = filterTopicToProto(t)
		}
	}
	return out
}

func topicRequestFromProto(m *pb.FilterTopicsRequest) filters.TopicRequest {
	if m == nil {
		return filters.TopicRequest{}
	}
	out := filters.TopicRequest{Mirror: m.GetMirror(), Properties: nilIfEmpty(m.GetProperties())}
	if ts := m.GetTopics(); len(ts) > 0 {
		out.Topics = make([]filters.Topic, len(ts))
		for i, t := range ts {
			out.Topics[i] = filterTopicFromProto(t)
		}
	}
	return out
}

func namesFromTopicsProto(m *pb.FilterTopicsResponse) []string {
	return nilIfEmptySlice(m.GetNames())
}

// --- GroupFilter ---

func filterGroupToProto(g filters.Group) *pb.FilterGroup {
	return &pb.FilterGroup{Name: g.Name, Topics: g.Topics}
}

func filterGroupFromProto(m *pb.FilterGroup) filters.Group {
	if m == nil {
		return filters.Group{}
	}
	return filters.Group{Name: m.GetName(), Topics: nilIfEmptySlice(m.GetTopics())}
}

func groupRequestToProto(r filters.GroupRequest) *pb.FilterGroupsRequest {
	out := &pb.FilterGroupsRequest{Mirror: r.Mirror, Properties: r.Properties}
	if r.Groups != nil {
		out.Groups = make([]*pb.FilterGroup, len(r.Groups))
		for i, g := range r.Groups {
			out.Groups[i] = filterGroupToProto(g)
		}
	}
	return out
}

func groupRequestFromProto(m *pb.FilterGroupsRequest) filters.GroupRequest {
	if m == nil {
		return filters.GroupRequest{}
	}
	out := filters.GroupRequest{Mirror: m.GetMirror(), Properties: nilIfEmpty(m.GetProperties())}
	if gs := m.GetGroups(); len(gs) > 0 {
		out.Groups = make([]filters.Group, len(gs))
		for i, g := range gs {
			out.Groups[i] = filterGroupFromProto(g)
		}
	}
	return out
}

func namesFromGroupsProto(m *pb.FilterGroupsResponse) []string {
	return nilIfEmptySlice(m.GetNames())
}

// --- TopicListener ---

func listenerTopicToProto(t listeners.Topic) *pb.ListenerTopic {
	return &pb.ListenerTopic{
		Upstream:   t.Upstream,
		Downstream: t.Downstream,
		Partitions: t.Partitions,
		State:      t.State,
		Metadata:   t.Metadata,
		SourceGaps: sourceGapsToProto(t.SourceGaps),
		Divergent:  divergentToProto(t.Divergent),
	}
}

func sourceGapsToProto(gs []listeners.SourceGap) []*pb.SourceGap {
	if len(gs) == 0 {
		return nil
	}
	out := make([]*pb.SourceGap, len(gs))
	for i, g := range gs {
		out[i] = &pb.SourceGap{Partition: g.Partition, From: g.From, To: g.To, Failed: g.Failed}
	}
	return out
}

func sourceGapsFromProto(ms []*pb.SourceGap) []listeners.SourceGap {
	if len(ms) == 0 {
		return nil
	}
	out := make([]listeners.SourceGap, len(ms))
	for i, m := range ms {
		out[i] = listeners.SourceGap{Partition: m.GetPartition(), From: m.GetFrom(), To: m.GetTo(), Failed: m.GetFailed()}
	}
	return out
}

func divergentToProto(ds []listeners.DivergentTail) []*pb.DivergentTail {
	if len(ds) == 0 {
		return nil
	}
	out := make([]*pb.DivergentTail, len(ds))
	for i, d := range ds {
		out[i] = &pb.DivergentTail{Partition: d.Partition, From: d.From, To: d.To}
	}
	return out
}

func divergentFromProto(ms []*pb.DivergentTail) []listeners.DivergentTail {
	if len(ms) == 0 {
		return nil
	}
	out := make([]listeners.DivergentTail, len(ms))
	for i, m := range ms {
		out[i] = listeners.DivergentTail{Partition: m.GetPartition(), From: m.GetFrom(), To: m.GetTo()}
	}
	return out
}

func listenerTopicFromProto(m *pb.ListenerTopic) listeners.Topic {
	if m == nil {
		return listeners.Topic{}
	}
	return listeners.Topic{
		Upstream:   m.GetUpstream(),
		Downstream: m.GetDownstream(),
		Partitions: m.GetPartitions(),
		State:      m.GetState(),
		Metadata:   nilIfEmpty(m.GetMetadata()),
		SourceGaps: sourceGapsFromProto(m.GetSourceGaps()),
		Divergent:  divergentFromProto(m.GetDivergent()),
	}
}

func listenerTopicsToProto(ts []listeners.Topic) []*pb.ListenerTopic {
	if ts == nil {
		return nil
	}
	out := make([]*pb.ListenerTopic, len(ts))
	for i, t := range ts {
		out[i] = listenerTopicToProto(t)
	}
	return out
}

func listenerTopicsFromProto(ms []*pb.ListenerTopic) []listeners.Topic {
	if len(ms) == 0 {
		return nil
	}
	out := make([]listeners.Topic, len(ms))
	for i, m := range ms {
		out[i] = listenerTopicFromProto(m)
	}
	return out
}

func topicsChangeToProto(c listeners.TopicsChange) *pb.TopicsChangedRequest {
	return &pb.TopicsChangedRequest{
		Mirror:   c.Mirror,
		Sequence: c.Sequence,
		Topics:   listenerTopicsToProto(c.Topics),
		Added:    listenerTopicsToProto(c.Added),
		Removed:  listenerTopicsToProto(c.Removed),
		Changed:  listenerTopicsToProto(c.Changed),
	}
}

func topicsChangeFromProto(m *pb.TopicsChangedRequest) listeners.TopicsChange {
	if m == nil {
		return listeners.TopicsChange{}
	}
	return listeners.TopicsChange{
		Mirror:   m.GetMirror(),
		Sequence: m.GetSequence(),
		Topics:   listenerTopicsFromProto(m.GetTopics()),
		Added:    listenerTopicsFromProto(m.GetAdded()),
		Removed:  listenerTopicsFromProto(m.GetRemoved()),
		Changed:  listenerTopicsFromProto(m.GetChanged()),
	}
}

// --- GroupListener ---

func listenerGroupsToProto(gs []listeners.Group) []*pb.ListenerGroup {
	if gs == nil {
		return nil
	}
	out := make([]*pb.ListenerGroup, len(gs))
	for i, g := range gs {
		out[i] = &pb.ListenerGroup{Name: g.Name, Topics: g.Topics}
	}
	return out
}

func listenerGroupsFromProto(ms []*pb.ListenerGroup) []listeners.Group {
	if len(ms) == 0 {
		return nil
	}
	out := make([]listeners.Group, len(ms))
	for i, m := range ms {
		out[i] = listeners.Group{Name: m.GetName(), Topics: nilIfEmptySlice(m.GetTopics())}
	}
	return out
}

func groupsChangeToProto(c listeners.GroupsChange) *pb.GroupsChangedRequest {
	return &pb.GroupsChangedRequest{
		Mirror:   c.Mirror,
		Sequence: c.Sequence,
		Groups:   listenerGroupsToProto(c.Groups),
		Added:    listenerGroupsToProto(c.Added),
		Removed:  listenerGroupsToProto(c.Removed),
	}
}

func groupsChangeFromProto(m *pb.GroupsChangedRequest) listeners.GroupsChange {
	if m == nil {
		return listeners.GroupsChange{}
	}
	return listeners.GroupsChange{
		Mirror:   m.GetMirror(),
		Sequence: m.GetSequence(),
		Groups:   listenerGroupsFromProto(m.GetGroups()),
		Added:    listenerGroupsFromProto(m.GetAdded()),
		Removed:  listenerGroupsFromProto(m.GetRemoved()),
	}
}
