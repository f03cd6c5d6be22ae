package connector

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/connector/offsets"
	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
)

// Selection is the part of a mirror's config that a reload can change
// while it runs: what it selects and how it labels.
type Selection struct {
	Filters       []filters.TopicFilter
	ConfigFilters []filters.ConfigPropertyFilter
	GroupFilters  []filters.GroupFilter
	Labels        []Label
	// TrustedUpstreams are the mirrors whose metadata topics on the source
	// are believed (Config.TrustedUpstreams).
	TrustedUpstreams []string
	// RateLimits cap the bytes per second fetched from the source
	// (Config.RateLimits).
	RateLimits RateLimits
}

// Notifier is told the mirror's current topic and group sets after every
// pass and group sync (listeners.Dispatcher implements it). Calls must not
// block.
type Notifier interface {
	SetTopics([]listeners.Topic)
	SetGroups([]listeners.Group)
}

// Explainer turns an error of a request to a cluster into one that names
// the cluster, its brokers and what to check.
type Explainer interface {
	Explain(error) error
}

type asIs struct{}

func (asIs) Explain(err error) error { return err }

// Config is everything one Mirror needs. The app layer builds it from the
// YAML config; the zero value of each optional field means "the default".
type Config struct {
	// Name identifies the mirror in logs, metrics and its internal topics.
	Name string
	// SourceAlias and TargetAlias are the clusters' names in the config;
	// the replication policy uses them to name and recognise topics.
	SourceAlias string
	TargetAlias string
	// SourceOpts and TargetOpts hold the connection settings of each
	// cluster (seeds, TLS, SASL, client ID). The mirror adds its own
	// consumer and producer settings on top.
	SourceOpts []kgo.Opt
	TargetOpts []kgo.Opt
	// SourceExplainer and TargetExplainer explain the errors of requests
	// to each cluster (internal/kafka.Cluster); nil leaves them as they
	// are.
	SourceExplainer Explainer
	TargetExplainer Explainer

	// Policy names target topics; policy.Default{} when nil.
	Policy policy.ReplicationPolicy
	// Filters select the topics, applied in order (each sees what the
	// previous kept). The final rules run after all of them.
	Filters []filters.TopicFilter
	// ConfigFilters select the source topic configs copied to the target,
	// at creation and by the config sync, applied in order. With none,
	// every config set on the source topic is copied.
	ConfigFilters []filters.ConfigPropertyFilter
	// Labels set user metadata on topics, later entries winning.
	Labels []Label
	// RateLimits cap the bytes per second the mirror fetches from the
	// source: all of it, and single topics (ratelimit.go).
	RateLimits RateLimits
	// TrustedUpstreams names the mirrors whose metadata topics on the
	// source (kmirror.<name>.metadata.internal, when the source is their
	// target) are read for the labels and origin they give topics. Any
	// other such topic is ignored with a warning: labels steer label
	// filters, and anyone who can create a topic on the source could name
	// one so. None by default.
	TrustedUpstreams []string

	// ConfigSyncInterval is the time between topic config syncs; 0
	// disables the sync (configs are still copied at creation).
	ConfigSyncInterval time.Duration
	// ACLSyncInterval is the time between ACL syncs; 0 disables it.
	ACLSyncInterval time.Duration
	// GroupFilters select the consumer groups whose offsets are
	// translated, applied in order.
	GroupFilters []filters.GroupFilter
	// GroupSyncInterval is the time between group syncs; 0 disables
	// them. A sync translates the selected groups and checkpoints them
	// on the target (what kmirror failover reads when the source is
	// gone), and commits them to the target unless GroupCheckpointOnly.
	GroupSyncInterval time.Duration
	// GroupCheckpointOnly: the group sync commits nothing to the target
	// groups (sync.group_offsets.enabled false, MM2's default); it still
	// translates and checkpoints them.
	GroupCheckpointOnly bool
	// FollowSourceRewinds lets a group sync move a target group backwards
	// when the source group itself moved back (an offset reset there).
	// Otherwise a target group only ever moves forward.
	FollowSourceRewinds bool

	// RefreshInterval is the time between control passes; 10s by default.
	RefreshInterval time.Duration
	// ProgressInterval is how often acknowledged positions are persisted;
	// 1s by default. A crash repeats at most about this much data.
	ProgressInterval time.Duration
	// ReplicationFactor for created topics; -1 (or 0) uses the target
	// broker's default.
	ReplicationFactor int16
	// StatePartitions is the partition count of the state topics kmirror
	// creates (progress and offset index, metadata, checkpoints): they are
	// read together at start. Default 8. A state topic that exists keeps
	// its own count.
	StatePartitions int32
	// IndexMemory bounds, in bytes, the memory of the mirror's offset
	// indexes (indexbudget.go): beyond it, stored chunks leave memory and
	// are read back when a translation needs them. Default 256 MiB; a
	// negative value means no bound.
	IndexMemory int64

	// Linger, BatchMaxBytes and Compression tune the target producer;
	// zero values keep franz-go's defaults (10ms linger, ~1MB batches),
	// except Compression, which defaults to none (franz-go's default is
	// snappy).
	Linger        time.Duration
	BatchMaxBytes int32
	Compression   []kgo.CompressionCodec
	// FetchMaxBytes is the most one fetch from the source asks for (0:
	// data.FetchMaxBytes); the batch path grows it across a long round
	// trip (mirrors[].fetch.max_bytes).
	FetchMaxBytes int32
	// SourceCompression (producer.compression: source) forwards source
	// batches to the target as they are, compressed with their source
	// codec, wherever that is safe (data/passthrough.go); the record path
	// (fallbacks, exactly_once) then produces uncompressed.
	SourceCompression bool

	// OffsetCodec compresses the progress and offset index records (the
	// offset envelope); a record compression would not shrink is stored
	// uncompressed. Zero is none.
	OffsetCodec offsets.Codec

	// ShutdownTimeout bounds the flush of in-flight records when Run's
	// context is cancelled (the last progress write gets 2s more if the
	// flush timed out); 10s by default. Records still unacknowledged then
	// are abandoned and copied again after a restart.
	ShutdownTimeout time.Duration
	// DeliveryTimeout, when positive, fails a record the target has not
	// acknowledged within it (its partition is then rewound and retried)
	// rather than retrying it forever.
	DeliveryTimeout time.Duration
	// DeadLetterTopic, when set, receives the records the target will
	// never accept, so that their partition moves on.
	DeadLetterTopic string
	// OnSourceGap is what a partition does when the source deleted
	// records before they were copied: "skip" ("" too) or "fail"
	// (sourcegap.go).
	OnSourceGap string
	// Cluster is how the workers of the mirror share it (cluster.go):
	// every worker is a member of the mirror's group on the target, a
	// single one a group of one. Nil takes the defaults
	// (DefaultClusterConfig).
	Cluster *ClusterConfig
	// MM2, when set, ties the mirror to the MirrorMaker 2 flow it replaces
	// (mm2.go): adopting MM2's positions, writing MM2's heartbeats and
	// checkpoints.
	MM2 *MM2Config

	// Notifier, when set, receives the topic and group sets.
	Notifier Notifier

	// Logger receives the mirror's logs; slog.Default() when nil.
	Logger *slog.Logger
	// Metrics receives the mirror's metrics; nil disables them.
	Metrics *Metrics
}

func (c *Config) applyDefaults() error {
	if c.Name == "" {
		return errors.New("mirror name is required")
	}
	if c.SourceAlias == "" || c.TargetAlias == "" {
		return fmt.Errorf("mirror %s: source and target aliases are required", c.Name)
	}
	if c.Policy == nil {
		c.Policy = policy.Default{}
	}
	if c.SourceExplainer == nil {
		c.SourceExplainer = asIs{}
	}
	if c.TargetExplainer == nil {
		c.TargetExplainer = asIs{}
	}
	if c.RefreshInterval <= 0 {
		c.RefreshInterval = 10 * time.Second
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = time.Second
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = -1
	}
	if c.IndexMemory == 0 {
		c.IndexMemory = defaultIndexMemory
	}
	if c.StatePartitions <= 0 {
		c.StatePartitions = defaultStatePartitions
	}
	if len(c.Compression) == 0 {
		c.Compression = []kgo.CompressionCodec{kgo.NoCompression()}
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if m := c.MM2; m != nil {
		if m.SourceAlias == "" {
			m.SourceAlias = c.SourceAlias
		}
		if m.OffsetsTopic == "" {
			m.OffsetsTopic = "mm2-offsets." + m.SourceAlias + ".internal"
		}
		if m.SourceConnector == "" {
			m.SourceConnector = mm2SourceConnector
		}
		if m.OffsetSyncsTopic == "" {
			// MM2 names it after the other cluster.
			m.OffsetSyncsTopic = "mm2-offset-syncs." + c.TargetAlias + ".internal"
			if m.OffsetSyncsOnTarget {
				m.OffsetSyncsTopic = "mm2-offset-syncs." + m.SourceAlias + ".internal"
			}
		}
		if m.HeartbeatsInterval <= 0 {
			m.HeartbeatsInterval = time.Second
		}
		if m.CheckpointsInterval <= 0 {
			m.CheckpointsInterval = time.Minute
		}
	}
	return nil
}

// MM2Config is the MirrorMaker 2 flow a mirror replaces (config.MM2 says
// what each field means).
type MM2Config struct {
	SourceAlias  string
	Adopt        bool
	OffsetsTopic string
	// SourceConnector is the name MM2's source connector committed its
	// positions under in OffsetsTopic.
	SourceConnector string
	// OffsetSyncsTopic is MM2's offset-syncs topic, on the target when
	// OffsetSyncsOnTarget, else on the source.
	OffsetSyncsTopic    string
	OffsetSyncsOnTarget bool
	Heartbeats          bool
	HeartbeatsInterval  time.Duration
	Checkpoints         bool
	CheckpointsInterval time.Duration
}

// defaultStatePartitions: a state topic's partitions are read in parallel
// at start and spread its writes over the target's brokers; eight keeps
// the topics small on a small cluster.
const defaultStatePartitions = 8

// defaultIndexMemory: 256 MiB hold about eleven million runs, the index of
// 100,000 partitions with a hundred gaps each.
const defaultIndexMemory = 256 << 20
