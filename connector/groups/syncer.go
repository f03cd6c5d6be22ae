package groups

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
	"sync"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/index"
	"github.com/kmirror/kmirror/connector/state"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
)

// Config is what a Syncer reads of its mirror's configuration.
type Config struct {
	// Mirror is the mirror's name: its checkpoint topic's and what
	// filters are told.
	Mirror string
	// SourceAlias and Policy name the target topic of a source topic
	// (Translate, which runs without the control plane).
	SourceAlias string
	Policy      policy.ReplicationPolicy
	// SourceOpts and TargetOpts connect the readers of state topics.
	SourceOpts, TargetOpts []kgo.Opt
	// ProgressTopic holds the offset indexes: Translate loads them, and a
	// translation reads back a chunk the index budget evicted.
	ProgressTopic string
	// Sealer wraps the checkpoints in the offset envelope.
	Sealer data.Sealer
	// FollowSourceRewinds lets a sync move a target group backwards when
	// the source group itself moved back.
	FollowSourceRewinds bool
	// TranslateOnly: the sync translates and checkpoints, and commits
	// nothing (sync.group_offsets disabled).
	TranslateOnly bool
	// MM2OffsetSyncs is where MirrorMaker 2's offset syncs are (nil
	// without an mm2 block): offsets older than an adopted position
	// translate from them.
	MM2OffsetSyncs *MM2OffsetSyncs
	Log            *slog.Logger
	// Metrics counts into the mirror's series; nil counts nothing.
	Metrics *Metrics
}

// MM2OffsetSyncs names MirrorMaker 2's offset-syncs topic.
type MM2OffsetSyncs struct {
	Topic string
	// OnTarget: the topic is on the target cluster, else on the source.
	OnTarget bool
}

// Mirror is what the groups plane needs of the rest of its mirror.
type Mirror interface {
	// Mirrored are the topics being copied: source topic -> target
	// topic (the control plane's).
	Mirrored() map[string]string
	// GroupFilters are the group filters of the current selection, in
	// order (a config reload swaps them).
	GroupFilters() []filters.GroupFilter
	// PublishGroups hands the group set to the listeners.
	PublishGroups(groups []listeners.Group)
	// StatePartitions is the partition count of one of the mirror's
	// state topics (progress, checkpoints).
	StatePartitions(topic string) int32
	// Produce writes a record of kmirror's own to the target without
	// blocking: with the producer's buffer full, promise fails at once
	// and the record is written again at a later sync.
	Produce(dst *kgo.Client, r *kgo.Record, promise func(*kgo.Record, error))
	// ReverseOf is the mirror this one copies back for after a failover
	// (kmirror failback set it), or "": offsets below a partition's
	// floor translate through that mirror's index backwards.
	ReverseOf() string
	// SrcErr and DstErr explain an error of a request to the source or
	// the target: the cluster, its brokers and what to check.
	SrcErr(err error) error
	DstErr(err error) error
}

// DataPlane is what the groups plane reads of the data plane: the
// partitions it copies, each with its offset index and acknowledged
// position.
type DataPlane interface {
	// Partition is the state of a copied partition, nil when it is not
	// copied (yet).
	Partition(tp data.TopicPartition) *data.PartitionState
	// Snapshot is every partition copied here.
	Snapshot() []*data.PartitionState
}

// Clients are the mirror's connections a sync or a translation uses.
type Clients struct {
	// SrcAdm and DstAdm are the admin clients of the source and target.
	SrcAdm, DstAdm *kadm.Client
	// Dst is the target's producer, for the checkpoints.
	Dst *kgo.Client
}

// Syncer is a mirror's groups plane: it keeps what it learned of every
// group between syncs, and the caches translations read through.
type Syncer struct {
	cfg             Config
	mirror          Mirror
	checkpointTopic string
	// chunks caches offset index chunks read back for translations
	// (chunks.go).
	chunks *chunkCache
	// mm2 are MM2's offset syncs, for group offsets older than an
	// adopted position (mm2syncs.go); nil without cfg.MM2OffsetSyncs.
	mm2 *mm2SyncStore
	// reverse caches the former mirror's indexes of a failback mirror
	// (reverse.go).
	reverse reverseIndexes

	mu     sync.Mutex
	groups map[string]*groupState // the translated groups, by name
}

// New returns the groups plane of a mirror.
func New(cfg Config, m Mirror) *Syncer {
	s := &Syncer{
		cfg:             cfg,
		mirror:          m,
		checkpointTopic: policy.InternalTopic(cfg.Mirror, "checkpoints"),
		chunks:          newChunkCache(64),
		groups:          make(map[string]*groupState),
	}
	if cfg.MM2OffsetSyncs != nil {
		s.mm2 = newMM2SyncStore()
	}
	return s
}

// CheckpointTopic is the name of the target topic holding the mirror's
// checkpoints (the mirror creates it at start).
func (s *Syncer) CheckpointTopic() string { return s.checkpointTopic }

// groupState is what the Syncer remembers of a group between syncs. Only
// the sync goroutine touches it, except the fields marked as guarded by
// Syncer.mu (Groups reads status, checkpoint promises write checkpoints).
type groupState struct {
	status Status // guarded by Syncer.mu
	// topics are the group's mirrored source topics at the last fetch of
	// its offsets: a group whose fetch fails stays in the set with them.
	topics []string
	// hidden marks a group that is not in the set (its first fetch at
	// the source failed); its state only rate-limits the log. Written
	// under Syncer.mu.
	hidden bool
	// lastSource is the source offset last synced per source partition,
	// to tell a source group that moved back from a stale translation.
	lastSource map[data.TopicPartition]int64

	// Guarded by Syncer.mu. checkpointed is the checkpoint the target
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
	// At is when it was written (Unix ms): how old the source offset
	// is, for a failover that has only the checkpoints. Not part of
	// what decides whether a checkpoint changed.
	At int64 `json:"at,omitempty"`
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
func (s *Syncer) groupCandidates(ctx context.Context, c Clients, mirrored map[string]string, known map[string]*groupState) (sourceGroups, error) {
	out := sourceGroups{offs: make(map[string]kadm.OffsetResponses), failed: make(map[string]error)}
	listed, err := c.SrcAdm.ListGroups(ctx)
	if err != nil {
		s.cfg.Metrics.incAdminErrors(AdminDescribeGroups)
		if len(listed) == 0 {
			return out, fmt.Errorf("list source groups: %w", s.mirror.SrcErr(err))
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
	fetched := c.SrcAdm.FetchManyOffsets(ctx, names...)
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
			s.cfg.Metrics.incAdminErrors(AdminFetchOffsets)
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
func (s *Syncer) selectGroups(ctx context.Context, cands []filters.Group) ([]filters.Group, error) {
	for i, f := range s.mirror.GroupFilters() {
		names, err := f.FilterGroups(ctx, filters.GroupRequest{Mirror: s.cfg.Mirror, Groups: cands})
		if err != nil {
			s.cfg.Metrics.incFilterErrors()
			return nil, fmt.Errorf("group filter %d failed; keeping the previous group set: %w", i, err)
		}
		cands = slices.DeleteFunc(cands, func(g filters.Group) bool { return !slices.Contains(names, g.Name) })
	}
	return cands, nil
}

// Sync is one group sync pass, translating through the partitions of dp.
// It returns an error only when the pass could not run at all (the source
// listed no group, a filter failed); what fails for one group is that
// group's status, counted, and logged at most once a minute while it
// lasts.
func (s *Syncer) Sync(ctx context.Context, c Clients, dp DataPlane) error {
	if s.mm2 != nil {
		s.mm2.nextPass() // a failed read of MM2's offset syncs is tried again
	}
	mirrored := s.mirror.Mirrored() // source topic -> target topic
	s.mu.Lock()
	known := s.groups
	s.mu.Unlock()
	src, err := s.groupCandidates(ctx, c, mirrored, known)
	if err != nil {
		return err
	}
	selected, err := s.selectGroups(ctx, src.cands)
	if err != nil {
		return err // keep the previous group set
	}
	var fresh []string // the selected groups whose source offsets were read
	for _, g := range selected {
		if src.failed[g.Name] == nil {
			fresh = append(fresh, g.Name)
		}
	}
	members := activeMembers(ctx, c.DstAdm, fresh)
	for range members.unknown {
		s.cfg.Metrics.incAdminErrors(AdminDescribeGroups)
	}
	targetNow := c.DstAdm.FetchManyOffsets(ctx, fresh...)

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
		s.mu.Lock()
		gs.hidden = false
		ckErr := gs.checkpointErr
		gs.checkpointErr = nil
		s.mu.Unlock()
		if ckErr != nil {
			problems.add(gs, g.Name, "could not write checkpoints to "+s.checkpointTopic+"; writing them again", ckErr)
		}
		if err := src.failed[g.Name]; err != nil {
			// Unknown this time: keep the last status, commit nothing.
			problems.add(gs, g.Name, "cannot read the group's offsets at the source; keeping its last state", err)
			continue
		}
		gs.topics = g.Topics
		st, commit, sources, cps := s.translateGroup(ctx, c, g.Name, gs, src.offs[g.Name], mirrored, dp, targetNow[g.Name], &problems)
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
			s.cfg.Metrics.incAdminErrors(AdminFetchOffsets)
			// Without them the never-rewind guard cannot run.
			problems.add(gs, g.Name, "cannot read the group's offsets on the target; not committing it", err)
			blocked = append(blocked, fmt.Sprintf("cannot read the group's offsets on the target: %v", err))
		}
		switch {
		case s.cfg.TranslateOnly:
			// Translation only, for MM2's checkpoints: nothing is
			// committed to the target group.
		case len(blocked) > 0:
			st.State, st.Error = StateError, strings.Join(blocked, "; ")
		case len(members.members[g.Name]) > 0:
			// Consumers are active on the target: their commits win.
			// MM2 does the same (UNKNOWN_MEMBER_ID otherwise).
			st.State, st.Error = StateActive, ""
		case len(commit) > 0:
			resp, err := c.DstAdm.CommitOffsets(ctx, g.Name, commit)
			if err == nil {
				err = resp.Error()
			}
			if isActiveGroupErr(err) {
				// A member joined between the describe and the commit.
				st.State, st.Error = StateActive, ""
				break
			}
			if err != nil {
				st.State, st.Error = StateError, fmt.Sprintf("commit on the target: %v", err)
				problems.add(gs, g.Name, "could not commit the group's offsets on the target; retrying on the next sync", err)
				s.cfg.Metrics.incGroupSyncErrors()
				break
			}
			maps.Copy(gs.lastSource, sources)
			s.cfg.Metrics.addGroupOffsetsSynced(len(commit))
			s.cfg.Log.Debug("synced group offsets", "group", g.Name, "partitions", len(commit))
		}
		s.mu.Lock()
		gs.status = st
		s.mu.Unlock()
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
		s.mu.Lock()
		gs.hidden = true
		s.mu.Unlock()
		statuses[name] = gs
		problems.add(gs, name, "cannot read the group's offsets at the source; it joins the set once they can be read", err)
	}
	problems.flush(s.cfg.Log, statuses, now)
	for _, w := range checkpoints {
		s.writeCheckpoint(c.Dst, w)
	}
	untranslatable := 0
	s.mu.Lock()
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
	s.groups = statuses
	s.mu.Unlock()
	s.cfg.Metrics.setUntranslatable(untranslatable)
	set := make([]listeners.Group, 0, len(selected))
	for _, g := range selected {
		set = append(set, listeners.Group{Name: g.Name, Topics: g.Topics})
	}
	s.mirror.PublishGroups(set)
	return nil
}

// Groups returns the translated groups, sorted by name.
func (s *Syncer) Groups() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.groups))
	for _, gs := range s.groups {
		if !gs.hidden {
			out = append(out, gs.status)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
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
func (s *Syncer) translateGroup(ctx context.Context, c Clients, group string, gs *groupState, offs kadm.OffsetResponses, mirrored map[string]string, dp DataPlane, target kadm.FetchOffsetsResponse, problems *problemLog) (Status, kadm.Offsets, map[data.TopicPartition]int64, []pendingCheckpoint) {
	st := Status{Mirror: s.cfg.Mirror, Group: group, State: StateSynced}
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
		ps := dp.Partition(tp)
		if ps == nil {
			return // not copied yet
		}
		gp := Partition{SourceTopic: o.Topic, TargetTopic: targetTopic, Partition: o.Partition, SourceOffset: o.At}
		tto, tbehind, terr := s.translatePartition(ctx, c.DstAdm, ps, o.At)
		var floor index.Run
		ps.Mu.Lock()
		gp.setTranslation(ps.Index, tto, tbehind, terr)
		below := errors.Is(terr, index.ErrBelowAdopted)
		if below {
			floor, _ = ps.Index.Floor()
		}
		ps.Mu.Unlock()
		switch former := s.mirror.ReverseOf(); {
		case below && former != "":
			s.translateFromReverse(ctx, c, &gp, tp, floor, former)
		case below && s.mm2 != nil:
			s.translateFromMM2(ctx, c, &gp, tp, floor, planeFloors(dp))
		}
		st.Partitions = append(st.Partitions, gp)
		if gp.Untranslatable {
			return // never guessed, never committed
		}
		to, behind := gp.TargetOffset, gp.Behind
		cv := checkpointValue{SourceOffset: o.At, TargetTopic: targetTopic, TargetOffset: to, Behind: behind}
		s.mu.Lock()
		if gs.checkpointed[tp] != cv && gs.checkpointing[tp] != cv {
			gs.checkpointing[tp] = cv
			checkpoints = append(checkpoints, pendingCheckpoint{gs: gs, key: checkpointKey{Group: group, Topic: o.Topic, Partition: o.Partition}, tp: tp, value: cv})
		}
		s.mu.Unlock()
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
			if !(s.cfg.FollowSourceRewinds && seen && o.At < last) {
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
		s.cfg.Metrics.incAdminErrors(AdminFetchOffsets)
	}
	if len(unreadable) > 0 {
		s.cfg.Metrics.incAdminErrors(AdminFetchOffsets)
		sort.Strings(unreadable)
		problems.add(gs, group, "cannot read some of the group's offsets on the target; not committing those partitions", firstErr)
		st.State, st.Error = StateError, fmt.Sprintf("cannot read the group's offsets on the target for %s (not committed): %v", strings.Join(unreadable, ", "), firstErr)
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
func (s *Syncer) writeCheckpoint(dst *kgo.Client, w pendingCheckpoint) {
	k, _ := json.Marshal(w.key)
	stamped := w.value
	stamped.At = time.Now().UnixMilli()
	v, _ := json.Marshal(stamped)
	// A group's checkpoints share a partition of the checkpoint topic.
	s.mirror.Produce(dst, &kgo.Record{Topic: s.checkpointTopic, Partition: state.PartitionFor(s.mirror.StatePartitions(s.checkpointTopic), w.key.Group, 0), Key: k, Value: s.cfg.Sealer.Seal(v)}, func(_ *kgo.Record, err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.gs.checkpointing[w.tp] == w.value {
			delete(w.gs.checkpointing, w.tp)
		}
		if err != nil {
			w.gs.checkpointErr = fmt.Errorf("%s/%d: %w", w.key.Topic, w.key.Partition, err)
			s.cfg.Metrics.incInternalWriteErrors(WriteCheckpoint)
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
