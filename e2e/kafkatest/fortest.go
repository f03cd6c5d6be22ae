package kafkatest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// TB is the part of testing.TB the helpers below use; it keeps this
// package free of the testing package. A *testing.T is one.
type TB interface {
	Helper()
	Skip(args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Failed() bool
	TempDir() string
	Cleanup(func())
}

// InCI reports whether the tests run in CI (CI=true), where a machine
// that cannot run Kafka fails the tests that need it instead of skipping
// them.
func InCI() bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv("CI")))
	return v != "" && v != "false" && v != "0"
}

// CachedRuntime returns FindCached's runtime for a test: when this
// machine cannot run Kafka (no java, jars not cached by `make
// kafka-jars`) the test skips, or fails with CI=true.
func CachedRuntime(t TB) *Runtime {
	t.Helper()
	rt, err := FindCached()
	if errors.Is(err, ErrUnavailable) && !InCI() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// StartForTest starts a one-broker cluster named name in the test's temp
// dir (see CachedRuntime for a machine without Kafka). It is stopped when
// the test ends, and the tail of its log is logged if the test failed.
func StartForTest(t TB, name string) *Cluster {
	t.Helper()
	c, err := CachedRuntime(t).NewCluster(Config{Name: name, Dir: filepath.Join(t.TempDir(), name)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("broker log %s:\n%s", c.LogPath(), c.Tail(40))
		}
		_ = c.Stop(30 * time.Second)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start: %v\n%s", err, c.Tail(40))
	}
	return c
}
