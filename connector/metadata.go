package connector

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/connector/state"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Topic metadata (after Pulsar's PIP-110): every mirrored topic carries a
// string map with its provenance and the user's labels, stored in the
// compacted topic kmirror.<mirror>.metadata.internal on the target:
//
//	key:   the target topic's name
//	value: {"kmirror.mirror":"east-to-west","kmirror.source.cluster":"east",...,"team":"payments"}
//
// Keys starting with "kmirror." are kmirror's; every other key is a label.
// A mirror reading a topic that was itself mirrored (A->B->C) finds the
// upstream metadata in the source cluster's metadata topics and carries the
// labels and the origin on: only those of the upstream mirrors its config
// trusts (trustedMetadataTopics).
const (
	MetaMirror        = "kmirror.mirror"
	MetaSourceCluster = "kmirror.source.cluster"
	MetaSourceTopic   = "kmirror.source.topic"
	MetaSourceTopicID = "kmirror.source.topic_id"
	MetaOriginCluster = "kmirror.origin.cluster"
	MetaOriginTopic   = "kmirror.origin.topic"
	MetaCreatedAt     = "kmirror.created_at"
	MetaConfigSynced  = "kmirror.config_synced_at"
	MetaSyncedConfigs = "kmirror.synced_configs"
	MetaState         = "kmirror.state"
	MetaStateReason   = "kmirror.state_reason"

	metaPrefix = "kmirror."
)

// StateRemoved is recorded in the metadata of a topic kmirror stopped
// mirroring (deleted at the source or no longer selected).
const StateRemoved State = "removed"

// Label sets user labels on the topics whose source name matches.
type Label struct {
	Match *regexp.Regexp
	Set   map[string]string
}

// metadataTopicRE matches every mirror's metadata topic, on any cluster;
// its group is the mirror's name.
var metadataTopicRE = regexp.MustCompile(`^kmirror\.(.+)\.metadata\.internal$`)

// trustedMetadataTopics returns, of the source's topics, the metadata
// topics of the upstream mirrors the config trusts. Any other topic named
// like one is ignored, with a warning once per topic: whoever can create a
// topic on the source could write it, and the labels it gives steer label
// filters, hence what is mirrored.
func (m *Mirror) trustedMetadataTopics(topics []string) []string {
	trusted := m.selection().TrustedUpstreams
	var out []string
	for _, topic := range topics {
		match := metadataTopicRE.FindStringSubmatch(topic)
		switch {
		case match == nil:
		case slices.Contains(trusted, match[1]):
			out = append(out, topic)
		default:
			m.logOnce.Warn(m.log, "untrusted-metadata:"+topic, "ignoring the topic metadata of a mirror this one does not trust; its labels and origin are not carried on (list the mirror in metadata.trusted_upstreams to believe it)", "topic", topic, "upstream_mirror", match[1])
		}
	}
	return out
}

func encodeMetadata(md map[string]string) []byte {
	// A map of strings always marshals; keys come out sorted.
	b, _ := json.Marshal(md)
	return b
}

func decodeMetadata(value []byte) (map[string]string, error) {
	var md map[string]string
	if err := json.Unmarshal(value, &md); err != nil {
		return nil, fmt.Errorf("topic metadata %q: %w", value, err)
	}
	return md, nil
}

// loadMetadata reads a metadata topic to its end: the latest map per topic.
func loadMetadata(ctx context.Context, log *slog.Logger, opts []kgo.Opt, adm *kadm.Client, topic string) (map[string]map[string]string, error) {
	out := make(map[string]map[string]string)
	err := state.Read(ctx, log, opts, adm, topic, -1, func(key, value []byte) error {
		if value == nil {
			delete(out, string(key))
			return nil
		}
		md, err := decodeMetadata(value)
		if err != nil {
			return err
		}
		out[string(key)] = md
		return nil
	})
	return out, err
}

// upstreamMetadata reads the given metadata topics on the source cluster
// (present when the source is itself a mirror target) and returns, per
// source topic, what travels downstream: the labels and the origin.
func upstreamMetadata(ctx context.Context, opts []kgo.Opt, adm *kadm.Client, metaTopics []string) (map[string]map[string]string, error) {
	out := make(map[string]map[string]string)
	for _, mt := range metaTopics {
		mds, err := loadMetadata(ctx, nil, opts, adm, mt)
		if err != nil {
			return nil, err
		}
		for topic, md := range mds {
			inherited := make(map[string]string)
			for k, v := range md {
				if !strings.HasPrefix(k, metaPrefix) {
					inherited[k] = v
				}
			}
			inherited[MetaOriginCluster] = firstNonEmpty(md[MetaOriginCluster], md[MetaSourceCluster])
			inherited[MetaOriginTopic] = firstNonEmpty(md[MetaOriginTopic], md[MetaSourceTopic])
			out[topic] = inherited
		}
	}
	return out, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// metadataFor builds a topic's metadata from what the mirror knows. The
// caller holds m.mu.
func (m *Mirror) metadataFor(ts *topicState) map[string]string {
	md := m.labelsFor(ts.source, ts.upstream)
	md[MetaMirror] = m.cfg.Name
	md[MetaSourceCluster] = m.cfg.SourceAlias
	md[MetaSourceTopic] = ts.source
	md[MetaOriginCluster] = firstNonEmpty(ts.upstream[MetaOriginCluster], m.cfg.SourceAlias)
	md[MetaOriginTopic] = firstNonEmpty(ts.upstream[MetaOriginTopic], ts.source)
	if ts.id != "" {
		md[MetaSourceTopicID] = ts.id
	}
	if !ts.createdAt.IsZero() {
		md[MetaCreatedAt] = ts.createdAt.UTC().Format(time.RFC3339)
	}
	if !ts.configSyncedAt.IsZero() {
		md[MetaConfigSynced] = ts.configSyncedAt.UTC().Format(time.RFC3339)
	}
	if len(ts.syncedConfigs) > 0 {
		md[MetaSyncedConfigs] = strings.Join(ts.syncedConfigs, ",")
	}
	md[MetaState] = string(ts.currentState())
	if err := ts.currentErr(); err != nil {
		md[MetaStateReason] = err.Error()
	}
	return md
}

// restoreFromMetadata seeds a newly selected topic's state from the metadata
// persisted by an earlier run.
func (ts *topicState) restoreFromMetadata(md map[string]string) {
	if t, err := time.Parse(time.RFC3339, md[MetaCreatedAt]); err == nil {
		ts.createdAt = t
	}
	if t, err := time.Parse(time.RFC3339, md[MetaConfigSynced]); err == nil {
		ts.configSyncedAt = t
	}
	if s := md[MetaSyncedConfigs]; s != "" {
		ts.syncedConfigs = strings.Split(s, ",")
	}
	ts.persistedID = md[MetaSourceTopicID]
}

// writeMetadata produces the metadata of every topic whose map changed
// since it was last written. Promises record what the target acknowledged,
// so a failed write is retried on the next call.
func (m *Mirror) writeMetadata(dst *kgo.Client, removed []*topicState) {
	type write struct {
		target string
		md     map[string]string
	}
	var writes []write
	m.mu.Lock()
	for _, ts := range m.topics {
		md := m.metadataFor(ts)
		if !maps.Equal(md, m.metaPersisted[ts.target]) {
			writes = append(writes, write{ts.target, md})
		}
	}
	for _, ts := range removed {
		md := m.metadataFor(ts)
		md[MetaState] = string(StateRemoved)
		delete(md, MetaStateReason)
		if !maps.Equal(md, m.metaPersisted[ts.target]) {
			writes = append(writes, write{ts.target, md})
		}
	}
	m.mu.Unlock()
	for _, w := range writes {
		m.dstProduce(dst, &kgo.Record{Topic: m.metadataTopic, Partition: state.PartitionFor(m.statePartitions(m.metadataTopic), w.target, 0), Key: []byte(w.target), Value: encodeMetadata(w.md)}, func(_ *kgo.Record, err error) {
			if err != nil {
				m.metrics.data().IncInternalWriteErrors(writeMetadata)
				m.logEvery.Warn(m.log, "write:"+writeMetadata, "could not write topic metadata; retrying on the next pass", "target_topic", w.target, "err", err)
				return
			}
			m.mu.Lock()
			m.metaPersisted[w.target] = w.md
			m.mu.Unlock()
		})
	}
}

// TopicMetadata is one mirrored topic's metadata, for the API and CLI.
type TopicMetadata struct {
	Mirror      string            `json:"mirror"`
	SourceTopic string            `json:"source_topic"`
	TargetTopic string            `json:"target_topic"`
	Metadata    map[string]string `json:"metadata"`
}

// Topics returns the metadata of every topic this mirror knows, sorted by
// target topic: the selected ones as they are now, and removed ones as last
// written.
func (m *Mirror) Topics() []TopicMetadata {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := make(map[string]bool)
	var out []TopicMetadata
	for _, ts := range m.topics {
		seen[ts.target] = true
		out = append(out, TopicMetadata{Mirror: m.cfg.Name, SourceTopic: ts.source, TargetTopic: ts.target, Metadata: m.metadataFor(ts)})
	}
	for target, md := range m.metaPersisted {
		if !seen[target] {
			out = append(out, TopicMetadata{Mirror: m.cfg.Name, SourceTopic: md[MetaSourceTopic], TargetTopic: target, Metadata: maps.Clone(md)})
		}
	}
	slices.SortFunc(out, func(a, b TopicMetadata) int { return strings.Compare(a.TargetTopic, b.TargetTopic) })
	return out
}

// ReadTopicMetadata reads a mirror's metadata topic from the target
// cluster, for `kmirror topics` (no running worker needed).
func ReadTopicMetadata(ctx context.Context, mirror string, targetOpts []kgo.Opt) ([]TopicMetadata, error) {
	cl, err := kgo.NewClient(targetOpts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topic := metadataTopicName(mirror)
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", topic, err)
	}
	if td, ok := tds[topic]; !ok || td.Err != nil {
		return nil, nil // the mirror never ran against this target
	}
	mds, err := loadMetadata(ctx, nil, targetOpts, adm, topic)
	if err != nil {
		return nil, err
	}
	out := make([]TopicMetadata, 0, len(mds))
	for target, md := range mds {
		out = append(out, TopicMetadata{Mirror: mirror, SourceTopic: md[MetaSourceTopic], TargetTopic: target, Metadata: md})
	}
	slices.SortFunc(out, func(a, b TopicMetadata) int { return strings.Compare(a.TargetTopic, b.TargetTopic) })
	return out, nil
}
