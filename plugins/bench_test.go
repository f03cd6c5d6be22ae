package plugins_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/plugins"
)

// startCatalog starts the catalog-filter example on a catalog listing every
// other one of n topics.
func startCatalog(b *testing.B, n int) (filters.TopicFilter, []filters.Topic) {
	b.Helper()
	catalogBin, _ := examples(b)
	dir := b.TempDir()
	var listed []string
	cands := make([]filters.Topic, n)
	for i := range cands {
		name := fmt.Sprintf("team%03d.topic-%06d", i%500, i)
		cands[i] = filters.Topic{Name: name, Partitions: 12,
			Configs: map[string]string{"cleanup.policy": "delete", "retention.ms": "604800000", "min.insync.replicas": "2"},
			Labels:  map[string]string{"team": fmt.Sprintf("team%03d", i%500)}}
		if i%2 == 0 {
			listed = append(listed, name)
		}
	}
	body, _ := json.Marshal(map[string]any{"topics": listed})
	catalog := filepath.Join(dir, "catalog.json")
	if err := os.WriteFile(catalog, body, 0o644); err != nil {
		b.Fatal(err)
	}
	h, err := plugins.NewHost(plugins.HostOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Close() })
	p, err := h.Start(context.Background(), plugins.Spec{Name: "catalog", Path: catalogBin,
		SHA256: mustSHA256(b, catalogBin), Config: map[string]string{"catalog": catalog}})
	if err != nil {
		b.Fatal(err)
	}
	f, _ := p.TopicFilter()
	return f, cands
}

// BenchmarkFilterTopics100k is one filter pass over 100,000 candidate
// topics (3 configs and a label each) through the catalog-filter plugin
// subprocess: marshal, gRPC over a unix socket with mTLS, the plugin's
// work, and back.
func BenchmarkFilterTopics100k(b *testing.B) {
	f, cands := startCatalog(b, 100_000)
	req := filters.TopicRequest{Mirror: "m", Topics: cands}
	b.ResetTimer()
	for b.Loop() {
		names, err := f.FilterTopics(context.Background(), req)
		if err != nil || len(names) != 50_000 {
			b.Fatalf("%d names, %v", len(names), err)
		}
	}
}

// BenchmarkFilterTopicsCall is the round trip of a small call (10
// candidates), and reports its p50 and p99.
func BenchmarkFilterTopicsCall(b *testing.B) {
	f, cands := startCatalog(b, 10)
	req := filters.TopicRequest{Mirror: "m", Topics: cands}
	var ds []time.Duration
	b.ResetTimer()
	for b.Loop() {
		begin := time.Now()
		if _, err := f.FilterTopics(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(begin))
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkStart is starting a plugin: sha256 check (twice: ours and
// go-plugin's), exec, handshake with AutoMTLS, PluginInfo, Configure; and
// stopping it.
func BenchmarkStart(b *testing.B) {
	catalogBin, _ := examples(b)
	sum := mustSHA256(b, catalogBin)
	h, err := plugins.NewHost(plugins.HostOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	for b.Loop() {
		p, err := h.Start(context.Background(), plugins.Spec{Name: "catalog", Path: catalogBin, SHA256: sum})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = p.Close()
		b.StartTimer()
	}
}
