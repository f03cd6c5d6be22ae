package policy_test

import (
	"testing"

	"github.com/kmirror/kmirror/connector/policy"
)

func TestDefaultPolicy(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		sep, source, topic string
		remote             string
		upstream           string
		upstreamOK         bool
		alias              string
	}{
		"dot":          {sep: ".", source: "east", topic: "orders", remote: "east.orders", upstream: "orders", upstreamOK: true, alias: "east"},
		"empty sep":    {sep: "", source: "east", topic: "orders", remote: "east.orders", upstream: "orders", upstreamOK: true, alias: "east"},
		"dash":         {sep: "-", source: "a", topic: "b.c", remote: "a-b.c", upstream: "b.c", upstreamOK: true, alias: "a"},
		"multichar":    {sep: "__", source: "a", topic: "t", remote: "a__t", upstream: "t", upstreamOK: true, alias: "a"},
		"dotted topic": {sep: ".", source: "b", topic: "a.t", remote: "b.a.t", upstream: "a.t", upstreamOK: true, alias: "b"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := policy.Default{Separator: tc.sep}
			remote := p.FormatRemoteTopic(tc.source, tc.topic)
			if remote != tc.remote {
				t.Fatalf("FormatRemoteTopic = %q, want %q", remote, tc.remote)
			}
			alias, ok := p.TopicSource(remote)
			if !ok || alias != tc.alias {
				t.Fatalf("TopicSource(%q) = %q, %v; want %q, true", remote, alias, ok, tc.alias)
			}
			up, ok := p.UpstreamTopic(remote)
			if ok != tc.upstreamOK || up != tc.upstream {
				t.Fatalf("UpstreamTopic(%q) = %q, %v; want %q, %v", remote, up, ok, tc.upstream, tc.upstreamOK)
			}
		})
	}
}

func TestDefaultPolicyLocalNames(t *testing.T) {
	t.Parallel()
	p := policy.Default{Separator: "."}
	for _, topic := range []string{"orders", ".hidden", "trailing."} {
		if a, ok := p.TopicSource(topic); ok {
			t.Errorf("TopicSource(%q) = %q, true; want false", topic, a)
		}
		if u, ok := p.UpstreamTopic(topic); ok {
			t.Errorf("UpstreamTopic(%q) = %q, true; want false", topic, u)
		}
	}
}

func TestIdentityPolicy(t *testing.T) {
	t.Parallel()
	p := policy.Identity{}
	if got := p.FormatRemoteTopic("east", "orders"); got != "orders" {
		t.Fatalf("FormatRemoteTopic = %q", got)
	}
	if _, ok := p.TopicSource("east.orders"); ok {
		t.Fatal("identity must not claim a source")
	}
	if _, ok := p.UpstreamTopic("east.orders"); ok {
		t.Fatal("identity must not claim an upstream")
	}
}

func TestIsCycle(t *testing.T) {
	t.Parallel()
	def := policy.Default{Separator: "."}
	tests := map[string]struct {
		p      policy.ReplicationPolicy
		target string
		topic  string
		want   bool
	}{
		"local topic":            {def, "west", "orders", false},
		"came from target":       {def, "west", "west.orders", true},
		"came from elsewhere":    {def, "west", "east.orders", false},
		"two hops via target":    {def, "west", "east.west.orders", true},
		"two hops not target":    {def, "west", "east.north.orders", false},
		"identity never detects": {policy.Identity{}, "west", "west.orders", false},
		"target alias as suffix": {def, "west", "orders.west", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := policy.IsCycle(tc.p, tc.target, tc.topic); got != tc.want {
				t.Fatalf("IsCycle(%q, %q) = %v, want %v", tc.target, tc.topic, got, tc.want)
			}
		})
	}
}

func TestIsInternalTopic(t *testing.T) {
	t.Parallel()
	tests := map[string]bool{
		"__consumer_offsets":                   true,
		"__transaction_state":                  true,
		".hidden":                              true,
		"connect-offsets.internal":             true,
		"mm2-offset-syncs.west-internal":       true,
		policy.InternalTopic("m1", "progress"): true,
		"orders":                               false,
		"_single_underscore":                   false,
		"kmirror.orders":                       false,
		"internal.orders":                      false,
		"orders_internal":                      false,
	}
	for topic, want := range tests {
		if got := policy.IsInternalTopic(topic); got != want {
			t.Errorf("IsInternalTopic(%q) = %v, want %v", topic, got, want)
		}
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	if p, err := policy.New("default", "-"); err != nil || p.FormatRemoteTopic("a", "t") != "a-t" {
		t.Fatalf("New(default) = %v, %v", p, err)
	}
	if p, err := policy.New("identity", ""); err != nil || p.FormatRemoteTopic("a", "t") != "t" {
		t.Fatalf("New(identity) = %v, %v", p, err)
	}
	if _, err := policy.New("prefix", ""); err == nil || err.Error() != `unknown replication policy type "prefix" (want default or identity)` {
		t.Fatalf("New(prefix) err = %v", err)
	}
}
