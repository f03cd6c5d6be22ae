// Package slots shares the work of one mirror among the kmirror workers that
// run it, through Kafka's own group membership on the target cluster.
//
// The work of a mirror is cut into a fixed number of task slots; SlotOf says
// which slot a source partition belongs to. The slots are the partitions of
// an internal control topic on the target cluster (for example
// kmirror.<mirror>.slots.internal), and the workers of the mirror are the
// members of one consumer group (for example kmirror.<mirror>) subscribed to
// that topic. The group coordinator, a broker, and the group's leader hand
// the partitions out: there is no election, lock or consensus of our own.
// Nothing is ever produced to the control topic and nothing is committed
// for the group; the topic exists only so that the group has something to
// assign, and this package never fetches from it.
//
// # Kafka rules relied on
//
// The group uses the classic group protocol with the cooperative-sticky
// assignor (KIP-429):
//
//   - A member that sends no heartbeat for the session timeout is removed
//     by the coordinator, which starts a rebalance; its slots go to the
//     remaining members as soon as they have rejoined (they learn of the
//     rebalance from their next heartbeat). A member killed with kill -9
//     or cut off by the network thus loses its slots after
//     Config.SessionTimeout plus about one heartbeat interval.
//   - A member that leaves (a LeaveGroup request, sent by Close) is removed
//     at once, and its slots move without waiting for any timeout.
//   - A slot that moves does so in two rebalances: in the first, the old
//     owner's new assignment lacks the slot and nobody else gets it; the
//     old owner revokes it (OnRevoked returns) and rejoins, and only that
//     second rebalance assigns it to the new owner. So, between members
//     that stay in the group, the old owner's OnRevoked for a slot returns
//     before the new owner's OnAssigned for it is called. Slots that do not
//     move are never revoked: the other members keep working while a
//     worker joins or leaves.
//   - The ordering does not hold when the old owner is removed from the
//     group (session timeout, rebalance timeout, network partition): the
//     new owner may get the slot while the old owner still believes it owns
//     it, and the old owner learns of the loss only later (OnLost), if ever.
//     Writes must therefore be fenced by other means (a slot's
//     transactional ID): this package only says who should work. How late
//     the old owner learns depends on how it was cut off: a refused
//     connection fails its next heartbeat at once, while dropped traffic
//     must first time out (measured on kfake with a 6s session timeout and
//     franz-go's default timeouts: OnLost 10s to 40s after the partition
//     began, while the others owned its slots after 6.5s).
//   - A member that lost its session keeps trying to rejoin, as a new
//     member, and gets slots again through OnAssigned once it can reach
//     the coordinator.
//
// The next-generation protocol (KIP-848, server-side assignment) is not
// used: its session timeout is a broker or group config
// (group.consumer.session.timeout.ms), not the member's, so
// Config.SessionTimeout could not bound a takeover; it needs Kafka 4.0 or
// later on the target (franz-go advises 4.3 or later), while a mirror's
// target may be older; and DescribeGroups does not describe its groups.
package slots

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Defaults for the zero values of Config.
const (
	DefaultSessionTimeout   = 10 * time.Second
	DefaultRebalanceTimeout = 30 * time.Second
)

// leaveGrace is how long Close waits, past the rebalance timeout, for the
// LeaveGroup request and for the client to shut down.
const leaveGrace = 5 * time.Second

// ErrRebalancing is returned (wrapped) by Member.Members while the group is
// rebalancing: the coordinator does not say who owns what until the group
// is stable again. It means "unknown this time", not "no owners".
var ErrRebalancing = errors.New("group is rebalancing")

// Config configures a member. Group, Topic and Slots are required.
type Config struct {
	// Group is the consumer group of the mirror's workers on the target
	// cluster, for example "kmirror.<mirror>". Every worker of a mirror
	// must use the same Group and Topic, and nothing else may use the
	// group.
	Group string
	// Topic is the control topic whose partitions are the slots, for
	// example "kmirror.<mirror>.slots.internal". Join creates it when it
	// does not exist.
	Topic string
	// Slots is the partition count Join creates Topic with. A topic that
	// exists keeps its count, whatever this says: Member.Slots returns the
	// count in force. Slot counts never change after creation (SlotOf is
	// the data layout), so do not add partitions to the topic.
	Slots int32
	// ReplicationFactor is the replication factor Join creates Topic with;
	// 0 or -1 mean the broker's default.
	ReplicationFactor int16

	// SessionTimeout is how long the coordinator waits for a heartbeat
	// before it removes a member and moves its slots (default 10s). It
	// must lie within the brokers' group.min.session.timeout.ms (6s by
	// default) and group.max.session.timeout.ms. Heartbeats go every fifth
	// of it.
	SessionTimeout time.Duration
	// RebalanceTimeout bounds how long a member may take to rejoin once a
	// rebalance starts, and so how long OnRevoked may run (default 30s); a
	// member that takes longer is removed from the group. It also bounds
	// the OnRevoked that Close runs.
	RebalanceTimeout time.Duration

	// ClientOpts connect to the target cluster: seeds, TLS, SASL, client
	// ID, logger, dialer. They must not set group or consumer options;
	// Join sets those itself, after these, so its own win.
	ClientOpts []kgo.Opt
	// Logger receives the package's own messages (nil: discarded). The
	// client's messages go to the logger in ClientOpts.
	Logger *slog.Logger

	// The callbacks are called serially (never two at once) from
	// franz-go's group goroutines, never from the caller's. A slot is
	// given to OnAssigned only if it is not owned, and to OnRevoked or
	// OnLost only if it is; none is called with no slots. Slots are
	// sorted. The context is canceled when Close runs out of time, and
	// once it has returned.
	// Heartbeats go on while OnAssigned or OnRevoked runs, but the
	// group's next rebalance waits for it, and calling Close from a
	// callback waits out Close's bound. The first OnAssigned may run
	// before Join returns.

	// OnAssigned is called with the slots this member now owns (Owned
	// includes them already). Work on a slot may start when it is called;
	// the previous owner may not have stopped if it was removed from the
	// group (see the package documentation).
	OnAssigned func(ctx context.Context, slots []int32)
	// OnRevoked is called with the slots this member gives up in a
	// rebalance (only those that move to another member) or when it
	// leaves (all of them, on Close). It must stop working on them before
	// it returns, flushing and persisting what it wants to keep: as long
	// as this member stays in the group, the new owner is assigned them
	// only after it returns. It must return within RebalanceTimeout, or
	// the group removes this member.
	OnRevoked func(ctx context.Context, slots []int32)
	// OnLost is called with the slots this member has lost without a
	// rebalance, because the group removed it (a session timeout, for
	// example after a long pause or a network partition). Other members
	// may own them already: stop at once; a flush may fail or be fenced.
	OnLost func(ctx context.Context, slots []int32)
}

// Member is one worker's membership in the group. Create it with Join and
// end it with Close. Its methods are safe for concurrent use.
type Member struct {
	cfg   Config
	log   *slog.Logger
	cl    *kgo.Client
	slots int32

	// cbCtx is the context of the callbacks; Close cancels it when the
	// callbacks ran out of time.
	cbCtx    context.Context
	cbCancel context.CancelFunc

	pollCancel context.CancelFunc
	pollDone   chan struct{}

	joined     chan struct{} // closed once the first assignment is handled
	joinedOnce sync.Once
	joinFailed chan error // a group error Join should not wait out
	closeOnce  sync.Once

	mu      sync.Mutex
	owned   map[int32]bool
	lastErr error // the last error that broke a group session
	// settling is the rebalance under way as this member sees it; its
	// Since is zero once the group gave this member an assignment.
	settling Settling
}

// Settling is a rebalance this member is in: since when, what it waits
// for, and the last error that broke its group session meanwhile.
type Settling struct {
	// Since is when the rebalance began for this member: Join, or the
	// first JoinGroup or group error after its last assignment.
	Since time.Time
	// Waiting is the request it last sent to complete it: "JoinGroup"
	// (the coordinator waits for every member to rejoin) or "SyncGroup"
	// (the leader's assignment); empty before the first is sent.
	Waiting string
	// Err is the last error that broke the group session since then
	// (a JoinGroup timed out, the coordinator moved), nil if none.
	Err error
}

// Join ensures the control topic exists (creating it with cfg.Slots
// partitions), joins the group, and returns once the group has given this
// member its first assignment, which may be empty when the group has more
// members than slots. The slots of that assignment have been passed to
// OnAssigned by then.
//
// ctx bounds only Join: the membership lasts until Close. Join retries
// errors it can outlive (an unreachable broker, a coordinator moving)
// until ctx is done, and then returns an error naming the last one; it
// fails at once on a bad config or an error the group would repeat (not
// authorized, session timeout outside the brokers' limits, a group used by
// another protocol).
func Join(ctx context.Context, cfg Config) (*Member, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("group", cfg.Group, "topic", cfg.Topic)

	slots, err := ensureTopic(ctx, &cfg, log)
	if err != nil {
		return nil, err
	}

	m := &Member{
		cfg:        cfg,
		log:        log,
		slots:      slots,
		joined:     make(chan struct{}),
		joinFailed: make(chan error, 1),
		pollDone:   make(chan struct{}),
		owned:      make(map[int32]bool),
	}
	m.cbCtx, m.cbCancel = context.WithCancel(context.Background())
	m.settling.Since = time.Now()

	opts := append(slices.Clip(cfg.ClientOpts),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		// Nothing is consumed, so there is nothing to commit; an
		// autocommit would only write empty offsets for the group.
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(cfg.SessionTimeout),
		// The group's requests (JoinGroup, SyncGroup, Heartbeat) are
		// retried for up to a session, franz-go's default, which the
		// cluster's request_timeout (internal/kafka) would cut short.
		kgo.RetryTimeout(cfg.SessionTimeout),
		// Kafka advises a third of the session timeout at most; a fifth
		// leaves room for a slow round trip or two on a loaded machine.
		kgo.HeartbeatInterval(cfg.SessionTimeout/5),
		kgo.RebalanceTimeout(cfg.RebalanceTimeout),
		kgo.OnPartitionsAssigned(m.assigned),
		kgo.OnPartitionsRevoked(m.revoked),
		kgo.OnPartitionsLost(m.lost),
		kgo.WithHooks(groupErrHook{m}, rebalanceHook{m}),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		m.cbCancel()
		return nil, fmt.Errorf("slots: group %q: %w", cfg.Group, err)
	}
	m.cl = cl
	// The topic carries no records: pausing it keeps the client from
	// sending fetch requests for it, while the group still assigns its
	// partitions (assignment does not depend on fetching).
	cl.PauseFetchTopics(cfg.Topic)

	pollCtx, pollCancel := context.WithCancel(context.Background())
	m.pollCancel = pollCancel
	go m.poll(pollCtx)

	select {
	case <-m.joined:
		log.Info("joined the slots group", "slots", slots, "member_id", m.ID(), "owned", m.Owned())
		return m, nil
	case err = <-m.joinFailed:
	case <-ctx.Done():
		m.mu.Lock()
		last := m.lastErr
		m.mu.Unlock()
		err = ctx.Err()
		if last != nil {
			err = fmt.Errorf("%w (last group error: %w)", err, last)
		}
	}
	m.Close()
	return nil, fmt.Errorf("slots: join group %q for topic %q: %w", cfg.Group, cfg.Topic, err)
}

// setDefaults validates cfg and fills in its defaults.
func (cfg *Config) setDefaults() error {
	switch {
	case cfg.Group == "":
		return errors.New("slots: Config.Group is empty")
	case cfg.Topic == "":
		return errors.New("slots: Config.Topic is empty")
	case cfg.Slots <= 0:
		return fmt.Errorf("slots: Config.Slots is %d, want at least 1", cfg.Slots)
	case cfg.ReplicationFactor < -1:
		return fmt.Errorf("slots: Config.ReplicationFactor is %d, want -1, 0 (both: broker default) or more", cfg.ReplicationFactor)
	case cfg.SessionTimeout < 0 || cfg.RebalanceTimeout < 0:
		return errors.New("slots: Config.SessionTimeout and RebalanceTimeout must not be negative")
	}
	if cfg.ReplicationFactor == 0 {
		cfg.ReplicationFactor = -1
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.RebalanceTimeout == 0 {
		cfg.RebalanceTimeout = DefaultRebalanceTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// ensureTopic returns the partition count of cfg.Topic, creating the topic
// with cfg.Slots partitions if the cluster does not have it. Several
// workers may start at once: a creation that loses the race finds the
// winner's topic. It waits until the topic is in the metadata, so that the
// group sees it when it joins.
func ensureTopic(ctx context.Context, cfg *Config, log *slog.Logger) (int32, error) {
	cl, err := kgo.NewClient(cfg.ClientOpts...)
	if err != nil {
		return 0, fmt.Errorf("slots: topic %q: %w", cfg.Topic, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	var last error // why the last attempt did not finish
	created := false
	for attempt := 0; ; attempt++ {
		n, err := partitionCount(ctx, cl, cfg.Topic)
		switch {
		case err == nil:
			if n != cfg.Slots {
				log.Warn("the slots topic exists with another partition count than configured; using the topic's", "partitions", n, "configured", cfg.Slots)
			}
			return n, nil
		case !errors.Is(err, kerr.UnknownTopicOrPartition):
			if !retriable(err) {
				return 0, fmt.Errorf("slots: describe topic %q: %w", cfg.Topic, err)
			}
			last = err
		case created:
			// Created (by us or a racing worker) but not yet in this
			// broker's metadata: wait for it.
			last = err
		default:
			resp, err := adm.CreateTopic(ctx, cfg.Slots, cfg.ReplicationFactor, nil, cfg.Topic)
			switch {
			case err == nil:
				created = true
				log.Info("created the slots topic", "partitions", resp.NumPartitions, "replication_factor", resp.ReplicationFactor)
				continue
			case errors.Is(err, kerr.TopicAlreadyExists):
				created = true
				continue
			case retriable(err) || ctx.Err() != nil:
				last = err
			default:
				return 0, fmt.Errorf("slots: create topic %q with %d partitions (create it by hand if this worker may not): %w", cfg.Topic, cfg.Slots, err)
			}
		}
		backoff := min(100*time.Millisecond<<min(attempt, 4), time.Second)
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("slots: ensure topic %q: %w (last: %v)", cfg.Topic, ctx.Err(), last)
		case <-time.After(backoff):
		}
	}
}

// partitionCount asks a broker for topic's partition count. It bypasses
// the client's metadata cache (which kadm's ListTopics uses), so a topic
// just created shows up at once.
func partitionCount(ctx context.Context, cl *kgo.Client, topic string) (int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return 0, err
		}
		if len(t.Partitions) == 0 {
			return 0, kerr.LeaderNotAvailable // being created
		}
		return int32(len(t.Partitions)), nil
	}
	return 0, kerr.UnknownTopicOrPartition
}

// retriable reports whether err may go away by itself: a Kafka error
// marked retriable, or a request that failed (no connection, a timeout)
// rather than being refused.
func retriable(err error) bool {
	var ke *kerr.Error
	return !errors.As(err, &ke) || ke.Retriable
}

// poll drains what the client buffers for polling: the topic is paused, so
// that is only the errors the client injects when a group session breaks
// (reported by groupErrHook), which would otherwise pile up.
func (m *Member) poll(ctx context.Context) {
	defer close(m.pollDone)
	for ctx.Err() == nil {
		if m.cl.PollFetches(ctx).IsClientClosed() {
			return
		}
	}
}

// groupErrHook keeps the error that broke a group session.
type groupErrHook struct{ m *Member }

var _ kgo.HookGroupManageError = groupErrHook{}

func (h groupErrHook) OnGroupManageError(err error) {
	m := h.m
	if errors.Is(err, context.Canceled) {
		m.mu.Lock()
		m.lastErr = err
		m.mu.Unlock()
		return // leaving
	}
	m.mu.Lock()
	m.lastErr = err
	if m.settling.Since.IsZero() {
		m.settling.Since = time.Now()
	}
	m.settling.Err = err
	m.mu.Unlock()
	m.log.Warn("group session failed; rejoining", "err", err)
	// Before the first assignment, an error the group would only repeat
	// fails Join at once instead of at its deadline.
	select {
	case <-m.joined:
		return
	default:
	}
	for _, fatal := range []error{
		kerr.GroupAuthorizationFailed,
		kerr.TopicAuthorizationFailed,
		kerr.InvalidSessionTimeout,
		kerr.InconsistentGroupProtocol,
		kerr.GroupMaxSizeReached,
	} {
		if errors.Is(err, fatal) {
			select {
			case m.joinFailed <- err:
			default:
			}
			return
		}
	}
}

// rebalanceHook follows the group requests this member sends, for
// Settling: a JoinGroup begins a rebalance (the coordinator asked for it,
// or the member is new or was removed), a SyncGroup is its second half.
type rebalanceHook struct{ m *Member }

var _ kgo.HookBrokerWrite = rebalanceHook{}

func (h rebalanceHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	var req string
	switch kmsg.Key(key) {
	case kmsg.JoinGroup:
		req = "JoinGroup"
	case kmsg.SyncGroup:
		req = "SyncGroup"
	default:
		return
	}
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.settling.Since.IsZero() {
		m.settling = Settling{Since: time.Now()}
	}
	m.settling.Waiting = req
}

func (m *Member) assigned(_ context.Context, _ *kgo.Client, tps map[string][]int32) {
	// franz-go calls this after every group sync, with the slots added
	// (all of them for an eager group), possibly none: the rebalance is
	// over for this member.
	m.mu.Lock()
	m.settling = Settling{}
	m.mu.Unlock()
	add := m.update(tps[m.cfg.Topic], true)
	if len(add) > 0 {
		m.log.Info("slots assigned", "slots", add, "owned", m.Owned())
		if m.cfg.OnAssigned != nil {
			m.cfg.OnAssigned(m.cbCtx, add)
		}
	}
	m.joinedOnce.Do(func() { close(m.joined) })
}

func (m *Member) revoked(_ context.Context, _ *kgo.Client, tps map[string][]int32) {
	// franz-go also calls this at the end of every cooperative session,
	// with nothing when nothing moves.
	if gone := m.update(tps[m.cfg.Topic], false); len(gone) > 0 {
		m.log.Info("slots revoked", "slots", gone, "owned", m.Owned())
		if m.cfg.OnRevoked != nil {
			m.cfg.OnRevoked(m.cbCtx, gone)
		}
	}
}

func (m *Member) lost(_ context.Context, _ *kgo.Client, tps map[string][]int32) {
	if gone := m.update(tps[m.cfg.Topic], false); len(gone) > 0 {
		m.log.Warn("slots lost: this member was removed from the group", "slots", gone)
		if m.cfg.OnLost != nil {
			m.cfg.OnLost(m.cbCtx, gone)
		}
	}
}

// update adds slots to (own) or removes them from the owned set and
// returns, sorted, those that changed.
func (m *Member) update(slots []int32, own bool) []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var changed []int32
	for _, s := range slots {
		if m.owned[s] != own {
			changed = append(changed, s)
			if own {
				m.owned[s] = true
			} else {
				delete(m.owned, s)
			}
		}
	}
	slices.Sort(changed)
	return changed
}

// Settling returns the rebalance this member is in, and false when it is
// in none: the group gave it an assignment since the last JoinGroup it
// sent. A rebalance that lasts longer than the session timeout plus the
// rebalance timeout (Kafka's own bound: a dead member's removal, then a
// rebalance waiting for members that do not rejoin) is not settling.
func (m *Member) Settling() (Settling, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.settling, !m.settling.Since.IsZero()
}

// SettleBound is how long a rebalance may take in a healthy group: the
// session timeout plus the rebalance timeout (see Settling).
func (m *Member) SettleBound() time.Duration {
	return m.cfg.SessionTimeout + m.cfg.RebalanceTimeout
}

// Slots returns the slot count: the control topic's partition count when
// Join found or created it. Use it, not Config.Slots, with SlotOf.
func (m *Member) Slots() int32 { return m.slots }

// Group returns the group's name.
func (m *Member) Group() string { return m.cfg.Group }

// ID returns this member's ID in the group, as Members reports it.
func (m *Member) ID() string {
	id, _ := m.cl.GroupMetadata()
	return id
}

// Generation returns this member's ID and the generation of the group it
// last joined, for CommitInTxn: the coordinator refuses a commit under any
// other pair. They do not say the member is still in the group (franz-go
// keeps them after the member was removed or left, and the coordinator
// then refuses them). The ID is empty or the generation -1 before the
// first join completes, which CommitInTxn refuses too.
func (m *Member) Generation() (memberID string, generation int32) {
	return m.cl.GroupMetadata()
}

// Owned returns the slots this member owns, sorted: those passed to
// OnAssigned and not yet to OnRevoked or OnLost. A slot joins the set just
// before OnAssigned is called and leaves it just before OnRevoked or OnLost
// is.
func (m *Member) Owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	owned := make([]int32, 0, len(m.owned))
	for s := range m.owned {
		owned = append(owned, s)
	}
	slices.Sort(owned)
	return owned
}

// MemberIDs asks the group's coordinator which members the group has,
// in any state (a rebalance included, where Members fails: assignments
// are not reported then). A member listed may be on its way out (its
// session not expired yet); one not listed has left the group or was
// removed. Any error means "unknown this time", never "no members".
func (m *Member) MemberIDs(ctx context.Context) (map[string]bool, error) {
	g, err := m.describe(ctx)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(g.Members))
	for _, gm := range g.Members {
		ids[gm.MemberID] = true
	}
	return ids, nil
}

// describe asks the group's coordinator to describe the group.
func (m *Member) describe(ctx context.Context) (kadm.DescribedGroup, error) {
	gs, err := kadm.NewClient(m.cl).DescribeGroups(ctx, m.cfg.Group)
	if err != nil {
		return kadm.DescribedGroup{}, fmt.Errorf("slots: describe group %q: %w", m.cfg.Group, err)
	}
	g, ok := gs[m.cfg.Group]
	switch {
	case !ok:
		return g, fmt.Errorf("slots: describe group %q: not in the response", m.cfg.Group)
	case g.Err != nil:
		return g, fmt.Errorf("slots: describe group %q: %w", m.cfg.Group, g.Err)
	}
	return g, nil
}

// MemberInfo is one member of the group as its coordinator describes it.
type MemberInfo struct {
	MemberID   string  // the member's ID in the group (Member.ID)
	InstanceID string  // the static member ID; empty: dynamic member (this package)
	ClientID   string  // the client ID the member's client sent (kgo.ClientID)
	Host       string  // the member's address as the coordinator sees it
	Slots      []int32 // the slots assigned to the member, sorted
}

// Members asks the group's coordinator who is in the group and which slots
// each member owns, sorted by member ID. Slots that no member owns are
// between two rebalances, or their owner was just removed.
//
// While the group rebalances, the coordinator does not report assignments:
// Members then returns an error wrapping ErrRebalancing. Any error means
// "unknown this time", never "no members".
func (m *Member) Members(ctx context.Context) ([]MemberInfo, error) {
	g, err := m.describe(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case g.State == "Empty" || g.State == "Dead":
		return nil, nil
	case g.State != "Stable":
		return nil, fmt.Errorf("slots: group %q is %s: %w", m.cfg.Group, g.State, ErrRebalancing)
	case g.ProtocolType != "consumer":
		return nil, fmt.Errorf("slots: group %q has protocol type %q, not consumer: is the group name used by something else?", m.cfg.Group, g.ProtocolType)
	}
	members := make([]MemberInfo, 0, len(g.Members))
	for _, gm := range g.Members {
		mi := MemberInfo{MemberID: gm.MemberID, ClientID: gm.ClientID, Host: gm.ClientHost}
		if gm.InstanceID != nil {
			mi.InstanceID = *gm.InstanceID
		}
		if a, ok := gm.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				if t.Topic == m.cfg.Topic {
					mi.Slots = append(mi.Slots, t.Partitions...)
				}
			}
		}
		slices.Sort(mi.Slots)
		members = append(members, mi)
	}
	slices.SortFunc(members, func(a, b MemberInfo) int { return cmp.Compare(a.MemberID, b.MemberID) })
	return members, nil
}

// Close leaves the group: OnRevoked is called with every owned slot and,
// once it returns, a LeaveGroup request lets the coordinator hand the
// slots to the other members at once, without waiting for the session
// timeout. Close is bounded: if OnRevoked is still running after
// RebalanceTimeout, the callbacks' context is canceled, and Close returns
// within RebalanceTimeout + 10s in any case, logging what it left
// unfinished (if the LeaveGroup request could not be sent, the others take
// the slots after the session timeout). Close is idempotent; it must not
// be called from a callback.
func (m *Member) Close() {
	m.closeOnce.Do(m.close)
}

func (m *Member) close() {
	start := time.Now()
	// A callback still running at the bound is told to stop.
	stopCb := time.AfterFunc(m.cfg.RebalanceTimeout, m.cbCancel)
	defer stopCb.Stop()
	defer m.cbCancel()

	// Leaving runs OnRevoked (in franz-go's group goroutine) and then
	// sends the LeaveGroup request, both under this context.
	leaveCtx, cancel := context.WithTimeout(context.Background(), m.cfg.RebalanceTimeout+leaveGrace)
	defer cancel()
	if err := m.cl.LeaveGroupContext(leaveCtx); err != nil {
		m.log.Warn("leaving the slots group failed; the other members take the slots after the session timeout", "err", err, "session_timeout", m.cfg.SessionTimeout)
	}

	m.pollCancel()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		// After the leave above, this only waits for a callback that
		// outlived its context, and closes the connections.
		m.cl.Close()
		<-m.pollDone
	}()
	select {
	case <-closed:
		m.log.Info("left the slots group", "took", time.Since(start).Round(time.Millisecond))
	case <-time.After(leaveGrace):
		m.log.Error("a slots callback did not return although its context is canceled; the client closes when it does", "waited", time.Since(start).Round(time.Millisecond))
	}
}
