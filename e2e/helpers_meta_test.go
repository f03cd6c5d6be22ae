//go:build e2e

package e2e

// Helpers of the metadata and group tests (metadata_test.go,
// groups_test.go): configs with the keys the shared template lacks (sync,
// groups, labels, several mirrors and clusters), the JSON of `kmirror
// topics`, /api/v1/topics and /api/v1/groups, topic configs, extra
// clusters. Every name starts with km so it cannot collide with helpers of
// other test files.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.yaml.in/yaml/v3"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// ---------------------------------------------------------------------------
// Config files
// ---------------------------------------------------------------------------

// kmConfig is a kmirror config file (docs/configuration.md), marshalled
// as block-style YAML.
type kmConfig struct {
	Clusters map[string]*kmCluster `yaml:"clusters"`
	Mirrors  []*kmMirror           `yaml:"mirrors"`
	HTTP     map[string]string     `yaml:"http"`
	Log      map[string]string     `yaml:"log"`
}

type kmCluster struct {
	BootstrapServers []string `yaml:"bootstrap_servers"`
	SASL             *kmSASL  `yaml:"sasl,omitempty"`
}

type kmSASL struct {
	Mechanism string `yaml:"mechanism"`
	Username  string `yaml:"username"`
	Password  string `yaml:"password"`
}

type kmMirror struct {
	Name              string            `yaml:"name"`
	Source            string            `yaml:"source"`
	Target            string            `yaml:"target"`
	ReplicationPolicy map[string]string `yaml:"replication_policy,omitempty"`
	Topics            kmTopics          `yaml:"topics"`
	Groups            *kmGroups         `yaml:"groups,omitempty"`
	ProgressInterval  string            `yaml:"progress_interval,omitempty"`
	Sync              *kmSync           `yaml:"sync,omitempty"`
	Labels            []kmLabel         `yaml:"labels,omitempty"`
	Metadata          *kmMetadata       `yaml:"metadata,omitempty"`
	Producer          map[string]any    `yaml:"producer,omitempty"`
	OnSourceGap       string            `yaml:"on_source_gap,omitempty"`
}

type kmMetadata struct {
	TrustedUpstreams []string `yaml:"trusted_upstreams,omitempty"`
}

type kmTopics struct {
	Include         []string `yaml:"include"`
	Exclude         []string `yaml:"exclude,omitempty"`
	RefreshInterval string   `yaml:"refresh_interval"`
}

type kmGroups struct {
	Include []string `yaml:"include"`
	Exclude []string `yaml:"exclude,omitempty"`
}

type kmSync struct {
	TopicConfigs *kmSyncItem `yaml:"topic_configs,omitempty"`
	ACLs         *kmSyncItem `yaml:"acls,omitempty"`
	GroupOffsets *kmSyncItem `yaml:"group_offsets,omitempty"`
}

type kmSyncItem struct {
	Enabled  *bool    `yaml:"enabled,omitempty"`
	Interval string   `yaml:"interval,omitempty"`
	Include  []string `yaml:"include,omitempty"`
	Exclude  []string `yaml:"exclude,omitempty"`
}

type kmLabel struct {
	Match string            `yaml:"match"`
	Set   map[string]string `yaml:"set"`
}

func kmBool(b bool) *bool { return &b }

// kmDefaultConfigExcludes is MirrorMaker 2's list, kmirror's default for
// sync.topic_configs.exclude (setting the key replaces it).
var kmDefaultConfigExcludes = []string{
	`follower\.replication\.throttled\.replicas`,
	`leader\.replication\.throttled\.replicas`,
	`message\.timestamp\.difference\.max\.ms`,
	`message\.timestamp\.type`,
	`unclean\.leader\.election\.enable`,
	`min\.insync\.replicas`,
}

// kmMirrorOf is mirror name from cluster src to cluster dst with the
// default policy (separator "."), the given include patterns, 1s refresh
// and 200ms progress interval.
func kmMirrorOf(name, src, dst string, include ...string) *kmMirror {
	return &kmMirror{
		Name: name, Source: src, Target: dst,
		ReplicationPolicy: map[string]string{"type": "default", "separator": "."},
		Topics:            kmTopics{Include: include, RefreshInterval: "1s"},
		ProgressInterval:  "200ms",
	}
}

// kmConfigFor is the metadata tests' base config: clusters src and dst of
// the env (the target through the fault proxy when the test has one, see
// proxyTarget) and mirror m1-<id> including every topic of the test.
func (e *env) kmConfigFor() *kmConfig {
	return &kmConfig{
		Clusters: map[string]*kmCluster{
			"src": {BootstrapServers: e.src.Addrs()},
			"dst": {BootstrapServers: e.targetAddrs()},
		},
		Mirrors: []*kmMirror{kmMirrorOf("m1-"+e.id, "src", "dst", ".*-"+e.id)},
		HTTP:    map[string]string{"listen": "127.0.0.1:0"},
		// info: the one-shot commands (plan, topics, translate) then log
		// only warnings and errors on stderr.
		Log: map[string]string{"level": "info"},
	}
}

func (c *kmConfig) yaml(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("# kmirror config written by e2e/helpers_meta_test.go\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		t.Fatalf("marshal config: %v", err)
	}
	_ = enc.Close()
	return buf.Bytes()
}

// kmWriteConfig writes cfg to a new file in the env's directory.
func (e *env) kmWriteConfig(cfg *kmConfig) string {
	e.t.Helper()
	f, err := os.CreateTemp(e.dir, "kmirror-*.yaml")
	if err != nil {
		e.t.Fatal(err)
	}
	f.Close()
	kmRewriteConfig(e.t, f.Name(), cfg.yaml(e.t))
	return f.Name()
}

// kmRewriteConfig replaces the content of the config file at path (for
// reloads): written to a temporary file and renamed, so a reader never sees
// half a file.
func kmRewriteConfig(t testing.TB, path string, content []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// ---------------------------------------------------------------------------
// Topic metadata: kmirror topics, /api/v1/topics
// ---------------------------------------------------------------------------

// kmTopicMeta is one entry of `kmirror topics -o json` and GET
// /api/v1/topics.
type kmTopicMeta struct {
	Mirror      string            `json:"mirror"`
	SourceTopic string            `json:"source_topic"`
	TargetTopic string            `json:"target_topic"`
	Metadata    map[string]string `json:"metadata"`
}

type kmTopicsDoc struct {
	Topics []kmTopicMeta `json:"topics"`
}

// kmTopicsHTTP reads GET /api/v1/topics?query and returns the topics by
// target topic.
func kmTopicsHTTP(addr, query string) (map[string]kmTopicMeta, error) {
	path := "/api/v1/topics"
	if query != "" {
		path += "?" + query
	}
	code, body, err := httpGet(addr, path)
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("GET %s: status %d: %s", path, code, body)
	}
	return kmDecodeTopics(body)
}

func kmDecodeTopics(body []byte) (map[string]kmTopicMeta, error) {
	var doc kmTopicsDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("decoding %s: %v", body, err)
	}
	if doc.Topics == nil {
		return nil, fmt.Errorf(`no "topics" list in %s`, body)
	}
	out := make(map[string]kmTopicMeta, len(doc.Topics))
	for _, tm := range doc.Topics {
		out[tm.TargetTopic] = tm
	}
	return out, nil
}

// kmTopicsCLI runs `kmirror topics --config path -o json [args]` and
// returns the topics by target topic.
func kmTopicsCLI(t testing.TB, path string, args ...string) (map[string]kmTopicMeta, error) {
	t.Helper()
	code, stdout, stderr := runCLI(t, append([]string{"topics", "--config", path, "-o", "json"}, args...)...)
	if code != 0 {
		return nil, fmt.Errorf("kmirror topics: exit %d; stderr:\n%s", code, stderr)
	}
	return kmDecodeTopics([]byte(stdout))
}

// kmLabels returns the labels of a metadata map: every key not starting
// with "kmirror.".
func kmLabels(md map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range md {
		if !strings.HasPrefix(k, "kmirror.") {
			out[k] = v
		}
	}
	return out
}

func kmFmtMap(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// kmHTTPPost posts an empty body to http://addr/path.
func kmHTTPPost(addr, path string) (int, []byte, error) {
	resp, err := httpClient.Post("http://"+addr+path, "application/json", nil)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// ---------------------------------------------------------------------------
// Groups: /api/v1/groups, kmirror translate
// ---------------------------------------------------------------------------

// kmGroupStatus is one entry of GET /api/v1/groups and the JSON of
// `kmirror translate -o json`.
type kmGroupStatus struct {
	Mirror     string             `json:"mirror"`
	Group      string             `json:"group"`
	State      string             `json:"state"`
	Error      string             `json:"error"`
	LastSyncAt time.Time          `json:"last_sync_at"`
	Partitions []kmGroupPartition `json:"partitions"`
}

type kmGroupPartition struct {
	SourceTopic  string `json:"source_topic"`
	TargetTopic  string `json:"target_topic"`
	Partition    int32  `json:"partition"`
	SourceOffset int64  `json:"source_offset"`
	TargetOffset int64  `json:"target_offset"`
	Behind       bool   `json:"behind"`
	// Untranslatable partitions have no exact target offset (-1) and
	// a Reason.
	Untranslatable bool   `json:"untranslatable"`
	Reason         string `json:"reason"`
}

// kmGroupsHTTP reads GET /api/v1/groups and returns the groups by name.
func kmGroupsHTTP(addr string) (map[string]kmGroupStatus, error) {
	code, body, err := httpGet(addr, "/api/v1/groups")
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("GET /api/v1/groups: status %d: %s", code, body)
	}
	var doc struct {
		Groups []kmGroupStatus `json:"groups"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("decoding %s: %v", body, err)
	}
	out := make(map[string]kmGroupStatus, len(doc.Groups))
	for _, g := range doc.Groups {
		out[g.Group] = g
	}
	return out, nil
}

// kmTP is a topic partition.
type kmTP struct {
	Topic     string
	Partition int32
}

func (tp kmTP) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// kmPartitionOffsets returns [source offset, target offset] by source
// topic partition.
func kmPartitionOffsets(ps []kmGroupPartition) map[kmTP][2]int64 {
	out := make(map[kmTP][2]int64, len(ps))
	for _, p := range ps {
		out[kmTP{p.SourceTopic, p.Partition}] = [2]int64{p.SourceOffset, p.TargetOffset}
	}
	return out
}

// kmCommitted returns a group's committed offsets on a cluster (empty when
// the group has none). Retriable errors (a coordinator still loading, or
// __consumer_offsets not created yet) are retried for up to 30s.
func kmCommitted(ctx context.Context, adm *kadm.Client, group string) (map[kmTP]int64, error) {
	var resp kadm.OffsetResponses
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		resp, err = adm.FetchOffsets(ctx, group)
		if err == nil {
			err = resp.Error()
		}
		if err == nil {
			break
		}
		if !kerr.IsRetriable(err) || time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(200 * time.Millisecond)
	}
	out := map[kmTP]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			out[kmTP{o.Topic, o.Partition}] = o.At
		}
	})
	return out, nil
}

// ---------------------------------------------------------------------------
// Topic configs
// ---------------------------------------------------------------------------

// kmConf is one topic config as a broker describes it.
type kmConf struct {
	Value string
	// Own is true when the value is set on the topic itself
	// (DYNAMIC_TOPIC_CONFIG), false for broker and Kafka defaults.
	Own bool
}

func (c kmConf) String() string {
	if !c.Own {
		return fmt.Sprintf("%s (default)", c.Value)
	}
	return c.Value + " (set on the topic)"
}

// kmTopicConfigs describes a topic's configs.
func kmTopicConfigs(ctx context.Context, adm *kadm.Client, topic string) (map[string]kmConf, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, err
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return nil, err
	}
	if rc.Err != nil {
		return nil, rc.Err
	}
	out := make(map[string]kmConf, len(rc.Configs))
	for _, c := range rc.Configs {
		v := ""
		if c.Value != nil {
			v = *c.Value
		}
		out[c.Key] = kmConf{Value: v, Own: c.Source == kmsg.ConfigSourceDynamicTopicConfig}
	}
	return out, nil
}

// kmAlterTopic sets (value non-nil) or deletes (nil) configs of a topic
// with one IncrementalAlterConfigs request.
func kmAlterTopic(t testing.TB, adm *kadm.Client, topic string, changes map[string]*string) {
	t.Helper()
	var alters []kadm.AlterConfig
	for _, k := range slices.Sorted(maps.Keys(changes)) {
		if v := changes[k]; v != nil {
			alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: v})
		} else {
			alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		}
	}
	resp, err := adm.AlterTopicConfigs(ctxTimeout(t, 15*time.Second), alters, topic)
	if err == nil {
		for _, r := range resp {
			if r.Err != nil {
				err = fmt.Errorf("%w %s", r.Err, r.ErrMessage)
			}
		}
	}
	if err != nil {
		t.Fatalf("alter configs of %s (%v): %v", topic, kmFmtPtrMap(changes), err)
	}
}

func kmFmtPtrMap(m map[string]*string) string {
	out := map[string]string{}
	for k, v := range m {
		if v == nil {
			out[k] = "<delete>"
		} else {
			out[k] = *v
		}
	}
	return kmFmtMap(out)
}

// ---------------------------------------------------------------------------
// Clusters and envs
// ---------------------------------------------------------------------------

// kmKfake starts a kfake cluster with opts, closed when the test ends.
func kmKfake(t testing.TB, opts ...kfake.Opt) *kfakeCluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("kfake.NewCluster: %v", err)
	}
	kc := &kfakeCluster{c: c}
	t.Cleanup(kc.Close)
	return kc
}

// kmExtraCluster starts one more cluster of backend b for the test (the
// third cluster of a chain): a fresh kfake cluster, or a real Kafka
// cluster of the test's own.
func kmExtraCluster(t *testing.T, b Backend, name string) Cluster {
	t.Helper()
	if b.Name() == "kafka" {
		return newKafkaCluster(t, name, kafkatest.Config{})
	}
	return newKfakeCluster(t, ClusterSpec{Brokers: 1})
}

// kmNewEnv is newEnvWith with client options for the test's own clients
// (e.g. SASL for clusters that require it). Tools that make their own
// clients from addresses (readTopic, waitTargetValues) do not get them.
func kmNewEnv(t *testing.T, src, dst Cluster, shared bool, srcOpts, dstOpts []kgo.Opt) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), shared: shared, src: src, dst: dst}
	e.id = fmt.Sprintf("e%04d", envSeq.Add(1))
	e.srcCl = newClient(t, src.Addrs(), srcOpts...)
	e.dstCl = newClient(t, dst.Addrs(), dstOpts...)
	e.srcAdm = kadm.NewClient(e.srcCl)
	e.dstAdm = kadm.NewClient(e.dstCl)
	return e
}

// kmWaitTopic waits until topic exists on the cluster behind cl with n
// partitions.
func (e *env) kmWaitTopic(cl *kgo.Client, timeout time.Duration, topic string, n int) {
	e.t.Helper()
	ctx := ctxTimeout(e.t, timeout+10*time.Second)
	e.waitFor(timeout, fmt.Sprintf("topic %s with %d partitions", topic, n), func() (bool, string) {
		got, err := partitionCount(ctx, cl, topic)
		if err != nil {
			return false, err.Error()
		}
		return got == n, fmt.Sprintf("%d partitions", got)
	})
}

// kmWaitMirroring waits until /api/v1/status shows every given source topic
// of mirror in state mirroring.
func (e *env) kmWaitMirroring(addr, mirror string, timeout time.Duration, sources ...string) {
	e.t.Helper()
	e.waitFor(timeout, fmt.Sprintf("mirror %s to show %v as mirroring in /api/v1/status", mirror, sources), func() (bool, string) {
		doc, body, err := getStatus(addr)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range sources {
			state, msg, ok := topicStatus(doc, mirror, s)
			if !ok || state != "mirroring" {
				return false, fmt.Sprintf("topic %s: state %q %s; status: %s", s, state, msg, body)
			}
		}
		return true, ""
	})
}

// kmKafkaDir is the directory for a real-Kafka cluster of the test's own,
// under the shared base directory (kept when the test fails).
func kmKafkaDir(t *testing.T, name string) string {
	t.Helper()
	k := requireKafkaBackend(t)
	return filepath.Join(k.base, safeName(t.Name())+"-"+name)
}

// kmStartKafka starts real-Kafka clusters of the test's own in parallel
// (each cfg needs Name and Dir, see kmKafkaDir), stopped when the test
// ends. It is newKafkaCluster for several clusters at once.
func kmStartKafka(t *testing.T, cfgs ...kafkatest.Config) []*kafkaCluster {
	t.Helper()
	k := requireKafkaBackend(t)
	out := make([]*kafkaCluster, len(cfgs))
	errs := make([]error, len(cfgs))
	ctx := ctxTimeout(t, 3*time.Minute)
	begin := time.Now()
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		c, err := k.rt.NewCluster(cfg)
		if err != nil {
			t.Fatal(err)
		}
		kc := &kafkaCluster{Cluster: c}
		out[i] = kc
		t.Cleanup(func() {
			kc.Close()
			if t.Failed() {
				kafkaState.failed.Store(true)
				t.Logf("kafka %s broker log: %s\n%s", c.Name(), c.LogPath(), c.Tail(40))
			}
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Start(ctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			kafkaState.failed.Store(true)
			t.Fatalf("starting kafka cluster %s: %v", cfgs[i].Name, err)
		}
	}
	for _, c := range out {
		t.Logf("kafka cluster %s at %s (log %s)", c.Name(), c.Addr(kafkatest.PLAINTEXT), c.LogPath())
	}
	t.Logf("%d kafka clusters started in %v", len(out), time.Since(begin).Round(10*time.Millisecond))
	return out
}

// ---------------------------------------------------------------------------
// ACLs
// ---------------------------------------------------------------------------

// kmACL is one ACL binding.
type kmACL struct {
	Type      kmsg.ACLResourceType
	Name      string
	Pattern   kmsg.ACLResourcePatternType
	Principal string
	Host      string
	Op        kmsg.ACLOperation
	Perm      kmsg.ACLPermissionType
}

func (a kmACL) String() string {
	return fmt.Sprintf("%s %s %s@%s on %s %s:%s", a.Perm, a.Op, a.Principal, a.Host, a.Type, a.Pattern, a.Name)
}

// kmCreateACLs creates ACLs in one request and fails the test on any error.
func kmCreateACLs(t testing.TB, cl *kgo.Client, acls ...kmACL) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, a := range acls {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = a.Type, a.Name, a.Pattern
		c.Principal, c.Host, c.Operation, c.PermissionType = a.Principal, a.Host, a.Op, a.Perm
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctxTimeout(t, 15*time.Second), cl)
	if err != nil {
		t.Fatalf("create ACLs: %v", err)
	}
	for i, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("create ACL %v: %v %v", acls[i], err, kmStr(r.ErrorMessage))
		}
	}
}

func kmStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// kmDescribeACLs returns every ACL of a cluster, sorted by String.
func kmDescribeACLs(ctx context.Context, cl *kgo.Client) ([]kmACL, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("%w %s", err, kmStr(resp.ErrorMessage))
	}
	var out []kmACL
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out = append(out, kmACL{r.ResourceType, r.ResourceName, r.ResourcePatternType, a.Principal, a.Host, a.Operation, a.PermissionType})
		}
	}
	slices.SortFunc(out, func(a, b kmACL) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}
