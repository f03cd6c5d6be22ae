package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/internal/app"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestVerifyExitCodes: verify exits 0 on a clean copy and 3 (not 1, an
// error's) when the copy differs: a record written to the target behind
// kmirror's back.
func TestVerifyExitCodes(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	kfaketest.CreateTopic(t, src, "orders", 1)
	srcCl := kfaketest.Client(t, src)
	produce := func(cl *kgo.Client, topic string, n int, prefix string) {
		t.Helper()
		for i := range n {
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", prefix, i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(srcCl, "orders", 20, "a")

	path := filepath.Join(t.TempDir(), "kmirror.yaml")
	body := fmt.Sprintf(`clusters:
  east: {bootstrap_servers: [%q]}
  west: {bootstrap_servers: [%q]}
mirrors:
  - {name: m, source: east, target: west, topics: {include: [orders], refresh_interval: 200ms}}
http: {listen: "127.0.0.1:0"}
`, src.ListenAddrs()[0], dst.ListenAddrs()[0])
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(app.Options{Config: cfg, Logger: kfaketest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })

	// verifyUntil runs verify until matched records are matched, and
	// returns its last exit code and stderr.
	verifyUntil := func(matched int64) (int, string) {
		t.Helper()
		var code int
		var stderr string
		kfaketest.WaitFor(t, func() bool {
			var stdout string
			code, stdout, stderr = runIn("verify", "--config", path, "-o", "json")
			var rep struct{ Total struct{ Matched int64 } }
			return json.Unmarshal([]byte(stdout), &rep) == nil && rep.Total.Matched == matched
		}, fmt.Sprintf("%d records copied and matched", matched))
		return code, stderr
	}
	if code, stderr := verifyUntil(20); code != exitOK {
		t.Fatalf("a clean copy: exit %d, want 0; stderr:\n%s", code, stderr)
	}
	// A record on the target behind kmirror's back, then more copied after
	// it: it lies in the verified range, an extra record.
	produce(kfaketest.Client(t, dst), "east.orders", 1, "foreign")
	produce(srcCl, "orders", 3, "b")
	if code, stderr := verifyUntil(23); code != exitNegative || !strings.Contains(stderr, "the copy differs from the source: 0 different, 0 missing, 1 extra") {
		t.Fatalf("a foreign record: exit %d, want 3; stderr:\n%s", code, stderr)
	}
}
