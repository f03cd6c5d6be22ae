package workload

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// LimitChild is the limit as a process of its own (its CPU and RSS are
// then its own): a benchmark binary runs itself with "limit-child" and
// these flags. It copies the source topics that match -topics (listed
// once, at start) to <prefix><topic> on the target, creating the target
// topics first (same partitions, replication factor 1), until SIGTERM.
// base holds the copy settings (fetch wait, linger, batch size); the flags
// add the clusters, the topics and the codec.
func LimitChild(args []string, base LimitConfig) int {
	fs := flag.NewFlagSet("limit-child", flag.ExitOnError)
	src := fs.String("src", "", "source bootstrap server")
	dst := fs.String("dst", "", "target bootstrap server")
	topics := fs.String("topics", "", "regexp of source topics")
	prefix := fs.String("prefix", "src.", "target topic name prefix")
	codec := fs.String("codec", "", "producer codec: none (empty), gzip, snappy, lz4 or zstd")
	_ = fs.Parse(args)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "limit:", err)
		return 1
	}
	re, err := regexp.Compile("^(?:" + *topics + ")$")
	if err != nil {
		return fail(err)
	}
	cfg := base
	cfg.Compression, err = Codec(*codec)
	if err != nil {
		return fail(err)
	}
	srcCl, err := kgo.NewClient(kgo.SeedBrokers(*src))
	if err != nil {
		return fail(err)
	}
	md, err := kadm.NewClient(srcCl).ListTopics(ctx)
	srcCl.Close()
	if err != nil {
		return fail(err)
	}
	offsets := map[string]map[int32]kgo.Offset{}
	byParts := map[int32][]string{}
	for _, t := range md.Sorted() {
		if !re.MatchString(t.Topic) {
			continue
		}
		ps := map[int32]kgo.Offset{}
		for p := range t.Partitions {
			ps[p] = kgo.NewOffset().AtStart()
		}
		offsets[t.Topic] = ps
		n := int32(len(t.Partitions))
		byParts[n] = append(byParts[n], *prefix+t.Topic)
	}
	if len(offsets) == 0 {
		return fail(fmt.Errorf("no source topic matches %q", *topics))
	}
	dstCl, err := kgo.NewClient(kgo.SeedBrokers(*dst))
	if err != nil {
		return fail(err)
	}
	adm := kadm.NewClient(dstCl)
	for n, names := range byParts {
		// Chunks of 1,000 topics: one request for 10,000 topics would
		// outlast a broker's request timeout.
		for chunk := range slices.Chunk(names, 1000) {
			res, err := adm.CreateTopics(ctx, n, 1, nil, chunk...)
			if err != nil {
				return fail(err)
			}
			for _, r := range res {
				if r.Err != nil && r.Err != kerr.TopicAlreadyExists {
					return fail(fmt.Errorf("create %s: %w", r.Topic, r.Err))
				}
			}
		}
	}
	dstCl.Close()
	cfg.SrcOpts = append(cfg.SrcOpts, kgo.SeedBrokers(*src))
	cfg.DstOpts = append(cfg.DstOpts, kgo.SeedBrokers(*dst))
	cfg.Offsets = offsets
	cfg.Rename = func(t string) string { return *prefix + t }
	l, err := StartLimit(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.Stop()
			fmt.Fprintf(os.Stderr, "limit: stopped after %d records acknowledged\n", l.Acked())
			return 0
		case <-t.C:
			if err := l.Err(); err != nil {
				l.Stop()
				return fail(err)
			}
		}
	}
}

// Codec is a producer codec by name ("" and "none": no compression).
func Codec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("unknown codec %q (want none, gzip, snappy, lz4 or zstd)", name)
}
