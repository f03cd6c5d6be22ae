package data

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the data plane's metrics of one mirror, curried with its
// name (Metrics.forMirror). A nil *Metrics counts nothing.
type Metrics struct {
	Records, Bytes, ProduceErrors, DeadLetters prometheus.Counter
	Latency, CommitLatency                     prometheus.Observer
	// InternalWrites by kind (WriteProgress, ...), Txns by result
	// (TxnCommitted, ...), Fallbacks by reason (recordbatch.Reason*),
	// Aheads by result (AheadUsed, AheadDropped).
	InternalWrites, Txns, Fallbacks, Aheads *prometheus.CounterVec
	BatchesPassthrough, BatchesRecords      prometheus.Counter
}

// Results of kmirror_transactions_total.
const (
	TxnCommitted = "commit"
	TxnAborted   = "abort"
	// txnUnknown: the commit's answer was lost; the slot is taken over
	// again to learn the outcome from its committed progress.
	TxnUnknown = "unknown"
)

// incInternalWriteErrors counts a failed write of kmirror's own records of
// kind (writeProgress, ...).
func (mm *Metrics) IncInternalWriteErrors(kind string) {
	if mm != nil {
		mm.InternalWrites.WithLabelValues(kind).Inc()
	}
}

func (mm *Metrics) IncDeadLetters() {
	if mm != nil {
		mm.DeadLetters.Inc()
	}
}

// txnEnded counts a slot transaction's end; took is the commit's duration.
func (mm *Metrics) TxnEnded(result string, took time.Duration) {
	if mm == nil {
		return
	}
	mm.Txns.WithLabelValues(result).Inc()
	if result == TxnCommitted {
		mm.CommitLatency.Observe(took.Seconds())
	}
}

// batchWritten counts a batch acknowledged by the target on path.
func (mm *Metrics) BatchWritten(passthrough bool) {
	switch {
	case mm == nil:
	case passthrough:
		mm.BatchesPassthrough.Inc()
	default:
		mm.BatchesRecords.Inc()
	}
}

// incFallback counts a source batch of a pass-through mirror that took the
// record path.
func (mm *Metrics) IncFallback(reason string) {
	if mm != nil {
		mm.Fallbacks.WithLabelValues(reason).Inc()
	}
}

// Results of kmirror_fetches_ahead_total (ptstripe.go).
const (
	AheadUsed    = "used"
	AheadDropped = "dropped"
)

// aheadDone counts an ahead fetch's end: its records used, or not.
func (mm *Metrics) aheadDone(used bool) {
	switch {
	case mm == nil:
	case used:
		mm.Aheads.WithLabelValues(AheadUsed).Inc()
	default:
		mm.Aheads.WithLabelValues(AheadDropped).Inc()
	}
}

// Kinds of the data plane's own records on the target, for
// kmirror_internal_write_errors_total.
const (
	WriteProgress   = "progress"
	WriteIndex      = "index"
	WriteDeadLetter = "dead_letter"
)
