package connector

import (
	"context"
	"time"

	"github.com/kmirror/kmirror/connector/groups"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
)

// The consumer groups plane is package groups; this file wires it into the
// mirror: the Syncer is made with the mirror, runs a pass on the group
// sync's ticker (Run), and answers Groups and Translate.

// The groups plane's types and states, under the names the mirror's users
// (the HTTP API, kmirror translate) know them by.
type (
	GroupStatus      = groups.Status
	GroupPartition   = groups.Partition
	TranslateOptions = groups.TranslateOptions
	RewindError      = groups.RewindError
	Rewind           = groups.Rewind
)

// Where a translation's source offsets came from (GroupStatus.OffsetsFrom).
const (
	FromSource      = groups.FromSource
	FromCheckpoints = groups.FromCheckpoints
)

// Group states (groups.State*).
const (
	GroupSynced  = groups.StateSynced
	GroupBehind  = groups.StateBehind
	GroupPartial = groups.StatePartial
	GroupActive  = groups.StateActive
	GroupError   = groups.StateError
)

// newGroupSyncer makes the mirror's groups plane.
func (m *Mirror) newGroupSyncer() *groups.Syncer {
	var syncs *groups.MM2OffsetSyncs
	if mc := m.cfg.MM2; mc != nil {
		syncs = &groups.MM2OffsetSyncs{Topic: mc.OffsetSyncsTopic, OnTarget: mc.OffsetSyncsOnTarget}
	}
	return groups.New(groups.Config{
		Mirror:              m.cfg.Name,
		SourceAlias:         m.cfg.SourceAlias,
		Policy:              m.cfg.Policy,
		SourceOpts:          m.cfg.SourceOpts,
		TargetOpts:          m.cfg.TargetOpts,
		ProgressTopic:       m.progressTopic,
		Sealer:              m.sealer,
		FollowSourceRewinds: m.cfg.FollowSourceRewinds,
		TranslateOnly:       m.translateOnly(),
		MM2OffsetSyncs:      syncs,
		Log:                 m.log,
		Metrics:             m.metrics.groups(),
	}, groupsMirror{m})
}

// groupsMirror is what the groups plane sees of its mirror (groups.Mirror).
type groupsMirror struct{ m *Mirror }

// Mirrored are the topics being copied: those with partitions assigned
// and no failure that stopped them.
func (g groupsMirror) Mirrored() map[string]string {
	mirrored := make(map[string]string) // source topic -> target topic
	g.m.mu.Lock()
	defer g.m.mu.Unlock()
	for _, ts := range g.m.topics {
		if ts.fatal == nil && ts.assigned > 0 {
			mirrored[ts.source] = ts.target
		}
	}
	return mirrored
}

func (g groupsMirror) GroupFilters() []filters.GroupFilter { return g.m.selection().GroupFilters }

func (g groupsMirror) PublishGroups(set []listeners.Group) { g.m.publishGroups(set) }

func (g groupsMirror) StatePartitions(topic string) int32 { return g.m.statePartitions(topic) }

func (g groupsMirror) Produce(dst *kgo.Client, r *kgo.Record, promise func(*kgo.Record, error)) {
	g.m.dstProduce(dst, r, promise)
}

func (g groupsMirror) SrcErr(err error) error { return g.m.srcErr(err) }

func (g groupsMirror) ReverseOf() string {
	g.m.mu.Lock()
	defer g.m.mu.Unlock()
	return g.m.reverseOf
}
func (g groupsMirror) DstErr(err error) error { return g.m.dstErr(err) }

// groups are the connections the groups plane uses.
func (c *clients) groups() groups.Clients {
	return groups.Clients{SrcAdm: c.srcAdm, DstAdm: c.dstAdm, Dst: c.dst}
}

// syncGroups is one group sync pass over the partitions of dp (see
// groups.Syncer.Sync).
func (m *Mirror) syncGroups(ctx context.Context, c *clients, dp dataPlane) error {
	return m.groupSync.Sync(ctx, c.groups(), dp)
}

// Groups returns the translated groups, sorted by name.
func (m *Mirror) Groups() []GroupStatus { return m.groupSync.Groups() }

// Translate computes, without a running worker, the target offsets of a
// source group from the stored offset index: what `kmirror translate`
// prints for a failover (see groups.Syncer.Translate).
func (m *Mirror) Translate(ctx context.Context, group string, opts TranslateOptions) (GroupStatus, error) {
	c, err := m.newClients()
	if err != nil {
		return GroupStatus{Mirror: m.cfg.Name, Group: group, State: GroupSynced, LastSyncAt: time.Now()}, err
	}
	defer c.close()
	defer m.cancelProduce()
	if _, err := m.readFence(ctx, c); err != nil {
		return GroupStatus{Mirror: m.cfg.Name, Group: group, State: GroupSynced, LastSyncAt: time.Now()}, err
	}
	return m.groupSync.Translate(ctx, c.groups(), group, opts)
}
