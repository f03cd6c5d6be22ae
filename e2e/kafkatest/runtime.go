// Package kafkatest runs real Apache Kafka brokers for tests: single-node
// KRaft clusters (broker and controller in one JVM) on free loopback ports,
// from the Maven Central jars of one pinned release, without Docker or a
// release tarball.
//
// A Runtime is the jars (fetched once with Maven into a cache directory
// outside the repository) plus a JVM; a Cluster is one formatted data
// directory with its ports, which can be started, stopped and started again.
//
//	rt, err := kafkatest.Find()          // java on PATH, cache dir
//	err = rt.Ensure(ctx, os.Stderr)      // mvn dependency:copy-dependencies, once
//	c, err := rt.NewCluster(kafkatest.Config{Name: "source", Dir: dir})
//	err = c.Start(ctx)                   // formats on first start, waits until ready
//	addr := c.Addr(kafkatest.PLAINTEXT)
//	err = c.Stop(30 * time.Second)       // SIGTERM, then SIGKILL
//
// The package has no test dependencies, so the e2e tests, benchmarks and the
// kafkatest command (cmd/kafkatest: fetch the jars, or start clusters by
// hand) share it.
package kafkatest

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Version is the Apache Kafka release the harness runs.
const Version = "4.3.1"

// ErrUnavailable is wrapped by errors that mean this machine cannot run
// real Kafka at all (no java, or no mvn while the jars are not cached yet),
// as opposed to a broker that fails to start.
var ErrUnavailable = errors.New("real Kafka is unavailable on this machine")

var (
	//go:embed pom.xml
	pomXML []byte
	//go:embed log4j2.properties
	brokerLog4j []byte
	//go:embed tools-log4j2.properties
	toolsLog4j []byte
)

// HomeEnv names the environment variable that overrides the cache
// directory (default $HOME/.cache/kmirror/kafka-<Version>).
const HomeEnv = "KMIRROR_KAFKA_HOME"

// Runtime is a Kafka installation: the jars in Home/lib and a JVM.
type Runtime struct {
	// Home holds pom.xml, lib/ (the jars, with the marker lib/.complete)
	// and config/ (log4j2 configs).
	Home string
	// Java is the java binary.
	Java string
}

// DefaultHome returns $KMIRROR_KAFKA_HOME, or else
// $HOME/.cache/kmirror/kafka-<Version>.
func DefaultHome() (string, error) {
	if h := os.Getenv(HomeEnv); h != "" {
		return filepath.Abs(h)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("kafkatest: no home directory for the jar cache (set %s): %w", HomeEnv, err)
	}
	return filepath.Join(home, ".cache", "kmirror", "kafka-"+Version), nil
}

// Find returns the Runtime in DefaultHome, with java from $JAVA_HOME/bin or
// PATH. It does not fetch anything (see Ensure). The error wraps
// ErrUnavailable when there is no java.
func Find() (*Runtime, error) {
	home, err := DefaultHome()
	if err != nil {
		return nil, err
	}
	java, err := lookJDKTool("java")
	if err != nil {
		return nil, err
	}
	return &Runtime{Home: home, Java: java}, nil
}

// FindCached is Find for tests that start brokers only where that needs no
// download: java is found and the jars are already cached (make
// kafka-jars). It writes the log4j2 configs (Ensure) and fetches nothing.
// The error wraps ErrUnavailable when java or the jars are missing.
func FindCached() (*Runtime, error) {
	rt, err := Find()
	if err != nil {
		return nil, err
	}
	if !rt.Ready() {
		return nil, fmt.Errorf("%w: the Kafka jars are not in %s (make kafka-jars)", ErrUnavailable, rt.Home)
	}
	if err := rt.Ensure(context.Background(), io.Discard); err != nil {
		return nil, err
	}
	return rt, nil
}

// lookJDKTool finds java or javac in $JAVA_HOME/bin, then on PATH.
func lookJDKTool(name string) (string, error) {
	if jh := os.Getenv("JAVA_HOME"); jh != "" {
		p := filepath.Join(jh, "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: %s not found on PATH or in $JAVA_HOME/bin (Kafka %s needs Java 17 or later)", ErrUnavailable, name, Version)
	}
	return p, nil
}

func (r *Runtime) libDir() string    { return filepath.Join(r.Home, "lib") }
func (r *Runtime) marker() string    { return filepath.Join(r.libDir(), ".complete") }
func (r *Runtime) configDir() string { return filepath.Join(r.Home, "config") }

// classPath is the broker's class path: every jar in lib/ (the JVM expands
// the wildcard itself) and then extra.
func (r *Runtime) classPath(extra ...string) string {
	return strings.Join(append([]string{filepath.Join(r.libDir(), "*")}, extra...), string(os.PathListSeparator))
}

// pomDigest identifies the POM the cached jars were fetched with; a changed
// POM fetches again.
func pomDigest() string {
	sum := sha256.Sum256(pomXML)
	return hex.EncodeToString(sum[:])
}

// Ready reports whether the jars are complete in Home (fetched with the
// current POM).
func (r *Runtime) Ready() bool {
	b, err := os.ReadFile(r.marker())
	return err == nil && strings.TrimSpace(string(b)) == pomDigest()
}

// Ensure makes sure the jars are in Home/lib and the log4j2 configs in
// Home/config. The first call on a machine runs
//
//	mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib.partial
//
// in Home (progress and errors to logw), renames lib.partial to lib and
// writes the marker lib/.complete; later calls only check the marker.
// Concurrent callers (several test binaries) are serialised with a lock
// file. The error wraps ErrUnavailable when the jars are missing and there
// is no mvn.
func (r *Runtime) Ensure(ctx context.Context, logw io.Writer) error {
	if logw == nil {
		logw = io.Discard
	}
	if err := os.MkdirAll(r.Home, 0o755); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	if err := r.writeConfigs(); err != nil {
		return err
	}
	if r.Ready() {
		return nil
	}
	unlock, err := lockFile(ctx, filepath.Join(r.Home, ".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	if r.Ready() { // fetched by another process while we waited
		return nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return fmt.Errorf("%w: the Kafka %s jars are not in %s and mvn (Maven) is not on PATH to fetch them", ErrUnavailable, Version, r.libDir())
	}
	if err := os.WriteFile(filepath.Join(r.Home, "pom.xml"), pomXML, 0o644); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	partial := filepath.Join(r.Home, "lib.partial")
	if err := os.RemoveAll(partial); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	fmt.Fprintf(logw, "kafkatest: fetching the Apache Kafka %s jars into %s (once per machine)\n", Version, r.libDir())
	begin := time.Now()
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "dependency:copy-dependencies", "-DoutputDirectory="+partial)
	cmd.Dir = r.Home
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kafkatest: mvn dependency:copy-dependencies in %s failed: %v\n%s", r.Home, err, tail(out.String(), 60))
	}
	if _, err := os.Stat(filepath.Join(partial, "kafka_2.13-"+Version+".jar")); err != nil {
		return fmt.Errorf("kafkatest: mvn finished but %s has no kafka_2.13-%s.jar\n%s", partial, Version, tail(out.String(), 60))
	}
	if err := os.RemoveAll(r.libDir()); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	if err := os.Rename(partial, r.libDir()); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	if err := os.WriteFile(r.marker(), []byte(pomDigest()+"\n"), 0o644); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	n, _ := filepath.Glob(filepath.Join(r.libDir(), "*.jar"))
	fmt.Fprintf(logw, "kafkatest: fetched %d jars in %v\n", len(n), time.Since(begin).Round(100*time.Millisecond))
	return nil
}

// writeConfigs writes the log4j2 configs into Home/config when they differ
// (atomically, since other test binaries may be starting JVMs with them).
func (r *Runtime) writeConfigs() error {
	if err := os.MkdirAll(r.configDir(), 0o755); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	for name, content := range map[string][]byte{
		"log4j2.properties":       brokerLog4j,
		"tools-log4j2.properties": toolsLog4j,
	} {
		path := filepath.Join(r.configDir(), name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
			continue
		}
		if err := writeFileAtomic(path, content); err != nil {
			return fmt.Errorf("kafkatest: %w", err)
		}
	}
	return nil
}

func writeFileAtomic(path string, content []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

// lockFile takes an exclusive flock on path, waiting until ctx ends.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("kafkatest: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("kafkatest: waiting for the lock %s (another process fetching the jars?): %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d earlier lines)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
