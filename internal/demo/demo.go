// Package demo runs kmirror end to end with no setup: two embedded Kafka
// clusters (franz-go's kfake), seeded topics, a live producer and one mirror
// between them, printing its config, what was mirrored, a consumer group's
// offsets translated to the target, and a closing summary.
//
// orders is written in transactions, as many producers write: every commit
// leaves a marker that takes an offset on the source and is not copied, so
// a source offset and its target offset differ and the group line shows
// translation at work (orders/0 240->120), not an identity.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strconv"
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
	{name: "orders", partitions: 6, records: 600}, // in transactions: see seed
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
	// The HTTP address first: a busy port fails the demo before anything
	// is printed, naming the demo's flag rather than the config key.
	ln, err := net.Listen("tcp", opts.HTTPListen)
	if err != nil {
		return fmt.Errorf("--http %s: %w (choose another address with --http)", opts.HTTPListen, err)
	}
	_ = ln.Close()
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
	// orders' producer: transactional, so a transactional client of its own.
	txn, err := kgo.NewClient(kgo.SeedBrokers(eastAddr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("kmirror-demo-orders"))
	if err != nil {
		return err
	}
	defer txn.Close()
	if err := seed(ctx, src, txn); err != nil {
		return fmt.Errorf("seed source topics: %w", err)
	}

	cfgText := fmt.Sprintf(demoConfig, eastAddr, westAddr, opts.HTTPListen)
	cfg, err := config.Load([]byte(cfgText), "demo.yaml")
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.Out, "kmirror demo: source cluster east at %s, target cluster west at %s\n", eastAddr, westAddr)
	fmt.Fprintf(opts.Out, "seeded: orders (6 partitions, written in transactions), customers (compacted, 3), clickstream (headers, 3), and two internal topics that are never mirrored\n")
	fmt.Fprintf(opts.Out, "\nthe config kmirror runs (kmirror run --config FILE with this file does the same):\n%s\n", indent(strings.TrimPrefix(cfgText, "\n")))

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		liveProducer(ctx, txn)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		billingConsumer(ctx, eastAddr)
	}()

	ready := make(chan struct{})
	a, err := app.New(app.Options{
		Config:  cfg,
		Logger:  opts.Logger,
		Version: opts.Version,
		Ready: func(addr string) {
			fmt.Fprintf(opts.Out, "status page: http://%s/  metrics: http://%s/metrics  status: http://%s/api/v1/status  ready: http://%s/readyz\n", addr, addr, addr, addr)
			close(ready)
		},
	})
	if err != nil {
		return err
	}
	start := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Tables only once kmirror runs: a start that fails prints none.
		select {
		case <-ctx.Done():
			return
		case <-ready:
		}
		fmt.Fprintln(opts.Out, groupLegend)
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
	wg.Wait()
	if err != nil {
		return err
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	printSummary(sctx, opts.Out, eastAddr, westAddr)
	printGroups(opts.Out, a)
	printClosing(sctx, opts.Out, westAddr, a, time.Since(start))
	return nil
}

// groupLegend explains the group lines.
const groupLegend = `every 5s: each topic's end offsets (summed over its partitions) on both sides, and the consumer
group billing (it reads orders on east) with its committed offsets translated to west:
"orders/0 240->120" means that a consumer of east.orders on west resumes at 120 where billing
stopped at 240 on east. orders is written in transactions: each commit marker takes an offset on
east and is not copied, so west's offsets are about half of east's.`

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ")
}

func seed(ctx context.Context, cl, txn *kgo.Client) error {
	adm := kadm.NewClient(cl)
	for _, s := range seeds {
		if _, err := adm.CreateTopic(ctx, s.partitions, 1, s.configs, s.name); err != nil {
			return err
		}
	}
	// orders: one transaction per round of one record per partition, so
	// every partition has a commit marker after each record.
	for i := 0; i < 600; i += 6 {
		if err := produceTxn(ctx, txn, i); err != nil {
			return err
		}
	}
	var recs []*kgo.Record
	for _, s := range seeds {
		if s.name == "orders" {
			continue
		}
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

// produceTxn writes one transaction to orders: a record on each of its 6
// partitions, numbered from first.
func produceTxn(ctx context.Context, cl *kgo.Client, first int) error {
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	recs := make([]*kgo.Record, 6)
	for p := range recs {
		recs[p] = &kgo.Record{Topic: "orders", Partition: int32(p), Value: fmt.Appendf(nil, "orders-%d", first+p)}
	}
	perr := cl.ProduceSync(ctx, recs...).FirstErr()
	commit := kgo.TransactionEndTry(perr == nil)
	if err := cl.EndTransaction(ctx, commit); err != nil {
		return err
	}
	return perr
}

// liveProducer keeps writing to orders, in transactions, so the mirror has
// live traffic.
func liveProducer(ctx context.Context, cl *kgo.Client) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for i := 600; ; i += 6 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := produceTxn(ctx, cl, i); err != nil {
			return // ctx ended, or the embedded cluster is gone
		}
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
	fmt.Fprintf(tw, "\nSOURCE (east)\tEND OFFSET\tTARGET (west)\tEND OFFSET\n")
	for _, n := range names {
		target, end := summaryTarget(n, dstEnds)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", n, srcEnds[n], target, end)
	}
	_ = tw.Flush()
}

// summaryTarget is the summary's target side of source topic n: its
// target topic and end offset, or why there is none ("-": a topic not on
// the target has no end offset, not 0).
func summaryTarget(n string, dstEnds map[string]int64) (target, end string) {
	target = "east." + n
	if got, ok := dstEnds[target]; ok {
		return target, strconv.FormatInt(got, 10)
	}
	if strings.HasPrefix(n, "__") || strings.HasSuffix(n, ".internal") {
		return "(not mirrored)", "-"
	}
	return "(pending)", "-"
}

// billingConsumer is a consumer group on the source that reads orders
// slowly and commits, so the demo shows its offsets translated exactly to
// the target.
func billingConsumer(ctx context.Context, addr string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
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

// printClosing is the demo's last line: what was copied, in how long, and
// what the group translation showed.
func printClosing(ctx context.Context, w io.Writer, westAddr string, a *app.App, took time.Duration) {
	dstEnds, err := endOffsets(ctx, westAddr)
	if err != nil {
		fmt.Fprintf(w, "\ndemo stopped after %s (no summary: %v)\n", took.Round(time.Second), err)
		return
	}
	topics, copied := 0, int64(0)
	for n, end := range dstEnds {
		if strings.HasPrefix(n, "east.") {
			topics++
			copied += end
		}
	}
	mapped := 0
	for _, g := range a.Groups() {
		for _, p := range g.Partitions {
			if !p.Untranslatable && p.SourceOffset != p.TargetOffset {
				mapped++
			}
		}
	}
	fmt.Fprintf(w, "\ndemo stopped after %s: %d topics mirrored east -> west, %d records on the target; "+
		"%d group partitions translated to a different target offset (exact, from the offset index)\n",
		took.Round(time.Second), topics, copied, mapped)
}
