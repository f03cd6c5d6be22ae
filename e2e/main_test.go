//go:build e2e

// Package e2e holds the end-to-end tests of kmirror: the real binary runs as a
// subprocess against two Kafka clusters (source and target) started by a
// Backend, and the tests check the target cluster with kadm/kgo.
//
// Run with:
//
//	go test -tags e2e -count=1 ./e2e/
//
// Environment:
//
//	KMIRROR_E2E_BACKENDS  comma-separated backends to run every test against:
//	                      kfake (franz-go's in-process fake) and kafka (real
//	                      Apache Kafka from Maven jars, see e2e/kafkatest);
//	                      default "kfake", "all" selects every one. make test
//	                      uses all. Without java/mvn the kafka subtests skip,
//	                      unless CI=true, where they fail.
//	KMIRROR_KAFKA_HOME    the Kafka jar cache (default
//	                      $HOME/.cache/kmirror/kafka-<version>)
//	KMIRROR_BIN           use this kmirror binary instead of building ./cmd/kmirror
//	KMIRROR_E2E_RACE=1    build the binary with -race
//	KMIRROR_E2E_LOGDIR    where full worker logs of failed tests are kept, and
//	                      the status page's screenshots (TestStatusPage)
//	                      (default $TMPDIR/kmirror-e2e-logs)
//	KMIRROR_E2E_SHOWLOGS=1 log worker stderr for passing tests too
//	KMIRROR_E2E_MEASURE=1 run the measurements among the tests (they skip
//	                      otherwise): TestListenerSlowThroughput
//	KMIRROR_CHAOS_SEED, KMIRROR_CHAOS_DURATION, KMIRROR_CHAOS_SKIP,
//	KMIRROR_CHAOS_REPORT  TestChaos's seed (default random), duration (2m),
//	                      fault kinds left out and report file (make chaos)
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// kmirrorBin is the path of the binary under test, set by TestMain.
var kmirrorBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if bin := os.Getenv("KMIRROR_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: KMIRROR_BIN: %v\n", err)
			return 1
		}
		kmirrorBin = abs
		return runTests(m)
	}

	dir, err := os.MkdirTemp("", "kmirror-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)

	root, err := repoRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: finding the repository root: %v\n", err)
		return 1
	}
	kmirrorBin = filepath.Join(dir, "kmirror")
	args := []string{"build", "-o", kmirrorBin}
	if os.Getenv("KMIRROR_E2E_RACE") == "1" {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/kmirror")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go %s (in %s) failed: %v\n%s\n", strings.Join(args, " "), root, err, out)
		return 1
	}
	return runTests(m)
}

// runTests runs the tests, with the kafka backend's shared clusters
// starting in the background first and stopped at the end.
func runTests(m *testing.M) int {
	kafkaMainStart()
	code := m.Run()
	runAtExit()
	kafkaMainStop(code)
	return code
}

// atExit holds what runs once after every test: helpers that build
// something once per test binary (plugin binaries) register its removal.
var atExit struct {
	mu  sync.Mutex
	fns []func()
}

// registerAtExit runs fn after all tests, latest registered first.
func registerAtExit(fn func()) {
	atExit.mu.Lock()
	defer atExit.mu.Unlock()
	atExit.fns = append(atExit.fns, fn)
}

func runAtExit() {
	atExit.mu.Lock()
	fns := atExit.fns
	atExit.fns = nil
	atExit.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// repoRoot returns the directory of the module's go.mod, falling back to
// the parent of the e2e directory.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err == nil {
		if gomod := strings.TrimSpace(string(out)); gomod != "" && gomod != os.DevNull {
			return filepath.Dir(gomod), nil
		}
	}
	return filepath.Abs("..")
}
