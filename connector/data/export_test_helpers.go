package data

// EndWrittenForTest is the source end in the last progress record
// produced for ps (tests of the recovery point; call with ps.Mu held).
func (ps *PartitionState) EndWrittenForTest() int64 { return ps.endWritten }

// FetchLanes is how many fetch sessions the batch path keeps with each
// source broker (ptFetchLanes), for tests that watch its fetches.
const FetchLanes = ptFetchLanes
