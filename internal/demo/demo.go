// Package demo runs kmirror end to end with no setup: two embedded Kafka
// clusters (franz-go's kfake), seeded topics, a live producer and one mirror
// between them, printing what was mirrored.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/internal/app"
)

// Options configure Run.
type Options struct {
	Out        io.Writer // where the summary goes
	Logger     *slog.Logger
	HTTPListen string
	Version    string
}

// seedTopic is a topic the demo creates at the source.
type seedTopic struct {
	name       string
	partitions int32
	configs    map[string]*string
	records    int
}

var seeds = []seedTopic{
	{name: "orders", partitions: 6, records: 600},
	{name: "customers", partitions: 3, configs: map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, records: 300},
	{name: "clickstream", partitions: 3, records: 300},
	// Never mirrored: internal names, whatever the include patterns say.
	{name: "__audit", partitions: 1, records: 10},
	{name: "app-state.internal", partitions: 1, records: 10},
}

const demoConfig = `
clusters:
  east: {bootstrap_servers: [%q]}
  west: {bootstrap_servers: [%q]}
mirrors:
  - name: east-to-west
    source: east
    target: west
    replication_policy: {type: default, separator: "."}
    topics: {include: [".*"], exclude: [], refresh_interval: 2s}
    labels:
      - match: "orders|customers"
        set: {team: payments}
    sync:
      group_offsets: {interval: 2s}
http: {listen: %q}
`

// Run starts everything and blocks until ctx ends.
func Run(ctx context.Context, opts Options) error {
	east, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return fmt.Errorf("start source cluster: %w", err)
	}
	defer east.Close()
	west, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return fmt.Errorf("start target cluster: %w", err)
	}
	defer west.Close()
	eastAddr, westAddr := east.ListenAddrs()[0], west.ListenAddrs()[0]

	src, err := kgo.NewClient(kgo.SeedBrokers(eastAddr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer src.Close()
	if err := seed(ctx, src); err != nil {
		return fmt.Errorf("seed source topics: %w", err)
	}

	cfg, err := config.Load(fmt.Appendf(nil, demoConfig, eastAddr, westAddr, opts.HTTPListen), "demo.yaml")
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.Out, "kmirror demo: source cluster east at %s, target cluster west at %s\n", eastAddr, westAddr)
	fmt.Fprintf(opts.Out, "seeded: orders (6 partitions), customers (compacted, 3), clickstream (headers, 3), and two internal topics that are never mirrored\n")

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		liveProducer(ctx, src)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		billingConsumer(ctx, eastAddr)
	}()

	a, err := app.New(app.Options{
		Config:  cfg,
		Logger:  opts.Logger,
		Version: opts.Version,
		Ready: func(addr string) {
			fmt.Fprintf(opts.Out, "status page: http://%s/  metrics: http://%s/metrics  status: http://%s/api/v1/status  ready: http://%s/readyz\n", addr, addr, addr, addr)
		},
	})
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				printSummary(ctx, opts.Out, eastAddr, westAddr)
				printGroups(opts.Out, a)
			}
		}
	}()
	err = a.Run(ctx)
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	printSummary(sctx, opts.Out, eastAddr, westAddr)
	printGroups(opts.Out, a)
	return err
}

func seed(ctx context.Context, cl *kgo.Client) error {
	adm := kadm.NewClient(cl)
	for _, s := range seeds {
		if _, err := adm.CreateTopic(ctx, s.partitions, 1, s.configs, s.name); err != nil {
			return err
		}
	}
	var recs []*kgo.Record
	for _, s := range seeds {
		for i := range s.records {
			r := &kgo.Record{Topic: s.name, Partition: int32(i) % s.partitions, Value: fmt.Appendf(nil, "%s-%d", s.name, i)}
			switch s.name {
			case "customers":
				// Keys repeat so compaction has something to do;
				// every tenth update is a tombstone.
				r.Key = fmt.Appendf(nil, "customer-%d", i%50)
				if i%10 == 9 {
					r.Value = nil
				}
			case "clickstream":
				r.Headers = []kgo.RecordHeader{
					{Key: "trace-id", Value: fmt.Appendf(nil, "t-%d", i)},
					{Key: "source", Value: []byte("web")},
					{Key: "source", Value: []byte("edge")}, // duplicate keys are kept, in order
				}
			}
			recs = append(recs, r)
		}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// liveProducer keeps writing to orders so the mirror has live traffic.
func liveProducer(ctx context.Context, cl *kgo.Client) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cl.Produce(ctx, &kgo.Record{Topic: "orders", Partition: int32(i % 6), Value: fmt.Appendf(nil, "live-%d", i)}, nil)
	}
}

func endOffsets(ctx context.Context, addr string) (map[string]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topics.Names()...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64)
	ends.Each(func(o kadm.ListedOffset) { out[o.Topic] += o.Offset })
	return out, nil
}

func printSummary(ctx context.Context, w io.Writer, eastAddr, westAddr string) {
	srcEnds, err1 := endOffsets(ctx, eastAddr)
	dstEnds, err2 := endOffsets(ctx, westAddr)
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintf(w, "summary unavailable: %v\n", err)
		return
	}
	names := make([]string, 0, len(srcEnds))
	for n := range srcEnds {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nSOURCE (east)\tRECORDS\tTARGET (west)\tRECORDS\n")
	for _, n := range names {
		target := "east." + n
		got, ok := dstEnds[target]
		if !ok {
			target, got = "(not mirrored)", 0
			if !strings.HasPrefix(n, "__") && !strings.HasSuffix(n, ".internal") {
				target = "(pending)"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", n, srcEnds[n], target, got)
	}
	_ = tw.Flush()
}

// billingConsumer is a consumer group on the source that reads orders
// slowly and commits, so the demo shows its offsets translated exactly to
// the target.
func billingConsumer(ctx context.Context, addr string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.FetchMaxPartitionBytes(4<<10)) // small fetches: it lags behind, as consumers do
	if err != nil {
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 7)
		if fs.NumRecords() > 0 {
			_ = cl.CommitUncommittedOffsets(ctx)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func printGroups(w io.Writer, a *app.App) {
	for _, g := range a.Groups() {
		fmt.Fprintf(w, "group %s (%s):", g.Group, g.State)
		for _, p := range g.Partitions {
			fmt.Fprintf(w, " %s/%d %d->%d", p.SourceTopic, p.Partition, p.SourceOffset, p.TargetOffset)
		}
		fmt.Fprintln(w)
	}
}
