package connector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/state"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/connector/policy"
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
	// State is one of the Group* constants: "synced", "behind",
	// "partial", "active" or "error".
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
	// after SourceOffset (or the end of the copy when Behind); -1 when
	// Untranslatable.
	TargetOffset int64 `json:"target_offset"`
	// Behind is true when records before SourceOffset are not copied yet:
	// a consumer starting at TargetOffset would see them again.
	Behind bool `json:"behind"`
	// Untranslatable is true when SourceOffset has no exact target offset
	// (it is older than what the offset index keeps, or nothing of the
	// partition is copied yet); Reason says why. Such a partition is
	// never committed to the target group.
	Untranslatable bool   `json:"untranslatable"`
	Reason         string `json:"reason,omitempty"`
	// Approximate is true when SourceOffset is older than where kmirror
	// took over from MirrorMaker 2 and TargetOffset comes from MM2's
	// offset syncs, as MM2 translates it: MM2-accurate, not exact (a
	// consumer may read again some records MM2 copied, never skip one).
	// Reason says so.
	Approximate bool `json:"approximate,omitempty"`
}

// Group states.
const (
	// GroupSynced: the target group has the translated offsets.
	GroupSynced = "synced"
	// GroupBehind: some source offset is past what was copied; the target
	// group points at the end of the copy there.
	GroupBehind = "behind"
	// GroupPartial: some partitions cannot be translated exactly (they
	// are listed with untranslatable and a reason, and never committed);
	// the others are committed.
	GroupPartial = "partial"
	// GroupActive: members consume on the target, so kmirror does not
	// write the group.
	GroupActive = "active"
	// GroupError: Error says what failed. A commit was refused, or what
	// kmirror must know before it writes the group could not be read
	// (whether members are active there, the group's current offsets
	// there): then nothing of the group, or nothing of the partitions
	// Error names, was committed this time.
	GroupError = "error"
)

// groupState is what the mirror remembers of a group between syncs. Only
// the sync goroutine touches it, except the fields marked as guarded by
// Mirror.mu (Groups reads status, checkpoint promises write checkpoints).
type groupState struct {
	status GroupStatus // guarded by Mirror.mu
	// topics are the group's mirrored source topics at the last fetch of
	// its offsets: a group whose fetch fails stays in the set with them.
	topics []string
	// hidden marks a group that is not in the set (its first fetch at
	// the source failed); its state only rate-limits the log. Written
	// under Mirror.mu.
	hidden bool
	// lastSource is the source offset last synced per source partition,
	// to tell a source group that moved back from a stale translation.
	lastSource map[data.TopicPartition]int64

	// Guarded by Mirror.mu. checkpointed is the checkpoint the target
	// acknowledged per source partition, checkpointing the one produced
	// and not acknowledged yet; a write that fails is counted in
	// checkpointErr and written again on the next sync.
	checkpointed  map[data.TopicPartition]checkpointValue
	checkpointing map[data.TopicPartition]checkpointValue
	checkpointErr error

	// logged is when each problem of the group (by problemLog key) was
	// last logged.
	logged map[string]time.Time
}

func newGroupState() *groupState {
	return &groupState{
		lastSource:    make(map[data.TopicPartition]int64),
		checkpointed:  make(map[data.TopicPartition]checkpointValue),
		checkpointing: make(map[data.TopicPartition]checkpointValue),
	}
}

// translateOffset maps committed source offset s exactly, given a
// partition's index and acked position: the target offset of the first
// copied source record at or after s, or, when no such record was copied
// yet, the end of the copy (behind when records before s are still to be
// copied).
func translateOffset(ix *index.Partition, acked, s int64) (target int64, behind bool, err error) {
	t, err := ix.Translate(s)
	switch {
	case err == nil:
		return t, false, nil
	case !errors.Is(err, index.ErrPastIndex):
		return 0, false, err
	}
	if last, ok := ix.Last(); ok {
		return last.Dst + last.N, s > acked, nil
	}
	if floor, ok := ix.Floor(); ok && ix.Evicted() == 0 {
		// Adopted, nothing copied since: the copy ends at the floor.
		return floor.Dst, s > acked, nil
	}
	return 0, false, err
}

// translate sets TargetOffset and Behind from gp.SourceOffset through ix
// (acked is the partition's acked position), or, when it has no exact
// translation, Untranslatable and Reason (TargetOffset -1): a guess would
// make a consumer skip or re-read records.
func (gp *GroupPartition) translate(ix *index.Partition, acked int64) {
	to, behind, err := translateOffset(ix, acked, gp.SourceOffset)
	gp.setTranslation(ix, to, behind, err)
}

// setTranslation sets what translateOffset (or translatePartition) found
// for gp.SourceOffset through ix.
func (gp *GroupPartition) setTranslation(ix *index.Partition, to int64, behind bool, err error) {
	if err != nil {
		gp.TargetOffset, gp.Untranslatable, gp.Reason = -1, true, untranslatableReason(ix, gp.SourceOffset, err)
		return
	}
	gp.TargetOffset, gp.Behind = to, behind
}

// settle sorts the partitions and sets State from them: partial when one
// is untranslatable, else behind when one is behind, else synced.
func (st *GroupStatus) settle() {
	sort.Slice(st.Partitions, func(i, j int) bool {
		a, b := st.Partitions[i], st.Partitions[j]
		return a.SourceTopic < b.SourceTopic || (a.SourceTopic == b.SourceTopic && a.Partition < b.Partition)
	})
	st.State = GroupSynced
	for _, p := range st.Partitions {
		switch {
		case p.Untranslatable:
			st.State = GroupPartial
		case p.Behind && st.State == GroupSynced:
			st.State = GroupBehind
		}
	}
}

// untranslatableReason says why translateOffset could not translate
// source offset s through ix (err is its error), for an operator.
func untranslatableReason(ix *index.Partition, s int64, err error) string {
	switch {
	case errors.Is(err, index.ErrBelowAdopted):
		return fmt.Sprintf("source offset %d is older than source offset %d, where kmirror took over from MirrorMaker 2 (mirrors[].mm2.adopt): MM2 copied the records before it, and the mirror has no mm2 block to read MM2's offset syncs from", s, floorSource(ix))
	case errors.Is(err, index.ErrBehindIndex):
		return fmt.Sprintf("source offset %d is older than the offset index, which starts at source offset %d: its target offset is no longer known", s, ix.OldestSource())
	case errors.Is(err, index.ErrPastIndex) && ix.Len() == 0:
		return fmt.Sprintf("nothing of this partition is copied yet (empty offset index): source offset %d has no target offset", s)
	}
	return fmt.Sprintf("source offset %d: %v", s, err)
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

// sourceGroups is what one look at the source found.
type sourceGroups struct {
	cands []filters.Group
	offs  map[string]kadm.OffsetResponses
	// failed are the groups whose offsets could not be read this time,
	// with the error: unknown, not absent.
	failed map[string]error
}

// groupCandidates returns the source groups with committed offsets on
// mirrored topics, with those offsets (MM2 checkpoints a group only when it
// has offsets for at least one replicated topic). A known group (in known)
// whose offsets cannot be read this time stays a candidate with the topics
// it had: an error is never an absence. It fails only when the source
// lists no group at all and answers with an error.
func (m *Mirror) groupCandidates(ctx context.Context, c *clients, mirrored map[string]string, known map[string]*groupState) (sourceGroups, error) {
	out := sourceGroups{offs: make(map[string]kadm.OffsetResponses), failed: make(map[string]error)}
	listed, err := c.srcAdm.ListGroups(ctx)
	if err != nil {
		m.metrics.incAdminErrors(adminDescribeGroups)
		if len(listed) == 0 {
			return out, fmt.Errorf("list source groups: %w", m.srcErr(err))
		}
		// Some coordinators answered: a known group missing from the
		// listing may live on one that did not.
		for name, gs := range known {
			if _, ok := listed[name]; !ok && !gs.hidden {
				out.failed[name] = fmt.Errorf("list source groups: %w", err)
			}
		}
	}
	var names []string
	for _, g := range listed {
		if g.GroupType == "share" {
			continue // share groups have no committed offsets to translate
		}
		if strings.HasPrefix(g.Group, policy.InternalTopicPrefix) {
			// kmirror's own (a cluster-mode mirror's workers, on a
			// cluster that is the target of another mirror): never
			// translated, whatever the filters say.
			continue
		}
		names = append(names, g.Group)
	}
	// Sorted: filters (and their per-pass cache) see the same candidates
	// in the same order every time.
	sort.Strings(names)
	fetched := c.srcAdm.FetchManyOffsets(ctx, names...)
	for _, name := range names {
		r, ok := fetched[name]
		switch {
		case ok && r.Err == nil:
		case ok && errors.Is(r.Err, kerr.GroupIDNotFound):
			continue // deleted since it was listed
		default:
			if !ok {
				r.Err = errors.New("no answer for the group")
			}
			m.metrics.incAdminErrors(adminFetchOffsets)
			out.failed[name] = fmt.Errorf("fetch the group's offsets at the source: %w", r.Err)
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
		out.cands = append(out.cands, filters.Group{Name: name, Topics: topics})
		out.offs[name] = r.Fetched
	}
	for name := range out.failed {
		if gs := known[name]; gs != nil && !gs.hidden {
			out.cands = append(out.cands, filters.Group{Name: name, Topics: gs.topics})
		}
	}
	sort.Slice(out.cands, func(i, j int) bool { return out.cands[i].Name < out.cands[j].Name })
	return out, nil
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

// syncGroups is one group sync pass. It returns an error only when the
// pass could not run at all (the source listed no group, a filter
// failed); what fails for one group is that group's status, counted,
// and logged at most once a minute while it lasts.
func (m *Mirror) syncGroups(ctx context.Context, c *clients, cp dataPlane) error {
	if m.mm2Syncs != nil {
		m.mm2Syncs.nextPass() // a failed read of MM2's offset syncs is tried again
	}
	mirrored := make(map[string]string) // source topic -> target topic
	m.mu.Lock()
	for _, ts := range m.topics {
		if ts.fatal == nil && ts.assigned > 0 {
			mirrored[ts.source] = ts.target
		}
	}
	known := m.groups
	m.mu.Unlock()
	src, err := m.groupCandidates(ctx, c, mirrored, known)
	if err != nil {
		return err
	}
	selected, err := m.selectGroups(ctx, src.cands)
	if err != nil {
		return err // keep the previous group set
	}
	var fresh []string // the selected groups whose source offsets were read
	for _, g := range selected {
		if src.failed[g.Name] == nil {
			fresh = append(fresh, g.Name)
		}
	}
	members := activeMembers(ctx, c.dstAdm, fresh)
	for range members.unknown {
		m.metrics.incAdminErrors(adminDescribeGroups)
	}
	targetNow := c.dstAdm.FetchManyOffsets(ctx, fresh...)

	now := time.Now()
	var checkpoints []pendingCheckpoint
	var problems problemLog
	statuses := make(map[string]*groupState, len(selected))
	state := func(name string) *groupState {
		if gs := known[name]; gs != nil {
			return gs
		}
		return newGroupState()
	}
	for _, g := range selected {
		gs := state(g.Name)
		statuses[g.Name] = gs
		m.mu.Lock()
		gs.hidden = false
		ckErr := gs.checkpointErr
		gs.checkpointErr = nil
		m.mu.Unlock()
		if ckErr != nil {
			problems.add(gs, g.Name, "could not write checkpoints to "+m.checkpointTopic+"; writing them again", ckErr)
		}
		if err := src.failed[g.Name]; err != nil {
			// Unknown this time: keep the last status, commit nothing.
			problems.add(gs, g.Name, "cannot read the group's offsets at the source; keeping its last state", err)
			continue
		}
		gs.topics = g.Topics
		st, commit, sources, cps := m.translateGroup(ctx, c, g.Name, gs, src.offs[g.Name], mirrored, cp, targetNow[g.Name], &problems)
		checkpoints = append(checkpoints, cps...)
		st.LastSyncAt = now
		var blocked []string // why nothing of the group is committed this time
		if err := members.unknown[g.Name]; err != nil {
			// Unknown is not inactive: a commit into a group with
			// members would fight their commits.
			problems.add(gs, g.Name, "cannot tell whether the group has members on the target; not committing it", err)
			blocked = append(blocked, fmt.Sprintf("cannot tell whether the group has members on the target: %v", err))
		}
		if err := targetFetchErr(targetNow, g.Name); err != nil {
			m.metrics.incAdminErrors(adminFetchOffsets)
			// Without them the never-rewind guard cannot run.
			problems.add(gs, g.Name, "cannot read the group's offsets on the target; not committing it", err)
			blocked = append(blocked, fmt.Sprintf("cannot read the group's offsets on the target: %v", err))
		}
		switch {
		case m.translateOnly():
			// Translation only, for MM2's checkpoints: nothing is
			// committed to the target group.
		case len(blocked) > 0:
			st.State, st.Error = GroupError, strings.Join(blocked, "; ")
		case len(members.members[g.Name]) > 0:
			// Consumers are active on the target: their commits win.
			// MM2 does the same (UNKNOWN_MEMBER_ID otherwise).
			st.State, st.Error = GroupActive, ""
		case len(commit) > 0:
			resp, err := c.dstAdm.CommitOffsets(ctx, g.Name, commit)
			if err == nil {
				err = resp.Error()
			}
			if isActiveGroupErr(err) {
				// A member joined between the describe and the commit.
				st.State, st.Error = GroupActive, ""
				break
			}
			if err != nil {
				st.State, st.Error = GroupError, fmt.Sprintf("commit on the target: %v", err)
				problems.add(gs, g.Name, "could not commit the group's offsets on the target; retrying on the next sync", err)
				m.metrics.incGroupSyncErrors()
				break
			}
			maps.Copy(gs.lastSource, sources)
			m.metrics.addGroupOffsetsSynced(len(commit))
			m.log.Debug("synced group offsets", "group", g.Name, "partitions", len(commit))
		}
		m.mu.Lock()
		gs.status = st
		m.mu.Unlock()
	}
	// Groups seen at the source whose first fetch failed are not in the
	// set (their topics are unknown) but are logged like the others.
	for name, err := range src.failed {
		if statuses[name] != nil {
			continue
		}
		gs := known[name]
		if gs == nil {
			gs = newGroupState()
		}
		m.mu.Lock()
		gs.hidden = true
		m.mu.Unlock()
		statuses[name] = gs
		problems.add(gs, name, "cannot read the group's offsets at the source; it joins the set once they can be read", err)
	}
	problems.flush(m.log, statuses, now)
	for _, w := range checkpoints {
		m.writeCheckpoint(c.dst, w)
	}
	untranslatable := 0
	m.mu.Lock()
	for _, gs := range statuses {
		if gs.hidden {
			continue
		}
		for _, p := range gs.status.Partitions {
			if p.Untranslatable {
				untranslatable++
			}
		}
	}
	m.groups = statuses
	m.groupsSyncedAt = now
	m.mu.Unlock()
	m.metrics.setUntranslatable(untranslatable)
	set := make([]listeners.Group, 0, len(selected))
	for _, g := range selected {
		set = append(set, listeners.Group{Name: g.Name, Topics: g.Topics})
	}
	m.publishGroups(set)
	return nil
}

// targetFetchErr is why the target's current offsets of group could not
// be read, or nil. A group the target does not know has no offsets there:
// that is an answer, not an error.
func targetFetchErr(fetched kadm.FetchOffsetsResponses, group string) error {
	r, ok := fetched[group]
	switch {
	case !ok:
		return errors.New("no answer for the group")
	case r.Err == nil, errors.Is(r.Err, kerr.GroupIDNotFound):
		return nil
	default:
		return r.Err
	}
}

// translateGroup translates one group's committed source offsets. It
// returns the group's status (State synced, behind or partial, or error
// when some target offsets could not be read), the offsets to commit on
// the target (never moving a partition backwards, unless the source group
// itself moved back and FollowSourceRewinds is set) with the source offset
// each comes from, and the checkpoints that changed. Partitions that cannot be translated exactly are in the
// status, and neither committed nor checkpointed.
func (m *Mirror) translateGroup(ctx context.Context, c *clients, group string, gs *groupState, offs kadm.OffsetResponses, mirrored map[string]string, cp dataPlane, target kadm.FetchOffsetsResponse, problems *problemLog) (GroupStatus, kadm.Offsets, map[data.TopicPartition]int64, []pendingCheckpoint) {
	st := GroupStatus{Mirror: m.cfg.Name, Group: group, State: GroupSynced}
	commit := make(kadm.Offsets)
	sources := make(map[data.TopicPartition]int64)
	var checkpoints []pendingCheckpoint
	var unreadable []string // target partitions whose current offset could not be read
	var firstErr error
	srcErrs := false
	offs.Each(func(o kadm.OffsetResponse) {
		targetTopic, ok := mirrored[o.Topic]
		if !ok || o.At < 0 {
			return
		}
		tp := data.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		if o.Err != nil {
			// This partition's offset is unknown this time.
			srcErrs = true
			problems.add(gs, group, "cannot read a partition's offset of the group at the source; not committing it", fmt.Errorf("%s/%d: %w", o.Topic, o.Partition, o.Err))
			return
		}
		ps := cp.Partition(tp)
		if ps == nil {
			return // not copied yet
		}
		gp := GroupPartition{SourceTopic: o.Topic, TargetTopic: targetTopic, Partition: o.Partition, SourceOffset: o.At}
		tto, tbehind, terr := m.translatePartition(ctx, c.dstAdm, ps, o.At)
		var floor index.Run
		ps.Mu.Lock()
		gp.setTranslation(ps.Index, tto, tbehind, terr)
		below := errors.Is(terr, index.ErrBelowAdopted)
		if below {
			floor, _ = ps.Index.Floor()
		}
		ps.Mu.Unlock()
		if below && m.mm2Syncs != nil {
			m.translateFromMM2(ctx, c, &gp, tp, floor, planeFloors(cp))
		}
		st.Partitions = append(st.Partitions, gp)
		if gp.Untranslatable {
			return // never guessed, never committed
		}
		to, behind := gp.TargetOffset, gp.Behind
		cv := checkpointValue{SourceOffset: o.At, TargetTopic: targetTopic, TargetOffset: to, Behind: behind}
		m.mu.Lock()
		if gs.checkpointed[tp] != cv && gs.checkpointing[tp] != cv {
			gs.checkpointing[tp] = cv
			checkpoints = append(checkpoints, pendingCheckpoint{gs: gs, key: checkpointKey{Group: group, Topic: o.Topic, Partition: o.Partition}, tp: tp, value: cv})
		}
		m.mu.Unlock()
		cur, has := target.Fetched.Lookup(targetTopic, o.Partition)
		if has && cur.Err != nil {
			// The guard below needs this partition's current offset.
			unreadable = append(unreadable, fmt.Sprintf("%s/%d", targetTopic, o.Partition))
			if firstErr == nil {
				firstErr = cur.Err
			}
			return
		}
		if has && cur.At >= 0 && to < cur.At {
			// Never move the target group backwards, unless the
			// source group itself moved back (a reset there).
			last, seen := gs.lastSource[tp]
			if !(m.cfg.FollowSourceRewinds && seen && o.At < last) {
				return
			}
		}
		if has && cur.At == to {
			gs.lastSource[tp] = o.At
			return
		}
		commit.Add(kadm.Offset{Topic: targetTopic, Partition: o.Partition, At: to, LeaderEpoch: -1})
		sources[tp] = o.At
	})
	st.settle()
	if srcErrs {
		m.metrics.incAdminErrors(adminFetchOffsets)
	}
	if len(unreadable) > 0 {
		m.metrics.incAdminErrors(adminFetchOffsets)
		sort.Strings(unreadable)
		problems.add(gs, group, "cannot read some of the group's offsets on the target; not committing those partitions", firstErr)
		st.State, st.Error = GroupError, fmt.Sprintf("cannot read the group's offsets on the target for %s (not committed): %v", strings.Join(unreadable, ", "), firstErr)
	}
	return st, commit, sources, checkpoints
}

// pendingCheckpoint is a checkpoint to write.
type pendingCheckpoint struct {
	gs    *groupState
	key   checkpointKey
	tp    data.TopicPartition
	value checkpointValue
}

// writeCheckpoint produces a checkpoint. It counts as written only once
// the target acknowledged it; a failed write is counted, reported at the
// next sync and written again then.
func (m *Mirror) writeCheckpoint(dst *kgo.Client, w pendingCheckpoint) {
	k, _ := json.Marshal(w.key)
	v, _ := json.Marshal(w.value)
	// A group's checkpoints share a partition of the checkpoint topic.
	m.dstProduce(dst, &kgo.Record{Topic: m.checkpointTopic, Partition: state.PartitionFor(m.statePartitions(m.checkpointTopic), w.key.Group, 0), Key: k, Value: m.sealer.Seal(v)}, func(_ *kgo.Record, err error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if w.gs.checkpointing[w.tp] == w.value {
			delete(w.gs.checkpointing, w.tp)
		}
		if err != nil {
			w.gs.checkpointErr = fmt.Errorf("%s/%d: %w", w.key.Topic, w.key.Partition, err)
			m.metrics.data().IncInternalWriteErrors(writeCheckpoint)
			return
		}
		w.gs.checkpointed[w.tp] = w.value
	})
}

// groupLogEvery is how often a problem that lasts is logged again.
const groupLogEvery = time.Minute

// problemLog collects what went wrong for groups during one sync and logs
// it rate-limited: one line per problem (message and error) naming the
// groups it hit, when it is new for one of them or was last logged
// groupLogEvery ago. A failure of the whole target thus logs one line a
// minute, not one per group and interval.
type problemLog struct {
	lines []*problemLine
}

type problemLine struct {
	key    string
	msg    string
	err    error
	groups []string
	states []*groupState
}

func (p *problemLog) add(gs *groupState, group, msg string, err error) {
	key := msg + "\x00" + err.Error()
	for _, l := range p.lines {
		if l.key == key {
			if !slices.Contains(l.groups, group) {
				l.groups = append(l.groups, group)
				l.states = append(l.states, gs)
			}
			return
		}
	}
	p.lines = append(p.lines, &problemLine{key: key, msg: msg, err: err, groups: []string{group}, states: []*groupState{gs}})
}

// maxLoggedGroups bounds the group names in one log line.
const maxLoggedGroups = 10

// flush logs the due lines and remembers, per group in statuses, when
// each of its current problems was logged; a problem that went away is
// forgotten, so it is logged at once should it come back.
func (p *problemLog) flush(log *slog.Logger, statuses map[string]*groupState, now time.Time) {
	next := make(map[*groupState]map[string]time.Time)
	for _, l := range p.lines {
		due := false
		for _, gs := range l.states {
			if at, ok := gs.logged[l.key]; !ok || now.Sub(at) >= groupLogEvery {
				due = true
			}
		}
		if due {
			names := l.groups
			if len(names) > maxLoggedGroups {
				names = names[:maxLoggedGroups]
			}
			log.Warn(l.msg, "groups", names, "group_count", len(l.groups), "err", l.err)
		}
		for _, gs := range l.states {
			if next[gs] == nil {
				next[gs] = make(map[string]time.Time)
			}
			at := gs.logged[l.key]
			if due {
				at = now
			}
			next[gs][l.key] = at
		}
	}
	var cleared []string
	for name, gs := range statuses {
		if len(gs.logged) > 0 && len(next[gs]) == 0 && !gs.hidden {
			cleared = append(cleared, name)
		}
		gs.logged = next[gs]
	}
	if len(cleared) > 0 {
		sort.Strings(cleared)
		log.Info("group sync problems cleared", "groups", cleared[:min(len(cleared), maxLoggedGroups)], "group_count", len(cleared))
	}
}

// Groups returns the translated groups, sorted by name.
func (m *Mirror) Groups() []GroupStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]GroupStatus, 0, len(m.groups))
	for _, gs := range m.groups {
		if !gs.hidden {
			out = append(out, gs.status)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// TranslateOptions are what `kmirror translate` asks of Translate.
type TranslateOptions struct {
	// Apply commits the translated offsets to the target group, refused
	// while it has active members there.
	Apply bool
	// AllowRewind lets Apply move a target partition backwards (below
	// the group's offset committed there); without it such an apply is
	// refused with a *RewindError and nothing is committed.
	AllowRewind bool
}

// RewindError is an apply refused because it would move the target group
// backwards.
type RewindError struct {
	Group      string
	Partitions []Rewind
}

// Rewind is one target partition an apply would move backwards.
type Rewind struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   int64  `json:"current_offset"`
	New       int64  `json:"new_offset"`
}

func (e *RewindError) Error() string {
	parts := make([]string, 0, len(e.Partitions))
	for _, r := range e.Partitions {
		parts = append(parts, fmt.Sprintf("%s/%d from %d to %d", r.Topic, r.Partition, r.Current, r.New))
	}
	return fmt.Sprintf("applying would move group %s backwards on the target (%s); nothing applied", e.Group, strings.Join(parts, ", "))
}

// Translate computes, without a running worker, the target offsets of a
// source group from the stored offset index: what `kmirror translate`
// prints for a failover. Partitions that cannot be translated exactly are
// listed as untranslatable and never applied. With opts.Apply it commits
// the others to the target group, refusing while the group has active
// members there, when its current offsets there cannot be read, and when
// it would move a partition backwards (unless opts.AllowRewind).
func (m *Mirror) Translate(ctx context.Context, group string, opts TranslateOptions) (GroupStatus, error) {
	st := GroupStatus{Mirror: m.cfg.Name, Group: group, State: GroupSynced, LastSyncAt: time.Now()}
	c, err := m.newClients()
	if err != nil {
		return st, err
	}
	defer c.close()
	defer m.cancelProduce()
	ld, err := data.LoadProgress(ctx, m.log, m.cfg.TargetOpts, c.dstAdm, m.progressTopic)
	if err != nil {
		return st, fmt.Errorf("read %s on the target: %w", m.progressTopic, m.dstErr(err))
	}
	fetched, err := c.srcAdm.FetchOffsets(ctx, group)
	if err != nil {
		return st, fmt.Errorf("fetch offsets of group %s on the source: %w", group, m.srcErr(err))
	}
	// A topic is mirrored when any partition of it has a stored position
	// or index; a partition of it without one has nothing copied yet.
	mirrored := make(map[string]bool)
	for tp := range ld.Positions {
		mirrored[tp.Topic] = true
	}
	for tp := range ld.Indexes {
		mirrored[tp.Topic] = true
	}
	commit := make(kadm.Offsets)
	fetched.Each(func(o kadm.OffsetResponse) {
		if !mirrored[o.Topic] {
			return
		}
		tp := data.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		ix, pos := ld.Indexes[tp], ld.Positions[tp]
		target := m.cfg.Policy.FormatRemoteTopic(m.cfg.SourceAlias, o.Topic)
		gp := GroupPartition{SourceTopic: o.Topic, TargetTopic: target, Partition: o.Partition, SourceOffset: o.At, TargetOffset: -1}
		if o.Err != nil {
			gp.Untranslatable, gp.Reason = true, fmt.Sprintf("the source answered with an error for this partition: %v", o.Err)
			st.Partitions = append(st.Partitions, gp)
			return
		}
		if o.At < 0 {
			return // nothing committed
		}
		if ix == nil {
			ix = index.New()
		}
		to, behind, err := translateOffset(ix, pos.Next, o.At)
		gp.setTranslation(ix, to, behind, err)
		if errors.Is(err, index.ErrBelowAdopted) && m.mm2Syncs != nil {
			floor, _ := ix.Floor()
			m.translateFromMM2(ctx, c, &gp, tp, floor, indexFloors(ld.Indexes))
		}
		st.Partitions = append(st.Partitions, gp)
		if !gp.Untranslatable {
			commit.Add(kadm.Offset{Topic: target, Partition: o.Partition, At: gp.TargetOffset, LeaderEpoch: -1})
		}
	})
	st.settle()
	if len(st.Partitions) == 0 {
		return st, fmt.Errorf("group %s has no committed offsets on topics mirrored by %s", group, m.cfg.Name)
	}
	if !opts.Apply {
		return st, nil
	}
	if len(commit) == 0 {
		return st, fmt.Errorf("no partition of group %s can be translated exactly: nothing to apply", group)
	}
	members := activeMembers(ctx, c.dstAdm, []string{group})
	if err := members.unknown[group]; err != nil {
		return st, fmt.Errorf("cannot tell whether group %s has active members on the target: %w; nothing applied", group, err)
	}
	if ms := members.members[group]; len(ms) > 0 {
		return st, fmt.Errorf("group %s has %d active members on the target (%s): stop them before applying", group, len(ms), strings.Join(ms, ", "))
	}
	if err := refuseRewind(ctx, c.dstAdm, group, commit, opts.AllowRewind); err != nil {
		return st, err
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

// refuseRewind reads group's current offsets on the target and returns a
// *RewindError when commit would move a partition backwards (unless
// allow), or an error when those offsets cannot be read: not knowing is no
// permission to rewind.
func refuseRewind(ctx context.Context, adm *kadm.Client, group string, commit kadm.Offsets, allow bool) error {
	current, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil // no group on the target: nothing to move backwards
	}
	if err != nil {
		return fmt.Errorf("read the current offsets of group %s on the target: %w; nothing applied", group, err)
	}
	var unreadable []string
	rewinds := &RewindError{Group: group}
	commit.Each(func(o kadm.Offset) {
		cur, ok := current.Lookup(o.Topic, o.Partition)
		switch {
		case !ok || (cur.Err == nil && cur.At < 0):
		case cur.Err != nil:
			unreadable = append(unreadable, fmt.Sprintf("%s/%d: %v", o.Topic, o.Partition, cur.Err))
		case o.At < cur.At:
			rewinds.Partitions = append(rewinds.Partitions, Rewind{Topic: o.Topic, Partition: o.Partition, Current: cur.At, New: o.At})
		}
	})
	if len(unreadable) > 0 {
		sort.Strings(unreadable)
		return fmt.Errorf("read the current offsets of group %s on the target: %s; nothing applied", group, strings.Join(unreadable, "; "))
	}
	if len(rewinds.Partitions) > 0 && !allow {
		sort.Slice(rewinds.Partitions, func(i, j int) bool {
			a, b := rewinds.Partitions[i], rewinds.Partitions[j]
			return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
		})
		return rewinds
	}
	return nil
}

// targetMembers is what the target says of groups' members.
type targetMembers struct {
	// members are the members consuming on the target, by group, as
	// "client-id@host".
	members map[string][]string
	// unknown are the groups whose members could not be learned this
	// time, with the error. Unknown is not "no members".
	unknown map[string]error
}

// activeMembers returns, per group, the members consuming on the target.
// A classic group answers DescribeGroups; a group on the consumer protocol
// (KIP-848) answers ConsumerGroupDescribe instead, so both are asked. Each
// answers GROUP_ID_NOT_FOUND for a group it does not hold (a group that
// does not exist, or one of the other protocol: Kafka and kfake alike), and
// that is a "no members" answer; any other error, or no answer, leaves the
// group unknown. Brokers without KIP-848 refuse the second request: then
// only classic groups exist.
func activeMembers(ctx context.Context, adm *kadm.Client, groups []string) targetMembers {
	out := targetMembers{members: make(map[string][]string), unknown: make(map[string]error)}
	if len(groups) == 0 {
		return out
	}
	unknown := func(g string, err error) {
		if out.unknown[g] == nil {
			out.unknown[g] = err
		}
	}
	described, err := adm.DescribeGroups(ctx, groups...)
	for _, g := range groups {
		d, ok := described[g]
		switch {
		case !ok:
			unknown(g, fmt.Errorf("describe group: %w", orNoAnswer(err)))
		case d.Err == nil:
			for _, m := range d.Members {
				out.members[g] = append(out.members[g], m.ClientID+"@"+m.ClientHost)
			}
		case !errors.Is(d.Err, kerr.GroupIDNotFound):
			unknown(g, fmt.Errorf("describe group: %w", d.Err))
		}
	}
	cgs, err := adm.DescribeConsumerGroups(ctx, groups...)
	if err != nil && len(cgs) == 0 && !consumerGroupDescribeSupported(ctx, adm) {
		return out
	}
	for _, g := range groups {
		d, ok := cgs[g]
		switch {
		case !ok:
			unknown(g, fmt.Errorf("describe consumer-protocol group: %w", orNoAnswer(err)))
		case d.Err == nil:
			for _, m := range d.Members {
				out.members[g] = append(out.members[g], m.ClientID+"@"+m.ClientHost)
			}
		case !errors.Is(d.Err, kerr.GroupIDNotFound):
			unknown(g, fmt.Errorf("describe consumer-protocol group: %w", d.Err))
		}
	}
	return out
}

func orNoAnswer(err error) error {
	if err == nil {
		return errors.New("no answer for the group")
	}
	return err
}

// consumerGroupDescribeSupported reports whether a broker of the cluster
// knows ConsumerGroupDescribe (KIP-848). When the brokers' versions cannot
// be read it answers true: a failed describe is then an error, not a
// cluster without consumer-protocol groups.
func consumerGroupDescribeSupported(ctx context.Context, adm *kadm.Client) bool {
	vs, err := adm.ApiVersions(ctx)
	if err != nil || len(vs) == 0 {
		return true
	}
	supported := false
	vs.Each(func(v kadm.BrokerApiVersions) {
		if v.Err != nil {
			supported = true
			return
		}
		if _, _, ok := v.KeyVersions(int16(kmsg.ConsumerGroupDescribe)); ok {
			supported = true
		}
	})
	return supported
}

// isActiveGroupErr reports a commit refused because the group has members:
// the classic protocol answers UNKNOWN_MEMBER_ID to a commit from outside
// the group, the consumer protocol STALE_MEMBER_EPOCH or UNKNOWN_MEMBER_ID.
func isActiveGroupErr(err error) bool {
	return errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.StaleMemberEpoch) || errors.Is(err, kerr.IllegalGeneration)
}
