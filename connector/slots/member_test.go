package slots_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/slots"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// The group settings of the membership tests: the smallest session timeout
// both kfake and Kafka accept by default (group.min.session.timeout.ms), so
// that a takeover after a kill is quick to wait for.
const (
	testSessionTimeout   = 6 * time.Second
	testRebalanceTimeout = 10 * time.Second
	testSlots            = 12
)

// TestMembershipKfake runs the membership scenario on an in-process kfake
// cluster.
func TestMembershipKfake(t *testing.T) {
	c := newKfake(t)
	exercise(t, c.ListenAddrs())
}

// TestMembershipKafka runs the same scenario against a real Apache Kafka
// broker. It skips where this machine cannot run one (no java, or the jars
// not cached by `make kafka-jars`), except with CI=true, where that fails.
func TestMembershipKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JVM")
	}
	c := kafkatest.StartForTest(t, "slots")
	exercise(t, c.Addrs())
}

// exercise runs the life of a group of workers on the cluster at seeds:
// members join one by one, one leaves with Close, one dies without leaving.
// After each step it waits for the group to settle and checks that every
// slot has exactly one owner; throughout, the ledger checks that no slot is
// ever assigned to a member while another live member owns it.
func exercise(t *testing.T, seeds []string) {
	h := newHarness(t, seeds, "kmirror.m1", "kmirror.m1.slots.internal")

	// One member owns every slot.
	a := h.join("a", testSlots)
	if a.m.Slots() != testSlots {
		t.Fatalf("Slots() = %d, want %d: the topic was created with Config.Slots", a.m.Slots(), testSlots)
	}
	h.checkTopic(testSlots)
	h.settle("a alone", a)

	// A second member: the slots split, and the first gives up only those
	// that move (cooperative), keeping the others without interruption.
	before := h.snapshot(a)
	b := h.join("b", testSlots)
	h.settle("a and b", a, b)
	h.checkSticky(before)

	// A third.
	before = h.snapshot(a, b)
	c := h.join("c", testSlots)
	h.settle("a, b and c", a, b, c)
	h.checkSticky(before)

	// b leaves: LeaveGroup moves its slots at once, without waiting for
	// the session timeout. b revokes them before anyone gets them (the
	// ledger checks that).
	bSlots := b.m.Owned()
	bRevoked := len(h.ledger.revokesOf("b"))
	start := time.Now()
	b.m.Close()
	closed := time.Since(start)
	if got := b.m.Owned(); len(got) != 0 {
		t.Errorf("b owns %v after Close", got)
	}
	if r := slices.Sorted(slices.Values(h.ledger.revokesOf("b")[bRevoked:])); !slices.Equal(r, bSlots) {
		t.Errorf("b's OnRevoked on Close got %v, want all it owned: %v", r, bSlots)
	}
	h.settle("a and c after b left", a, c)
	moved := h.ledger.takeover(bSlots, start)
	t.Logf("Close: took %v; b's %d slots owned by others %v after Close began", closed.Round(time.Millisecond), len(bSlots), moved.Round(time.Millisecond))
	if moved >= testSessionTimeout {
		t.Errorf("b's slots moved %v after Close began, not before the session timeout %v: was LeaveGroup sent?", moved, testSessionTimeout)
	}

	// c dies without leaving: its connections drop and it cannot dial
	// again, as after kill -9. The coordinator removes it after the
	// session timeout and a takes its slots.
	h.fail("kill", c, c.dialer.cut, a)

	// Close is bounded even when the LeaveGroup cannot be sent.
	start = time.Now()
	c.m.Close()
	// Its bound is RebalanceTimeout + 10s; 5s more for a loaded machine.
	if took, limit := time.Since(start), testRebalanceTimeout+15*time.Second; took > limit {
		t.Errorf("Close of a cut-off member took %v, more than %v", took, limit)
	}

	h.checkNothingWritten()
}

// TestExistingTopicKeepsItsCount: a control topic that exists with another
// partition count is used as it is, and Slots reports its real count.
func TestExistingTopicKeepsItsCount(t *testing.T) {
	c := newKfake(t)
	h := newHarness(t, c.ListenAddrs(), "kmirror.m2", "kmirror.m2.slots.internal")
	if _, err := h.adm.CreateTopic(context.Background(), 5, -1, nil, h.topic); err != nil {
		t.Fatal(err)
	}
	a := h.join("a", 16)
	if a.m.Slots() != 5 {
		t.Fatalf("Slots() = %d, want the existing topic's 5", a.m.Slots())
	}
	h.checkTopic(5)
	h.settle("a alone on 5 slots", a)
	if !strings.Contains(h.logs.String(), "another partition count than configured") {
		t.Errorf("no warning about the partition count in the log:\n%s", h.logs.String())
	}
}

// TestMoreMembersThanSlots: a member that gets no slot still joins; Join
// returns with nothing owned, and it takes over when an owner leaves.
func TestMoreMembersThanSlots(t *testing.T) {
	c := newKfake(t)
	h := newHarness(t, c.ListenAddrs(), "kmirror.m3", "kmirror.m3.slots.internal")
	a := h.join("a", 2)
	b := h.join("b", 2)
	h.settle("a and b", a, b)
	idle := h.join("c", 2)
	waitFor(t, 60*time.Second, "three members in the group", func() (bool, string) {
		ms, err := a.m.Members(context.Background())
		return err == nil && len(ms) == 3, fmt.Sprintf("members %v, err %v", ms, err)
	})
	if got := idle.m.Owned(); len(got) != 0 {
		t.Fatalf("the third member owns %v of 2 slots shared by two", got)
	}
	a.m.Close()
	h.settle("b and c after a left", b, idle)
}

// TestJoinFailsFast: an error the group would only repeat fails Join at
// once, naming the cause, rather than at the context's deadline.
func TestJoinFailsFast(t *testing.T) {
	c := newKfake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	m, err := slots.Join(ctx, slots.Config{
		Group:          "kmirror.m4",
		Topic:          "kmirror.m4.slots.internal",
		Slots:          4,
		SessionTimeout: time.Second, // below kfake's minimum of 6s
		ClientOpts:     []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)},
	})
	if err == nil {
		m.Close()
		t.Fatal("Join with a session timeout below the brokers' minimum succeeded")
	}
	if !errors.Is(err, kerr.InvalidSessionTimeout) || !strings.Contains(err.Error(), "kmirror.m4") {
		t.Errorf("Join error %q: want INVALID_SESSION_TIMEOUT and the group's name", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("Join took %v to fail", took)
	}
}

// TestJoinContextDeadline: an unreachable cluster fails Join when its
// context ends, with the last error.
func TestJoinContextDeadline(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = slots.Join(ctx, slots.Config{
		Group: "g", Topic: "t", Slots: 1,
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(addr)},
	})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "last:") {
		t.Errorf("Join error %v: want the deadline and the last error", err)
	}
}

func TestJoinValidatesConfig(t *testing.T) {
	for name, c := range map[string]struct {
		cfg  slots.Config
		want string
	}{
		"no group":  {slots.Config{Topic: "t", Slots: 1}, "Group is empty"},
		"no topic":  {slots.Config{Group: "g", Slots: 1}, "Topic is empty"},
		"no slots":  {slots.Config{Group: "g", Topic: "t"}, "Slots is 0"},
		"bad rf":    {slots.Config{Group: "g", Topic: "t", Slots: 1, ReplicationFactor: -2}, "ReplicationFactor is -2"},
		"neg times": {slots.Config{Group: "g", Topic: "t", Slots: 1, SessionTimeout: -1}, "must not be negative"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := slots.Join(context.Background(), c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Join error %v, want %q", err, c.want)
			}
		})
	}
}

// TestPartitionedMember: a member cut off by a network partition (its
// traffic silently dropped) loses its slots to the others after the session
// timeout, and notices on its own later: its heartbeats must first time out.
// The gap between the two is why slots need fencing. When the network
// heals, it rejoins by itself.
func TestPartitionedMember(t *testing.T) {
	c := newKfake(t)
	h := newHarness(t, c.ListenAddrs(), "kmirror.m5", "kmirror.m5.slots.internal")
	a := h.join("a", 4)
	b := h.join("b", 4)
	h.settle("a and b", a, b)
	h.fail("partition", b, b.dialer.hole, a)

	// Once the network heals, b rejoins on its own and gets slots again.
	h.ledger.alive("b")
	b.dialer.heal()
	h.settle("a and b after the partition healed", a, b)
}

// ---- harness ----

func newKfake(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

type harness struct {
	t      *testing.T
	seeds  []string
	group  string
	topic  string
	adm    *kadm.Client
	logs   *syncBuffer
	ledger *ledger
	all    []*member
}

// member is one worker under test: its Member and the dialer that can cut
// it off from the cluster.
type member struct {
	name   string
	m      *slots.Member
	dialer *faultDialer
}

func newHarness(t *testing.T, seeds []string, group, topic string) *harness {
	h := &harness{t: t, seeds: seeds, group: group, topic: topic, logs: &syncBuffer{}, ledger: newLedger()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	h.adm = kadm.NewClient(cl)
	t.Cleanup(func() {
		// Closing in parallel: a cut-off member's Close waits out its
		// bound, the others need not wait for it. SLOTS_LOGS=1 shows the
		// logs of passing tests too.
		var wg sync.WaitGroup
		for _, m := range h.all {
			wg.Go(m.m.Close)
		}
		wg.Wait()
		cl.Close()
		if v := h.ledger.violations(); len(v) > 0 {
			t.Errorf("slot ownership went wrong:\n%s", strings.Join(v, "\n"))
		}
		if t.Failed() || os.Getenv("SLOTS_LOGS") != "" {
			t.Logf("logs (slots and franz-go):\n%s", h.logs.tail(400))
		}
	})
	return h
}

// join starts a member named name (its client ID) and waits for Join.
func (h *harness) join(name string, nslots int32) *member {
	h.t.Helper()
	d := &faultDialer{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, err := h.joinWith(ctx, name, nslots, d)
	if err != nil {
		h.t.Fatalf("join %s: %v", name, err)
	}
	mem := &member{name: name, m: m, dialer: d}
	h.all = append(h.all, mem)
	return mem
}

// joinWith joins a member named name that dials through d; the ledger
// follows its callbacks. It is safe to call from any goroutine.
func (h *harness) joinWith(ctx context.Context, name string, nslots int32, d *faultDialer) (*slots.Member, error) {
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("member", name)
	return slots.Join(ctx, slots.Config{
		Group:            h.group,
		Topic:            h.topic,
		Slots:            nslots,
		SessionTimeout:   testSessionTimeout,
		RebalanceTimeout: testRebalanceTimeout,
		ClientOpts: []kgo.Opt{
			kgo.SeedBrokers(h.seeds...),
			kgo.ClientID(name),
			kgo.Dialer(d.dial),
			kgo.WithLogger(kgo.BasicLogger(h.logs, kgo.LogLevelInfo, func() string { return name + " " })),
		},
		Logger:     log,
		OnAssigned: func(_ context.Context, s []int32) { h.ledger.assigned(name, s) },
		OnRevoked:  func(_ context.Context, s []int32) { h.ledger.revoked(name, s) },
		OnLost:     func(_ context.Context, s []int32) { h.ledger.lost(name, s) },
	})
}

// settle waits until the live members share every slot, each slot owned by
// exactly one of them, evenly (counts differ by one at most), and the
// group's coordinator reports the same assignment.
func (h *harness) settle(desc string, live ...*member) {
	h.t.Helper()
	h.settleWithin(60*time.Second, desc, live...)
}

// settleWithin is settle with a bound of its own.
func (h *harness) settleWithin(timeout time.Duration, desc string, live ...*member) {
	h.t.Helper()
	n := live[0].m.Slots()
	waitFor(h.t, timeout, desc+": every slot owned once, evenly, as the coordinator says", func() (bool, string) {
		owner := map[int32]string{}
		lo, hi := int(n), 0
		for _, mem := range live {
			owned := mem.m.Owned()
			lo, hi = min(lo, len(owned)), max(hi, len(owned))
			for _, s := range owned {
				if o, dup := owner[s]; dup {
					return false, fmt.Sprintf("slot %d owned by %s and %s", s, o, mem.name)
				}
				owner[s] = mem.name
			}
		}
		if len(owner) != int(n) {
			return false, fmt.Sprintf("%d of %d slots owned: %v", len(owner), n, owner)
		}
		if hi-lo > 1 {
			return false, fmt.Sprintf("uneven: %v", owner)
		}
		ms, err := live[0].m.Members(context.Background())
		if err != nil {
			return false, err.Error()
		}
		if len(ms) != len(live) {
			return false, fmt.Sprintf("coordinator lists %d members, want %d: %+v", len(ms), len(live), ms)
		}
		for _, mem := range live {
			i := slices.IndexFunc(ms, func(mi slots.MemberInfo) bool { return mi.MemberID == mem.m.ID() })
			if i < 0 {
				return false, fmt.Sprintf("coordinator does not list %s (%s): %+v", mem.name, mem.m.ID(), ms)
			}
			if ms[i].ClientID != mem.name || ms[i].Host == "" {
				return false, fmt.Sprintf("coordinator lists %s as %+v", mem.name, ms[i])
			}
			if !slices.Equal(ms[i].Slots, mem.m.Owned()) {
				return false, fmt.Sprintf("coordinator gives %s %v, it owns %v", mem.name, ms[i].Slots, mem.m.Owned())
			}
		}
		return true, ""
	})
	var parts []string
	for _, mem := range live {
		parts = append(parts, fmt.Sprintf("%s=%v", mem.name, mem.m.Owned()))
	}
	h.t.Logf("%s: %s", desc, strings.Join(parts, " "))
}

// fail applies fault to victim, which the ledger counts as dead from then
// on, and checks that the survivors take over its slots within the session
// timeout + 5s, and that the victim reports them lost (OnLost) on its own.
func (h *harness) fail(what string, victim *member, fault func(), survivors ...*member) {
	h.t.Helper()
	slots := victim.m.Owned()
	h.ledger.dead(victim.name)
	start := time.Now()
	fault()
	h.settle(fmt.Sprintf("after the %s of %s", what, victim.name), survivors...)
	took := h.ledger.takeover(slots, start)
	h.t.Logf("%s: %s's %d slots owned by others %v after it began (session timeout %v)", what, victim.name, len(slots), took.Round(time.Millisecond), testSessionTimeout)
	if limit := testSessionTimeout + 5*time.Second; took > limit {
		h.t.Errorf("takeover after the %s took %v, more than the session timeout + 5s (%v)", what, took, limit)
	}
	// Over a partition, the victim's heartbeats must time out first;
	// franz-go took up to 40s here.
	waitFor(h.t, 120*time.Second, victim.name+" to report its slots lost", func() (bool, string) {
		return len(victim.m.Owned()) == 0, fmt.Sprintf("%s still owns %v", victim.name, victim.m.Owned())
	})
	h.t.Logf("%s: %s's OnLost %v after it began", what, victim.name, h.ledger.lostAt(victim.name).Sub(start).Round(time.Millisecond))
	if got := h.ledger.lostOf(victim.name); !slices.Equal(got, slots) {
		h.t.Errorf("%s's OnLost got %v, want %v", victim.name, got, slots)
	}
}

// snapshot records what each member owns and has revoked so far.
func (h *harness) snapshot(ms ...*member) map[*member]snap {
	s := map[*member]snap{}
	for _, m := range ms {
		s[m] = snap{owned: m.m.Owned(), revoked: len(h.ledger.revokesOf(m.name))}
	}
	return s
}

type snap struct {
	owned   []int32
	revoked int
}

// checkSticky checks that, since before, each member kept a subset of its
// slots and revoked only those it no longer has: the slots that stayed
// were never interrupted.
func (h *harness) checkSticky(before map[*member]snap) {
	h.t.Helper()
	for m, s := range before {
		now := m.m.Owned()
		for _, slot := range now {
			if !slices.Contains(s.owned, slot) {
				h.t.Errorf("%s gained slot %d when a member joined", m.name, slot)
			}
		}
		if revoked := len(h.ledger.revokesOf(m.name)) - s.revoked; revoked != len(s.owned)-len(now) {
			h.t.Errorf("%s revoked %d slots going from %v to %v: not cooperative", m.name, revoked, s.owned, now)
		}
	}
}

// checkTopic checks the control topic's partition count.
func (h *harness) checkTopic(want int) {
	h.t.Helper()
	tds, err := h.adm.ListTopics(context.Background(), h.topic)
	if err != nil {
		h.t.Fatal(err)
	}
	if got := len(tds[h.topic].Partitions); got != want {
		h.t.Errorf("topic %s has %d partitions, want %d", h.topic, got, want)
	}
}

// checkNothingWritten checks that the members produced nothing to the
// control topic and committed nothing for the group.
func (h *harness) checkNothingWritten() {
	h.t.Helper()
	ctx := context.Background()
	ends, err := h.adm.ListEndOffsets(ctx, h.topic)
	if err != nil {
		h.t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 0 {
			h.t.Errorf("control topic partition %d: end offset %d, err %v: want 0", o.Partition, o.Offset, o.Err)
		}
	})
	offs, err := h.adm.FetchOffsets(ctx, h.group)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(offs) != 0 {
		h.t.Errorf("offsets committed for group %s: %v", h.group, offs)
	}
}

// ledger follows the callbacks of all members. Every callback updates it
// while it runs, so it sees the order Kafka guarantees: a slot is assigned
// only once its previous owner's OnRevoked has run. A member declared dead
// forfeits its slots at once, as a killed process would.
type ledger struct {
	mu         sync.Mutex
	owner      map[int32]string
	assignedAt map[int32]time.Time
	revokes    map[string][]int32
	losses     map[string][]int32
	lostTime   map[string]time.Time
	isDead     map[string]bool
	errs       []string
}

func newLedger() *ledger {
	return &ledger{
		owner:      map[int32]string{},
		assignedAt: map[int32]time.Time{},
		revokes:    map[string][]int32{},
		losses:     map[string][]int32{},
		lostTime:   map[string]time.Time{},
		isDead:     map[string]bool{},
	}
}

func (l *ledger) assigned(name string, ss []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range ss {
		if o, ok := l.owner[s]; ok {
			l.errs = append(l.errs, fmt.Sprintf("slot %d assigned to %s while %s owns it", s, name, o))
		}
		l.owner[s] = name
		l.assignedAt[s] = time.Now()
	}
}

func (l *ledger) revoked(name string, ss []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.revokes[name] = append(l.revokes[name], ss...)
	l.release(name, ss)
}

func (l *ledger) lost(name string, ss []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.losses[name] = append(l.losses[name], ss...)
	l.lostTime[name] = time.Now()
	l.release(name, ss)
}

func (l *ledger) release(name string, ss []int32) {
	for _, s := range ss {
		if l.owner[s] == name {
			delete(l.owner, s)
		} else if !l.isDead[name] {
			l.errs = append(l.errs, fmt.Sprintf("%s gave up slot %d, owned by %q", name, s, l.owner[s]))
		}
	}
}

func (l *ledger) dead(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.isDead[name] = true
	for s, o := range l.owner {
		if o == name {
			delete(l.owner, s)
		}
	}
}

func (l *ledger) alive(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.isDead, name)
}

// takeover returns how long after since the last of slots was assigned.
func (l *ledger) takeover(slots []int32, since time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, s := range slots {
		if at := l.assignedAt[s]; at.After(last) {
			last = at
		}
	}
	return last.Sub(since)
}

// revokesOf returns the slots name has revoked, in the order it did.
func (l *ledger) revokesOf(name string) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.revokes[name])
}

func (l *ledger) lostOf(name string) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(slices.Values(l.losses[name]))
}

func (l *ledger) lostAt(name string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostTime[name]
}

func (l *ledger) violations() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

// faultDialer dials normally until a fault:
//   - cut closes every connection it made and refuses new ones: the member
//     is gone as after kill -9 (the kernel closes its sockets), while its
//     process lives on;
//   - hole makes the network drop everything: writes vanish, nothing more
//     is read, and new connections never complete (a network partition,
//     or a paused process as the brokers see it).
type faultDialer struct {
	mu     sync.Mutex
	isCut  bool
	isHole bool
	conns  []net.Conn
}

var errCut = errors.New("cut off by the test")

func (d *faultDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	isCut, isHole := d.isCut, d.isHole
	d.mu.Unlock()
	switch {
	case isCut:
		return nil, errCut
	case isHole:
		<-ctx.Done() // the dial timeout
		return nil, ctx.Err()
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.isCut {
		c.Close()
		return nil, errCut
	}
	hc := &holeConn{Conn: c, d: d}
	d.conns = append(d.conns, hc)
	return hc, nil
}

func (d *faultDialer) holed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.isHole
}

func (d *faultDialer) cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.isCut = true
	for _, c := range d.conns {
		c.Close()
	}
}

func (d *faultDialer) hole() { d.setHole(true) }
func (d *faultDialer) heal() { d.setHole(false) }

func (d *faultDialer) setHole(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.isHole = on
}

// holeConn drops all traffic once its dialer is holed. The connection's
// deadlines still apply, so the client times out as over a real partition.
type holeConn struct {
	net.Conn
	d *faultDialer
}

func (c *holeConn) Write(p []byte) (int, error) {
	if c.d.holed() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *holeConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if err != nil || !c.d.holed() {
			return n, err
		}
		// A reply that crosses the partition is lost.
	}
}

// waitFor polls cond until it reports true, or fails the test after
// timeout with cond's last explanation.
func waitFor(t *testing.T, timeout time.Duration, desc string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last: %s", timeout, desc, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail returns the last n lines.
func (b *syncBuffer) tail(n int) string {
	lines := strings.Split(b.String(), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
