package connector

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/fence"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestPlanBlockers: plan reports what would keep run from copying, as run
// would say it: with mm2.adopt, MirrorMaker 2's offsets topic missing, or
// holding the positions under another connector name; a fenced mirror.
// Nothing blocks once MM2's positions can be adopted.
func TestPlanBlockers(t *testing.T) {
	src, dst := kfaketest.Clusters(t)
	mm2Setup(t, src, dst)
	const offsets = "mm2-offsets.src.internal"
	plan := func(cfg Config) *Plan {
		t.Helper()
		cfg.SourceOpts = []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)}
		cfg.TargetOpts = []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)}
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, err := m.Plan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	blockedBy := func(p *Plan, want ...string) {
		t.Helper()
		if len(p.Blocked) != 1 || !slices.Equal(p.Blocked[0].Topics, []string{"orders"}) {
			t.Fatalf("blocked %+v, want orders held back by one blocker", p.Blocked)
		}
		for _, w := range want {
			if !strings.Contains(p.Blocked[0].Error, w) {
				t.Errorf("blocker %q does not say %q", p.Blocked[0].Error, w)
			}
		}
	}

	blockedBy(plan(adoptConfig()), offsets, "does not exist", "mirrors[].mm2.adopt", "adopt: false")
	if p := plan(Config{Name: "m", SourceAlias: "src", TargetAlias: "dst", Filters: adoptConfig().Filters, Logger: kfaketest.Logger()}); len(p.Blocked) != 0 {
		t.Fatalf("without mm2.adopt: blocked %+v", p.Blocked)
	}

	writeMM2Offsets(t, dst, offsets, &kgo.Record{Key: []byte(`["mm2-src-to-dst",{"cluster":"src","partition":0,"topic":"orders"}]`), Value: offsetValue(6)})
	blockedBy(plan(adoptConfig()), `"mm2-src-to-dst"`, "mirrors[].mm2.source_connector")
	writeMM2Offsets(t, dst, offsets, &kgo.Record{Key: mm2Key("src", "orders", 0), Value: offsetValue(6)})
	if p := plan(adoptConfig()); len(p.Blocked) != 0 {
		t.Fatalf("with MM2's positions: blocked %+v", p.Blocked)
	}

	// A topic kmirror copies resumes from its own progress: MM2's offsets
	// topic may be gone.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := kfaketest.Client(t, dst)
	kfaketest.WriteCompacted(t, dst, "kmirror.m.metadata.internal", 1, &kgo.Record{Key: []byte("src.orders"),
		Value: encodeMetadata(map[string]string{MetaSourceTopic: "orders", MetaState: string(StateMirroring)})})
	if _, err := kadm.NewClient(cl).DeleteTopic(ctx, offsets); err != nil {
		t.Fatal(err)
	}
	if p := plan(adoptConfig()); len(p.Blocked) != 0 {
		t.Fatalf("a topic kmirror copies, without MM2's offsets topic: blocked %+v", p.Blocked)
	}

	// Fenced (kmirror failover): every topic is held back.
	if err := fence.Write(ctx, kadm.NewClient(cl), cl, "m", -1, fence.State{Fenced: true, At: time.Now(), By: "kmirror failover on test", Reason: "drill"}); err != nil {
		t.Fatal(err)
	}
	blockedBy(plan(adoptConfig()), "fenced at", "drill", "kmirror failback")
}
