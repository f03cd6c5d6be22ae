package groups

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Whether a group has members on the target decides whether kmirror may
// write it there: both Sync and Translate ask.

// targetMembers is what the target says of groups' members.
type targetMembers struct {
	// members are the members consuming on the target, by group, as
	// "client-id@host".
	members map[string][]string
	// unknown are the groups whose members could not be learned this
	// time, with the error. Unknown is not "no members".
	unknown map[string]error
}

// activeMembers returns, per group, the members consuming on the target.
// A classic group answers DescribeGroups; a group on the consumer protocol
// (KIP-848) answers ConsumerGroupDescribe instead, so both are asked. Each
// answers GROUP_ID_NOT_FOUND for a group it does not hold (a group that
// does not exist, or one of the other protocol: Kafka and kfake alike), and
// that is a "no members" answer; any other error, or no answer, leaves the
// group unknown. Brokers without KIP-848 refuse the second request: then
// only classic groups exist.
func activeMembers(ctx context.Context, adm *kadm.Client, groups []string) targetMembers {
	out := targetMembers{members: make(map[string][]string), unknown: make(map[string]error)}
	if len(groups) == 0 {
		return out
	}
	unknown := func(g string, err error) {
		if out.unknown[g] == nil {
			out.unknown[g] = err
		}
	}
	described, err := adm.DescribeGroups(ctx, groups...)
	for _, g := range groups {
		d, ok := described[g]
		switch {
		case !ok:
			unknown(g, fmt.Errorf("describe group: %w", orNoAnswer(err)))
		case d.Err == nil:
			for _, m := range d.Members {
				out.members[g] = append(out.members[g], m.ClientID+"@"+m.ClientHost)
			}
		case !errors.Is(d.Err, kerr.GroupIDNotFound):
			unknown(g, fmt.Errorf("describe group: %w", d.Err))
		}
	}
	cgs, err := adm.DescribeConsumerGroups(ctx, groups...)
	if err != nil && len(cgs) == 0 && !consumerGroupDescribeSupported(ctx, adm) {
		return out
	}
	for _, g := range groups {
		d, ok := cgs[g]
		switch {
		case !ok:
			unknown(g, fmt.Errorf("describe consumer-protocol group: %w", orNoAnswer(err)))
		case d.Err == nil:
			for _, m := range d.Members {
				out.members[g] = append(out.members[g], m.ClientID+"@"+m.ClientHost)
			}
		case !errors.Is(d.Err, kerr.GroupIDNotFound):
			unknown(g, fmt.Errorf("describe consumer-protocol group: %w", d.Err))
		}
	}
	return out
}

func orNoAnswer(err error) error {
	if err == nil {
		return errors.New("no answer for the group")
	}
	return err
}

// consumerGroupDescribeSupported reports whether a broker of the cluster
// knows ConsumerGroupDescribe (KIP-848). When the brokers' versions cannot
// be read it answers true: a failed describe is then an error, not a
// cluster without consumer-protocol groups.
func consumerGroupDescribeSupported(ctx context.Context, adm *kadm.Client) bool {
	vs, err := adm.ApiVersions(ctx)
	if err != nil || len(vs) == 0 {
		return true
	}
	supported := false
	vs.Each(func(v kadm.BrokerApiVersions) {
		if v.Err != nil {
			supported = true
			return
		}
		if _, _, ok := v.KeyVersions(int16(kmsg.ConsumerGroupDescribe)); ok {
			supported = true
		}
	})
	return supported
}

// isActiveGroupErr reports a commit refused because the group has members:
// the classic protocol answers UNKNOWN_MEMBER_ID to a commit from outside
// the group, the consumer protocol STALE_MEMBER_EPOCH or UNKNOWN_MEMBER_ID.
func isActiveGroupErr(err error) bool {
	return errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.StaleMemberEpoch) || errors.Is(err, kerr.IllegalGeneration)
}
