package connector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
)

// Consumer groups: every sync interval the mirror reads the committed
// offsets of the selected source groups, translates them exactly through
// the offset index, writes them to the same groups on the target when
// nobody consumes there, and records a checkpoint per partition. A
// consumer that fails over to the target with its group reads exactly the
// records after its last source commit: no re-delivery, nothing skipped.

// GroupStatus is one translated group, for /api/v1/groups.
type GroupStatus struct {
	Mirror string `json:"mirror"`
	Group  string `json:"group"`
	// State is "synced" (the target group has the translated offsets),
	// "behind" (some source offset is past what was copied; the target
	// group points at the end of the copy), "active" (members consume on
	// the target, so kmirror does not write the group) or "error".
	State      string           `json:"state"`
	Error      string           `json:"error,omitempty"`
	LastSyncAt time.Time        `json:"last_sync_at"`
	Partitions []GroupPartition `json:"partitions"`
}

// GroupPartition is one partition of a translated group.
type GroupPartition struct {
	SourceTopic  string `json:"source_topic"`
	TargetTopic  string `json:"target_topic"`
	Partition    int32  `json:"partition"`
	SourceOffset int64  `json:"source_offset"`
	// TargetOffset is the target offset of the first source record at or
	// after SourceOffset (or the end of the copy when Behind).
	TargetOffset int64 `json:"target_offset"`
	// Behind is true when records before SourceOffset are not copied yet:
	// a consumer starting at TargetOffset would see them again.
	Behind bool `json:"behind"`
}

// Group states.
const (
	GroupSynced = "synced"
	GroupBehind = "behind"
	GroupActive = "active"
	GroupError  = "error"
)

// groupState is what the mirror remembers of a group between syncs.
type groupState struct {
	status GroupStatus
	// lastSource is the source offset last synced per source partition,
	// to tell a source group that moved back from a stale translation.
	lastSource map[topicPartition]int64
	// checkpointed is the checkpoint last written per source partition.
	checkpointed map[topicPartition]checkpointValue
}

// translateOffset maps committed source offset s exactly, given a
// partition's index and acked position: the target offset of the first
// copied source record at or after s, or, when no such record was copied
// yet, the end of the copy (behind when records before s are still to be
// copied).
func translateOffset(ix *partitionIndex, acked, s int64) (target int64, behind bool, err error) {
	t, err := ix.translate(s)
	switch {
	case err == nil:
		return t, false, nil
	case errors.Is(err, ErrPastIndex) && len(ix.runs) > 0:
		last := ix.runs[len(ix.runs)-1]
		return last.dst + last.n, s > acked, nil
	default:
		return 0, false, err
	}
}

// checkpoint records live in kmirror.<mirror>.checkpoints.internal on the
// target, one per group and source partition, values in the offset
// envelope.
type checkpointKey struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

type checkpointValue struct {
	SourceOffset int64  `json:"source_offset"`
	TargetTopic  string `json:"target_topic"`
	TargetOffset int64  `json:"target_offset"`
	Behind       bool   `json:"behind,omitempty"`
}

// groupCandidates returns the source groups with committed offsets on
// mirrored topics, with those offsets (MM2 checkpoints a group only when it
// has offsets for at least one replicated topic).
func (m *Mirror) groupCandidates(ctx context.Context, c *clients, mirrored map[string]string) ([]filters.Group, map[string]kadm.OffsetResponses, error) {
	listed, err := c.srcAdm.ListGroups(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list source groups: %w", err)
	}
	var names []string
	for _, g := range listed {
		if g.GroupType == "share" {
			continue // share groups have no committed offsets to translate
		}
		names = append(names, g.Group)
	}
	if len(names) == 0 {
		return nil, nil, nil
	}
	// Sorted: filters (and their per-pass cache) see the same candidates
	// in the same order every time.
	sort.Strings(names)
	fetched := c.srcAdm.FetchManyOffsets(ctx, names...)
	var cands []filters.Group
	offs := make(map[string]kadm.OffsetResponses)
	for _, name := range names {
		r, ok := fetched[name]
		if !ok || r.Err != nil {
			continue
		}
		var topics []string
		for topic := range r.Fetched {
			if _, ok := mirrored[topic]; ok {
				topics = append(topics, topic)
			}
		}
		if len(topics) == 0 {
			continue
		}
		sort.Strings(topics)
		cands = append(cands, filters.Group{Name: name, Topics: topics})
		offs[name] = r.Fetched
	}
	return cands, offs, nil
}

// selectGroups runs the group filters in order, keeping candidate order.
// Each filter sees what the previous kept; a name it was not given cannot
// add a group. A filter error (a plugin down, timed out or failing) is
// counted in kmirror_filter_errors_total and returned: the caller then
// keeps the previous group set, never an empty one.
func (m *Mirror) selectGroups(ctx context.Context, cands []filters.Group) ([]filters.Group, error) {
	for i, f := range m.selection().GroupFilters {
		names, err := f.FilterGroups(ctx, filters.GroupRequest{Mirror: m.cfg.Name, Groups: cands})
		if err != nil {
			m.metrics.incFilterErrors()
			return nil, fmt.Errorf("group filter %d failed; keeping the previous group set: %w", i, err)
		}
		cands = slices.DeleteFunc(cands, func(g filters.Group) bool { return !slices.Contains(names, g.Name) })
	}
	return cands, nil
}

// syncGroups is one group sync pass.
func (m *Mirror) syncGroups(ctx context.Context, c *clients, cp *copier) error {
	mirrored := make(map[string]string) // source topic -> target topic
	m.mu.Lock()
	for _, ts := range m.topics {
		if ts.fatal == nil && ts.assigned > 0 {
			mirrored[ts.source] = ts.target
		}
	}
	m.mu.Unlock()
	cands, offs, err := m.groupCandidates(ctx, c, mirrored)
	if err != nil {
		return err
	}
	selected, err := m.selectGroups(ctx, cands)
	if err != nil {
		return err // keep the previous group set
	}
	names := make([]string, 0, len(selected))
	for _, g := range selected {
		names = append(names, g.Name)
	}
	active, err := activeMembers(ctx, c.dstAdm, names)
	if err != nil {
		return err
	}
	targetNow := c.dstAdm.FetchManyOffsets(ctx, names...)

	now := time.Now()
	var errs []error
	var checkpoints []*kgo.Record
	statuses := make(map[string]*groupState, len(selected))
	for _, g := range selected {
		m.mu.Lock()
		gs := m.groups[g.Name]
		m.mu.Unlock()
		if gs == nil {
			gs = &groupState{lastSource: make(map[topicPartition]int64), checkpointed: make(map[topicPartition]checkpointValue)}
		}
		st := GroupStatus{Mirror: m.cfg.Name, Group: g.Name, State: GroupSynced, LastSyncAt: now}
		commit := make(kadm.Offsets)
		offs[g.Name].Each(func(o kadm.OffsetResponse) {
			target, ok := mirrored[o.Topic]
			if !ok || o.Err != nil || o.At < 0 {
				return
			}
			tp := topicPartition{o.Topic, o.Partition}
			ps := cp.partition(tp)
			if ps == nil {
				return
			}
			ps.mu.Lock()
			to, behind, err := translateOffset(ps.index, ps.acked, o.At)
			ps.mu.Unlock()
			if err != nil {
				m.log.Debug("cannot translate group offset yet", "group", g.Name, "topic", o.Topic, "partition", o.Partition, "offset", o.At, "err", err)
				return
			}
			st.Partitions = append(st.Partitions, GroupPartition{SourceTopic: o.Topic, TargetTopic: target, Partition: o.Partition, SourceOffset: o.At, TargetOffset: to, Behind: behind})
			if behind && st.State == GroupSynced {
				st.State = GroupBehind
			}
			cv := checkpointValue{SourceOffset: o.At, TargetTopic: target, TargetOffset: to, Behind: behind}
			if gs.checkpointed[tp] != cv {
				k, _ := json.Marshal(checkpointKey{Group: g.Name, Topic: o.Topic, Partition: o.Partition})
				v, _ := json.Marshal(cv)
				checkpoints = append(checkpoints, &kgo.Record{Topic: m.checkpointTopic, Key: k, Value: m.sealer.seal(v)})
				gs.checkpointed[tp] = cv
			}
			// Never move the target group backwards, unless the
			// source group itself moved back (a reset there).
			cur, has := targetNow[g.Name].Fetched.Lookup(target, o.Partition)
			if has && cur.Err == nil && cur.At >= 0 && to < cur.At {
				last, seen := gs.lastSource[tp]
				if !(m.cfg.FollowSourceRewinds && seen && o.At < last) {
					return
				}
			}
			if has && cur.Err == nil && cur.At == to {
				gs.lastSource[tp] = o.At
				return
			}
			commit.Add(kadm.Offset{Topic: target, Partition: o.Partition, At: to, LeaderEpoch: -1})
			gs.lastSource[tp] = o.At
		})
		sort.Slice(st.Partitions, func(i, j int) bool {
			a, b := st.Partitions[i], st.Partitions[j]
			return a.SourceTopic < b.SourceTopic || (a.SourceTopic == b.SourceTopic && a.Partition < b.Partition)
		})
		if len(active[g.Name]) > 0 {
			// Consumers are active on the target: their commits win.
			// MM2 does the same (UNKNOWN_MEMBER_ID otherwise).
			st.State = GroupActive
		} else if len(commit) > 0 {
			resp, err := c.dstAdm.CommitOffsets(ctx, g.Name, commit)
			if err == nil {
				err = resp.Error()
			}
			if isActiveGroupErr(err) {
				// A member joined between the describe and the commit.
				st.State = GroupActive
			} else if err != nil {
				st.State, st.Error = GroupError, err.Error()
				errs = append(errs, fmt.Errorf("commit group %s on the target: %w", g.Name, err))
				m.metrics.incGroupSyncErrors()
			} else {
				m.metrics.addGroupOffsetsSynced(len(commit))
				m.log.Debug("synced group offsets", "group", g.Name, "partitions", len(commit))
			}
		}
		gs.status = st
		statuses[g.Name] = gs
	}
	for _, r := range checkpoints {
		m.dstProduce(c.dst, r, nil)
	}
	m.mu.Lock()
	m.groups = statuses
	m.groupsSyncedAt = now
	m.mu.Unlock()
	set := make([]listeners.Group, 0, len(selected))
	for _, g := range selected {
		set = append(set, listeners.Group{Name: g.Name, Topics: g.Topics})
	}
	m.publishGroups(set)
	return errors.Join(errs...)
}

// Groups returns the translated groups, sorted by name.
func (m *Mirror) Groups() []GroupStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]GroupStatus, 0, len(m.groups))
	for _, gs := range m.groups {
		out = append(out, gs.status)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// Translate computes, without a running worker, the target offsets of a
// source group from the stored offset index: what `kmirror translate`
// prints for a failover. With apply it commits them to the target group,
// refusing while the group has active members there.
func (m *Mirror) Translate(ctx context.Context, group string, apply bool) (GroupStatus, error) {
	st := GroupStatus{Mirror: m.cfg.Name, Group: group, State: GroupSynced, LastSyncAt: time.Now()}
	c, err := m.newClients()
	if err != nil {
		return st, err
	}
	defer c.close()
	defer m.cancelProduce()
	ld, err := loadProgress(ctx, m.cfg.TargetOpts, c.dstAdm, m.progressTopic)
	if err != nil {
		return st, fmt.Errorf("read %s on the target: %w", m.progressTopic, err)
	}
	fetched, err := c.srcAdm.FetchOffsets(ctx, group)
	if err != nil {
		return st, fmt.Errorf("fetch offsets of group %s on the source: %w", group, err)
	}
	commit := make(kadm.Offsets)
	fetched.Each(func(o kadm.OffsetResponse) {
		tp := topicPartition{o.Topic, o.Partition}
		ix, pos := ld.indexes[tp], ld.positions[tp]
		if ix == nil || o.Err != nil || o.At < 0 {
			return
		}
		to, behind, err := translateOffset(ix, pos.next, o.At)
		if err != nil {
			return
		}
		target := m.cfg.Policy.FormatRemoteTopic(m.cfg.SourceAlias, o.Topic)
		st.Partitions = append(st.Partitions, GroupPartition{SourceTopic: o.Topic, TargetTopic: target, Partition: o.Partition, SourceOffset: o.At, TargetOffset: to, Behind: behind})
		if behind {
			st.State = GroupBehind
		}
		commit.Add(kadm.Offset{Topic: target, Partition: o.Partition, At: to, LeaderEpoch: -1})
	})
	sort.Slice(st.Partitions, func(i, j int) bool {
		a, b := st.Partitions[i], st.Partitions[j]
		return a.SourceTopic < b.SourceTopic || (a.SourceTopic == b.SourceTopic && a.Partition < b.Partition)
	})
	if len(st.Partitions) == 0 {
		return st, fmt.Errorf("group %s has no committed offsets on topics mirrored by %s", group, m.cfg.Name)
	}
	if !apply {
		return st, nil
	}
	active, err := activeMembers(ctx, c.dstAdm, []string{group})
	if err != nil {
		return st, err
	}
	if members := active[group]; len(members) > 0 {
		return st, fmt.Errorf("group %s has %d active members on the target (%s): stop them before applying", group, len(members), strings.Join(members, ", "))
	}
	resp, err := c.dstAdm.CommitOffsets(ctx, group, commit)
	if err == nil {
		err = resp.Error()
	}
	if isActiveGroupErr(err) {
		return st, fmt.Errorf("group %s has active members on the target (a member joined while applying: %v): stop them before applying", group, err)
	}
	if err != nil {
		return st, fmt.Errorf("commit group %s on the target: %w", group, err)
	}
	return st, nil
}

// activeMembers returns, per group, the members consuming on the target
// (as "client-id@host"). A classic group answers DescribeGroups; a group on
// the consumer protocol (KIP-848) looks empty or unknown there and answers
// ConsumerGroupDescribe instead, so both are asked. Brokers without KIP-848
// refuse the second request: then only classic groups exist.
func activeMembers(ctx context.Context, adm *kadm.Client, groups []string) (map[string][]string, error) {
	out := make(map[string][]string)
	if len(groups) == 0 {
		return out, nil
	}
	described, err := adm.DescribeGroups(ctx, groups...)
	if err != nil && len(described) == 0 {
		return nil, fmt.Errorf("describe target groups: %w", err)
	}
	for g, d := range described {
		if d.Err == nil {
			for _, m := range d.Members {
				out[g] = append(out[g], m.ClientID+"@"+m.ClientHost)
			}
		}
	}
	if cgs, err := adm.DescribeConsumerGroups(ctx, groups...); err == nil || len(cgs) > 0 {
		for g, d := range cgs {
			if d.Err == nil {
				for _, m := range d.Members {
					out[g] = append(out[g], m.ClientID+"@"+m.ClientHost)
				}
			}
		}
	}
	return out, nil
}

// isActiveGroupErr reports a commit refused because the group has members:
// the classic protocol answers UNKNOWN_MEMBER_ID to a commit from outside
// the group, the consumer protocol STALE_MEMBER_EPOCH or UNKNOWN_MEMBER_ID.
func isActiveGroupErr(err error) bool {
	return errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.StaleMemberEpoch) || errors.Is(err, kerr.IllegalGeneration)
}
