// Command slowlistener is a kmirror TopicListener plugin for the e2e tests:
// every call sleeps (30s by default, the config key `sleep`), ignoring the
// caller's deadline, so kmirror's dispatcher times it out and retries. The
// e2e throughput test checks that replication does not notice.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/kmirror/kmirror/listeners"
	"github.com/kmirror/kmirror/plugins/sdk"
)

func main() {
	sdk.Serve(sdk.WithInfo("slowlistener", "1.0.0"), sdk.WithTopicListener(&slow{sleep: 30 * time.Second}))
}

type slow struct{ sleep time.Duration }

// Configure implements listeners.Configurer.
func (s *slow) Configure(_ context.Context, config map[string]string) error {
	if v := config["sleep"]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("sleep: %w", err)
		}
		s.sleep = d
	}
	return nil
}

// TopicsChanged implements listeners.TopicListener.
func (s *slow) TopicsChanged(_ context.Context, c listeners.TopicsChange) error {
	sdk.Logger().Info("slow listener: call received; sleeping", "sequence", c.Sequence, "topics", len(c.Topics), "sleep", s.sleep)
	time.Sleep(s.sleep)
	return nil
}
