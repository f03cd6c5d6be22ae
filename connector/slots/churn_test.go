package slots_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/connector/slots"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// Issue 24, item 6: a group whose members are killed and restarted in
// quick succession must settle once the kills stop, as Kafka's coordinator
// ensures: a member that does not rejoin within the rebalance timeout is
// removed, and one that sends no heartbeat within the session timeout is.

// churnKills is how many kill-and-restart rounds a churn run has.
const churnKills = 8

// TestChurnSettlesKfake runs the churn on kfake.
func TestChurnSettlesKfake(t *testing.T) {
	churn(t, newKfake(t).ListenAddrs())
}

// TestChurnSettlesKafka runs the same churn against a real Apache Kafka
// broker (skipped where none can run, as TestMembershipKafka).
func TestChurnSettlesKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JVM")
	}
	churn(t, kafkatest.StartForTest(t, "slots-churn").Addrs())
}

// churnMember is one incarnation of a worker: it joins in the background,
// so that the next kill may hit it while it is still joining, as a process
// restarted during a rebalance is.
type churnMember struct {
	name   string
	dialer *faultDialer
	cancel context.CancelFunc
	done   chan struct{} // closed once Join returned
	m      *slots.Member // set before done is closed; nil if Join failed
	err    error
}

// churn runs three members; a random one is killed (no LeaveGroup, its
// connections dropped, as kill -9 does) and started again, every 1 to 2.5
// seconds (within the session timeout, so a rebalance is always under way),
// churnKills times. Then the group must settle with the live members
// within the session timeout (the last killed member's removal) plus the
// rebalance timeout (a rebalance waiting for a member that died in it) plus
// a margin for the two rounds of a cooperative move.
func churn(t *testing.T, seeds []string) {
	h := newHarness(t, seeds, "kmirror.churn", "kmirror.churn.slots.internal")
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)

	var (
		mu  sync.Mutex
		all []*churnMember
	)
	start := func(name string) *churnMember {
		cm := &churnMember{name: name, dialer: &faultDialer{}, done: make(chan struct{})}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cm.cancel = cancel
		mu.Lock()
		all = append(all, cm)
		mu.Unlock()
		go func() {
			defer close(cm.done)
			cm.m, cm.err = h.joinWith(ctx, name, testSlots, cm.dialer)
		}()
		return cm
	}
	// Killed members are closed (a bounded Close whose LeaveGroup cannot be
	// sent) at the end, all at once.
	t.Cleanup(func() {
		var wg sync.WaitGroup
		mu.Lock()
		defer mu.Unlock()
		for _, cm := range all {
			wg.Go(func() {
				cm.cancel()
				<-cm.done
				if cm.m != nil {
					cm.m.Close()
				}
			})
		}
		wg.Wait()
	})

	live := []*churnMember{start("w0"), start("w1"), start("w2")}
	waitJoined(t, live, time.Minute)
	h.settle("three members", members(live)...)

	var lastKill time.Time
	for k := range churnKills {
		time.Sleep(time.Duration(1000+rng.IntN(1500)) * time.Millisecond)
		i := rng.IntN(len(live))
		victim := live[i]
		h.ledger.dead(victim.name)
		victim.dialer.cut()
		victim.cancel() // a Join under way fails
		lastKill = time.Now()
		live[i] = start(fmt.Sprintf("w%d.%d", i, k+1))
		t.Logf("kill #%d: %s, restarted as %s", k+1, victim.name, live[i].name)
	}

	bound := testSessionTimeout + testRebalanceTimeout + 10*time.Second
	waitJoined(t, live, bound)
	h.settleWithin(bound-time.Since(lastKill), "the live members after the churn", members(live)...)
	t.Logf("settled %v after the last kill (bound %v)", time.Since(lastKill).Round(100*time.Millisecond), bound)
}

// waitJoined waits until every member's Join returned, and fails the test
// if one failed.
func waitJoined(t *testing.T, cms []*churnMember, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for _, cm := range cms {
		select {
		case <-cm.done:
		case <-deadline:
			t.Fatalf("%s: Join did not return within %v", cm.name, timeout)
		}
		if cm.err != nil {
			t.Fatalf("%s: Join: %v", cm.name, cm.err)
		}
	}
}

func members(cms []*churnMember) []*member {
	ms := make([]*member, len(cms))
	for i, cm := range cms {
		ms[i] = &member{name: cm.name, m: cm.m, dialer: cm.dialer}
	}
	return ms
}

// TestSettlingReportsStuckJoin: a member whose JoinGroup the coordinator
// keeps refusing says so through Settling (since when, what it waits for,
// the error), and Settling clears once the group settles.
func TestSettlingReportsStuckJoin(t *testing.T) {
	c := newKfake(t)
	h := newHarness(t, c.ListenAddrs(), "kmirror.stuck", "kmirror.stuck.slots.internal")
	a := h.join("a", 4)
	h.settle("a alone", a)
	if s, ok := a.m.Settling(); ok {
		t.Fatalf("a settled member reports a rebalance: %+v", s)
	}

	// a's JoinGroup is refused while refusing is set; a second member
	// makes the coordinator start a rebalance, which a must rejoin.
	var refusing atomic.Bool
	refusing.Store(true)
	aID := a.m.ID()
	c.ControlKey(int16(kmsg.JoinGroup), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.JoinGroupRequest)
		if !refusing.Load() || req.MemberID != aID {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil, true
	})
	begin := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bDone := make(chan *slots.Member, 1)
	go func() {
		m, _ := h.joinWith(ctx, "b", 4, &faultDialer{})
		bDone <- m
	}()
	waitFor(t, 30*time.Second, "a to report the refused JoinGroup", func() (bool, string) {
		s, ok := a.m.Settling()
		return ok && s.Waiting == "JoinGroup" && errors.Is(s.Err, kerr.GroupAuthorizationFailed), fmt.Sprintf("%+v, %v", s, ok)
	})
	s, _ := a.m.Settling()
	if s.Since.Before(begin) || time.Since(s.Since) > 30*time.Second {
		t.Errorf("Settling.Since %v: want the start of the rebalance, after %v", s.Since, begin)
	}

	refusing.Store(false)
	bm := <-bDone
	if bm == nil {
		t.Fatal("b did not join once JoinGroup was allowed")
	}
	b := &member{name: "b", m: bm}
	defer bm.Close()
	h.settle("a and b", a, b)
	if s, ok := a.m.Settling(); ok {
		t.Errorf("a still reports a rebalance after the group settled: %+v", s)
	}
}
