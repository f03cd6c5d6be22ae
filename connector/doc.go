// Package connector is the mirror itself: one Mirror copies the selected
// topics of a source cluster to a target cluster.
//
// It is split the way MirrorMaker 2 splits its source connector, into
// planes, each in its own package or files, with the Mirror as the wiring:
//
//   - the control plane (control.go) runs a pass every refresh interval:
//     discover source topics with their partition counts, select them
//     (filters, then the final rules nothing overrides), name them with the
//     replication policy, create what is missing on the target in one batched
//     CreateTopics request, grow partitions, and hand the result to the data
//     plane (the dataPlane interface, plane.go);
//   - the data plane (package data) reads the assigned source partitions
//     (read_committed, never as a consumer group: the source is only read),
//     forwards their batches to the same partition of the target topic, and
//     persists how far the target acknowledged them in the progress topic
//     with the offset index (package index);
//   - membership (cluster.go, package slots) makes every worker a member of
//     its mirror's group on the target, which hands out the slots that
//     partitions hash to; each slot owned here is copied here, and with
//     exactly_once the worker's transactions are fenced by that membership
//     (eosfence.go);
//   - the groups plane (package groups, wired in groupsync.go) translates the
//     source's committed group offsets through the offset index and commits
//     them on the target; it sees the mirror only through its groups.Mirror
//     and groups.DataPlane interfaces.
//
// The disaster-recovery commands run no worker and change the mirror from
// outside, each a sequence of named steps in a file of its own: a failover
// (failover.go) sets the mirror's fence (package fence, a record on the
// target every worker watches: a fenced worker copies nothing) and commits
// every group on the target from the source or from its checkpoints; a
// cutover (cutover.go) does the same behind a gate (caught up, the source
// quiet, the copy verified by package verify); a failback (failback.go)
// prepares the reverse mirror to copy back only what the former target got
// since.
//
// Leaf packages hold what the planes share: recordbatch (v2 record batches,
// read and rewritten without decompressing), state (kmirror's compacted
// state topics), offsets (the envelope of kmirror's own records), policy
// (target topic names), uncached (metadata requests without franz-go's
// cache) and loglimit.
//
// The package never imports plugins: it sees filters only through the
// filters package's interfaces.
package connector
