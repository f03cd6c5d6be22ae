// Package data is a mirror's data plane: the Copier reads the source
// partitions assigned to it and writes them to the same partitions of their
// target topics, and persists its progress.
//
//   - The batch path (passthrough.go, ptfetch.go, ptmeta.go) fetches with
//     raw Fetch requests in a fetch session and forwards each source batch
//     as it is, rewriting only its header (package recordbatch): the
//     records, their codec and timestamps are the source's bytes. Where a
//     batch cannot be forwarded (aborted transactions, compacted gaps,
//     LogAppendTime, a refusal), the partition takes the record path
//     (copier.go): franz-go's consumer and producer, record by record.
//   - Progress (progress.go): the next source offset of every partition and
//     its offset index (package index) in the mirror's compacted progress
//     topic, written only once the target acknowledged the data before it,
//     so that a restart resumes exactly there.
//   - Exactly once (txn.go, pttxn.go): the copier writes inside
//     transactions of the worker's producer, with its progress, and both
//     paths write in them; each commit carries the worker's slots to the
//     mirror's group (TxnFence), which refuses a member it no longer knows.
//
// The control plane drives a Copier through Assign and Unassign; the
// membership plane gives the partitions of the worker's slots to its copier
// and runs it.
package data
