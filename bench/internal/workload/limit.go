package workload

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/connector/data"
	"github.com/twmb/franz-go/pkg/kgo"
)

// LimitConfig configures the limit. The consumer and producer options are
// the connector's (connector/data/copier.go and connector.Mirror's target
// client); SrcOpts and DstOpts add seed brokers, hooks and the like.
type LimitConfig struct {
	SrcOpts, DstOpts []kgo.Opt
	// Offsets are the source partitions to copy and where to start.
	Offsets map[string]map[int32]kgo.Offset
	// Rename maps a source topic to its target topic.
	Rename func(string) string
	// FetchMaxWait, Linger and BatchMaxBytes: the connector's settings.
	FetchMaxWait  time.Duration
	Linger        time.Duration
	BatchMaxBytes int32
	// Compression is the producer's codec (zero: none).
	Compression kgo.CompressionCodec
}

// Limit is the plainest franz-go loop that does the same work as kmirror's
// data plane (direct read_committed consumer, manual partitioning to the
// same partition, key/value/headers/timestamp kept), with none of the
// bookkeeping (no per-partition offset tracking, no progress topic, no
// metrics, no control plane). Its target topics must exist.
type Limit struct {
	src, dst *kgo.Client
	n        atomic.Int64
	failed   ErrOnce
	cancel   context.CancelFunc
	done     chan struct{}
}

// StartLimit starts copying.
func StartLimit(ctx context.Context, cfg LimitConfig) (*Limit, error) {
	src, err := kgo.NewClient(append([]kgo.Opt{
		kgo.ConsumePartitions(cfg.Offsets),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(cfg.FetchMaxWait),
		kgo.FetchMaxBytes(data.FetchMaxBytes), // as kmirror's copier
	}, cfg.SrcOpts...)...)
	if err != nil {
		return nil, err
	}
	l := &Limit{src: src, done: make(chan struct{})}
	dst, err := kgo.NewClient(append([]kgo.Opt{
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.UnknownTopicRetries(20),
		kgo.ProducerLinger(cfg.Linger),
		kgo.ProducerBatchMaxBytes(cfg.BatchMaxBytes),
		kgo.ProducerBatchCompression(cfg.Compression),
		kgo.MaxBufferedBytes(data.ProducerMaxBufferedBytes), // as kmirror's producer
	}, cfg.DstOpts...)...)
	if err != nil {
		src.Close()
		return nil, err
	}
	loopCtx, cancel := context.WithCancel(ctx)
	l.dst, l.cancel = dst, cancel
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			l.failed.Set(err)
			return
		}
		l.n.Add(1)
	}
	// One rename per topic, not per record.
	names := make(map[string]string, len(cfg.Offsets))
	for t := range cfg.Offsets {
		names[t] = cfg.Rename(t)
	}
	go func() {
		defer close(l.done)
		for loopCtx.Err() == nil {
			fetches := src.PollFetches(loopCtx)
			fetches.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.Canceled) {
					l.failed.Set(fmt.Errorf("fetch %s/%d: %w", t, p, err))
				}
			})
			fetches.EachRecord(func(r *kgo.Record) {
				dst.Produce(loopCtx, &kgo.Record{
					Topic:     names[r.Topic],
					Partition: r.Partition,
					Key:       r.Key,
					Value:     r.Value,
					Headers:   r.Headers,
					Timestamp: r.Timestamp,
				}, promise)
			})
		}
	}()
	return l, nil
}

// Acked is how many records the target has acknowledged.
func (l *Limit) Acked() int64 { return l.n.Load() }

// Err is the first fetch or produce error.
func (l *Limit) Err() error { return l.failed.Get() }

// Stop stops copying, flushes what is in flight and closes both clients.
func (l *Limit) Stop() {
	l.cancel()
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = l.dst.Flush(ctx)
	l.src.Close()
	l.dst.Close()
}
