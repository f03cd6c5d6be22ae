// Package connector is the mirror itself: one Mirror copies the selected
// topics of a source cluster to a target cluster.
//
// It is split the way MirrorMaker 2 splits its source connector:
//
//   - the control plane (control.go) runs a pass every refresh interval:
//     discover source topics with their partition counts, select them
//     (filters, then the final rules nothing overrides), name them with the
//     replication policy, create what is missing on the target in one batched
//     CreateTopics request, grow partitions, and hand the result to the copier;
//   - the data plane (copier.go) reads the assigned source partitions
//     (read_committed, never as a consumer group: the source is only read) and
//     produces every record to the same partition of the target topic,
//     tracking which source offsets the target has acknowledged;
//   - progress (progress.go) persists the next source offset per partition in
//     a compacted topic on the target, only once the data before it was
//     acknowledged, so a restart resumes exactly there (at-least-once: a
//     crash can repeat records, never lose them).
//
// The package never imports plugins: it sees filters only through the
// filters package's interfaces.
package connector
