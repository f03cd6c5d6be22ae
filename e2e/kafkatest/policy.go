package kafkatest

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

//go:embed java/RefuseMarkedConfigsPolicy.java
var refusePolicySource []byte

// RefusePolicy is a compiled CreateTopicPolicy that refuses topics created
// with a config the test marked: while the file MarkerPath(key, value)
// exists, a CreateTopics request for a topic with that config fails with
// POLICY_VIOLATION. Both brokers validate configs alike, so this is how a
// test makes one cluster stricter than the other.
type RefusePolicy struct {
	// ClassDir goes into Config.ClassPath.
	ClassDir string
	// Dir holds the marker files.
	Dir string
}

// RefusePolicyClass is the policy's class name.
const RefusePolicyClass = "kmirror.e2e.RefuseMarkedConfigsPolicy"

// CompileRefusePolicy compiles the policy with javac against the Kafka
// jars into dir/classes; markers live in dir/markers. The error wraps
// ErrUnavailable when there is no javac.
func (r *Runtime) CompileRefusePolicy(ctx context.Context, dir string) (*RefusePolicy, error) {
	markers := filepath.Join(dir, "markers")
	if err := os.MkdirAll(markers, 0o755); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	classes, err := r.compileJava(ctx, dir, "RefuseMarkedConfigsPolicy.java", refusePolicySource)
	if err != nil {
		return nil, err
	}
	return &RefusePolicy{ClassDir: classes, Dir: markers}, nil
}

// Properties are the broker properties that install the policy.
func (p *RefusePolicy) Properties() map[string]string {
	return map[string]string{
		"create.topic.policy.class.name": RefusePolicyClass,
		"kmirror.e2e.policy.dir":         p.Dir,
	}
}

// MarkerPath is the file whose existence refuses topics with key=value.
func (p *RefusePolicy) MarkerPath(key, value string) string {
	return filepath.Join(p.Dir, "refuse-"+key+"="+value)
}

// Refuse makes the broker refuse topics created with key=value.
func (p *RefusePolicy) Refuse(key, value string) error {
	return os.WriteFile(p.MarkerPath(key, value), nil, 0o644)
}

// Allow lifts Refuse.
func (p *RefusePolicy) Allow(key, value string) error {
	err := os.Remove(p.MarkerPath(key, value))
	if os.IsNotExist(err) {
		return nil
	}
	return err
}
