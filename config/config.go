// Package config loads and validates the kmirror YAML configuration.
//
// Loading is strict, in the manner of Prometheus and Alertmanager: unknown keys
// are errors, values are type checked, every cross-field rule is validated, and
// every problem is reported at once as "<file>:<line>: <field path>: <message>".
// Scalar values may reference environment variables as ${VAR} or
// ${VAR:-default}; "$$" is a literal "$". Defaults are documented on each field
// and in docs/configuration.md.
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Default values applied to keys that are absent (or null) in the file.
const (
	defaultClientID          = "kmirror"
	defaultDialTimeout       = Duration(10 * time.Second)
	defaultRequestTimeout    = Duration(10 * time.Second)
	minRequestTimeout        = Duration(100 * time.Millisecond) // franz-go's bounds
	maxRequestTimeout        = Duration(15 * time.Minute)
	defaultPolicyType        = PolicyDefault
	defaultSeparator         = "."
	defaultReplicationFactor = -1
	defaultRefreshInterval   = Duration(10 * time.Second)
	defaultProgressInterval  = Duration(time.Second)
	defaultLinger            = Duration(5 * time.Millisecond)
	defaultBatchMaxBytes     = 1 << 20  // 1 MiB
	maxBatchMaxBytes         = 64 << 20 // 64 MiB
	defaultFetchMaxBytes     = ByteSize(16 << 20)
	minFetchMaxBytes         = ByteSize(1 << 20)
	maxFetchMaxBytes         = ByteSize(256 << 20)
	defaultCompression       = "source"
	defaultOnSourceGap       = "skip"
	defaultHTTPListen        = "127.0.0.1:9644"
	defaultShutdownTimeout   = Duration(10 * time.Second)
	defaultSlots             = 16
	maxSlots                 = 1000
	defaultSessionTimeout    = Duration(10 * time.Second)
	defaultCommitInterval    = Duration(100 * time.Millisecond)
	defaultLogLevel          = "info"
	defaultLogFormat         = "text"
	maxReplicationFactor     = 32767 // Kafka stores it as an int16
	defaultStatePartitions   = 8
	defaultIndexMemory       = ByteSize(256 << 20)
	minIndexMemory           = ByteSize(1 << 20)
	maxStatePartitions       = 1000

	defaultMM2HeartbeatsInterval  = Duration(time.Second)
	defaultMM2CheckpointsInterval = Duration(60 * time.Second)
)

// Replication policy types accepted in ReplicationPolicy.Type.
const (
	// PolicyDefault names target topics "<source alias><separator><topic>",
	// like MM2's DefaultReplicationPolicy.
	PolicyDefault = "default"
	// PolicyIdentity keeps the source topic name, like MM2's
	// IdentityReplicationPolicy. It cannot detect cycles by name.
	PolicyIdentity = "identity"
)

// defaultGroupsExclude is MM2's default groups.exclude.
var defaultGroupsExclude = []string{"console-consumer-.*", "connect-.*", "__.*"}

// DefaultConfigExclude are the topic configs never synced by default:
// MirrorMaker 2's config.properties.exclude. Throttles and ISR minimums
// describe the source cluster's hardware and policy; the timestamp settings
// would make the target rewrite or reject the timestamps copied from the
// source.
var DefaultConfigExclude = []string{
	`follower\.replication\.throttled\.replicas`,
	`leader\.replication\.throttled\.replicas`,
	`message\.timestamp\.difference\.max\.ms`,
	`message\.timestamp\.type`,
	`unclean\.leader\.election\.enable`,
	`min\.insync\.replicas`,
}

const (
	defaultConfigSyncInterval = Duration(30 * time.Second)
	defaultACLSyncInterval    = Duration(time.Minute)
	defaultGroupSyncInterval  = Duration(5 * time.Second)
)

// Config is the whole kmirror configuration file.
type Config struct {
	// Clusters maps an alias (used by mirrors and, with the default
	// replication policy, as the target topic prefix) to a Kafka cluster.
	// At least one is required.
	Clusters map[string]*Cluster `yaml:"clusters"`
	// Mirrors are the source->target flows. At least one is required.
	Mirrors []*Mirror `yaml:"mirrors"`
	// HTTP is the metrics, health and API endpoint.
	HTTP HTTP `yaml:"http"`
	// Log configures the process logger.
	Log Log `yaml:"log"`
	// Offsets configures how kmirror stores offsets (progress, the offset
	// index, checkpoints).
	Offsets Offsets `yaml:"offsets"`
	// Plugins are out-of-process filter plugins, by name; mirrors refer to
	// them in mirrors[].filters.
	Plugins map[string]*Plugin `yaml:"plugins"`
	// Listeners are told whenever a mirror's replicated set changes, by
	// name; mirrors refer to them in mirrors[].listeners.
	Listeners map[string]*Listener `yaml:"listeners"`
	// ShutdownTimeout bounds a shutdown (SIGINT/SIGTERM): records not
	// delivered by then are abandoned (their progress is not written, so
	// a restart copies them again) and kmirror exits with status 1.
	// Default 10s; must be greater than 0. A second signal exits at once.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`

	// loaded is where Load found each field: problems found after Load
	// (a plugin that does not start, say) name the file, line and field
	// too, as Load's own errors do.
	loaded fieldLines
}

// FieldError is a problem with the field at path (as in Error.Field)
// found after Load: it names the file and the line of that field, or of
// its nearest parent in the file.
func (c *Config) FieldError(path, format string, args ...any) *Error {
	return c.loaded.errorAt(path, format, args...)
}

// Plugin is a plugin binary built with kmirror's plugin SDK.
type Plugin struct {
	// Path of the binary, relative to the config file's directory.
	// Required.
	Path string `yaml:"path"`
	// SHA256 is the binary's hex sha256 (sha256sum). Required: kmirror
	// refuses to start a binary that does not match.
	SHA256 string `yaml:"sha256"`
	// Config is handed to the plugin when it starts.
	Config map[string]string `yaml:"config"`
}

// FilterRef is one entry of mirrors[].filters: a filter plugin with the
// mirror's context properties, or the built-in property filter.
type FilterRef struct {
	// Plugin names an entry of plugins.
	Plugin string `yaml:"plugin"`
	// Properties are the mirror's context, handed to the plugin with
	// every call.
	Properties map[string]string `yaml:"properties"`
	// Property is the built-in property filter.
	Property *PropertyFilter `yaml:"property"`
}

// PropertyFilter keeps topics by their configs, labels and partition
// count.
type PropertyFilter struct {
	// Combine is "all" (the default: every condition must hold) or "any".
	Combine string `yaml:"combine"`
	// Conditions, each "FIELD OP VALUE": FIELD is config.<key>,
	// label.<key> or partitions; OP is = (equal), ~ (regexp over the whole
	// value), > or < (numbers). E.g. "config.cleanup.policy = compact".
	Conditions []string `yaml:"conditions"`
}

// Listener is one listener: built in (log, file, webhook, alertmanager) or
// a plugin binary.
type Listener struct {
	// Type is log, file, webhook, alertmanager or plugin.
	Type string `yaml:"type"`
	// Path and SHA256 locate and pin the binary of a plugin listener.
	Path   string `yaml:"path"`
	SHA256 string `yaml:"sha256"`
	// Config holds the type's settings (see docs/listeners.md), e.g.
	// path for file, url for webhook and alertmanager; for a plugin, it
	// is handed to the plugin.
	Config map[string]string `yaml:"config"`
	// Timeout bounds one call. Default 10s.
	Timeout Duration `yaml:"timeout"`
}

// Offsets configures kmirror's offset records.
type Offsets struct {
	// Compression of offset records in the offset envelope: none, gzip,
	// zlib, snappy, lz4 or zstd (the default). A record that compression
	// would not shrink is stored uncompressed; readers need no setting.
	Compression string `yaml:"compression"`
	// IndexMemory bounds the memory of each mirror's offset indexes:
	// beyond it, index chunks already stored on the target leave memory
	// and are read back when a translation needs them (translation stays
	// exact). Default 256MiB; at least 1MiB.
	IndexMemory ByteSize `yaml:"index_memory"`
}

// Cluster is one Kafka cluster that mirrors read from or write to.
type Cluster struct {
	// BootstrapServers are the seed brokers as "host:port". Required and
	// non-empty.
	BootstrapServers []string `yaml:"bootstrap_servers"`
	// ClientID is the Kafka client.id kmirror uses. Default "kmirror".
	ClientID string `yaml:"client_id"`
	// DialTimeout bounds opening a connection to a broker (TCP, and the
	// TLS handshake with tls). Default 10s.
	DialTimeout Duration `yaml:"dial_timeout"`
	// RequestTimeout bounds the wait for a broker's answer beyond the
	// request's own timeout, and how long a failed request is retried:
	// a broker that accepts connections and never answers is reported
	// after about twice this (franz-go tries a second connection).
	// Default 10s.
	RequestTimeout Duration `yaml:"request_timeout"`

	// TLS, when present (even empty), connects with TLS; without it the
	// connection is plaintext.
	TLS *TLS `yaml:"tls,omitempty"`
	// SASL, when present, authenticates every connection.
	SASL *SASL `yaml:"sasl,omitempty"`
}

// TLS configures encrypted connections to a cluster. Relative paths are
// resolved against the config file's directory.
type TLS struct {
	// CAFile is a PEM bundle of the CAs that sign the brokers'
	// certificates. Default: the system's roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// brokers that require client authentication (mTLS). Both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the host name checked against the brokers'
	// certificates. Default: the host of each broker address.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify accepts any broker certificate. For tests only:
	// it makes TLS useless against an attacker in the middle.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// SASL authenticates to a cluster.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string `yaml:"mechanism"`
	// Username is required.
	Username string `yaml:"username"`
	// Password is the password, usually "${ENV_VAR}". Never printed.
	Password Secret `yaml:"password"`
	// PasswordFile is a file holding the password (one trailing newline is
	// dropped), read when the config is loaded. Exactly one of Password and
	// PasswordFile is required.
	PasswordFile string `yaml:"password_file"`
}

// Mirror is one replication flow from a source cluster to a target cluster.
type Mirror struct {
	// Name identifies the mirror in metrics, logs, the API and kmirror's
	// internal topic names. Required, unique, 1-100 characters from
	// [A-Za-z0-9._-].
	Name string `yaml:"name"`
	// Source is the alias of the cluster to read from. Required.
	Source string `yaml:"source"`
	// Target is the alias of the cluster to write to. Required, and not
	// the same as Source.
	Target string `yaml:"target"`
	// ReplicationPolicy decides target topic names.
	ReplicationPolicy ReplicationPolicy `yaml:"replication_policy"`
	// Topics selects the source topics to mirror.
	Topics Topics `yaml:"topics"`
	// Groups selects the source consumer groups whose offsets are translated.
	Groups Groups `yaml:"groups"`
	// ReplicationFactor of created target topics. Default -1, meaning the
	// target broker's default.replication.factor; otherwise 1 to 32767.
	ReplicationFactor int `yaml:"replication_factor"`
	// StatePartitions is the partition count of the state topics kmirror
	// creates on the target (progress and offset index, topic metadata,
	// checkpoints), read in parallel at start. Default 8, 1 to 1000; fixed
	// when a topic is created: an existing one keeps its count.
	StatePartitions int `yaml:"state_partitions"`
	// Producer tunes writes to the target cluster.
	Producer Producer `yaml:"producer"`
	// ProgressInterval is how often copied positions are persisted to the
	// target. Default 1s; must be greater than 0.
	ProgressInterval Duration `yaml:"progress_interval"`
	// DeadLetter, when set, receives the records the target will never
	// accept (too large, invalid, refused by a policy) so that their
	// partition moves on; without it such a partition stops, failed.
	DeadLetter *DeadLetter `yaml:"dead_letter,omitempty"`
	// OnSourceGap is what a partition does when the source deleted
	// records (retention) before kmirror copied them: "skip" (default,
	// as MirrorMaker 2: go on from the log start) or "fail" (stop the
	// partition, failed, until the operator acts). Either way the gap
	// is counted, shown and announced.
	OnSourceGap string `yaml:"on_source_gap"`
	// Cluster is how the kmirror processes that run this mirror share it
	// (docs/cluster.md): every worker joins one group on the target
	// cluster, which hands out task slots, a single worker taking them
	// all. Its defaults when not set.
	Cluster *MirrorCluster `yaml:"cluster,omitempty"`
	// ExactlyOnce makes each worker write through a transactional
	// producer whose commits carry its slots to the mirror's group under
	// its generation (a worker that lost them can never commit), with its
	// records, progress and offset index together: every source record
	// reaches a read_committed consumer of the target exactly once,
	// across crashes and takeovers. Without it, at least once.
	ExactlyOnce bool `yaml:"exactly_once"`
	// Sync keeps topic configs and ACLs of mirrored topics in step.
	Sync Sync `yaml:"sync"`
	// Labels add user metadata to mirrored topics, per topic pattern.
	Labels []*Label `yaml:"labels"`
	// RateLimit caps the bytes per second the mirror fetches from the
	// source, all its topics together (0: no limit). The workers of a
	// mirror split it by the slots they own. A reload changes it.
	RateLimit ByteSize `yaml:"rate_limit"`
	// TopicRateLimits cap single topics, each topic on its own: the
	// first rule a topic meets gives it its limit. A reload changes them.
	TopicRateLimits []*TopicRateLimit `yaml:"topic_rate_limits"`
	// Fetch sizes the mirror's fetches from the source.
	Fetch Fetch `yaml:"fetch"`
	// Metadata says whose topic metadata found on the source is believed.
	Metadata MirrorMetadata `yaml:"metadata"`
	// Filters run after topics.include/exclude, in order; each sees what
	// the previous kept. The final rules (no internal topics, no cycles)
	// run after all of them.
	Filters []*FilterRef `yaml:"filters"`
	// Listeners name entries of the top-level listeners to notify.
	Listeners []string `yaml:"listeners"`
	// MM2, when set, connects the mirror to the MirrorMaker 2 flow it
	// replaces (docs/migration.md): it can start from the positions MM2
	// committed, and write MM2's heartbeats and checkpoints so that MM2's
	// clients (RemoteClusterUtils, MirrorClient) keep working.
	MM2 *MM2 `yaml:"mm2,omitempty"`
}

// MM2 is what a mirror keeps of the MirrorMaker 2 flow it replaces.
type MM2 struct {
	// SourceAlias is the source cluster's alias in MM2's config (the A of
	// A->B): MM2 keys its committed positions by it, and names the
	// checkpoints topic after it. Default: the mirror's source.
	SourceAlias string `yaml:"source_alias"`
	// Adopt makes a partition that kmirror has never copied start from the
	// position MM2 committed for it (in OffsetsTopic) instead of from the
	// beginning, so that nothing MM2 copied is copied again. Default false.
	Adopt bool `yaml:"adopt"`
	// OffsetsTopic is the Connect offsets topic on the target cluster in
	// which MM2 (dedicated mode) committed its source positions. Default
	// "mm2-offsets.<source_alias>.internal": MM2's herder for A->B keeps
	// them in mm2-offsets.A.internal on B (MirrorMakerConfig.workerConfig).
	OffsetsTopic string `yaml:"offsets_topic"`
	// SourceConnector is the connector name MM2's source connector
	// committed its positions under in OffsetsTopic (the first element of
	// each key). Default "MirrorSourceConnector", the name MM2's dedicated
	// mode gives it; a Connect deployment's is its config's name=.
	SourceConnector string `yaml:"source_connector"`
	// OffsetSyncsLocation is the cluster holding MM2's offset-syncs topic:
	// "source" (default) or "target", MM2's offset-syncs.topic.location.
	// A group offset older than the adopted position is translated from
	// those syncs (MM2-accurate, not exact: docs/offsets.md).
	OffsetSyncsLocation string `yaml:"offset_syncs_location"`
	// OffsetSyncsTopic is MM2's offset-syncs topic. Default
	// "mm2-offset-syncs.<target>.internal" on the source, or
	// "mm2-offset-syncs.<source_alias>.internal" when it is on the target
	// (MM2 names it after the other cluster).
	OffsetSyncsTopic string `yaml:"offset_syncs_topic"`
	// Heartbeats writes MM2's Heartbeat records to the target's
	// "heartbeats" topic (compacted, one partition), as MM2's heartbeat
	// connector does. Default false.
	Heartbeats bool `yaml:"heartbeats"`
	// HeartbeatsInterval between heartbeats. Default 1s (MM2's
	// emit.heartbeats.interval.seconds); greater than 0.
	HeartbeatsInterval Duration `yaml:"heartbeats_interval"`
	// Checkpoints writes MM2's Checkpoint records, from kmirror's exact
	// translation of the selected groups, to the target's
	// "<source_alias>.checkpoints.internal" (compacted, one partition).
	// Default false.
	Checkpoints bool `yaml:"checkpoints"`
	// CheckpointsInterval between checkpoints. Default 60s (MM2's
	// emit.checkpoints.interval.seconds); greater than 0.
	CheckpointsInterval Duration `yaml:"checkpoints_interval"`
}

func (m *MM2) setDefaults() {
	m.HeartbeatsInterval = defaultMM2HeartbeatsInterval
	m.CheckpointsInterval = defaultMM2CheckpointsInterval
}

// Sync configures the metadata kmirror copies besides records.
type Sync struct {
	// TopicConfigs syncs topic configs from source to target.
	TopicConfigs TopicConfigSync `yaml:"topic_configs"`
	// ACLs syncs topic ACLs from source to target.
	ACLs ACLSync `yaml:"acls"`
	// GroupOffsets translates the committed offsets of the selected
	// consumer groups (see Mirror.Groups) and writes them to the target.
	GroupOffsets GroupOffsetSync `yaml:"group_offsets"`
}

// GroupOffsetSync writes exactly translated consumer group offsets to the
// target, for groups with no active members there.
type GroupOffsetSync struct {
	// Enabled commits the translations to the target groups. Default
	// true. Disabled, the sync still runs: it translates the selected
	// groups and checkpoints them on the target, which is what `kmirror
	// failover` translates from when the source is gone.
	Enabled bool `yaml:"enabled"`
	// Interval between syncs (and checkpoints). Default 5s; greater than 0.
	Interval Duration `yaml:"interval"`
	// FollowSourceRewinds lets the sync move a target group backwards when
	// the source group itself moved back (an offset reset there). Default
	// true; false means target groups only ever move forward.
	FollowSourceRewinds bool `yaml:"follow_source_rewinds"`
}

// TopicConfigSync copies the configs set on source topics to their target
// copies, continuously, by incremental alter, only for keys that differ. A
// config the source leaves at the broker default is not copied: the target
// keeps its own default. Configs set only on the target are left alone.
type TopicConfigSync struct {
	// Enabled turns the sync on. Default true.
	Enabled bool `yaml:"enabled"`
	// Interval between syncs. Default 30s; greater than 0.
	Interval Duration `yaml:"interval"`
	// Include: patterns of config names eligible for sync. Default [".*"].
	Include []string `yaml:"include"`
	// Exclude: patterns of config names never synced; wins over Include.
	// Default: MirrorMaker 2's list (DefaultConfigExclude). Setting it
	// replaces the default, as MM2's config.properties.exclude does.
	Exclude []string `yaml:"exclude"`

	include, exclude []*regexp.Regexp
}

// IncludeRegexps returns the anchored, compiled include patterns.
func (t TopicConfigSync) IncludeRegexps() []*regexp.Regexp { return compiled(t.include, t.Include) }

// ExcludeRegexps returns the anchored, compiled exclude patterns.
func (t TopicConfigSync) ExcludeRegexps() []*regexp.Regexp { return compiled(t.exclude, t.Exclude) }

// ACLSync copies topic ACLs by MirrorMaker 2's rules: literal topic ACLs
// only, ALLOW WRITE dropped (only kmirror writes to mirrored topics), ALL
// becomes READ, topic names mapped through the replication policy.
type ACLSync struct {
	// Enabled turns the sync on. Default false.
	Enabled bool `yaml:"enabled"`
	// Interval between syncs. Default 1m; greater than 0.
	Interval Duration `yaml:"interval"`
}

// MirrorMetadata is what a mirror believes of the topic metadata that
// other mirrors left on its source cluster.
type MirrorMetadata struct {
	// TrustedUpstreams names the mirrors whose metadata topics on the
	// source (kmirror.<name>.metadata.internal: the source is their
	// target, as B is in A->B->C) are read, so that their labels and
	// origin travel on. Any other such topic is ignored with a warning:
	// whoever can create a topic on the source could name it so, and
	// labels steer label filters, hence what is mirrored. Default: none.
	TrustedUpstreams []string `yaml:"trusted_upstreams"`
}

// Label sets user metadata on every mirrored topic whose source name
// matches. Labels are per topic: kmirror keeps no partition metadata.
type Label struct {
	// Match is a regexp matched against the whole source topic name.
	Match string `yaml:"match"`
	// Set are the labels to set. Keys must not start with "kmirror.",
	// which kmirror reserves for provenance.
	Set map[string]string `yaml:"set"`
	// Partition and Partitions exist only to reject configs that try to
	// label partitions with a clear error.
	Partition  *int  `yaml:"partition,omitempty"`
	Partitions []int `yaml:"partitions,omitempty"`

	match *regexp.Regexp
}

// Regexp returns the anchored, compiled Match pattern.
func (l *Label) Regexp() *regexp.Regexp {
	if l.match == nil {
		l.match = regexp.MustCompile(anchor(l.Match))
	}
	return l.match
}

// TopicRateLimit caps each topic it matches at RateLimit bytes per second.
// A topic meets the rule when its source name matches Match and it has
// every label in Labels (labels set by this mirror or carried from
// upstream); a rule names Match, Labels or both.
type TopicRateLimit struct {
	// Match is a regexp matched against the whole source topic name.
	Match string `yaml:"match"`
	// Labels are the labels (all of them) a topic must have.
	Labels map[string]string `yaml:"labels"`
	// RateLimit is the topic's bytes per second.
	RateLimit ByteSize `yaml:"rate_limit"`

	match *regexp.Regexp
}

// Regexp returns the anchored, compiled Match pattern (nil without one).
func (r *TopicRateLimit) Regexp() *regexp.Regexp {
	if r.match == nil && r.Match != "" {
		r.match = regexp.MustCompile(anchor(r.Match))
	}
	return r.match
}

// ReplicationPolicy decides how source topic names map to target topic names.
type ReplicationPolicy struct {
	// Type is "default" (the default) or "identity".
	Type string `yaml:"type"`
	// Separator goes between the source alias and the topic name with the
	// "default" type. Default "."; one or more characters from [A-Za-z0-9._-].
	Separator string `yaml:"separator"`
}

// Topics selects source topics. A topic is mirrored when it matches an
// Include pattern and no Exclude pattern. Patterns are Go regular
// expressions matched against the whole topic name (as ^(?:pattern)$).
// kmirror never mirrors internal topics or cycles, whatever the patterns say.
type Topics struct {
	// Include patterns. Default [".*"]. Must not be empty.
	Include []string `yaml:"include"`
	// Exclude patterns. Default [].
	Exclude []string `yaml:"exclude"`
	// RefreshInterval is how often source topics are listed. Default 10s;
	// must be greater than 0.
	RefreshInterval Duration `yaml:"refresh_interval"`

	include, exclude []*regexp.Regexp // compiled by Load
}

// IncludeRegexps returns the compiled, anchored Include patterns. The slice
// is shared; do not modify it. For a Topics built by hand rather than by
// Load, the patterns are compiled on every call and an invalid one panics.
func (t Topics) IncludeRegexps() []*regexp.Regexp { return compiled(t.include, t.Include) }

// ExcludeRegexps returns the compiled, anchored Exclude patterns, like
// IncludeRegexps.
func (t Topics) ExcludeRegexps() []*regexp.Regexp { return compiled(t.exclude, t.Exclude) }

// Groups selects source consumer groups, like Topics selects topics.
type Groups struct {
	// Include patterns. Default [".*"]; [] translates no groups.
	Include []string `yaml:"include"`
	// Exclude patterns. Default ["console-consumer-.*", "connect-.*", "__.*"]
	// (MM2's default); [] excludes nothing.
	Exclude []string `yaml:"exclude"`

	include, exclude []*regexp.Regexp // compiled by Load
}

// IncludeRegexps returns the compiled, anchored Include patterns, like
// Topics.IncludeRegexps.
func (g Groups) IncludeRegexps() []*regexp.Regexp { return compiled(g.include, g.Include) }

// ExcludeRegexps returns the compiled, anchored Exclude patterns, like
// Topics.IncludeRegexps.
func (g Groups) ExcludeRegexps() []*regexp.Regexp { return compiled(g.exclude, g.Exclude) }

// Producer tunes the producer that writes to the target cluster.
type Producer struct {
	// Linger is how long a batch waits for more records. Default 5ms; 0
	// sends as soon as possible; must not be negative.
	Linger Duration `yaml:"linger"`
	// BatchMaxBytes caps a record batch. Default 1048576 (1 MiB); 1 to
	// 67108864 (64 MiB).
	BatchMaxBytes int `yaml:"batch_max_bytes"`
	// Compression codec: source (the default: each batch keeps its source
	// batch's codec, forwarded as it is where safe), none, gzip, snappy,
	// lz4 or zstd.
	Compression string `yaml:"compression"`
	// DeliveryTimeout fails a record the target has not acknowledged
	// within it (its partition is then retried from its last acknowledged
	// offset) instead of retrying it forever. Default 0: no limit; must
	// not be negative.
	DeliveryTimeout Duration `yaml:"delivery_timeout"`
}

// Fetch sizes the fetches from the source. The defaults follow the link:
// only a broker that caps its responses lower, or a worker short of
// memory, needs them changed.
type Fetch struct {
	// MaxBytes is the most one fetch request asks for. Default 16MiB; on
	// the batch path it grows in proportion to the round trip beyond
	// 75 ms (up to 4 times), and a worker holds up to twice it in bytes
	// fetched and not yet written. 1MiB to 256MiB.
	MaxBytes ByteSize `yaml:"max_bytes"`
}

// MirrorCluster configures how the workers of a mirror share it.
type MirrorCluster struct {
	// Slots is the number of task slots, the partitions of the control
	// topic kmirror.<mirror>.slots.internal. Fixed when the topic is
	// created (a later change is ignored, with a warning); it bounds how
	// many workers can share the mirror. Default 16; 1 to 1000.
	Slots int `yaml:"slots"`
	// SessionTimeout is how long a worker may be silent before the group
	// gives its slots to the others. Default 10s; the target brokers'
	// group.min.session.timeout.ms and group.max.session.timeout.ms
	// bound it (6s and 30m by default).
	SessionTimeout Duration `yaml:"session_timeout"`
	// CommitInterval is how often a slot commits its transaction: records
	// become visible to read_committed consumers then. Default 100ms;
	// greater than 0.
	CommitInterval Duration `yaml:"commit_interval"`
}

func (c *MirrorCluster) setDefaults() {
	c.Slots = defaultSlots
	c.SessionTimeout = defaultSessionTimeout
	c.CommitInterval = defaultCommitInterval
}

// DeadLetter is a topic on the target cluster for records the target will
// never accept.
type DeadLetter struct {
	// Topic on the target cluster; created (one partition, the target's
	// default replication factor) if missing. Required.
	Topic string `yaml:"topic"`
}

// HTTP configures the HTTP endpoint (metrics, health, API, status page).
type HTTP struct {
	// Listen is the "host:port" to listen on. Default "127.0.0.1:9644"; an
	// empty host listens on every interface and port 0 picks a free port.
	Listen string `yaml:"listen"`
	// TLS, when set, serves HTTPS only.
	TLS *HTTPTLS `yaml:"tls,omitempty"`
	// Auth, when set, requires a bearer token on every endpoint but
	// /healthz, /readyz and the status page's static files (which hold no
	// data).
	Auth *HTTPAuth `yaml:"auth,omitempty"`
	// MetricsDetail is how finely /metrics breaks the replication series
	// down: mirror (the mirror-wide series only), topic (the default:
	// also records and lag per topic) or partition (also per partition:
	// at 100,000 partitions, 200,000 series).
	MetricsDetail string `yaml:"metrics_detail"`
}

// MetricsDetails are http.metrics_detail's values.
var MetricsDetails = []string{"mirror", "topic", "partition"}

// HTTPTLS is the HTTP server's certificate and, for mutual TLS, the CAs
// its clients' certificates must chain to. Relative paths are resolved
// against the config file's directory.
type HTTPTLS struct {
	// CertFile and KeyFile are the server's PEM certificate (with its
	// chain) and key. Both required.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile, when set, is a PEM bundle of CAs: every client must
	// present a certificate signed by one of them (mutual TLS), health
	// checks included.
	ClientCAFile string `yaml:"client_ca_file"`
}

// HTTPAuth requires "Authorization: Bearer <token>" on the HTTP API.
type HTTPAuth struct {
	// BearerTokenFile is a file holding the token (one trailing newline is
	// dropped), read when the config is loaded. Exactly one of it and
	// BearerTokenEnv is required.
	BearerTokenFile string `yaml:"bearer_token_file"`
	// BearerTokenEnv names an environment variable holding the token.
	BearerTokenEnv string `yaml:"bearer_token_env"`
	// Metrics says whether /metrics needs the token too. Default true;
	// false lets a Prometheus without credentials scrape it.
	Metrics bool `yaml:"metrics"`

	token Secret // read from the file or the environment by Load
}

// Token returns the bearer token read by Load.
func (a *HTTPAuth) Token() Secret { return a.token }

func (a *HTTPAuth) setDefaults() { a.Metrics = true }

// Log configures the process logger.
type Log struct {
	// Level is debug, info (the default), warn or error.
	Level string `yaml:"level"`
	// Format is text (the default) or json.
	Format string `yaml:"format"`
}

func (c *Config) setDefaults() {
	c.HTTP = HTTP{Listen: defaultHTTPListen, MetricsDetail: "topic"}
	c.Log = Log{Level: defaultLogLevel, Format: defaultLogFormat}
	c.Offsets = Offsets{Compression: "zstd", IndexMemory: defaultIndexMemory}
	c.ShutdownTimeout = defaultShutdownTimeout
}

func (c *Cluster) setDefaults() {
	c.ClientID = defaultClientID
	c.DialTimeout = defaultDialTimeout
	c.RequestTimeout = defaultRequestTimeout
}

func (m *Mirror) setDefaults() {
	m.ReplicationPolicy = ReplicationPolicy{Type: defaultPolicyType, Separator: defaultSeparator}
	m.Topics = Topics{
		Include:         []string{".*"},
		Exclude:         []string{},
		RefreshInterval: defaultRefreshInterval,
	}
	m.Groups = Groups{
		Include: []string{".*"},
		Exclude: slices.Clone(defaultGroupsExclude),
	}
	m.ReplicationFactor = defaultReplicationFactor
	m.StatePartitions = defaultStatePartitions
	m.Producer = Producer{
		Linger:        defaultLinger,
		BatchMaxBytes: defaultBatchMaxBytes,
		Compression:   defaultCompression,
	}
	m.Fetch = Fetch{MaxBytes: defaultFetchMaxBytes}
	m.ProgressInterval = defaultProgressInterval
	m.OnSourceGap = defaultOnSourceGap
	m.Sync = Sync{
		TopicConfigs: TopicConfigSync{
			Enabled:  true,
			Interval: defaultConfigSyncInterval,
			Include:  []string{".*"},
			Exclude:  slices.Clone(DefaultConfigExclude),
		},
		ACLs:         ACLSync{Interval: defaultACLSyncInterval},
		GroupOffsets: GroupOffsetSync{Enabled: true, Interval: defaultGroupSyncInterval, FollowSourceRewinds: true},
	}
}

// Load parses and validates a configuration from YAML. filename is used only
// in error messages. A non-nil error is an errors.Join of *Error values
// sorted by line, or a single *Error.
func Load(data []byte, filename string) (*Config, error) {
	if filename == "" {
		filename = "<config>"
	}
	root, err := parse(data, filename)
	if err != nil {
		return nil, err
	}
	d := newDecoder(filename, os.LookupEnv)
	cfg := &Config{}
	cfg.setDefaults()
	d.decode(root, cfgValue(cfg), "")
	if err := d.err(); err != nil {
		return nil, err
	}
	v := &validator{fieldLines: fieldLines{file: filename, lines: d.lines}, dir: filepath.Dir(filename)}
	v.validate(cfg)
	if err := v.err(); err != nil {
		return nil, err
	}
	cfg.loaded = v.fieldLines
	return cfg, nil
}

// LoadFile reads and parses the configuration file at path. Errors name the
// file as path.
func LoadFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Load(data, path)
}

// String returns the configuration as YAML with every Secret shown as
// "<secret>".
func (c *Config) String() string {
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return fmt.Sprintf("<error creating config string: %s>", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Sprintf("<error creating config string: %s>", err)
	}
	return b.String()
}

// Mirror returns the mirror with the given name, or nil.
func (c *Config) Mirror(name string) *Mirror {
	for _, m := range c.Mirrors {
		if m != nil && m.Name == name {
			return m
		}
	}
	return nil
}

// Cluster returns the cluster with the given alias, or nil.
func (c *Config) Cluster(alias string) *Cluster {
	return c.Clusters[alias]
}

// anchor makes pattern match whole names only.
func anchor(pattern string) string { return "^(?:" + pattern + ")$" }

func compiled(re []*regexp.Regexp, patterns []string) []*regexp.Regexp {
	if re != nil || len(patterns) == 0 {
		return re
	}
	out := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		out[i] = regexp.MustCompile(anchor(p))
	}
	return out
}
