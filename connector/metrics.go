package connector

import (
	"github.com/kmirror/kmirror/connector/data"
	"github.com/kmirror/kmirror/connector/groups"
	"github.com/kmirror/kmirror/connector/recordbatch"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the replication metrics of every mirror in the process, in base
// units and labelled by mirror only (per-partition series would explode with
// the topic count). Create one with NewMetrics against an injected registry;
// a nil *Metrics is valid and records nothing.
type Metrics struct {
	records         *prometheus.CounterVec
	bytes           *prometheus.CounterVec
	latency         *prometheus.HistogramVec
	lag             *prometheus.GaugeVec
	lagUnknown      *prometheus.GaugeVec
	topics          *prometheus.GaugeVec
	createErrors    *prometheus.CounterVec
	produceErrors   *prometheus.CounterVec
	recreations     *prometheus.CounterVec
	configChanges   *prometheus.CounterVec
	configSyncErrs  *prometheus.CounterVec
	aclsCreated     *prometheus.CounterVec
	groupOffsets    *prometheus.CounterVec
	groupSyncErrs   *prometheus.CounterVec
	setChanges      *prometheus.CounterVec
	filterErrors    *prometheus.CounterVec
	passes          *prometheus.CounterVec
	passErrors      *prometheus.CounterVec
	lastPassSuccess *prometheus.GaugeVec
	internalWrites  *prometheus.CounterVec
	adminErrors     *prometheus.CounterVec
	untranslatable  *prometheus.GaugeVec
	failedParts     *prometheus.GaugeVec
	deadLetters     *prometheus.CounterVec
	slotsOwned      *prometheus.GaugeVec
	slotsTaken      *prometheus.CounterVec
	controlPlane    *prometheus.GaugeVec
	slotsTotal      *prometheus.GaugeVec
	slotsUnowned    *prometheus.GaugeVec
	rebalanceSecs   *prometheus.GaugeVec
	txns            *prometheus.CounterVec
	commitLatency   *prometheus.HistogramVec
	indexBytes      *prometheus.GaugeVec
	indexEvictions  *prometheus.CounterVec
	batches         *prometheus.CounterVec
	fallbacks       *prometheus.CounterVec
	aheads          *prometheus.CounterVec
	mm2Adopted      *prometheus.CounterVec
	mm2AdoptErrors  *prometheus.CounterVec
	mm2Heartbeats   *prometheus.CounterVec
	mm2Checkpoints  *prometheus.CounterVec
	sourceGaps      *prometheus.CounterVec
	divergent       *prometheus.GaugeVec
	// detail: the per-topic and per-partition series (metricsdetail.go).
	detail *detailCollector
	// throttles: the rate limits and the time they held fetches back
	// (ratelimit.go).
	throttles *throttleCollector
}

// Kinds of kmirror's own records on the target, for
// kmirror_internal_write_errors_total.
// The data plane's are in package data (data.WriteProgress, ...), the
// groups plane's in package groups (groups.WriteCheckpoint).
const (
	writeMetadata = "metadata"
	// MM2's heartbeats and checkpoints (mm2.go).
	writeMM2Heartbeat  = "mm2_heartbeat"
	writeMM2Checkpoint = "mm2_checkpoint"
)

// Admin requests whose failures are counted in kmirror_admin_errors_total;
// the groups plane's are in package groups (groups.AdminDescribeGroups, ...).
const (
	adminListStartOffsets     = "list_start_offsets"
	adminListCommittedOffsets = "list_committed_offsets"
	adminDescribeConfigs      = "describe_configs"
)

// NewMetrics registers the replication metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_replication_records_total",
			Help: "Records copied to the target and acknowledged by it.",
		}, []string{"mirror"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_replication_bytes_total",
			Help: "Bytes of key, value and headers copied to the target and acknowledged by it.",
		}, []string{"mirror"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kmirror_replication_latency_seconds",
			Help:    "Time from a record's source timestamp to its acknowledgement by the target.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"mirror"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_replication_lag_records",
			Help: "Records committed at the source and not yet acknowledged by the target, summed over the mirror's partitions.",
		}, []string{"mirror"}),
		lagUnknown: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_lag_unknown_partitions",
			Help: "Partitions copied here whose source end offset could not be read since it last was (source down, a listing or fetch refused): their lag is unknown, and kmirror_replication_lag_records keeps the last sum known while this is above 0.",
		}, []string{"mirror"}),
		topics: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_mirrored_topics",
			Help: "Topics selected for mirroring, by state (pending, mirroring, failed).",
		}, []string{"mirror", "state"}),
		createErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_topic_create_errors_total",
			Help: "Target topics or partitions that could not be created (retried on the next pass).",
		}, []string{"mirror"}),
		produceErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_produce_errors_total",
			Help: "Records the target refused; the partition is rewound to its last acknowledged offset and retried.",
		}, []string{"mirror"}),
		recreations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_source_topic_recreations_total",
			Help: "Source topics found deleted and recreated under the same name (new topic ID); the new topic is mirrored from its start.",
		}, []string{"mirror"}),
		configChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_topic_config_changes_total",
			Help: "Topic config keys set or deleted on target topics by the config sync.",
		}, []string{"mirror"}),
		configSyncErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_topic_config_sync_errors_total",
			Help: "Config syncs that failed for a topic (retried on the next interval).",
		}, []string{"mirror"}),
		aclsCreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_acls_created_total",
			Help: "ACLs created on the target by the ACL sync.",
		}, []string{"mirror"}),
		groupOffsets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_group_offsets_synced_total",
			Help: "Partition offsets committed to target consumer groups.",
		}, []string{"mirror"}),
		groupSyncErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_group_sync_errors_total",
			Help: "Target group commits that failed (retried on the next interval).",
		}, []string{"mirror"}),
		setChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_replicated_set_changes_total",
			Help: "Changes to the replicated set, by kind: added, removed, changed (topics), group_added, group_removed.",
		}, []string{"mirror", "kind"}),
		filterErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_filter_errors_total",
			Help: "Control passes and group syncs aborted because a topic or group filter failed (the previous topic selection or group set is kept).",
		}, []string{"mirror"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_control_passes_total",
			Help: "Control passes run (discover, select, create).",
		}, []string{"mirror"}),
		passErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_control_pass_errors_total",
			Help: "Control passes that failed; the previous selection is kept.",
		}, []string{"mirror"}),
		lastPassSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_control_last_success_timestamp_seconds",
			Help: "Unix time of the last successful control pass.",
		}, []string{"mirror"}),
		internalWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_internal_write_errors_total",
			Help: "Writes of kmirror's own records to the target that failed, by kind (progress, index, checkpoint, metadata, dead_letter); each is retried.",
		}, []string{"mirror", "kind"}),
		adminErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_admin_errors_total",
			Help: "Admin requests (or per-topic/per-group answers) that failed, by request; the state they would update is kept as it was.",
		}, []string{"mirror", "request"}),
		untranslatable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_group_untranslatable_partitions",
			Help: "Committed group offsets (group and partition) that cannot be translated exactly at the last group sync; never committed to the target.",
		}, []string{"mirror"}),
		failedParts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_failed_partitions",
			Help: "Partitions whose records the target refuses and that are not moving (retried with backoff, or stopped on a record the target will never accept).",
		}, []string{"mirror"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_dead_letter_records_total",
			Help: "Records the target will never accept that were written to the mirror's dead-letter topic instead.",
		}, []string{"mirror"}),
		slotsOwned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_cluster_slots_owned",
			Help: "Task slots this worker owns.",
		}, []string{"mirror"}),
		slotsTaken: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_cluster_slot_changes_total",
			Help: "Slots this worker took over (kind=assigned) or gave up (revoked, lost) in rebalances.",
		}, []string{"mirror", "kind"}),
		slotsTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_cluster_slots",
			Help: "The mirror's slot count: the partitions of its control topic.",
		}, []string{"mirror"}),
		slotsUnowned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_cluster_slots_unowned",
			Help: "Slots no worker is assigned, as the group's coordinator last described the group (refreshed every control pass; kept while the group rebalances).",
		}, []string{"mirror"}),
		rebalanceSecs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_cluster_rebalance_seconds",
			Help: "How long this worker has been in a rebalance of the mirror's group (its JoinGroup or SyncGroup not yet answered, or failing), 0 when settled; refreshed every control pass.",
		}, []string{"mirror"}),
		txns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_transactions_total",
			Help: "Slot transactions ended, by result: commit, abort, unknown (a commit whose answer was lost; the slot is taken over again to learn its outcome).",
		}, []string{"mirror", "result"}),
		commitLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kmirror_transaction_commit_seconds",
			Help:    "Time to commit a slot's transaction: flushing its records, writing its progress and ending it.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"mirror"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_batches_total",
			Help: "Record batches written to the target and acknowledged, by path: passthrough (the source batch forwarded as it is), records (records decoded and produced again).",
		}, []string{"mirror", "path"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_passthrough_fallbacks_total",
			Help: "Source batches of a pass-through mirror that took the record path, by reason (aborted, straddle, offset_gaps, log_append_time, malformed, target_refused).",
		}, []string{"mirror", "reason"}),
		aheads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_fetches_ahead_total",
			Help: "Second fetches of a partition sent ahead of its fetch in flight (a partition that fills fetches on its own), by result: used (it became the partition's fetch, or its records followed that fetch's), dropped (a gap after the fetch before it, an error, a rewind).",
		}, []string{"mirror", "result"}),
		controlPlane: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_cluster_control_plane",
			Help: "1 while this worker runs the mirror's control plane (owns slot 0), else 0.",
		}, []string{"mirror"}),
		indexBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kmirror_offset_index_memory_bytes",
			Help: "Memory the offset indexes of the partitions copied here hold (offsets.index_memory bounds it).",
		}, []string{"mirror"}),
		indexEvictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_offset_index_evicted_chunks_total",
			Help: "Stored offset index chunks evicted from memory to keep within offsets.index_memory; a translation that needs one reads it back.",
		}, []string{"mirror"}),
		mm2Adopted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_mm2_adopted_partitions_total",
			Help: "Partitions whose copy started at the position MirrorMaker 2 committed (mirrors[].mm2.adopt).",
		}, []string{"mirror"}),
		mm2AdoptErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_mm2_adopt_errors_total",
			Help: "Control passes that could not read MirrorMaker 2's positions (or the target's end offsets) for partitions to adopt; those partitions wait, retried on the next pass.",
		}, []string{"mirror"}),
		mm2Heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_mm2_heartbeats_total",
			Help: "MirrorMaker 2 Heartbeat records written to the target's heartbeats topic and acknowledged.",
		}, []string{"mirror"}),
		mm2Checkpoints: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kmirror_mm2_checkpoints_total",
			Help: "MirrorMaker 2 Checkpoint records written to <source_alias>.checkpoints.internal on the target and acknowledged.",
		}, []string{"mirror"}),
		sourceGaps: newSourceGapCounter(),
		divergent:  newDivergentGauge(),
	}
	reg.MustRegister(m.sourceGaps, m.divergent)
	reg.MustRegister(m.records, m.bytes, m.latency, m.lag, m.lagUnknown, m.topics, m.createErrors,
		m.produceErrors, m.recreations, m.configChanges, m.configSyncErrs, m.aclsCreated, m.groupOffsets, m.groupSyncErrs, m.setChanges, m.filterErrors, m.passes, m.passErrors, m.lastPassSuccess,
		m.internalWrites, m.adminErrors, m.untranslatable, m.failedParts, m.deadLetters,
		m.slotsOwned, m.slotsTaken, m.controlPlane, m.slotsTotal, m.slotsUnowned, m.rebalanceSecs, m.txns, m.commitLatency, m.batches, m.fallbacks, m.aheads,
		m.indexBytes, m.indexEvictions, m.mm2Adopted, m.mm2AdoptErrors, m.mm2Heartbeats, m.mm2Checkpoints)
	m.detail = newDetailCollector()
	m.throttles = newThrottleCollector()
	reg.MustRegister(m.detail, m.throttles)
	return m
}

// mirrorMetrics are one mirror's resolved series, looked up once so the data
// path does no label hashing per record. Every method is a no-op on nil.
type mirrorMetrics struct {
	// *data.Metrics are the data plane's (the copier's): nil counts
	// nothing, like a nil mirrorMetrics.
	*data.Metrics
	// groupSet is the groups plane's (see groups()).
	groupSet *groups.Metrics

	createErrors, recreations, passes, passErrors                     prometheus.Counter
	configChanges, configSyncErrors, aclsCreated                      prometheus.Counter
	mm2Adopted, mm2AdoptErrors, mm2Heartbeats, mm2Checkpoints         prometheus.Counter
	lag, lagUnknown, lastPassSuccess                                  prometheus.Gauge
	pending, mirroring, failed                                        prometheus.Gauge
	filterErrors                                                      prometheus.Counter
	setChanges                                                        *prometheus.CounterVec
	adminErrors                                                       *prometheus.CounterVec
	failedParts                                                       prometheus.Gauge
	slotsOwned, controlPlane, slotsTotal, slotsUnowned, rebalanceSecs prometheus.Gauge
	slotsTaken                                                        *prometheus.CounterVec
	indexBytes                                                        prometheus.Gauge
	indexEvictions                                                    prometheus.Counter
	sourceGaps                                                        *prometheus.CounterVec
	divergent                                                         *prometheus.GaugeVec
}

// data is the data plane's metrics (nil when mm is).
func (mm *mirrorMetrics) data() *data.Metrics {
	if mm == nil {
		return nil
	}
	return mm.Metrics
}

// groups is the groups plane's metrics (nil when mm is).
func (mm *mirrorMetrics) groups() *groups.Metrics {
	if mm == nil {
		return nil
	}
	return mm.groupSet
}

func (m *Metrics) forMirror(name string) *mirrorMetrics {
	if m == nil {
		return nil
	}
	for _, kind := range []string{"added", "removed", "changed", "group_added", "group_removed"} {
		m.setChanges.WithLabelValues(name, kind) // pre-initialised: alerts see 0, not absence
	}
	for _, kind := range []string{data.WriteProgress, data.WriteIndex, groups.WriteCheckpoint, writeMetadata, data.WriteDeadLetter, writeMM2Heartbeat, writeMM2Checkpoint} {
		m.internalWrites.WithLabelValues(name, kind)
	}
	for _, req := range []string{adminListStartOffsets, adminListCommittedOffsets, groups.AdminDescribeGroups, groups.AdminFetchOffsets, adminDescribeConfigs} {
		m.adminErrors.WithLabelValues(name, req)
	}
	for _, reason := range fallbackReasons {
		m.fallbacks.WithLabelValues(name, reason)
	}
	for _, result := range []string{data.AheadUsed, data.AheadDropped} {
		m.aheads.WithLabelValues(name, result)
	}
	adminErrors := m.adminErrors.MustCurryWith(prometheus.Labels{"mirror": name})
	internalWrites := m.internalWrites.MustCurryWith(prometheus.Labels{"mirror": name})
	filterErrors := m.filterErrors.WithLabelValues(name)
	return &mirrorMetrics{
		Metrics: &data.Metrics{
			BatchesPassthrough: m.batches.WithLabelValues(name, pathPassthrough),
			BatchesRecords:     m.batches.WithLabelValues(name, pathRecords),
			Fallbacks:          m.fallbacks.MustCurryWith(prometheus.Labels{"mirror": name}),
			Aheads:             m.aheads.MustCurryWith(prometheus.Labels{"mirror": name}),
			InternalWrites:     internalWrites,
			DeadLetters:        m.deadLetters.WithLabelValues(name),
			Txns:               m.txns.MustCurryWith(prometheus.Labels{"mirror": name}),
			CommitLatency:      m.commitLatency.WithLabelValues(name),
			Records:            m.records.WithLabelValues(name),
			Bytes:              m.bytes.WithLabelValues(name),
			Latency:            m.latency.WithLabelValues(name),
			ProduceErrors:      m.produceErrors.WithLabelValues(name),
		},
		groupSet: &groups.Metrics{
			GroupOffsets:    m.groupOffsets.WithLabelValues(name),
			GroupSyncErrors: m.groupSyncErrs.WithLabelValues(name),
			FilterErrors:    filterErrors,
			Untranslatable:  m.untranslatable.WithLabelValues(name),
			AdminErrors:     adminErrors,
			InternalWrites:  internalWrites,
		},
		adminErrors:      adminErrors,
		failedParts:      m.failedParts.WithLabelValues(name),
		slotsOwned:       m.slotsOwned.WithLabelValues(name),
		controlPlane:     m.controlPlane.WithLabelValues(name),
		slotsTaken:       m.slotsTaken.MustCurryWith(prometheus.Labels{"mirror": name}),
		slotsTotal:       m.slotsTotal.WithLabelValues(name),
		slotsUnowned:     m.slotsUnowned.WithLabelValues(name),
		rebalanceSecs:    m.rebalanceSecs.WithLabelValues(name),
		indexBytes:       m.indexBytes.WithLabelValues(name),
		indexEvictions:   m.indexEvictions.WithLabelValues(name),
		setChanges:       m.setChanges.MustCurryWith(prometheus.Labels{"mirror": name}),
		filterErrors:     filterErrors,
		mm2Adopted:       m.mm2Adopted.WithLabelValues(name),
		mm2AdoptErrors:   m.mm2AdoptErrors.WithLabelValues(name),
		mm2Heartbeats:    m.mm2Heartbeats.WithLabelValues(name),
		mm2Checkpoints:   m.mm2Checkpoints.WithLabelValues(name),
		sourceGaps:       m.sourceGaps.MustCurryWith(prometheus.Labels{"mirror": name}),
		divergent:        m.divergent.MustCurryWith(prometheus.Labels{"mirror": name}),
		lag:              m.lag.WithLabelValues(name),
		lagUnknown:       m.lagUnknown.WithLabelValues(name),
		createErrors:     m.createErrors.WithLabelValues(name),
		recreations:      m.recreations.WithLabelValues(name),
		configChanges:    m.configChanges.WithLabelValues(name),
		configSyncErrors: m.configSyncErrs.WithLabelValues(name),
		aclsCreated:      m.aclsCreated.WithLabelValues(name),
		passes:           m.passes.WithLabelValues(name),
		passErrors:       m.passErrors.WithLabelValues(name),
		lastPassSuccess:  m.lastPassSuccess.WithLabelValues(name),
		pending:          m.topics.WithLabelValues(name, string(StatePending)),
		mirroring:        m.topics.WithLabelValues(name, string(StateMirroring)),
		failed:           m.topics.WithLabelValues(name, string(StateFailed)),
	}
}

func (mm *mirrorMetrics) incPasses() {
	if mm != nil {
		mm.passes.Inc()
	}
}

func (mm *mirrorMetrics) incPassErrors() {
	if mm != nil {
		mm.passErrors.Inc()
	}
}

func (mm *mirrorMetrics) passSucceeded() {
	if mm != nil {
		mm.lastPassSuccess.SetToCurrentTime()
	}
}

func (mm *mirrorMetrics) incRecreations() {
	if mm != nil {
		mm.recreations.Inc()
	}
}

func (mm *mirrorMetrics) incCreateErrors() {
	if mm != nil {
		mm.createErrors.Inc()
	}
}

func (mm *mirrorMetrics) incConfigSyncErrors() {
	if mm != nil {
		mm.configSyncErrors.Inc()
	}
}

func (mm *mirrorMetrics) addConfigChanges(n int) {
	if mm != nil {
		mm.configChanges.Add(float64(n))
	}
}

func (mm *mirrorMetrics) incACLsCreated() {
	if mm != nil {
		mm.aclsCreated.Inc()
	}
}

func (mm *mirrorMetrics) addSetChanges(kind string, n int) {
	if mm != nil && n > 0 {
		mm.setChanges.WithLabelValues(kind).Add(float64(n))
	}
}

func (mm *mirrorMetrics) incFilterErrors() {
	if mm != nil {
		mm.filterErrors.Inc()
	}
}

// incAdminErrors counts a failed admin request (adminListStartOffsets, ...).
func (mm *mirrorMetrics) incAdminErrors(request string) {
	if mm != nil {
		mm.adminErrors.WithLabelValues(request).Inc()
	}
}

// setIndexMemory reports the indexes' memory and counts evictions.
func (mm *mirrorMetrics) setIndexMemory(held int64, evicted int) {
	if mm != nil {
		mm.indexBytes.Set(float64(held))
		mm.indexEvictions.Add(float64(evicted))
	}
}

func (mm *mirrorMetrics) setFailedPartitions(n int) {
	if mm != nil {
		mm.failedParts.Set(float64(n))
	}
}

// slotOwned counts a slot this worker took over (owned) or gave up.
func (mm *mirrorMetrics) slotOwned(slot int32, owned bool, kind string) {
	if mm == nil {
		return
	}
	if owned {
		mm.slotsOwned.Inc()
	} else {
		mm.slotsOwned.Dec()
	}
	if slot == controlSlot {
		mm.controlPlane.Set(map[bool]float64{true: 1, false: 0}[owned])
	}
	mm.slotsTaken.WithLabelValues(kind).Inc()
}

func (mm *mirrorMetrics) setSlots(n int32) {
	if mm != nil {
		mm.slotsTotal.Set(float64(n))
	}
}

func (mm *mirrorMetrics) setSlotsUnowned(n int) {
	if mm != nil {
		mm.slotsUnowned.Set(float64(n))
	}
}

func (mm *mirrorMetrics) setRebalanceSeconds(secs float64) {
	if mm != nil {
		mm.rebalanceSecs.Set(secs)
	}
}

// Paths of kmirror_batches_total.
const (
	pathPassthrough = "passthrough"
	pathRecords     = "records"
)

// fallbackReasons label kmirror_passthrough_fallbacks_total (pre-initialised).
var fallbackReasons = []string{recordbatch.ReasonAborted, recordbatch.ReasonStraddle, recordbatch.ReasonGaps, recordbatch.ReasonLogAppendTime, recordbatch.ReasonMalformed, recordbatch.ReasonRefused}

func (mm *mirrorMetrics) addMM2Adopted(n int) {
	if mm != nil {
		mm.mm2Adopted.Add(float64(n))
	}
}

func (mm *mirrorMetrics) incMM2AdoptErrors() {
	if mm != nil {
		mm.mm2AdoptErrors.Inc()
	}
}

func (mm *mirrorMetrics) incMM2Heartbeats() {
	if mm != nil {
		mm.mm2Heartbeats.Inc()
	}
}

func (mm *mirrorMetrics) incMM2Checkpoints() {
	if mm != nil {
		mm.mm2Checkpoints.Inc()
	}
}
