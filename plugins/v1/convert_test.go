package v1

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
	"github.com/kmirror/kmirror/plugins/v1/internal/pb"
)

// Table tests after terraform-plugin-go's fromproto/toproto: every message
// has a nil (or zero), an empty and a full case, both ways. Proto messages
// compare with proto.Equal (nil and empty repeated fields are the same on
// the wire); Go values with reflect.DeepEqual, exactly: empty comes back
// as nil.

func checkProto(t *testing.T, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("toproto:\n got %v\nwant %v", got, want)
	}
}

func checkGo(t *testing.T, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fromproto:\n got %#v\nwant %#v", got, want)
	}
}

var (
	fullFilterTopic = filters.Topic{
		Name: "orders", Partitions: 12,
		Configs: map[string]string{"cleanup.policy": "compact"},
		Labels:  map[string]string{"team": "payments"},
	}
	fullFilterTopicProto = &pb.FilterTopic{
		Name: "orders", Partitions: 12,
		Configs: map[string]string{"cleanup.policy": "compact"},
		Labels:  map[string]string{"team": "payments"},
	}
	fullListenerTopic = listeners.Topic{
		Upstream: "orders", Downstream: "east.orders", Partitions: 3, State: "mirroring",
		Metadata:   map[string]string{"kmirror.source.cluster": "east"},
		SourceGaps: []listeners.SourceGap{{Partition: 1, From: 3, To: 6}, {Partition: 2, From: 10, To: 40, Failed: true}},
		Divergent:  []listeners.DivergentTail{{Partition: 0, From: 20, To: 25}, {Partition: 2, From: 7, To: 9}},
	}
	fullListenerTopicProto = &pb.ListenerTopic{
		Upstream: "orders", Downstream: "east.orders", Partitions: 3, State: "mirroring",
		Metadata:   map[string]string{"kmirror.source.cluster": "east"},
		SourceGaps: []*pb.SourceGap{{Partition: 1, From: 3, To: 6}, {Partition: 2, From: 10, To: 40, Failed: true}},
		Divergent:  []*pb.DivergentTail{{Partition: 0, From: 20, To: 25}, {Partition: 2, From: 7, To: 9}},
	}
)

func TestInfoConversion(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		in    Info
		proto *pb.PluginInfoResponse
		back  Info // what the proto converts back to
	}{
		"zero": {Info{}, &pb.PluginInfoResponse{}, Info{}},
		"empty": {Info{Capabilities: []Capability{}}, &pb.PluginInfoResponse{},
			Info{}},
		"full": {
			Info{Name: "cat", Version: "1.2.3", ProtocolMinor: 4, Capabilities: []Capability{
				CapabilityTopicFilter, CapabilityGroupFilter, CapabilityTopicListener, CapabilityGroupListener}},
			&pb.PluginInfoResponse{Name: "cat", Version: "1.2.3", ProtocolMinor: 4, Capabilities: []pb.Capability{
				pb.Capability_CAPABILITY_TOPIC_FILTER, pb.Capability_CAPABILITY_GROUP_FILTER,
				pb.Capability_CAPABILITY_TOPIC_LISTENER, pb.Capability_CAPABILITY_GROUP_LISTENER}},
			Info{Name: "cat", Version: "1.2.3", ProtocolMinor: 4, Capabilities: []Capability{
				CapabilityTopicFilter, CapabilityGroupFilter, CapabilityTopicListener, CapabilityGroupListener}},
		},
		"unknown capability is not sent": {
			Info{Capabilities: []Capability{"teleport", CapabilityTopicFilter}},
			&pb.PluginInfoResponse{Capabilities: []pb.Capability{pb.Capability_CAPABILITY_TOPIC_FILTER}},
			Info{Capabilities: []Capability{CapabilityTopicFilter}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkProto(t, infoToProto(tc.in), tc.proto)
			checkGo(t, infoFromProto(tc.proto), tc.back)
		})
	}
}

func TestInfoFromProtoEdgeCases(t *testing.T) {
	t.Parallel()
	checkGo(t, infoFromProto(nil), Info{})
	// A capability from a newer plugin is kept as unknown_<n>; UNSPECIFIED
	// is dropped.
	got := infoFromProto(&pb.PluginInfoResponse{Capabilities: []pb.Capability{0, 1, 99}})
	checkGo(t, got.Capabilities, []Capability{CapabilityTopicFilter, "unknown_99"})
	if got.Has("unknown_99") != true || got.Has(CapabilityGroupFilter) {
		t.Errorf("Has: %v", got)
	}
}

func TestConfigureConversion(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		in    map[string]string
		proto *pb.ConfigureRequest
		back  map[string]string
	}{
		"nil":   {nil, &pb.ConfigureRequest{}, nil},
		"empty": {map[string]string{}, &pb.ConfigureRequest{}, nil},
		"full":  {map[string]string{"path": "/x", "": ""}, &pb.ConfigureRequest{Config: map[string]string{"path": "/x", "": ""}}, map[string]string{"path": "/x", "": ""}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkProto(t, configureToProto(tc.in), tc.proto)
			checkGo(t, configureFromProto(tc.proto), tc.back)
		})
	}
	checkGo(t, configureFromProto(nil), map[string]string(nil))
}

func TestFilterTopicConversion(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		in    filters.Topic
		proto *pb.FilterTopic
		back  filters.Topic
	}{
		"zero":  {filters.Topic{}, &pb.FilterTopic{}, filters.Topic{}},
		"empty": {filters.Topic{Configs: map[string]string{}, Labels: map[string]string{}}, &pb.FilterTopic{}, filters.Topic{}},
		"full":  {fullFilterTopic, fullFilterTopicProto, fullFilterTopic},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkProto(t, filterTopicToProto(tc.in), tc.proto)
			checkGo(t, filterTopicFromProto(tc.proto), tc.back)
		})
	}
	checkGo(t, filterTopicFromProto(nil), filters.Topic{})
}

func TestTopicRequestConversion(t *testing.T) {
	t.Parallel()
	full := filters.TopicRequest{
		Mirror: "east-to-west", Properties: map[string]string{"team": "payments"},
		Topics: []filters.Topic{fullFilterTopic, {Name: "bare"}},
	}
	fullProto := &pb.FilterTopicsRequest{
		Mirror: "east-to-west", Properties: map[string]string{"team": "payments"},
		Topics: []*pb.FilterTopic{fullFilterTopicProto, {Name: "bare"}},
	}
	tests := map[string]struct {
		in    filters.TopicRequest
		proto *pb.FilterTopicsRequest
		back  filters.TopicRequest
	}{
		"zero":  {filters.TopicRequest{}, &pb.FilterTopicsRequest{}, filters.TopicRequest{}},
		"empty": {filters.TopicRequest{Properties: map[string]string{}, Topics: []filters.Topic{}}, &pb.FilterTopicsRequest{}, filters.TopicRequest{}},
		"full":  {full, fullProto, full},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkProto(t, topicRequestToProto(tc.in), tc.proto)
			checkGo(t, topicRequestFromProto(tc.proto), tc.back)
		})
	}
	checkGo(t, topicRequestFromProto(nil), filters.TopicRequest{})
	// A nil element converts to the zero topic, not a panic.
	checkGo(t, topicRequestFromProto(&pb.FilterTopicsRequest{Topics: []*pb.FilterTopic{nil}}),
		filters.TopicRequest{Topics: []filters.Topic{{}}})
}

func TestNamesConversion(t *testing.T) {
	t.Parallel()
	checkGo(t, namesFromTopicsProto(nil), []string(nil))
	checkGo(t, namesFromTopicsProto(&pb.FilterTopicsResponse{Names: []string{}}), []string(nil))
	checkGo(t, namesFromTopicsProto(&pb.FilterTopicsResponse{Names: []string{"a", "b"}}), []string{"a", "b"})
	checkGo(t, namesFromGroupsProto(nil), []string(nil))
	checkGo(t, namesFromGroupsProto(&pb.FilterGroupsResponse{Names: []string{}}), []string(nil))
	checkGo(t, namesFromGroupsProto(&pb.FilterGroupsResponse{Names: []string{"g"}}), []string{"g"})
}

func TestFilterGroupConversion(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		in    filters.Group
		proto *pb.FilterGroup
		back  filters.Group
	}{
		"zero":  {filters.Group{}, &pb.FilterGroup{}, filters.Group{}},
		"empty": {filters.Group{Topics: []string{}}, &pb.FilterGroup{}, filters.Group{}},
		"full":  {filters.Group{Name: "billing", Topics: []string{"orders", "payments"}}, &pb.FilterGroup{Name: "billing", Topics: []string{"orders", "payments"}}, filters.Group{Name: "billing", Topics: []string{"orders", "payments"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkProto(t, filterGroupToProto(tc.in), tc.proto)
			checkGo(t, filterGroupFromProto(tc.proto), tc.back)
		})
	}
	checkGo(t, filterGroupFromProto(nil), filters.Group{})
}

func TestGroupRequestConversion(t *testing.T) {
	t.Parallel()
	full := filters.GroupRequest{
		Mirror: "m", Properties: map[string]string{"k": "v"},
		Groups: []filters.Group{{Name: "g1", Topics: []string{"t"}}, {Name: "g2"}},
	}
	fullProto := &pb.FilterGroupsRequest{
		Mirror: "m", Properties: map[string]string{"k": "v"},
		Groups: []*pb.FilterGroup{{Name: "g1", Topics: []string{"t"}}, {Name: "g2"}},
	}
	tests := map[string]struct {
		in    filters.GroupRequest
		proto *pb.FilterGroupsRequest
		back  filters.GroupRequest
	}{
		"zero":  {filters.GroupRequest{}, &pb.FilterGroupsRequest{}, filters.GroupRequest{}},
		"empty": {filters.GroupRequest{Properties: map[string]string{}, Groups: []filters.Group{}}, &pb.FilterGroupsRequest{}, filters.GroupRequest{}},
		"full":  {full, fullProto, full},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkProto(t, groupRequestToProto(tc.in), tc.proto)
			checkGo(t, groupRequestFromProto(tc.proto), tc.back)
		})
	}
	checkGo(t, groupRequestFromProto(nil), filters.GroupRequest{})
}

func TestListenerTopicConversion(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		in    listeners.Topic
		proto *pb.ListenerTopic
		back  listeners.Topic
	}{
		"zero":  {listeners.Topic{}, &pb.ListenerTopic{}, listeners.Topic{}},
		"empty": {listeners.Topic{Metadata: map[string]string{}}, &pb.ListenerTopic{}, listeners.Topic{}},
		"full":  {fullListenerTopic, fullListenerTopicProto, fullListenerTopic},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkProto(t, listenerTopicToProto(tc.in), tc.proto)
			checkGo(t, listenerTopicFromProto(tc.proto), tc.back)
		})
	}
	checkGo(t, listenerTopicFromProto(nil), listeners.Topic{})
}

func TestTopicsChangeConversion(t *testing.T) {
	t.Parallel()
	other := listeners.Topic{Upstream: "clicks", Downstream: "east.clicks", Partitions: 1, State: "pending"}
	otherProto := &pb.ListenerTopic{Upstream: "clicks", Downstream: "east.clicks", Partitions: 1, State: "pending"}
	full := listeners.TopicsChange{
		Mirror: "east-to-west", Sequence: 7,
		Topics:  []listeners.Topic{other, fullListenerTopic},
		Added:   []listeners.Topic{other},
		Removed: []listeners.Topic{{Upstream: "gone", Downstream: "east.gone", State: "mirroring"}},
		Changed: []listeners.Topic{fullListenerTopic},
	}
	fullProto := &pb.TopicsChangedRequest{
		Mirror: "east-to-west", Sequence: 7,
		Topics:  []*pb.ListenerTopic{otherProto, fullListenerTopicProto},
		Added:   []*pb.ListenerTopic{otherProto},
		Removed: []*pb.ListenerTopic{{Upstream: "gone", Downstream: "east.gone", State: "mirroring"}},
		Changed: []*pb.ListenerTopic{fullListenerTopicProto},
	}
	empty := listeners.TopicsChange{Topics: []listeners.Topic{}, Added: []listeners.Topic{}, Removed: []listeners.Topic{}, Changed: []listeners.Topic{}}
	tests := map[string]struct {
		in    listeners.TopicsChange
		proto *pb.TopicsChangedRequest
		back  listeners.TopicsChange
	}{
		"zero":  {listeners.TopicsChange{}, &pb.TopicsChangedRequest{}, listeners.TopicsChange{}},
		"empty": {empty, &pb.TopicsChangedRequest{}, listeners.TopicsChange{}},
		"full":  {full, fullProto, full},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkProto(t, topicsChangeToProto(tc.in), tc.proto)
			checkGo(t, topicsChangeFromProto(tc.proto), tc.back)
		})
	}
	checkGo(t, topicsChangeFromProto(nil), listeners.TopicsChange{})
}

func TestGroupsChangeConversion(t *testing.T) {
	t.Parallel()
	g1 := listeners.Group{Name: "billing", Topics: []string{"orders"}}
	g2 := listeners.Group{Name: "idle"}
	full := listeners.GroupsChange{
		Mirror: "m", Sequence: 1,
		Groups: []listeners.Group{g1, g2}, Added: []listeners.Group{g1, g2},
		Removed: []listeners.Group{{Name: "old", Topics: []string{"a", "b"}}},
	}
	fullProto := &pb.GroupsChangedRequest{
		Mirror: "m", Sequence: 1,
		Groups:  []*pb.ListenerGroup{{Name: "billing", Topics: []string{"orders"}}, {Name: "idle"}},
		Added:   []*pb.ListenerGroup{{Name: "billing", Topics: []string{"orders"}}, {Name: "idle"}},
		Removed: []*pb.ListenerGroup{{Name: "old", Topics: []string{"a", "b"}}},
	}
	empty := listeners.GroupsChange{Groups: []listeners.Group{}, Added: []listeners.Group{}, Removed: []listeners.Group{{Topics: []string{}}}}
	tests := map[string]struct {
		in    listeners.GroupsChange
		proto *pb.GroupsChangedRequest
		back  listeners.GroupsChange
	}{
		"zero": {listeners.GroupsChange{}, &pb.GroupsChangedRequest{}, listeners.GroupsChange{}},
		"empty": {empty, &pb.GroupsChangedRequest{Removed: []*pb.ListenerGroup{{}}},
			listeners.GroupsChange{Removed: []listeners.Group{{}}}},
		"full": {full, fullProto, full},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkProto(t, groupsChangeToProto(tc.in), tc.proto)
			checkGo(t, groupsChangeFromProto(tc.proto), tc.back)
		})
	}
	checkGo(t, groupsChangeFromProto(nil), listeners.GroupsChange{})
}

// TestConversionSurvivesTheWire marshals the full messages and converts the
// decoded bytes back: what a plugin sees is what the host sent.
func TestConversionSurvivesTheWire(t *testing.T) {
	t.Parallel()
	in := filters.TopicRequest{Mirror: "m", Properties: map[string]string{"a": "b"},
		Topics: []filters.Topic{fullFilterTopic, {Name: "x", Partitions: -1}}}
	b, err := proto.Marshal(topicRequestToProto(in))
	if err != nil {
		t.Fatal(err)
	}
	var m pb.FilterTopicsRequest
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	checkGo(t, topicRequestFromProto(&m), in)
}
