package slots

import "hash/fnv"

// SlotOf returns the slot, in [0, slots), that owns partition of the source
// topic topic. Whoever owns the slot copies the partition, with the slot's
// producer and the slot's progress, so the mapping is the data layout of a
// mirror: it is fixed forever. Changing it, or calling it with another
// slot count than the control topic's real partition count (Member.Slots),
// would hand a partition to two slots at once, each resuming from its own
// progress.
//
// The mapping is (FNV-1a-32(topic) + partition) mod slots, computed without
// overflow. The hash spreads topics over the slots, and consecutive
// partitions of one topic land on consecutive slots, so a topic with at
// least as many partitions as there are slots loads every slot evenly.
// topic is the source topic's name, before any renaming by the replication
// policy.
//
// SlotOf panics if slots is not positive, as a division by zero would.
func SlotOf(topic string, partition int32, slots int32) int32 {
	if slots <= 0 {
		panic("slots: SlotOf with a slot count that is not positive")
	}
	h := fnv.New32a()
	h.Write([]byte(topic)) // never fails
	// In 64 bits, the sum cannot wrap, so the slots of one topic's
	// partitions stay consecutive whatever the hash.
	return int32((uint64(h.Sum32()) + uint64(uint32(partition))) % uint64(slots))
}
