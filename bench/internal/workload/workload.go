// Package workload holds what the benchmarks share: the records they
// produce (random 1 KiB values, a "seq" header, a produce-time header for
// latency), the source preload and steady-rate producer, the target
// latency reader, per-partition counts for correctness checks, and the
// limit (a plain franz-go consume-then-produce loop).
package workload

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const KeySize = 16

// RecordBytes is what one record carries as the connector counts it (key,
// value, header keys and values): the basis of MB/s.
func RecordBytes(valueSize int) int { return KeySize + valueSize + len("seq") + 8 }

// CreateTopic creates topic with the given partitions (replication factor 1:
// the benchmarks' clusters have one broker, or are kfake, which keeps every
// replica in memory; replication is not what is measured).
func CreateTopic(ctx context.Context, addrs []string, topic string, partitions int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, topic); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// HarnessProducer is the bench's own producer (not a contender). It spreads
// records round-robin over the partitions itself so every partition gets
// the same count.
func HarnessProducer(addrs []string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addrs...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}, opts...)...)
}

// ErrOnce keeps the first error reported by promises.
type ErrOnce struct {
	mu  sync.Mutex
	err error
}

func (e *ErrOnce) Set(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
}

func (e *ErrOnce) Get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// Preload produces n records of random values with random 16-byte keys and
// one "seq" header to topic, and waits until the source acknowledged them.
// It is not timed: the contenders start with a full source.
func Preload(ctx context.Context, addrs []string, topic string, n, partitions, valueSize int) error {
	cl, err := HarnessProducer(addrs)
	if err != nil {
		return err
	}
	defer cl.Close()
	// ChaCha8 is fast enough that generating 500 MB costs well under a
	// second, and random values keep any compression honest.
	rng := rand.NewChaCha8([32]byte{1})
	var failed ErrOnce
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.Set(err)
		}
	}
	for i := range n {
		r := &kgo.Record{
			Topic:     topic,
			Partition: int32(i % partitions),
			Key:       make([]byte, KeySize),
			Value:     make([]byte, valueSize),
			Headers:   []kgo.RecordHeader{{Key: "seq", Value: binary.BigEndian.AppendUint64(nil, uint64(i))}},
		}
		_, _ = rng.Read(r.Key)
		_, _ = rng.Read(r.Value)
		cl.Produce(ctx, r, promise)
		if i%10000 == 0 {
			if err := failed.Get(); err != nil {
				return fmt.Errorf("Preload %s: %w", topic, err)
			}
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if err := failed.Get(); err != nil {
		return fmt.Errorf("Preload %s: %w", topic, err)
	}
	return nil
}

// PartitionCounts returns the number of records per partition of topic
// (end minus start offset: the bench writes no transactions, so offsets
// and records match one to one).
func PartitionCounts(ctx context.Context, addrs []string, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	out := make(map[int32]int64)
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(o.Topic, o.Partition)
		out[o.Partition] = o.Offset - s.Offset
	})
	return out, nil
}

// CommittedCounts returns the number of committed data records per
// partition of topic, read with read_committed up to the last stable
// offset: a topic written in transactions holds a marker per transaction
// and partition, which offsets count and records do not.
func CommittedCounts(ctx context.Context, addrs []string, topic string) (map[int32]int64, error) {
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	ends, err := kadm.NewClient(admCl).ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list last stable offsets of %s: %w", topic, err)
	}
	want := make(map[int32]int64)
	from := make(map[int32]kgo.Offset)
	out := make(map[int32]int64)
	ends.Each(func(o kadm.ListedOffset) {
		out[o.Partition] = 0
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			from[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return out, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("count records of %s: %w", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out[r.Partition]++
			}
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	return out, nil
}

// LatencyHeader carries the produce time in nanoseconds. Record timestamps
// are only millisecond-precise on the wire, which would blur a p50 of a
// few milliseconds.
const LatencyHeader = "ts"

// ProduceAtRate produces rate records per second to topic for total
// records, stamping each with the current time. It paces by the clock (not
// a fixed sleep per record) so scheduling hiccups do not lower the rate.
func ProduceAtRate(ctx context.Context, addrs []string, topic string, partitions, valueSize, rate, total int) error {
	// No linger: the harness must not add its own batching delay to
	// what it measures.
	cl, err := HarnessProducer(addrs, kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	rng := rand.NewChaCha8([32]byte{2})
	var failed ErrOnce
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.Set(err)
		}
	}
	start := time.Now()
	for seq := 0; seq < total && ctx.Err() == nil; {
		due := min(total, int(time.Since(start).Seconds()*float64(rate)))
		for ; seq < due; seq++ {
			now := time.Now()
			r := &kgo.Record{
				Topic:     topic,
				Partition: int32(seq % partitions),
				Key:       make([]byte, KeySize),
				Value:     make([]byte, valueSize),
				Timestamp: now,
				Headers: []kgo.RecordHeader{
					{Key: "seq", Value: binary.BigEndian.AppendUint64(nil, uint64(seq))},
					{Key: LatencyHeader, Value: binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano()))},
				},
			}
			_, _ = rng.Read(r.Key)
			_, _ = rng.Read(r.Value)
			cl.Produce(ctx, r, promise)
		}
		time.Sleep(time.Millisecond)
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return failed.Get()
}

// LatencyReader reads a topic on the target from the start and records, for
// each record with seq >= skip, how long after its production it arrived.
// It stops after want records or when ctx ends.
type LatencyReader struct {
	cl   *kgo.Client
	want int
	skip uint64
	got  atomic.Int64
	mu   sync.Mutex
	lat  []time.Duration
	done chan struct{}
}

func StartLatencyReader(ctx context.Context, addrs []string, topic string, partitions, want, skip int) (*LatencyReader, error) {
	offsets := make(map[int32]kgo.Offset, partitions)
	for p := range partitions {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	if err != nil {
		return nil, err
	}
	lr := &LatencyReader{cl: cl, want: want, skip: uint64(skip), done: make(chan struct{})}
	go lr.run(ctx)
	return lr, nil
}

func (lr *LatencyReader) run(ctx context.Context) {
	defer close(lr.done)
	for ctx.Err() == nil && int(lr.got.Load()) < lr.want {
		fetches := lr.cl.PollFetches(ctx)
		now := time.Now()
		fetches.EachRecord(func(r *kgo.Record) {
			lr.got.Add(1)
			var seq, ts uint64
			for _, h := range r.Headers {
				switch {
				case h.Key == "seq" && len(h.Value) == 8:
					seq = binary.BigEndian.Uint64(h.Value)
				case h.Key == LatencyHeader && len(h.Value) == 8:
					ts = binary.BigEndian.Uint64(h.Value)
				}
			}
			if seq < lr.skip || ts == 0 {
				return
			}
			lr.mu.Lock()
			lr.lat = append(lr.lat, now.Sub(time.Unix(0, int64(ts))))
			lr.mu.Unlock()
		})
	}
}

// wait returns the measured latencies, sorted, once want records arrived
// or ctx ended, and closes the reader.
func (lr *LatencyReader) Wait() (sorted []time.Duration, received int) {
	<-lr.done
	lr.cl.Close()
	lr.mu.Lock()
	defer lr.mu.Unlock()
	slices.Sort(lr.lat)
	return lr.lat, int(lr.got.Load())
}

// Quantile of sorted durations (nearest rank).
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[min(max(rank-1, 0), len(sorted)-1)]
}

// Steady produces records like Preload's (random key and value, a "seq"
// header) at a fixed rate, round-robin over the partitions, until Stop: a
// source that keeps being written (the WAN phase's outage). It paces by
// the clock, as ProduceAtRate; lingers 5 ms, as the contenders' producers.
type Steady struct {
	stop     chan struct{}
	done     chan struct{}
	produced atomic.Int64
	err      error
}

// StartSteady starts producing rate records per second to topic.
func StartSteady(addrs []string, topic string, partitions, valueSize, rate int) (*Steady, error) {
	cl, err := HarnessProducer(addrs, kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, err
	}
	s := &Steady{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer cl.Close()
		rng := rand.NewChaCha8([32]byte{3})
		var failed ErrOnce
		promise := func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Set(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		start := time.Now()
		for seq := 0; ; {
			select {
			case <-s.stop:
				fctx, fcancel := context.WithTimeout(ctx, 2*time.Minute)
				defer fcancel()
				s.err = errors.Join(cl.Flush(fctx), failed.Get())
				return
			default:
			}
			if err := failed.Get(); err != nil {
				s.err = err
				return
			}
			due := int(time.Since(start).Seconds() * float64(rate))
			for ; seq < due; seq++ {
				r := &kgo.Record{
					Topic:     topic,
					Partition: int32(seq % partitions),
					Key:       make([]byte, KeySize),
					Value:     make([]byte, valueSize),
					Headers:   []kgo.RecordHeader{{Key: "seq", Value: binary.BigEndian.AppendUint64(nil, uint64(seq))}},
				}
				_, _ = rng.Read(r.Key)
				_, _ = rng.Read(r.Value)
				cl.Produce(ctx, r, promise)
				s.produced.Add(1)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return s, nil
}

// Produced is the records handed to the producer so far.
func (s *Steady) Produced() int64 { return s.produced.Load() }

// Err is the producer's first error once it ended, nil while it runs.
func (s *Steady) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Stop stops producing, waits for the records handed over to be
// acknowledged and returns how many there were, and the first error.
func (s *Steady) Stop() (int64, error) {
	select {
	case <-s.done:
	default:
		close(s.stop)
		<-s.done
	}
	return s.produced.Load(), s.err
}
