// Package chaos is the plan and the verdict of kmirror's randomized fault
// soak (issue 24, `make chaos`, e2e/chaos_test.go): a fault schedule that is
// a pure function of a seed, and the checks of what the target holds at the
// end. It needs no cluster, so that both are unit-tested with the race
// detector like any other package; e2e/chaos_test.go carries them out.
package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Kind is a kind of fault.
type Kind string

const (
	// Kill: kill -9 of Worker, started again after Dur.
	Kill Kind = "kill"
	// Pause: SIGSTOP of Worker, SIGCONT after Dur (longer than the
	// session timeout or not).
	Pause Kind = "pause"
	// Cut: Worker's connections to Cluster go silent (the fault proxy
	// holds every response) for Dur, then are released.
	Cut Kind = "cut"
	// BrokerRestart: Cluster's broker is down for Dur (real Kafka: stopped
	// and started again; kfake: every worker's proxy to it silent).
	BrokerRestart Kind = "broker-restart"
	// TopicError: Worker's Metadata responses from Cluster list Topic with
	// the error Code for Dur.
	TopicError Kind = "topic-error"
	// RefuseProduce: the target refuses every Produce of Worker with Code
	// for Dur.
	RefuseProduce Kind = "refuse-produce"
	// Reload: Worker's config is rewritten (Variant) and it gets SIGHUP.
	Reload Kind = "reload"
	// CreateTopic: a new source topic (the next Topic index) with
	// Partitions partitions.
	CreateTopic Kind = "create-topic"
	// AddPartitions: Topic gets Partitions more partitions.
	AddPartitions Kind = "add-partitions"
	// GroupCommit: consumer group Group commits every partition of Topic
	// on the source, Fraction of the way from its last commit to the end.
	GroupCommit Kind = "group-commit"
)

// Kinds is every kind, in the order reports list them.
var Kinds = []Kind{Kill, Pause, Cut, BrokerRestart, TopicError, RefuseProduce, Reload, CreateTopic, AddPartitions, GroupCommit}

// Cluster names one side of the mirror.
type Cluster string

const (
	Source Cluster = "source"
	Target Cluster = "target"
)

// Fault is one fault of a schedule. Which fields matter depends on Kind.
type Fault struct {
	At         time.Duration // from the start of the soak
	Kind       Kind
	Worker     int     // Kill, Pause, Cut, TopicError, RefuseProduce, Reload
	Cluster    Cluster // Cut, BrokerRestart, TopicError
	Dur        time.Duration
	Topic      int   // index into the topics: the initial ones, then those created, in order
	Partitions int   // CreateTopic, AddPartitions
	Code       int16 // TopicError, RefuseProduce
	Variant    int   // Reload
	Group      int   // GroupCommit
	Fraction   float64
}

// End is when the fault is over (At for instant ones).
func (f Fault) End() time.Duration { return f.At + f.Dur }

// Membership reports whether the fault takes a member out of the group of
// the workers (the group lives on the target): the others must take its
// slots over within the session timeout.
func (f Fault) Membership() bool {
	switch f.Kind {
	case Kill, Pause:
		return true
	case Cut, BrokerRestart:
		return f.Cluster == Target
	}
	return false
}

// Outage reports whether the fault stops copying by design for its
// duration (Kafka or the network is down, the target refuses): kmirror
// cannot copy around it, so the stall bound does not count that time.
func (f Fault) Outage() bool {
	switch f.Kind {
	case BrokerRestart, TopicError, RefuseProduce:
		return true
	case Cut:
		return f.Cluster == Source // a worker cut off from the target loses its slots
	}
	return false
}

func (f Fault) String() string {
	at := fmt.Sprintf("%8.1fs %-14s", f.At.Seconds(), f.Kind)
	switch f.Kind {
	case Kill:
		return fmt.Sprintf("%s worker %d, started again after %v", at, f.Worker, f.Dur)
	case Pause:
		return fmt.Sprintf("%s worker %d for %v", at, f.Worker, f.Dur)
	case Cut:
		return fmt.Sprintf("%s worker %d from the %s for %v", at, f.Worker, f.Cluster, f.Dur)
	case BrokerRestart:
		return fmt.Sprintf("%s the %s broker, down for %v", at, f.Cluster, f.Dur)
	case TopicError:
		return fmt.Sprintf("%s worker %d: the %s lists topic %d with %s for %v", at, f.Worker, f.Cluster, f.Topic, codeName(f.Code), f.Dur)
	case RefuseProduce:
		return fmt.Sprintf("%s worker %d: the target refuses its writes with %s for %v", at, f.Worker, codeName(f.Code), f.Dur)
	case Reload:
		return fmt.Sprintf("%s worker %d, variant %d", at, f.Worker, f.Variant)
	case CreateTopic:
		return fmt.Sprintf("%s topic %d, %d partitions", at, f.Topic, f.Partitions)
	case AddPartitions:
		return fmt.Sprintf("%s topic %d, %d more", at, f.Topic, f.Partitions)
	case GroupCommit:
		return fmt.Sprintf("%s group %d on topic %d, %.2f of the way to the end", at, f.Group, f.Topic, f.Fraction)
	}
	return at
}

func codeName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		if ke, ok := err.(*kerr.Error); ok {
			return ke.Message
		}
		return err.Error()
	}
	return fmt.Sprint(code)
}

// Params is what a schedule is drawn from besides the seed.
type Params struct {
	Seed     uint64
	Duration time.Duration // faults end by then
	Workers  int
	// Session is the cluster's session timeout: pauses and cuts last from
	// well under it to past it, and a membership fault keeps the next
	// one away until the group had the time to settle.
	Session time.Duration
	// Topics are the partition counts of the topics that exist at the
	// start.
	Topics []int
	// Groups is the number of source consumer groups that commit.
	Groups int
	// Skip are kinds left out of the draw (to keep a known bug out of a
	// soak's way until it is fixed); the replay needs the same.
	Skip []Kind
}

// Limits that keep the producer's load (and so the run's speed) bounded
// however long the soak: topics are created and grown up to these.
const (
	MaxTopics              = 8
	MaxPartitionsPerTopic  = 12
	maxTotalPartitions     = 64
	warmup                 = 5 * time.Second // the workers settle first
	brokerRestartAllowance = 20 * time.Second
	// settleMargin is what a membership fault holds past the session
	// timeout: the takeover after it (the dead member's expiry, two
	// cooperative rebalances, fencing and loading the slots' progress)
	// ends before the next one begins.
	settleMargin = 10 * time.Second
)

// Settle is how long after a membership fault ends the next one may begin.
func (p Params) Settle() time.Duration { return p.Session + settleMargin }

// Schedule is the fault plan of one soak.
type Schedule struct {
	Params
	Faults []Fault
	// Topics are the partition counts each topic reaches, by index
	// (initial topics first), as the schedule grows them.
	Topics []int
}

// weights of the kinds: what a production cluster meets most, most.
type kindWeight struct {
	kind Kind
	w    int
}

var weights = []kindWeight{
	{Kill, 3}, {Pause, 2}, {Cut, 3}, {BrokerRestart, 1}, {TopicError, 2},
	{RefuseProduce, 2}, {Reload, 2}, {CreateTopic, 1}, {AddPartitions, 1}, {GroupCommit, 3},
}

// New draws the schedule of p: the same Params give the same schedule.
//
// Faults that share a resource never overlap: a worker's process (kill,
// pause, reload), a worker's proxy to a cluster (cut, topic errors,
// refusals), the brokers (a broker restart, and the admin requests of
// topic changes and group commits, which need them up), and membership
// (one member out of the group at a time, and Settle after it: the stall
// bound is the session timeout + 10 s, which a chain of takeovers could
// not meet: a worker killed, and the one taking its slots over paused
// before it was done, stalls them twice the session timeout). A fault whose
// resources are busy starts when they are free; one that would not end
// before p.Duration is dropped.
func New(p Params) Schedule {
	if p.Workers < 1 {
		p.Workers = 1
	}
	rng := rand.New(rand.NewPCG(p.Seed, 0x6b6d6972726f72)) // "kmirror"
	s := Schedule{Params: p, Topics: slices.Clone(p.Topics)}
	free := map[string]time.Duration{}
	total := 0
	for _, n := range s.Topics {
		total += n
	}
	tenths := func(lo, hi time.Duration) time.Duration {
		d := lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
		return d.Round(100 * time.Millisecond)
	}
	ws := slices.DeleteFunc(slices.Clone(weights), func(w kindWeight) bool { return slices.Contains(p.Skip, w.kind) })
	sum := 0
	for _, w := range ws {
		sum += w.w
	}
	for at := warmup; ; {
		at += tenths(time.Second, 6*time.Second)
		if at >= p.Duration || sum == 0 {
			break
		}
		k := rng.IntN(sum)
		var kind Kind
		for _, w := range ws {
			if k < w.w {
				kind = w.kind
				break
			}
			k -= w.w
		}
		// Every fault draws a worker, used or not, so that a kind's
		// parameters do not shift the draws of the next faults.
		f := Fault{At: at, Kind: kind, Worker: rng.IntN(p.Workers)}
		proxy := func(c Cluster) string { return fmt.Sprintf("proxy %d %s", f.Worker, c) }
		worker := fmt.Sprintf("worker %d", f.Worker)
		var res []string
		hold := time.Duration(0) // beyond f.Dur
		switch kind {
		case Kill:
			f.Dur = tenths(0, 3*time.Second)
			res, hold = []string{worker, "membership"}, p.Settle()
		case Pause:
			f.Dur = tenths(time.Second, p.Session+4*time.Second)
			res, hold = []string{worker, "membership"}, p.Settle()
		case Cut:
			f.Cluster = []Cluster{Source, Target}[rng.IntN(2)]
			f.Dur = tenths(time.Second, p.Session+4*time.Second)
			res = []string{proxy(f.Cluster)}
			if f.Cluster == Target {
				res, hold = append(res, "membership"), p.Settle()
			}
		case BrokerRestart:
			f.Cluster = []Cluster{Source, Target}[rng.IntN(2)]
			f.Dur = tenths(time.Second, 5*time.Second)
			res, hold = []string{"brokers"}, brokerRestartAllowance
			for w := range p.Workers {
				res = append(res, fmt.Sprintf("proxy %d %s", w, f.Cluster))
			}
			if f.Cluster == Target {
				res = append(res, "membership")
				hold = max(hold, p.Settle())
			}
		case TopicError:
			f.Cluster = []Cluster{Source, Target}[rng.IntN(2)]
			f.Topic = rng.IntN(len(s.Topics))
			f.Code = []int16{kerr.LeaderNotAvailable.Code, kerr.UnknownTopicOrPartition.Code}[rng.IntN(2)]
			f.Dur = tenths(2*time.Second, 10*time.Second)
			res = []string{proxy(f.Cluster)}
		case RefuseProduce:
			f.Code = []int16{kerr.NotEnoughReplicas.Code, kerr.NotLeaderForPartition.Code}[rng.IntN(2)]
			f.Dur = tenths(time.Second, 8*time.Second)
			res = []string{proxy(Target)}
		case Reload:
			f.Variant = rng.IntN(4)
			res, hold = []string{worker}, time.Second
		case CreateTopic, AddPartitions:
			n := 1 + rng.IntN(3)
			f.Topic = rng.IntN(len(s.Topics))
			if kind == CreateTopic || s.Topics[f.Topic]+n > MaxPartitionsPerTopic || slices.Contains(p.Skip, AddPartitions) {
				f.Kind, f.Topic, n = CreateTopic, len(s.Topics), 1+rng.IntN(6)
			}
			if total+n > maxTotalPartitions || (f.Kind == CreateTopic && (len(s.Topics) >= MaxTopics || slices.Contains(p.Skip, CreateTopic))) {
				continue // the load stays bounded
			}
			f.Partitions = n
			res, hold = []string{"brokers"}, time.Second
		case GroupCommit:
			f.Group = rng.IntN(max(p.Groups, 1))
			f.Topic = rng.IntN(len(s.Topics))
			f.Fraction = float64(rng.IntN(101)) / 100
			res, hold = []string{"brokers"}, time.Second
		}
		switch f.Kind {
		case BrokerRestart, CreateTopic, AddPartitions, GroupCommit:
			f.Worker = -1
		}
		for _, r := range res {
			f.At = max(f.At, free[r])
		}
		if f.At+f.Dur+hold > p.Duration {
			continue
		}
		for _, r := range res {
			free[r] = f.At + f.Dur + hold
		}
		switch f.Kind {
		case CreateTopic:
			s.Topics = append(s.Topics, f.Partitions)
			total += f.Partitions
		case AddPartitions:
			s.Topics[f.Topic] += f.Partitions
			total += f.Partitions
		}
		s.Faults = append(s.Faults, f)
		// The next fault is drawn from here: the plan stays in time
		// order, and a topic a fault names exists by then.
		at = f.At
	}
	return s
}

// Count returns the number of faults by kind.
func (s Schedule) Count() map[Kind]int {
	out := map[Kind]int{}
	for _, f := range s.Faults {
		out[f.Kind]++
	}
	return out
}

func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, %v, %d workers, session timeout %v: %d faults\n", s.Seed, s.Duration, s.Workers, s.Session, len(s.Faults))
	for _, f := range s.Faults {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return b.String()
}
