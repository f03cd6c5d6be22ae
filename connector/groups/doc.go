// Package groups is a mirror's consumer-groups plane. Every sync interval
// the Syncer reads the committed offsets of the selected source groups,
// translates them exactly through the offset index, writes them to the
// same groups on the target when nobody consumes there, and records a
// checkpoint per partition. A consumer that fails over to the target with
// its group reads exactly the records after its last source commit: no
// re-delivery, nothing skipped.
//
//   - Sync (syncer.go) is one pass: the candidates (source groups with
//     offsets on mirrored topics), selected through the group filters, each
//     translated, committed (never backwards, never into a group with
//     members on the target) and checkpointed; Groups is what the last
//     pass found, for /api/v1/groups.
//   - Translation (status.go, chunks.go) goes through a partition's offset
//     index, reading back from the progress topic a chunk the index budget
//     evicted; below the position where kmirror took over from MirrorMaker
//     2, through MM2's offset syncs (mm2syncs.go).
//   - Translate (translate.go) is `kmirror translate`: the same from the
//     stored progress, without a running worker, with an optional apply.
//
// It needs of the rest of its mirror only what its interfaces say: Mirror
// (the mirrored topics of the control plane, the current group filters, the
// listeners, the state topics' partition counts, a producer that never
// blocks, the clusters' error explainers) and DataPlane (the partitions the
// data plane copies, with their index and acknowledged position), with the
// mirror's Clients passed per call. Package connector wires it: it makes
// the Syncer, runs Sync on the group sync's ticker and registers its
// Metrics.
package groups
