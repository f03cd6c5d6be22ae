//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestActiveActive: two mirrors, src -> dst and dst -> src, with the
// default policy (deploy/examples/active-active.yaml), both running in one
// worker. Each side gets the other's topic once (src.orders on dst,
// dst.clicks on src) and nothing comes back (no dst.src.orders on src, no
// src.dst.clicks on dst, several passes after the copies are done), the
// copies hold exactly the records (none twice), and a group committed on
// either side is translated to the other.
func TestActiveActive(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b Backend) {
		e := newEnv(t, b, ClusterSpec{Brokers: 1})
		orders, clicks := e.topic("orders"), e.topic("clicks")
		createTopic(t, e.srcCl, orders, 1, nil)
		createTopic(t, e.dstCl, clicks, 1, nil)
		orderRecs, wantOrders := seqRecords(orders, "o", 1, 20)
		clickRecs, wantClicks := seqRecords(clicks, "c", 1, 20)
		produce(t, e.srcCl, orderRecs...)
		produce(t, e.dstCl, clickRecs...)

		cfg := e.kmConfigFor()
		cfg.Clusters["dst"].BootstrapServers = e.dst.Addrs()
		toDst, toSrc := "m1-"+e.id, "m2-"+e.id
		cfg.Mirrors = []*kmMirror{
			kmMirrorOf(toDst, "src", "dst", ".*-"+e.id),
			kmMirrorOf(toSrc, "dst", "src", ".*-"+e.id),
		}
		for _, m := range cfg.Mirrors {
			m.Sync = &kmSync{GroupOffsets: &kmSyncItem{Interval: "1s"}}
		}
		w := e.startWorker(e.kmWriteConfig(cfg))
		addr := w.httpAddr(t)

		// Groups committed on each side, at offset 10 of its own topic.
		ctx := ctxTimeout(t, 3*time.Minute)
		east, west := "billing-"+e.id, "analytics-"+e.id
		commit := func(adm *kadm.Client, group, topic string) {
			t.Helper()
			o := kadm.Offsets{}
			o.Add(kadm.Offset{Topic: topic, Partition: 0, At: 10, LeaderEpoch: -1})
			if resp, err := adm.CommitOffsets(ctx, group, o); err != nil || resp.Error() != nil {
				t.Fatalf("commit %s on %s: %v %v", group, topic, err, resp.Error())
			}
		}
		commit(e.srcAdm, east, orders)
		commit(e.dstAdm, west, clicks)

		// Each copy holds exactly the records, once.
		e.waitTargetValues(60*time.Second, "src."+orders, wantOrders)
		e.waitFor(60*time.Second, "src holding exactly the records of dst."+clicks, func() (bool, string) {
			got, err := readTopic(ctx, e.src.Addrs(), "dst."+clicks)
			if err != nil {
				return false, err.Error()
			}
			d := diffValues(wantClicks, values(got))
			return d == "", d
		})

		// The groups translated both ways: the copy of a record is at the
		// same offset as its original (one partition, written from 0).
		for _, g := range []struct {
			adm          *kadm.Client
			group, topic string
		}{{e.dstAdm, east, "src." + orders}, {e.srcAdm, west, "dst." + clicks}} {
			e.waitFor(60*time.Second, fmt.Sprintf("group %s translated to %s at 10", g.group, g.topic), func() (bool, string) {
				got, err := kmCommitted(ctx, g.adm, g.group)
				if err != nil {
					return false, err.Error()
				}
				return got[kmTP{g.topic, 0}] == 10, fmt.Sprintf("committed %v", got)
			})
		}

		// No loop: after three more passes of each mirror, neither side
		// has a copy of a copy, and the copies still hold each record once.
		passes := func(mirror string) float64 {
			v, err := metricSum(addr, "kmirror_control_passes_total", mirror)
			if err != nil {
				t.Fatalf("kmirror_control_passes_total{mirror=%q}: %v", mirror, err)
			}
			return v
		}
		for _, m := range []string{toDst, toSrc} {
			start := passes(m)
			e.waitFor(60*time.Second, "three more passes of "+m, func() (bool, string) {
				n := passes(m)
				return n >= start+3, fmt.Sprintf("%v passes, want %v", n, start+3)
			})
		}
		for _, side := range []struct {
			name string
			cl   *kgo.Client
			loop string
		}{{"src", e.srcCl, "dst.src." + orders}, {"dst", e.dstCl, "src.dst." + clicks}} {
			topics, err := listTopics(ctx, side.cl)
			if err != nil {
				t.Fatal(err)
			}
			for _, tp := range topics {
				if tp == side.loop || strings.Contains(tp, "src.dst.") || strings.Contains(tp, "dst.src.") {
					t.Errorf("%s has %s: a record loop", side.name, tp)
				}
			}
			if side.name == "src" && !slices.Contains(topics, "dst."+clicks) || side.name == "dst" && !slices.Contains(topics, "src."+orders) {
				t.Errorf("%s lacks the other side's topic: %v", side.name, topics)
			}
		}
		for _, c := range []struct {
			cl    *kgo.Client
			topic string
		}{{e.dstCl, "src." + orders}, {e.srcCl, "dst." + clicks}} {
			if n, _, err := recordCount(ctx, c.cl, c.topic); err != nil || n != 20 {
				t.Errorf("%s holds %d records (%v), want 20", c.topic, n, err)
			}
		}
	})
}
