package connector

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// aclBinding is one topic ACL: who may (or may not) do what, from where.
type aclBinding struct {
	topic      string
	principal  string
	host       string
	operation  kmsg.ACLOperation
	permission kmsg.ACLPermissionType
}

// targetACL maps a source topic ACL to the one the target copy gets, by
// MirrorMaker 2's rules, or ok=false when it must not be copied:
//
//   - WRITE is never copied: only kmirror writes to a mirrored topic. MM2
//     drops ALLOW WRITE; kmirror drops DENY WRITE as well, because a copied
//     deny could match kmirror's own principal and stop replication.
//   - ALL becomes READ, for the same reasons (for ALLOW, as MM2 does, and
//     for DENY).
//   - the topic name goes through the replication policy.
func (m *Mirror) targetACL(b aclBinding, targetTopic string) (aclBinding, bool) {
	switch b.operation {
	case kmsg.ACLOperationWrite:
		return aclBinding{}, false
	case kmsg.ACLOperationAll:
		b.operation = kmsg.ACLOperationRead
	}
	b.topic = targetTopic
	return b, true
}

// describeTopicACLs lists the literal topic ACLs of a cluster.
func describeTopicACLs(ctx context.Context, cl *kgo.Client) ([]aclBinding, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeTopic
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := brokerErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	var out []aclBinding
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out = append(out, aclBinding{topic: r.ResourceName, principal: a.Principal, host: a.Host, operation: a.Operation, permission: a.PermissionType})
		}
	}
	return out, nil
}

// syncACLs copies the ACLs of mirrored topics to their target copies,
// creating only those the target lacks. ACLs removed at the source are not
// removed at the target: the target may have ACLs of its own on the same
// topics, and kmirror cannot tell them apart from copied ones.
func (m *Mirror) syncACLs(ctx context.Context, c *clients) error {
	targets := make(map[string]string) // source topic -> target topic
	m.mu.Lock()
	for _, ts := range m.topics {
		if ts.fatal == nil && ts.exists {
			targets[ts.source] = ts.target
		}
	}
	m.mu.Unlock()
	if len(targets) == 0 {
		return nil
	}
	src, err := describeTopicACLs(ctx, c.srcAdminCl)
	if err != nil {
		return fmt.Errorf("describe source ACLs: %w", m.srcErr(err))
	}
	dst, err := describeTopicACLs(ctx, c.dst)
	if err != nil {
		return fmt.Errorf("describe target ACLs: %w", m.dstErr(err))
	}
	have := make(map[aclBinding]bool, len(dst))
	for _, b := range dst {
		have[b] = true
	}
	var missing []aclBinding
	for _, b := range src {
		target, ok := targets[b.topic]
		if !ok {
			continue
		}
		if tb, ok := m.targetACL(b, target); ok && !have[tb] {
			have[tb] = true // two source ACLs can map to one (ALL and READ)
			missing = append(missing, tb)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	// In requests of at most maxRecordsPerRequest ACLs: a KRaft
	// controller writes each as a metadata record of one batch.
	var errs []error
	for chunk := range slices.Chunk(missing, maxRecordsPerRequest) {
		if err := m.createACLs(ctx, c, chunk); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// createACLs creates bindings on the target in one request.
func (m *Mirror) createACLs(ctx context.Context, c *clients, bindings []aclBinding) error {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bindings {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType = kmsg.ACLResourceTypeTopic
		cr.ResourceName = b.topic
		cr.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
		cr.Principal, cr.Host = b.principal, b.host
		cr.Operation, cr.PermissionType = b.operation, b.permission
		req.Creations = append(req.Creations, cr)
	}
	resp, err := req.RequestWith(ctx, c.dst)
	if err != nil {
		return fmt.Errorf("create target ACLs: %w", err)
	}
	var errs []error
	for i, r := range resp.Results {
		if i >= len(bindings) {
			break
		}
		b := bindings[i]
		if err := brokerErr(r.ErrorCode, r.ErrorMessage); err != nil {
			errs = append(errs, fmt.Errorf("create ACL %s %s %s on %s: %w", b.permission, b.operation, b.principal, b.topic, err))
			continue
		}
		m.metrics.incACLsCreated()
		m.log.Info("created target ACL", "target_topic", b.topic, "principal", b.principal, "host", b.host, "operation", b.operation.String(), "permission", b.permission.String())
	}
	return errors.Join(errs...)
}
