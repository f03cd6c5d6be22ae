package main

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/kmirror/kmirror/bench/internal/kfakeproc"
	"github.com/kmirror/kmirror/bench/internal/workload"
)

// The workload (records, preload, steady-rate producer, latency reader) is
// shared with bench/mm2 in bench/internal/workload.
var (
	recordBytes        = workload.RecordBytes
	createTopic        = workload.CreateTopic
	preload            = workload.Preload
	partitionCounts    = workload.PartitionCounts
	produceAtRate      = workload.ProduceAtRate
	startLatencyReader = workload.StartLatencyReader
	quantile           = workload.Quantile
)

// verifyCopy checks that the target topic holds exactly the source topic's
// records per partition, and n in all: fewer means loss, more means
// duplicates.
func verifyCopy(ctx context.Context, cs *kfakeproc.Pair, srcTopic, dstTopic string, n int64) error {
	src, err := partitionCounts(ctx, cs.Src.Addrs, srcTopic)
	if err != nil {
		return err
	}
	dst, err := partitionCounts(ctx, cs.Dst.Addrs, dstTopic)
	if err != nil {
		return err
	}
	if !maps.Equal(src, dst) {
		// Offsets count transaction markers too (kmirror-eos): count
		// the committed records themselves.
		if dst, err = workload.CommittedCounts(ctx, cs.Dst.Addrs, dstTopic); err != nil {
			return err
		}
	}
	var total int64
	var errs []error
	for p, want := range src {
		total += want
		if got := dst[p]; got != want {
			errs = append(errs, fmt.Errorf("partition %d: source %d records, target %d", p, want, got))
		}
	}
	if len(dst) != len(src) {
		errs = append(errs, fmt.Errorf("source has %d partitions, target %d", len(src), len(dst)))
	}
	if total != n {
		errs = append(errs, fmt.Errorf("source has %d records, expected %d", total, n))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s -> %s: %w", srcTopic, dstTopic, errors.Join(errs...))
	}
	return nil
}
