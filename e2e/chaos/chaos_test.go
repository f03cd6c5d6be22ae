package chaos

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

func params(seed uint64, d time.Duration) Params {
	return Params{Seed: seed, Duration: d, Workers: 3, Session: 6 * time.Second, Topics: []int{6, 4}, Groups: 3}
}

// The same seed gives the same schedule (what `make chaos SEED=` replays),
// another seed another one.
func TestScheduleFromSeed(t *testing.T) {
	a, b := New(params(42, 30*time.Minute)), New(params(42, 30*time.Minute))
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 42 gave two schedules:\n%s\n%s", a, b)
	}
	if c := New(params(43, 30*time.Minute)); reflect.DeepEqual(a.Faults, c.Faults) {
		t.Fatal("seeds 42 and 43 gave the same schedule")
	}
	// A shorter soak from the same seed begins as the longer one (until
	// its end drops a fault that no longer fits).
	short := New(params(42, 2*time.Minute))
	for i, f := range short.Faults {
		if f.At < time.Minute && !reflect.DeepEqual(f, a.Faults[i]) {
			t.Fatalf("fault %d: %v in the 2-minute schedule, %v in the 30-minute one", i, f, a.Faults[i])
		}
	}
}

// The goal: 30 minutes, at least 200 faults, of every kind; two
// minutes (CI) still bring a good number.
func TestScheduleDensity(t *testing.T) {
	for seed := range uint64(20) {
		s := New(params(seed, 30*time.Minute))
		if len(s.Faults) < 200 {
			t.Errorf("seed %d: %d faults in 30 minutes, want at least 200", seed, len(s.Faults))
		}
		for _, k := range Kinds {
			if s.Count()[k] == 0 {
				t.Errorf("seed %d: no %s in 30 minutes", seed, k)
			}
		}
		if n := len(New(params(seed, 2*time.Minute)).Faults); n < 10 {
			t.Errorf("seed %d: %d faults in 2 minutes", seed, n)
		}
	}
}

// Faults on one resource never overlap, all end before the soak does,
// broker restarts are apart and a membership fault leaves the group a
// session timeout and a margin to settle; topics named exist.
func TestScheduleExclusive(t *testing.T) {
	for seed := range uint64(50) {
		p := params(seed, 30*time.Minute)
		s := New(p)
		type iv struct {
			from, to time.Duration
			f        Fault
		}
		busy := map[string][]iv{}
		topics := len(p.Topics)
		var prev time.Duration
		for _, f := range s.Faults {
			if f.At < prev {
				t.Fatalf("seed %d: %v before %v: not in time order", seed, f, prev)
			}
			prev = f.At
			if f.End() > p.Duration {
				t.Errorf("seed %d: %v ends after the soak", seed, f)
			}
			switch f.Kind {
			case CreateTopic:
				if f.Topic != topics {
					t.Errorf("seed %d: %v: want topic %d", seed, f, topics)
				}
				topics++
			case AddPartitions, TopicError, GroupCommit:
				if f.Topic >= topics {
					t.Errorf("seed %d: %v names a topic not created yet", seed, f)
				}
			}
			var res []string
			if f.Kind == Kill || f.Kind == Pause {
				res = append(res, fmt.Sprint("worker ", f.Worker))
			}
			if f.Kind == BrokerRestart {
				res = append(res, "broker")
			}
			if f.Membership() {
				res = append(res, "membership")
			}
			for _, r := range res {
				to := f.End()
				if r == "membership" {
					to += p.Settle()
				}
				for _, o := range busy[r] {
					if f.At < o.to && o.from < to {
						t.Errorf("seed %d: %v overlaps %v on %s", seed, f, o.f, r)
					}
				}
				busy[r] = append(busy[r], iv{f.At, to, f})
			}
		}
		for _, n := range s.Topics {
			if n > MaxPartitionsPerTopic {
				t.Errorf("seed %d: a topic grows to %d partitions", seed, n)
			}
		}
	}
}

func recs(offset int64, vals ...string) []Record {
	var out []Record
	for i, v := range vals {
		out = append(out, Record{v, offset + int64(i)})
	}
	return out
}

func TestCheckPartition(t *testing.T) {
	src := recs(0, "a", "b", "c", "d")
	for _, c := range []struct {
		name                string
		dst                 []Record
		miss, dups, extra   int
		outOfOrder, exact   bool
		failsEOS, failsALOS bool
		detail              string
	}{
		{name: "exact", dst: recs(0, "a", "b", "c", "d"), exact: true},
		{name: "missing", dst: recs(0, "a", "b", "d"), miss: 1, failsEOS: true, failsALOS: true, detail: `source offset 2 ("c") is not on the target`},
		{name: "rewound", dst: recs(0, "a", "b", "c", "b", "c", "d"), dups: 2, failsEOS: true, detail: `target offset 3 is a second copy of source offset 1 ("b")`},
		{name: "swapped", dst: recs(0, "a", "c", "b", "d"), outOfOrder: true, failsEOS: true, failsALOS: true, detail: `target offset 2 holds source offset 1 ("b"), first copied after source offset 2`},
		{name: "foreign", dst: recs(0, "a", "b", "x", "c", "d"), extra: 1, failsEOS: true, failsALOS: true, detail: `target offset 2 holds "x", no source record`},
	} {
		got := CheckPartition("t", 0, src, c.dst)
		if got.Missing != c.miss || got.Duplicates != c.dups || got.Extra != c.extra || got.OutOfOrder != c.outOfOrder || got.Exact != c.exact {
			t.Errorf("%s: %+v", c.name, got)
		}
		if got.Failed(true) != c.failsEOS || got.Failed(false) != c.failsALOS {
			t.Errorf("%s: fails exactly-once %v, at-least-once %v", c.name, got.Failed(true), got.Failed(false))
		}
		if c.detail != "" && (len(got.Details) == 0 || got.Details[0] != c.detail) {
			t.Errorf("%s: details %q, want first %q", c.name, got.Details, c.detail)
		}
	}
	sum := Check(false, CheckPartition("t", 0, src, recs(0, "a", "b", "c", "b", "c", "d")), CheckPartition("t", 1, src, recs(0, "a", "b", "d")))
	if sum.Source != 8 || sum.Target != 9 || sum.Duplicates != 2 || sum.Missing != 1 || len(sum.Failed) != 1 || sum.Failed[0].Partition != 1 {
		t.Errorf("Check: %+v", sum)
	}
}

func TestStalls(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	s := NewStalls()
	s.Produced("t/0", 10, at(0))
	s.Copied("t/0", 5, at(1))
	s.Sample(at(3)) // behind since 0, advanced at 1: 2s
	s.Copied("t/0", 10, at(4))
	s.Sample(at(20)) // caught up: no stall
	s.Produced("t/0", 20, at(21))
	s.OutageBegin(at(22))
	s.Sample(at(30))
	s.OutageEnd(at(31))
	s.Sample(at(33)) // raw 12s since 21; bounded 2s since the outage ended
	raw, bounded := s.Longest()
	if raw.Took != 12*time.Second || bounded.Took != 3*time.Second || bounded.Partition != "t/0" {
		t.Errorf("raw %v, bounded %v", raw, bounded)
	}

	var tk Takeovers
	tk.Fault(at(0), "kill")
	tk.Covered(at(-1), at(1)) // began before the fault: not its takeover
	tk.Covered(at(5), at(6))
	tk.Fault(at(10), "pause")
	all, longest, pending := tk.Result()
	if len(all) != 1 || longest.Took != 6*time.Second || len(pending) != 1 {
		t.Errorf("takeovers %v, longest %v, pending %v", all, longest, pending)
	}
}

// Skipped kinds are never drawn.
func TestScheduleSkip(t *testing.T) {
	p := params(7, 30*time.Minute)
	p.Skip = []Kind{AddPartitions, Kill}
	s := New(p)
	if c := s.Count(); c[AddPartitions] != 0 || c[Kill] != 0 || c[CreateTopic] == 0 {
		t.Errorf("skipping add-partitions and kill: %v", c)
	}
}
