package connector

import (
	"context"
	"fmt"
	"sort"

	"github.com/kmirror/kmirror/connector/fence"
)

// Plan is what one pass would change on the target, computed without
// changing anything (kmirror plan): creations are checked by the
// controller with CreateTopics validateOnly, growth with CreatePartitions
// validateOnly, and config changes are diffed but not applied.
type Plan struct {
	Mirror  string          `json:"mirror"`
	Create  []PlannedTopic  `json:"create"`
	Grow    []PlannedGrowth `json:"grow"`
	Configs []PlannedConfig `json:"configs"`
	// Failed lists selected topics kmirror would not touch (the source
	// topic was recreated or shrank).
	Failed []TopicStatus `json:"failed"`
	// Blocked is what would keep run from copying topics, as far as
	// plan sees it without copying (planBlockers): a plan that creates
	// every topic is no promise that they will be copied.
	Blocked []PlanBlocker `json:"blocked"`
}

// PlanBlocker is one reason run would copy nothing of some selected
// topics.
type PlanBlocker struct {
	// Topics are the source topics it holds back, sorted.
	Topics []string `json:"topics"`
	// Error is what run would say, and what to change.
	Error string `json:"error"`
}

// PlannedTopic is a target topic that would be created.
type PlannedTopic struct {
	SourceTopic string            `json:"source_topic"`
	TargetTopic string            `json:"target_topic"`
	Partitions  int32             `json:"partitions"`
	Configs     map[string]string `json:"configs,omitempty"`
	// Error is the controller's verdict when it would refuse the topic.
	Error string `json:"error,omitempty"`
}

// PlannedGrowth is a target topic whose partitions would be added.
type PlannedGrowth struct {
	TargetTopic string `json:"target_topic"`
	From        int32  `json:"from"`
	To          int32  `json:"to"`
	Error       string `json:"error,omitempty"`
}

// PlannedConfig is a target topic whose configs would change.
type PlannedConfig struct {
	SourceTopic string            `json:"source_topic"`
	TargetTopic string            `json:"target_topic"`
	Set         map[string]string `json:"set,omitempty"`
	Delete      []string          `json:"delete,omitempty"`
}

// Changes reports whether applying the plan would change the target.
func (p *Plan) Changes() bool {
	return len(p.Create) > 0 || len(p.Grow) > 0 || len(p.Configs) > 0
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (p *Plan) addCreate(s topicSpec, err error) {
	p.Create = append(p.Create, PlannedTopic{SourceTopic: s.source, TargetTopic: s.name, Partitions: s.partitions, Configs: s.configs, Error: errString(err)})
}

func (p *Plan) addGrow(topic string, from, to int32, err error) {
	p.Grow = append(p.Grow, PlannedGrowth{TargetTopic: topic, From: from, To: to, Error: errString(err)})
}

func (p *Plan) addConfigChange(ch configChange) {
	p.Configs = append(p.Configs, PlannedConfig{SourceTopic: ch.source, TargetTopic: ch.target, Set: ch.set, Delete: ch.del})
}

// Plan connects to both clusters, runs one pass in dry-run mode and returns
// what it would change. It creates nothing, not even kmirror's internal
// topics; it reads the stored metadata when the mirror ran before, so the
// config diff knows which keys kmirror manages.
func (m *Mirror) Plan(ctx context.Context) (*Plan, error) {
	c, err := m.newClients()
	if err != nil {
		return nil, err
	}
	defer c.close()
	defer m.cancelProduce()

	tds, err := c.dstAdm.ListTopics(ctx, m.metadataTopic)
	if err != nil {
		return nil, fmt.Errorf("mirror %s: look up %s on the target: %w", m.cfg.Name, m.metadataTopic, m.dstErr(err))
	}
	if td, ok := tds[m.metadataTopic]; ok && td.Err == nil {
		md, err := loadMetadata(ctx, m.log, m.cfg.TargetOpts, c.dstAdm, m.metadataTopic)
		if err != nil {
			return nil, fmt.Errorf("mirror %s: %w", m.cfg.Name, m.dstErr(err))
		}
		m.metaPersisted = md
	}
	plan := &Plan{Mirror: m.cfg.Name}
	m.plan = plan
	if _, err := m.doPass(ctx, c, nil); err != nil {
		return nil, fmt.Errorf("mirror %s: %w", m.cfg.Name, err)
	}
	if err := m.syncConfigs(ctx, c); err != nil {
		return nil, fmt.Errorf("mirror %s: %w", m.cfg.Name, err)
	}
	for _, t := range m.Status().Topics {
		if t.State == StateFailed {
			plan.Failed = append(plan.Failed, t)
		}
	}
	plan.Blocked = m.planBlockers(ctx, c)
	sort.Slice(plan.Create, func(i, j int) bool { return plan.Create[i].TargetTopic < plan.Create[j].TargetTopic })
	sort.Slice(plan.Grow, func(i, j int) bool { return plan.Grow[i].TargetTopic < plan.Grow[j].TargetTopic })
	sort.Slice(plan.Configs, func(i, j int) bool { return plan.Configs[i].TargetTopic < plan.Configs[j].TargetTopic })
	return plan, nil
}

// planBlockers are what would keep run from copying, that plan sees
// cheaply: the mirror's fence, and with mm2.adopt MirrorMaker 2's
// positions for the topics kmirror has not copied yet. Each says what run
// would say.
func (m *Mirror) planBlockers(ctx context.Context, c *clients) []PlanBlocker {
	var out []PlanBlocker
	for _, b := range []*PlanBlocker{m.planFence(ctx, c), m.planAdoption(ctx, c)} {
		if b != nil {
			out = append(out, *b)
		}
	}
	return out
}

// planFence: a fenced mirror copies nothing (kmirror failover or cutover
// fenced it), nor does one whose fence cannot be read.
func (m *Mirror) planFence(ctx context.Context, c *clients) *PlanBlocker {
	st, _, err := fence.Read(ctx, m.log, m.cfg.TargetOpts, c.dstAdm, m.cfg.Name)
	switch {
	case err != nil:
		return &PlanBlocker{Topics: m.copyableTopics(), Error: fmt.Sprintf("cannot read the mirror's fence on the target; run copies nothing until it can: %v", m.dstErr(err))}
	case st.Fenced:
		return &PlanBlocker{Topics: m.copyableTopics(), Error: fmt.Sprintf("the mirror is %s; run copies nothing until the fence is lifted (kmirror failback, docs/disaster-recovery.md)", st)}
	}
	return nil
}

// copyableTopics are the selected topics that are not failed, sorted.
func (m *Mirror) copyableTopics() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, ts := range m.topics {
		if ts.fatal == nil {
			out = append(out, ts.source)
		}
	}
	sort.Strings(out)
	return out
}
