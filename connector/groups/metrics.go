package groups

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the groups plane's series of one mirror, registered (and
// labelled with the mirror) by package connector. A nil *Metrics counts
// nothing.
type Metrics struct {
	// GroupOffsets counts the partition offsets committed to target
	// groups, GroupSyncErrors the commits that failed, FilterErrors the
	// syncs a group filter aborted.
	GroupOffsets, GroupSyncErrors, FilterErrors prometheus.Counter
	// Untranslatable is the group partitions the last sync could not
	// translate exactly.
	Untranslatable prometheus.Gauge
	// AdminErrors by request (AdminDescribeGroups, AdminFetchOffsets),
	// InternalWrites by kind (WriteCheckpoint).
	AdminErrors, InternalWrites *prometheus.CounterVec
}

// Admin requests of the groups plane, for kmirror_admin_errors_total.
const (
	AdminDescribeGroups = "describe_groups"
	AdminFetchOffsets   = "fetch_offsets"
)

// WriteCheckpoint is the kind of a checkpoint write, for
// kmirror_internal_write_errors_total.
const WriteCheckpoint = "checkpoint"

func (mm *Metrics) incAdminErrors(request string) {
	if mm != nil {
		mm.AdminErrors.WithLabelValues(request).Inc()
	}
}

func (mm *Metrics) incInternalWriteErrors(kind string) {
	if mm != nil {
		mm.InternalWrites.WithLabelValues(kind).Inc()
	}
}

func (mm *Metrics) incFilterErrors() {
	if mm != nil {
		mm.FilterErrors.Inc()
	}
}

func (mm *Metrics) incGroupSyncErrors() {
	if mm != nil {
		mm.GroupSyncErrors.Inc()
	}
}

func (mm *Metrics) addGroupOffsetsSynced(n int) {
	if mm != nil {
		mm.GroupOffsets.Add(float64(n))
	}
}

func (mm *Metrics) setUntranslatable(n int) {
	if mm != nil {
		mm.Untranslatable.Set(float64(n))
	}
}
