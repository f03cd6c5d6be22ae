package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/bench/internal/kfakeproc"
	"github.com/kmirror/kmirror/bench/internal/workload"
	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/connector/policy"
	"github.com/kmirror/kmirror/filters"
)

// The target producer settings every contender uses: kmirror's defaults as
// the app wires them from an empty producer config (config.go defaults:
// linger 5ms, batch_max_bytes 1 MiB, compression none; internal/app maps
// "none" to kgo.NoCompression()). Everything else is franz-go's default.
const (
	linger        = 5 * time.Millisecond
	batchMaxBytes = 1 << 20
)

// fetchMaxWait is the connector's source consumer setting
// (connector/data/copier.go), used by the limit too.
const fetchMaxWait = 500 * time.Millisecond

// Source and target aliases; the default policy names the copy of topic t
// "src.t".
const (
	srcAlias = "src"
	dstAlias = "dst"
)

func targetTopic(topic string) string { return policy.Default{}.FormatRemoteTopic(srcAlias, topic) }

// copying is one contender copying one source topic to the target.
type copying interface {
	// acked is how many records of the topic the target has acknowledged.
	acked() int64
	// err reports a failure that means the copy will never complete.
	err() error
	// ready blocks until records produced to the source from now on will
	// be copied (the target topic exists and its partitions are assigned).
	ready(ctx context.Context) error
	// stop stops copying and flushes what is in flight.
	stop()
	// stats counts the target producer's requests and batches.
	stats() *produceStats
}

// startFunc starts a contender on topic, which has the given partitions.
type startFunc func(ctx context.Context, cs *kfakeproc.Pair, topic string, partitions int) (copying, error)

var contenders = map[string]startFunc{
	"limit":   startLimit,
	"kmirror": startKmirror,
	// kmirror in cluster mode, one worker: every slot's records,
	// progress and index in transactions (exactly once). Its acked count
	// is taken at acknowledgement, before the commit, so the last
	// commit (at most one 100ms commit interval) is not timed.
	"kmirror-eos": startKmirrorEOS,
	// Two kmirror workers of one cluster-mode mirror in this process,
	// sharing the slots through the group protocol. On one machine this
	// shows what coordination costs (the second worker's join moves half
	// the slots while they copy), not scaling: both share the same cores.
	"kmirror-eos-2w": startKmirrorEOS2,
}

// limitCopy is the limit (workload.Limit): the plainest franz-go loop that
// does the same work as kmirror's data plane, with none of the bookkeeping.
type limitCopy struct {
	*workload.Limit
	ps produceStats
}

func startLimit(ctx context.Context, cs *kfakeproc.Pair, topic string, partitions int) (copying, error) {
	target := targetTopic(topic)
	// Creating the target topic is part of the timed work, as it is for
	// kmirror.
	if err := createTopic(ctx, cs.Dst.Addrs, target, partitions); err != nil {
		return nil, err
	}
	offsets := make(map[int32]kgo.Offset, partitions)
	for p := range partitions {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	l := &limitCopy{}
	var err error
	l.Limit, err = workload.StartLimit(ctx, workload.LimitConfig{
		SrcOpts:       []kgo.Opt{kgo.SeedBrokers(cs.Src.Addrs...)},
		DstOpts:       []kgo.Opt{kgo.SeedBrokers(cs.Dst.Addrs...), kgo.WithHooks(&l.ps)},
		Offsets:       map[string]map[int32]kgo.Offset{topic: offsets},
		Rename:        targetTopic,
		FetchMaxWait:  fetchMaxWait,
		Linger:        linger,
		BatchMaxBytes: batchMaxBytes,
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (l *limitCopy) acked() int64         { return l.Acked() }
func (l *limitCopy) err() error           { return l.Err() }
func (l *limitCopy) stats() *produceStats { return &l.ps }

// ready: the target topic was created and the consumer assigned in start.
func (l *limitCopy) ready(context.Context) error { return nil }

func (l *limitCopy) stop() { l.Stop() }

// kmirrorCopy is kmirror's connector in this process, wired as the app
// wires it (metrics on, warnings logged) but selecting only the bench
// topic.
type kmirrorCopy struct {
	m      *connector.Mirror
	topic  string
	reg    *prometheus.Registry
	ps     produceStats
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	lastErr error
	checked time.Time
}

func startKmirror(ctx context.Context, cs *kfakeproc.Pair, topic string, partitions int) (copying, error) {
	return startConnector(ctx, cs, topic, nil)
}

// benchCluster is exactly_once with the cluster defaults (docs/cluster.md).
var benchCluster = connector.ClusterConfig{ExactlyOnce: true, Slots: 16, SessionTimeout: 10 * time.Second, CommitInterval: 100 * time.Millisecond}

func startKmirrorEOS(ctx context.Context, cs *kfakeproc.Pair, topic string, partitions int) (copying, error) {
	cluster := benchCluster
	return startConnector(ctx, cs, topic, &cluster)
}

func startKmirrorEOS2(ctx context.Context, cs *kfakeproc.Pair, topic string, partitions int) (copying, error) {
	var ws workers
	for range 2 {
		cluster := benchCluster
		w, err := startConnector(ctx, cs, topic, &cluster)
		if err != nil {
			ws.stop()
			return nil, err
		}
		ws = append(ws, w.(*kmirrorCopy))
	}
	return ws, nil
}

// workers are several kmirror workers of one mirror, counted as one
// contender. A slot handed over during a graceful rebalance commits before
// it moves, so acknowledged records are not counted twice; a takeover
// after a failure would count its aborted records again (none happen in a
// bench run).
type workers []*kmirrorCopy

func (ws workers) acked() int64 {
	var n int64
	for _, w := range ws {
		n += w.acked()
	}
	return n
}

func (ws workers) err() error {
	for _, w := range ws {
		if err := w.err(); err != nil {
			return err
		}
	}
	return nil
}

// ready: the topic is mirrored once the worker running the control plane
// (whichever that is) created the target topic and slots are assigned.
func (ws workers) ready(ctx context.Context) error {
	for {
		for _, w := range ws {
			for _, t := range w.m.Status().Topics {
				if t.SourceTopic == w.topic && t.State == connector.StateMirroring {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kmirror workers did not start mirroring: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (ws workers) stop() {
	for _, w := range ws {
		w.stop()
	}
}

// stats sums what the workers' producers sent.
func (ws workers) stats() *produceStats {
	var sum produceStats
	for _, w := range ws {
		sum.requests.Add(w.ps.requests.Load())
		sum.batches.Add(w.ps.batches.Load())
		sum.records.Add(w.ps.records.Load())
	}
	return &sum
}

// startConnector starts kmirror's connector, in cluster mode when cluster
// is set.
func startConnector(ctx context.Context, cs *kfakeproc.Pair, topic string, cluster *connector.ClusterConfig) (copying, error) {
	reg := prometheus.NewRegistry()
	k := &kmirrorCopy{topic: topic, reg: reg, done: make(chan error, 1)}
	m, err := connector.New(connector.Config{
		Name:        "bench",
		SourceAlias: srcAlias,
		TargetAlias: dstAlias,
		SourceOpts:  []kgo.Opt{kgo.SeedBrokers(cs.Src.Addrs...)},
		// The hook only counts; the connector adds its producer
		// options after these.
		TargetOpts: []kgo.Opt{kgo.SeedBrokers(cs.Dst.Addrs...), kgo.WithHooks(&k.ps)},
		Filters: []filters.TopicFilter{filters.Regex{
			Include: filters.MustCompileAll(regexp.QuoteMeta(topic)),
		}},
		RefreshInterval: time.Second,
		Linger:          linger,
		BatchMaxBytes:   batchMaxBytes,
		Compression:     []kgo.CompressionCodec{kgo.NoCompression()},
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Metrics:         connector.NewMetrics(reg),
		Cluster:         cluster,
	})
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	k.m, k.cancel = m, cancel
	go func() { k.done <- m.Run(runCtx) }()
	return k, nil
}

// acked reads kmirror_replication_records_total, which the connector
// increments in the produce promise once the target acknowledged a record:
// the same point where the limit counts.
func (k *kmirrorCopy) acked() int64 {
	mfs, err := k.reg.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == "kmirror_replication_records_total" {
			var n float64
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
			return int64(n)
		}
	}
	return 0
}

// err reports Run returning early or the topic failing; it consults
// Status at most once a second, as it takes locks on the data path.
func (k *kmirrorCopy) err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	select {
	case err := <-k.done:
		k.done <- err // keep it for stop
		if err == nil {
			err = errors.New("kmirror Run returned")
		}
		k.lastErr = err
		return err
	default:
	}
	if time.Since(k.checked) < time.Second {
		return k.lastErr
	}
	k.checked = time.Now()
	for _, t := range k.m.Status().Topics {
		if t.SourceTopic == k.topic && t.State == connector.StateFailed {
			k.lastErr = fmt.Errorf("kmirror: topic %s failed: %s", t.SourceTopic, t.Error)
		}
	}
	return k.lastErr
}

// ready waits until Status shows the topic being mirrored: its target
// topic exists and every partition is assigned to the copier.
func (k *kmirrorCopy) ready(ctx context.Context) error {
	for {
		for _, t := range k.m.Status().Topics {
			if t.SourceTopic == k.topic && t.State == connector.StateMirroring {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kmirror did not start mirroring %s: %w", k.topic, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (k *kmirrorCopy) stats() *produceStats { return &k.ps }

func (k *kmirrorCopy) stop() {
	k.cancel()
	<-k.done
}

// waitForTarget waits until target has acknowledged n records, polling
// every 10ms (the timing's resolution).
func waitForTarget(ctx context.Context, c copying, n int64) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for c.acked() < n {
		if err := c.err(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d records acknowledged: %w", c.acked(), n, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// produceStats counts what a contender's target producer sent: produce
// requests and record batches. Fewer, fuller batches cost the target
// broker less per record, so they explain throughput that CPU does not.
type produceStats struct {
	requests, batches, records atomic.Int64
}

func (s *produceStats) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 0 && err == nil { // 0 is Produce
		s.requests.Add(1)
	}
}

func (s *produceStats) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	s.batches.Add(1)
	s.records.Add(int64(m.NumRecords))
}
