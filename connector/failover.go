package connector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/fence"
	"github.com/kmirror/kmirror/connector/groups"
	"github.com/kmirror/kmirror/connector/policy"
)

// A failover moves the applications of a mirror's source to its target:
// the mirror is fenced so that nothing is copied into the target any more,
// every group is translated (from the source when it answers, else from
// its checkpoints on the target) and committed there, and the report says
// what the target lacks: per partition, the source records never copied,
// as far as the last known source end tells (the recovery point). It is a
// sequence of named steps (Failover), each of which only reads or writes
// the target unless the source answers.

// FailoverOptions are what `kmirror failover` asks.
type FailoverOptions struct {
	// Groups limits the groups translated (default: every group with
	// checkpoints on the target).
	Groups []string
	// SourceTimeout bounds the one look at the source; when it does not
	// answer, every group is translated from its checkpoints.
	SourceTimeout time.Duration
	// FromCheckpoints never asks the source.
	FromCheckpoints bool
	// AllowRewind lets a group's commit move a target partition
	// backwards.
	AllowRewind bool
	// Reason is written with the fence.
	Reason string
}

// FailoverReport is what a failover did, for the operator and as JSON.
type FailoverReport struct {
	Mirror string `json:"mirror"`
	// Fence is the fence now set.
	Fence string `json:"fence"`
	// SourceReachable: the source answered; SourceError why not.
	SourceReachable bool   `json:"source_reachable"`
	SourceError     string `json:"source_error,omitempty"`
	// RecoveryPoint is, per mirrored partition, how far the copy goes
	// and how much of the source it lacks.
	RecoveryPoint []PartitionRecovery `json:"recovery_point"`
	// NotCopied is the sum of the partitions' NotCopied.
	NotCopied int64 `json:"not_copied_total"`
	// Groups are the translated groups, with whether each was applied.
	Groups []FailoverGroup `json:"groups"`
	// OK: every group was applied, every partition of it exactly.
	OK bool `json:"ok"`
	// Error is what stopped the failover before its end.
	Error string `json:"error,omitempty"`
}

// PartitionRecovery is the recovery point of one partition.
type PartitionRecovery struct {
	SourceTopic string `json:"source_topic"`
	TargetTopic string `json:"target_topic"`
	Partition   int32  `json:"partition"`
	// CopiedTo is the next source offset kmirror would have copied:
	// every source record below it is on the target.
	CopiedTo int64 `json:"copied_to"`
	// SourceEnd is the source's end as kmirror last saw it (-1:
	// unknown: the position was written by an older kmirror).
	SourceEnd int64 `json:"source_end"`
	// NotCopied is SourceEnd-CopiedTo: records (offsets, on a
	// compacted or transactional topic) the source held that the
	// target lacks. Records the source took after kmirror's last look
	// are not known to anyone but the source.
	NotCopied int64 `json:"not_copied"`
}

// FailoverGroup is one group of a failover.
type FailoverGroup struct {
	groups.Status
	Applied bool `json:"applied"`
	// Exact: applied and every partition translated exactly.
	Exact    bool   `json:"exact"`
	ApplyErr string `json:"apply_error,omitempty"`
}

// Failover fences the mirror, waits for its workers to leave, and
// translates and commits every group on the target. The report is filled
// as far as it got; the error says what stopped it.
func (m *Mirror) Failover(ctx context.Context, opts FailoverOptions) (FailoverReport, error) {
	rep := FailoverReport{Mirror: m.cfg.Name}
	err := m.failover(ctx, opts, &rep)
	if err != nil {
		rep.Error = err.Error()
	}
	return rep, err
}

func (m *Mirror) failover(ctx context.Context, opts FailoverOptions, rep *FailoverReport) error {
	c, err := m.newClients()
	if err != nil {
		return err
	}
	defer c.close()
	defer m.cancelProduce()

	if err := m.fenceMirror(ctx, c, "kmirror failover", opts.Reason); err != nil {
		return err
	}
	st, _, err := fence.Read(ctx, m.log, m.cfg.TargetOpts, c.dstAdm, m.cfg.Name)
	if err != nil {
		return m.dstErr(err)
	}
	rep.Fence = st.String()
	if err := m.awaitWorkersGone(ctx, c); err != nil {
		return err
	}
	stored, err := m.groupSync.LoadStored(ctx, c.groups())
	if err != nil {
		return err
	}
	rep.RecoveryPoint, rep.NotCopied = m.recoveryPoint(stored.Progress)
	tr := groups.TranslateOptions{Apply: true, AllowRewind: opts.AllowRewind, FromCheckpoints: opts.FromCheckpoints}
	if !opts.FromCheckpoints {
		if err := m.reachSource(ctx, c, opts.SourceTimeout); err != nil {
			rep.SourceError = err.Error()
			tr.FromCheckpoints = true
		} else {
			rep.SourceReachable = true
		}
	}
	names := opts.Groups
	if len(names) == 0 {
		if names, err = checkpointedGroups(stored); err != nil {
			return err
		}
	}
	rep.Groups = m.translateGroups(ctx, c, stored, names, tr)
	rep.OK = true
	for i, g := range rep.Groups {
		if g.OffsetsFrom == FromCheckpoints && g.SourceError == "" {
			rep.Groups[i].SourceError = rep.SourceError
		}
		rep.OK = rep.OK && g.Exact
	}
	if !rep.OK {
		return errors.New("not every group was applied exactly (see the groups' apply_error and untranslatable partitions)")
	}
	return nil
}

// fenceMirror sets the mirror's fence, naming the command and this host;
// what the last fence record says of the mirror's reverse is kept.
func (m *Mirror) fenceMirror(ctx context.Context, c *clients, command, reason string) error {
	host, _ := os.Hostname()
	st, err := m.readFence(ctx, c)
	if err != nil {
		return fmt.Errorf("fence mirror %s: %w", m.cfg.Name, err)
	}
	st.Fenced, st.At, st.By, st.Reason = true, time.Time{}, fmt.Sprintf("%s on %s", command, host), reason
	if err := fence.Write(ctx, c.dstAdm, c.dst, m.cfg.Name, m.cfg.ReplicationFactor, st); err != nil {
		return fmt.Errorf("fence mirror %s: %w", m.cfg.Name, m.dstErr(err))
	}
	return nil
}

// awaitWorkersGone waits, within ctx, until the mirror's group has no
// member: every worker saw the fence, persisted its progress and left.
// Until then the stored positions are not final. A group the target does
// not know (GROUP_ID_NOT_FOUND) has no member; any other group that cannot
// be described is waited for: unknown is not empty.
func (m *Mirror) awaitWorkersGone(ctx context.Context, c *clients) error {
	group := policy.InternalTopicPrefix + m.cfg.Name
	var last error
	for {
		described, err := c.dstAdm.DescribeGroups(ctx, group)
		if err == nil {
			err = described.Error()
		}
		d := described[group]
		switch {
		case err == nil && len(d.Members) == 0:
			return nil
		case errors.Is(err, kerr.GroupIDNotFound):
			// Kafka 4 answers so for a group it does not hold: no
			// worker of the mirror ever joined, or none is left.
			return nil
		case err == nil:
			var ids []string
			for _, mem := range d.Members {
				ids = append(ids, fmt.Sprintf("%s (%s)", mem.MemberID, mem.ClientHost))
			}
			last = fmt.Errorf("%d workers of mirror %s are still in its group %s: %v", len(d.Members), m.cfg.Name, group, ids)
		default:
			last = fmt.Errorf("describe the mirror's group %s: %w", group, m.dstErr(err))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the mirror is fenced, but its workers did not stop in time (%w); run the command again once they have: it is safe to repeat", last)
		case <-time.After(fence.CheckEvery / 2):
		}
	}
}

// reachSource asks the source for its brokers once, within timeout.
func (m *Mirror) reachSource(ctx context.Context, c *clients, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := c.srcAdm.BrokerMetadata(ctx); err != nil {
		return fmt.Errorf("reach the source: %w", m.srcErr(err))
	}
	return nil
}

// recoveryPoint is every stored partition's recovery point, sorted, and
// their total of records not copied.
func (m *Mirror) recoveryPoint(ld data.Loaded) ([]PartitionRecovery, int64) {
	out := make([]PartitionRecovery, 0, len(ld.Positions))
	var total int64
	for tp, pos := range ld.Positions {
		pr := PartitionRecovery{SourceTopic: tp.Topic, TargetTopic: m.cfg.Policy.FormatRemoteTopic(m.cfg.SourceAlias, tp.Topic), Partition: tp.Partition, CopiedTo: pos.Next, SourceEnd: -1}
		if pos.SourceEnd > 0 {
			pr.SourceEnd = pos.SourceEnd
			pr.NotCopied = max(0, pos.SourceEnd-pos.Next)
		}
		total += pr.NotCopied
		out = append(out, pr)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.SourceTopic < b.SourceTopic || (a.SourceTopic == b.SourceTopic && a.Partition < b.Partition)
	})
	return out, total
}
