package connector

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

func TestConfigDiff(t *testing.T) {
	t.Parallel()
	target := []filters.ConfigProperty{
		{Name: "retention.ms", Value: "1000"},                        // set on the target topic
		{Name: "cleanup.policy", Value: "delete", Default: true},     // target default
		{Name: "segment.ms", Value: "500"},                           // target-only override
		{Name: "max.message.bytes", Value: "2000"},                   // kmirror set it earlier
		{Name: "compression.type", Value: "producer", Default: true}, // default, synced earlier
		{Name: "retention.bytes", Value: "100"},                      // equal already
	}
	desired := map[string]string{"retention.ms": "2000", "cleanup.policy": "compact", "retention.bytes": "100"}
	set, del := configDiff(desired, target, []string{"max.message.bytes", "compression.type", "retention.ms"})
	if want := map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}; !reflect.DeepEqual(set, want) {
		t.Errorf("set = %v, want %v", set, want)
	}
	// segment.ms was never kmirror's: untouched. compression.type is
	// already at the target's default: nothing to delete.
	if want := []string{"max.message.bytes"}; !reflect.DeepEqual(del, want) {
		t.Errorf("del = %v, want %v", del, want)
	}
	set, del = configDiff(nil, nil, nil)
	if len(set) != 0 || len(del) != 0 {
		t.Errorf("empty diff = %v %v", set, del)
	}
}

func describeOn(t *testing.T, adm *kadm.Client, topic string) map[string]filters.ConfigProperty {
	t.Helper()
	props, errs := describeConfigs(context.Background(), adm, []string{topic})
	if err := errs[topic]; err != nil {
		t.Fatal(err)
	}
	out := map[string]filters.ConfigProperty{}
	for _, p := range props[topic] {
		out[p.Name] = p
	}
	return out
}

func alterOn(t *testing.T, cl *kgo.Client, topic string, set map[string]string, del ...string) {
	t.Helper()
	res, err := alterConfigs(context.Background(), cl, []configChange{{target: topic, set: set, del: del}})
	if err != nil || res[topic] != nil {
		t.Fatalf("alter %s: %v %v", topic, err, res[topic])
	}
}

// TestConfigSync: a config change at the source reaches the target;
// excluded keys and target-only settings are untouched; a key the source
// stops setting is removed from the target.
func TestConfigSync(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	ctx := context.Background()
	if _, err := h.srcAdm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("100000")}, "cfg"); err != nil {
		t.Fatal(err)
	}
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	if got := describeOn(t, h.dstAdm, "src.cfg")["retention.ms"]; got.Value != "100000" || got.Default {
		t.Fatalf("retention.ms at creation = %+v", got)
	}
	srcCl := h.c.srcAdminCl
	alterOn(t, srcCl, "cfg", map[string]string{"retention.ms": "200000", "segment.bytes": "2000000", "min.insync.replicas": "1"})
	alterOn(t, h.dst, "src.cfg", map[string]string{"segment.ms": "600000"}) // the target's own
	if err := h.m.syncConfigs(ctx, h.c); err != nil {
		t.Fatal(err)
	}
	got := describeOn(t, h.dstAdm, "src.cfg")
	if got["retention.ms"].Value != "200000" || got["segment.bytes"].Value != "2000000" {
		t.Fatalf("after sync: retention.ms=%+v segment.bytes=%+v", got["retention.ms"], got["segment.bytes"])
	}
	if !got["min.insync.replicas"].Default {
		t.Fatalf("an excluded key was copied: %+v", got["min.insync.replicas"])
	}
	if got["segment.ms"].Value != "600000" || got["segment.ms"].Default {
		t.Fatalf("a target-only setting was touched: %+v", got["segment.ms"])
	}
	md := h.m.Topics()[0].Metadata
	if md[MetaSyncedConfigs] != "retention.ms,segment.bytes" || md[MetaConfigSynced] == "" {
		t.Fatalf("metadata after sync = %v", md)
	}

	// The source drops its override: the target falls back to its default.
	alterOn(t, srcCl, "cfg", nil, "segment.bytes")
	if err := h.m.syncConfigs(ctx, h.c); err != nil {
		t.Fatal(err)
	}
	got = describeOn(t, h.dstAdm, "src.cfg")
	if !got["segment.bytes"].Default || got["segment.ms"].Default {
		t.Fatalf("after the source dropped segment.bytes: segment.bytes=%+v segment.ms=%+v", got["segment.bytes"], got["segment.ms"])
	}
	// Nothing differs any more: a plan shows no config change.
	h.m.plan = &Plan{}
	if err := h.m.syncConfigs(ctx, h.c); err != nil || len(h.m.plan.Configs) != 0 {
		t.Fatalf("plan after sync = %+v, %v", h.m.plan.Configs, err)
	}
}

// readMetadataTopic reads the mirror's metadata topic like a plain consumer.
func readMetadataTopic(t *testing.T, h *passHarness) map[string]map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := loadMetadata(ctx, nil, []kgo.Opt{kgo.SeedBrokers(h.dstAddrs()...)}, h.dstAdm, h.m.metadataTopic)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

func (h *passHarness) dstAddrs() []string { return h.dst.OptValue(kgo.SeedBrokers).([]string) }

func TestMetadataAndLabels(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	labels := []Label{
		{Match: regexp.MustCompile(`^(?:orders.*)$`), Set: map[string]string{"team": "payments", "tier": "2"}},
		{Match: regexp.MustCompile(`^(?:orders\.eu)$`), Set: map[string]string{"tier": "1"}},
	}
	h.m.cfg.Labels = labels // the config a restarted mirror starts from
	h.m.Reconfigure(Selection{Filters: h.m.selection().Filters, ConfigFilters: h.m.selection().ConfigFilters, Labels: labels})
	ctx := context.Background()
	for _, topic := range []string{"orders.eu", "clicks"} {
		if _, err := h.srcAdm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	var stored map[string]map[string]string
	kfaketest.WaitFor(t, func() bool {
		stored = readMetadataTopic(t, h)
		return len(stored) == 2
	}, "metadata for both topics")
	eu := stored["src.orders.eu"]
	for k, want := range map[string]string{
		MetaMirror: "m", MetaSourceCluster: "src", MetaSourceTopic: "orders.eu", MetaOriginCluster: "src",
		MetaOriginTopic: "orders.eu", MetaState: "mirroring", "team": "payments", "tier": "1",
	} {
		if eu[k] != want {
			t.Errorf("metadata %s = %q, want %q (all: %v)", k, eu[k], want, eu)
		}
	}
	if eu[MetaCreatedAt] == "" || eu[MetaSourceTopicID] == "" {
		t.Errorf("created_at and source topic ID must be set: %v", eu)
	}
	if _, ok := stored["src.clicks"]["team"]; ok {
		t.Errorf("clicks matches no label: %v", stored["src.clicks"])
	}

	// A label change in the config reaches existing topics.
	labels = []Label{{Match: labels[0].Match, Set: map[string]string{"team": "checkout"}}, labels[1]}
	h.m.cfg.Labels = labels
	h.m.Reconfigure(Selection{Filters: h.m.selection().Filters, ConfigFilters: h.m.selection().ConfigFilters, Labels: labels})
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool { return readMetadataTopic(t, h)["src.orders.eu"]["team"] == "checkout" }, "the new label")

	// A restarted mirror keeps created_at from the stored metadata.
	created := eu[MetaCreatedAt]
	h2 := newPassHarnessFor(t, src, dst, h.m.cfg)
	if err := h2.m.load(ctx, h2.dstAdm); err != nil {
		t.Fatal(err)
	}
	if err := h2.pass(t); err != nil {
		t.Fatal(err)
	}
	for _, tm := range h2.m.Topics() {
		if tm.TargetTopic == "src.orders.eu" && tm.Metadata[MetaCreatedAt] != created {
			t.Fatalf("created_at after restart = %q, want %q", tm.Metadata[MetaCreatedAt], created)
		}
	}
}

// TestLabelsTravelDownstream: in a chain A->B->C the labels set by A->B
// reach C's metadata, with A as the origin.
func TestLabelsTravelDownstream(t *testing.T) {
	t.Parallel()
	a, b := kfaketest.Clusters(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ab := newPassHarness(t, a, b)
	ab.m.Reconfigure(Selection{Filters: ab.m.selection().Filters, Labels: []Label{{Match: regexp.MustCompile(`.*`), Set: map[string]string{"team": "payments"}}}})
	ctx := context.Background()
	if _, err := ab.srcAdm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := ab.pass(t); err != nil {
		t.Fatal(err)
	}
	kfaketest.WaitFor(t, func() bool { return len(readMetadataTopic(t, ab)) == 1 }, "A->B metadata")

	bcCfg := ab.m.cfg
	bcCfg.Name, bcCfg.SourceAlias, bcCfg.TargetAlias, bcCfg.Labels = "bc", "b", "c", nil
	bcCfg.TrustedUpstreams = []string{ab.m.cfg.Name}
	bc := newPassHarnessFor(t, b, c, bcCfg)
	kfaketest.WaitFor(t, func() bool {
		if err := bc.pass(t); err != nil {
			t.Fatal(err)
		}
		for _, tm := range bc.m.Topics() {
			if tm.SourceTopic == "src.orders" {
				return tm.Metadata["team"] == "payments" && tm.Metadata[MetaOriginCluster] == "src" &&
					tm.Metadata[MetaOriginTopic] == "orders" && tm.Metadata[MetaSourceCluster] == "b"
			}
		}
		return false
	}, "C's metadata to carry A's labels and origin")
	// B's own internal topics never travel on.
	for _, tm := range bc.m.Topics() {
		if strings.HasPrefix(tm.SourceTopic, "kmirror.") {
			t.Fatalf("an internal topic was mirrored: %v", tm)
		}
	}
}

// TestUpstreamMetadataOnlyFromTrustedMirrors: a source holds the metadata
// topic of a trusted upstream mirror and one that anyone could have
// created under another mirror's name; both label a topic team=payments,
// which the label filter selects. Only the trusted one is believed (its
// topic is selected, with its labels and origin); the other is ignored,
// with one warning naming it over several passes. A reload that withdraws
// the trust drops what was inherited: orders with its label, and clicks
// (selected for its partitions) keeps no label and no origin from it.
func TestUpstreamMetadataOnlyFromTrustedMirrors(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	var conds []filters.Condition
	for _, c := range []string{"label.team = payments", "partitions > 1"} {
		cond, err := filters.ParseCondition(c)
		if err != nil {
			t.Fatal(err)
		}
		conds = append(conds, cond)
	}
	prop, err := filters.NewProperty(filters.Any, conds...)
	if err != nil {
		t.Fatal(err)
	}
	logs := &kfaketest.LockedBuffer{}
	h := newPassHarnessFor(t, src, dst, Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		Filters:          []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll(".*")}, prop},
		TrustedUpstreams: []string{"up"},
		Logger:           slog.New(slog.NewTextHandler(logs, nil)),
	})
	trusted, forged := metadataTopicName("up"), metadataTopicName("forged")
	ctx := context.Background()
	for topic, partitions := range map[string]int32{"orders": 1, "secrets": 1, "clicks": 2, trusted: 1, forged: 1} {
		if _, err := h.srcAdm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	upstream := func(topic string, md map[string]string) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte(md[MetaSourceTopic]), Value: encodeMetadata(md)}
	}
	if err := kfaketest.Client(t, src).ProduceSync(ctx,
		upstream(trusted, map[string]string{MetaSourceCluster: "a", MetaSourceTopic: "orders", "team": "payments"}),
		upstream(trusted, map[string]string{MetaSourceCluster: "a", MetaSourceTopic: "clicks", "tier": "1"}),
		upstream(forged, map[string]string{MetaSourceCluster: "mallory", MetaSourceTopic: "secrets", "team": "payments"}),
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	metadata := func(source string) map[string]string {
		for _, tm := range h.m.Topics() {
			if tm.SourceTopic == source {
				return tm.Metadata
			}
		}
		return nil
	}

	for range 3 {
		if err := h.pass(t); err != nil {
			t.Fatal(err)
		}
	}
	if states := h.topicStates(); len(states) != 2 || states["orders"] == "" || states["clicks"] == "" {
		t.Fatalf("mirroring %v, want orders and clicks (secrets is labelled by untrusted metadata)", states)
	}
	if md := metadata("orders"); md["team"] != "payments" || md[MetaOriginCluster] != "a" || md[MetaOriginTopic] != "orders" {
		t.Errorf("orders' metadata = %v, want team=payments and origin a/orders from the trusted upstream", md)
	}
	if n := logs.Count("topic=" + forged); n != 1 {
		t.Errorf("%d log lines name %s over 3 passes, want 1:\n%s", n, forged, logs)
	}
	if n := logs.Count("topic=" + trusted); n != 0 {
		t.Errorf("the trusted metadata topic was warned about:\n%s", logs)
	}

	sel := *h.m.selection()
	sel.TrustedUpstreams = nil
	h.m.Reconfigure(sel)
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	if states := h.topicStates(); len(states) != 1 || states["clicks"] == "" {
		t.Errorf("after the trust was withdrawn, mirroring %v, want clicks only (orders lost its team label)", states)
	}
	if md := metadata("clicks"); md["tier"] != "" || md[MetaOriginCluster] != "src" || md[MetaOriginTopic] != "clicks" {
		t.Errorf("after the trust was withdrawn, clicks' metadata = %v, want no tier and origin src/clicks", md)
	}
	if n := logs.Count("topic=" + trusted); n != 1 {
		t.Errorf("%d log lines name %s once it is no longer trusted, want 1:\n%s", n, trusted, logs)
	}
}

// TestACLSync: the mirrored topics' ACLs reach the target as kmirror
// maps them, in CreateACLs requests of at most maxRecordsPerRequest ACLs
// (lowered to 2 here: not parallel).
func TestACLSync(t *testing.T) {
	old := maxRecordsPerRequest
	maxRecordsPerRequest = 2
	t.Cleanup(func() { maxRecordsPerRequest = old })
	newACLCluster := func() *kfake.Cluster {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "admin"), kfake.EnableACLs())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	src, dst := newACLCluster(), newACLCluster()
	h := newPassHarnessFor(t, src, dst, Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		Filters: []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll("secured")}},
		Logger:  kfaketest.Logger(),
	}, kgo.SASL(plain.Auth{User: "admin", Pass: "admin"}.AsMechanism()))
	ctx := context.Background()
	if _, err := h.srcAdm.CreateTopic(ctx, 1, 1, nil, "secured"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srcAdm.CreateTopic(ctx, 1, 1, nil, "unmirrored"); err != nil {
		t.Fatal(err)
	}
	mk := func(topic string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType, principal string) aclBinding {
		return aclBinding{topic: topic, principal: principal, host: "*", operation: op, permission: perm}
	}
	srcACLs := []aclBinding{
		mk("secured", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow, "User:reader"),
		mk("secured", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow, "User:writer"),
		mk("secured", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow, "User:owner"),
		mk("secured", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeDeny, "User:intruder"),
		mk("secured", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny, "User:*"),
		mk("unmirrored", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow, "User:reader"),
	}
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range srcACLs {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeTopic, b.topic, kmsg.ACLResourcePatternTypeLiteral
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = b.principal, b.host, b.operation, b.permission
		req.Creations = append(req.Creations, cr)
	}
	if _, err := req.RequestWith(ctx, h.c.srcAdminCl); err != nil {
		t.Fatal(err)
	}
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	var creates, wide atomic.Int32
	dst.ControlKey(int16(kmsg.CreateACLs), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		creates.Add(1)
		if len(kr.(*kmsg.CreateACLsRequest).Creations) > 2 {
			wide.Add(1)
		}
		return nil, nil, false
	})
	for range 2 { // the second sync must create nothing new
		if err := h.m.syncACLs(ctx, h.c); err != nil {
			t.Fatal(err)
		}
	}
	got, err := describeTopicACLs(ctx, h.dst)
	if err != nil {
		t.Fatal(err)
	}
	want := map[aclBinding]bool{
		mk("src.secured", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow, "User:reader"):      true,
		mk("src.secured", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow, "User:owner"):       true,
		mk("src.secured", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeDeny, "User:intruder"): true,
	}
	gotSet := map[aclBinding]bool{}
	for _, b := range got {
		if b.operation == kmsg.ACLOperationWrite {
			t.Errorf("a WRITE ACL reached the target: %+v", b)
		}
		gotSet[b] = true
	}
	if len(got) != len(want) || !reflect.DeepEqual(gotSet, want) {
		t.Fatalf("target ACLs = %+v, want exactly %+v", got, want)
	}
	// 3 ACLs, at most 2 a request: 2 requests, none on the second sync.
	if creates.Load() != 2 || wide.Load() != 0 {
		t.Fatalf("%d CreateACLs requests, %d of more than 2 ACLs; want 2, none wider", creates.Load(), wide.Load())
	}
}

// TestPlanChangesNothing: a plan against a fresh target lists every topic
// and creates none, not even kmirror's own topics.
func TestPlanChangesNothing(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.Clusters(t)
	ctx := context.Background()
	srcCl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer srcCl.Close()
	srcAdm := kadm.NewClient(srcCl)
	for _, topic := range []string{"a", "b", "c"} {
		if _, err := srcAdm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kadm.StringPtr("123456")}, topic); err != nil {
			t.Fatal(err)
		}
	}
	m, err := New(Config{
		Name: "m", SourceAlias: "src", TargetAlias: "dst",
		SourceOpts: []kgo.Opt{kgo.SeedBrokers(src.ListenAddrs()...)},
		TargetOpts: []kgo.Opt{kgo.SeedBrokers(dst.ListenAddrs()...)},
		Filters:    []filters.TopicFilter{filters.Regex{Include: filters.MustCompileAll(".*")}},
		Logger:     kfaketest.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := m.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range plan.Create {
		names = append(names, p.TargetTopic)
		if p.Partitions != 2 || p.Configs["retention.ms"] != "123456" || p.Error != "" {
			t.Errorf("planned %+v", p)
		}
	}
	if !reflect.DeepEqual(names, []string{"src.a", "src.b", "src.c"}) || !plan.Changes() {
		t.Fatalf("plan creates %v", names)
	}
	dstCl, err := kgo.NewClient(kgo.SeedBrokers(dst.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer dstCl.Close()
	if tp := targetPartitions(t, dstCl); len(tp) != 0 {
		t.Fatalf("plan created topics on the target: %v", tp)
	}
}

// TestConfigSyncWithinTheControllersLimit: config changes for many topics
// go in IncrementalAlterConfigs requests of at most maxRecordsPerRequest
// configs (a KRaft controller refuses a larger batch, enforced here by the
// target), and the configs are read in DescribeConfigs requests of at
// most describeConfigsPerRequest topics; every change lands in one sync.
// Not parallel: it lowers both limits.
func TestConfigSyncWithinTheControllersLimit(t *testing.T) {
	oldRecords, oldDescribe := maxRecordsPerRequest, describeConfigsPerRequest
	maxRecordsPerRequest, describeConfigsPerRequest = 5, 2
	t.Cleanup(func() { maxRecordsPerRequest, describeConfigsPerRequest = oldRecords, oldDescribe })
	src, dst := kfaketest.Clusters(t)
	h := newPassHarness(t, src, dst)
	ctx := context.Background()
	var names []string
	for i := range 6 {
		names = append(names, fmt.Sprintf("cfg%d", i))
	}
	if _, err := h.srcAdm.CreateTopics(ctx, 1, 1, nil, names...); err != nil {
		t.Fatal(err)
	}
	if err := h.pass(t); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		alterOn(t, h.c.srcAdminCl, n, map[string]string{"retention.ms": "200000", "segment.bytes": "2000000"})
	}
	var alters, refused, describes, wide atomic.Int32
	dst.ControlKey(int16(kmsg.IncrementalAlterConfigs), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		req := kr.(*kmsg.IncrementalAlterConfigsRequest)
		records := 0
		for _, r := range req.Resources {
			records += len(r.Configs)
		}
		alters.Add(1)
		if records <= 5 {
			return nil, nil, false
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, r := range req.Resources {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			rr.ErrorCode = kerr.PolicyViolation.Code
			rr.ErrorMessage = kmsg.StringPtr("Unable to perform excessively large batch operation.")
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil, true
	})
	for _, c := range []*kfake.Cluster{src, dst} {
		c.ControlKey(int16(kmsg.DescribeConfigs), func(kr kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			describes.Add(1)
			if len(kr.(*kmsg.DescribeConfigsRequest).Resources) > 2 {
				wide.Add(1)
			}
			return nil, nil, false
		})
	}
	if err := h.m.syncConfigs(ctx, h.c); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if got := describeOn(t, h.dstAdm, "src."+n); got["retention.ms"].Value != "200000" || got["segment.bytes"].Value != "2000000" {
			t.Errorf("src.%s after one sync: retention.ms=%+v segment.bytes=%+v", n, got["retention.ms"], got["segment.bytes"])
		}
	}
	// 6 topics of 2 changes, at most 5 a request: 3 requests.
	if alters.Load() != 3 || refused.Load() != 0 {
		t.Errorf("%d IncrementalAlterConfigs requests, %d refused as too large; want 3, none refused", alters.Load(), refused.Load())
	}
	if describes.Load() < 6 || wide.Load() != 0 {
		t.Errorf("%d DescribeConfigs requests, %d of more than 2 topics; want 3 per cluster or more, none wider", describes.Load(), wide.Load())
	}
}
