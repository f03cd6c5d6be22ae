package kafkatest

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// compileJava compiles one Java source file (its base name is name) with
// javac against the Kafka jars into dir/classes, which it returns. The
// error wraps ErrUnavailable when there is no javac.
func (r *Runtime) compileJava(ctx context.Context, dir, name string, source []byte) (string, error) {
	javac, err := lookJDKTool("javac")
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "src", name)
	classes := filepath.Join(dir, "classes")
	for _, d := range []string{filepath.Dir(src), classes} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("kafkatest: %w", err)
		}
	}
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	cmd := exec.CommandContext(ctx, javac, "--release", "17", "-nowarn", "-cp", r.classPath(), "-d", classes, src)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kafkatest: javac %s: %v\n%s", src, err, out.String())
	}
	return classes, nil
}

//go:embed java/MM2Client.java
var mm2ClientSource []byte

// MM2Client is MirrorMaker 2's client API (connect-mirror-client's
// MirrorClient and RemoteClusterUtils, from the same jars as the brokers
// and MM2) in a small program: what an application that uses them sees.
type MM2Client struct {
	r       *Runtime
	classes string
}

// CompileMM2Client compiles the program into dir. The error wraps
// ErrUnavailable when there is no javac.
func (r *Runtime) CompileMM2Client(ctx context.Context, dir string) (*MM2Client, error) {
	classes, err := r.compileJava(ctx, dir, "MM2Client.java", mm2ClientSource)
	if err != nil {
		return nil, err
	}
	return &MM2Client{r: r, classes: classes}, nil
}

// Run runs the program with args (java/MM2Client.java says which) and
// returns its stdout; stderr (the client's logging) is in the error when
// it fails.
func (c *MM2Client) Run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.r.Java, append([]string{"-Xmx256m", "-cp", c.r.classPath(c.classes), "kmirror.e2e.MM2Client"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kafkatest: MM2Client %v: %v\n%s", args, err, tail(stderr.String(), 20))
	}
	return stdout.String(), nil
}
