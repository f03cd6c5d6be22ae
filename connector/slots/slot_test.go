package slots_test

import (
	"fmt"
	"testing"

	"github.com/kmirror/kmirror/connector/slots"
)

// TestSlotOfGolden pins the mapping: it is the data layout of every mirror
// that runs in slots, so these values must never change.
func TestSlotOfGolden(t *testing.T) {
	for _, c := range []struct {
		topic     string
		partition int32
		slots     int32
		want      int32
	}{
		{"", 0, 16, 5}, // FNV-1a-32("") = 0x811c9dc5
		{"orders", 0, 16, 12},
		{"orders", 1, 16, 13},
		{"orders", 15, 16, 11}, // consecutive partitions, consecutive slots, wrapping around
		{"orders", 16, 16, 12},
		{"payments.eu", 7, 16, 13},
		{"payments.eu", 7, 12, 9},
		{"payments.eu", 7, 1, 0},
		{"a", 0, 16, 12},
		{"a", 2147483647, 16, 11}, // hash + partition passes 2^32: no wrap
		{"kmirror-test", 3, 7, 2},
	} {
		if got := slots.SlotOf(c.topic, c.partition, c.slots); got != c.want {
			t.Errorf("SlotOf(%q, %d, %d) = %d, want %d", c.topic, c.partition, c.slots, got, c.want)
		}
	}
}

// TestSlotOfSpread checks that realistic topic sets load the slots evenly:
// 10,000 partitions over 16 slots, each slot within 10% of the mean.
func TestSlotOfSpread(t *testing.T) {
	const nslots = 16
	for _, c := range []struct {
		name   string
		topics func(add func(topic string, partitions int32))
	}{
		{"10000 topics of 1 partition", func(add func(string, int32)) {
			for i := range 10000 {
				add(fmt.Sprintf("topic-%d", i), 1)
			}
		}},
		{"1000 topics of 10 partitions", func(add func(string, int32)) {
			for i := range 1000 {
				add(fmt.Sprintf("events.%d", i), 10)
			}
		}},
		{"mixed sizes", func(add func(string, int32)) {
			// 1 topic of 1000, then 9000 partitions in topics of 3, 6, 12, 24, 50, 3, ...
			add("big", 1000)
			sizes := []int32{3, 6, 12, 24, 50}
			left := int32(9000)
			for i := 0; left > 0; i++ {
				n := min(sizes[i%len(sizes)], left)
				add(fmt.Sprintf("svc-%d.log", i), n)
				left -= n
			}
		}},
		{"one topic of 10000", func(add func(string, int32)) { add("firehose", 10000) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var load [nslots]int
			total := 0
			c.topics(func(topic string, partitions int32) {
				for p := range partitions {
					s := slots.SlotOf(topic, p, nslots)
					if s < 0 || s >= nslots {
						t.Fatalf("SlotOf(%q, %d, %d) = %d: out of range", topic, p, nslots, s)
					}
					if again := slots.SlotOf(topic, p, nslots); again != s {
						t.Fatalf("SlotOf(%q, %d) not stable: %d then %d", topic, p, s, again)
					}
					load[s]++
					total++
				}
			})
			if total != 10000 {
				t.Fatalf("%d partitions, want 10000", total)
			}
			mean := float64(total) / nslots
			for s, n := range load {
				if d := float64(n) - mean; d > mean/10 || d < -mean/10 {
					t.Errorf("slot %d has %d partitions, more than 10%% off the mean %.0f; load %v", s, n, mean, load)
				}
			}
		})
	}
}

func TestSlotOfPanicsWithoutSlots(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("SlotOf with 0 slots did not panic")
		}
	}()
	slots.SlotOf("t", 0, 0)
}
