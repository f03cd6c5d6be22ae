package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestProxyKfake runs the proxy in front of a three-broker kfake cluster.
func TestProxyKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exercise(t, c.ListenAddrs(), 3)
}

// TestProxyKafka runs the same against a real Apache Kafka broker when
// this machine can (java and the jars cached by `make kafka-jars`; it skips
// otherwise, as kafkatest's own TestClusterLifecycle does).
func TestProxyKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JVM")
	}
	c := kafkatest.StartForTest(t, "faultproxy")
	exercise(t, c.Addrs(), 1)
}

// kfakeProxy is a proxy in front of a one-broker kfake cluster started
// with opts, both closed when the test ends.
func kfakeProxy(t *testing.T, opts ...kfake.Opt) *Proxy {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	p, err := New(c.ListenAddrs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// waitFor polls cond until it reports true or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, desc string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last: %s", timeout, desc, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialLog records every address a client dials.
type dialLog struct {
	mu    sync.Mutex
	addrs map[string]bool
}

func (d *dialLog) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs[host] = true
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, host)
}

// exercise puts a proxy in front of the cluster at upstream (brokers
// brokers) and checks pass-through, address rewriting, every kind of hook
// and Close.
func exercise(t *testing.T, upstream []string, brokers int) {
	p, err := New(upstream)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			p.Close()
		}
	}()
	if got := p.Addrs(); len(got) != brokers {
		t.Fatalf("Addrs %v: want one per broker (%d)", got, brokers)
	}

	dials := &dialLog{addrs: map[string]bool{}}
	var clients []*kgo.Client
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		cl, err := kgo.NewClient(append([]kgo.Opt{
			kgo.SeedBrokers(p.Addrs()...),
			kgo.Dialer(dials.dial),
			kgo.MetadataMinAge(100 * time.Millisecond),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
		}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
		return cl
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	direct, err := kgo.NewClient(kgo.SeedBrokers(upstream...))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	directAdm := kadm.NewClient(direct)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := newClient()
	adm := kadm.NewClient(cl)
	const topic, group = "fp-orders", "fp-group"
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatalf("create topic through the proxy: %v", err)
	}
	waitFor(t, 30*time.Second, "the topic in metadata", func() (bool, string) {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		d := td[topic]
		return d.Err == nil && len(d.Partitions) == 3, fmt.Sprintf("%v, %d partitions", d.Err, len(d.Partitions))
	})
	endOffsets := func() int64 {
		t.Helper()
		ends, err := directAdm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			t.Fatalf("end offsets (directly): %v", err)
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n
	}

	t.Run("produce and consume", func(t *testing.T) {
		var recs []*kgo.Record
		for i := range 30 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: fmt.Appendf(nil, "v%d", i)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		// acks=0: no response, so the proxy must not wait for one (a
		// later response would then be matched to the wrong request).
		noAck := newClient(kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
		for i := range 5 {
			if err := noAck.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "noack%d", i)}).FirstErr(); err != nil {
				t.Fatalf("acks=0 produce: %v", err)
			}
		}
		waitFor(t, 30*time.Second, "the acks=0 records at the broker", func() (bool, string) {
			n := endOffsets()
			return n == 35, fmt.Sprintf("%d offsets", n)
		})
		if _, err := kadm.NewClient(noAck).ListEndOffsets(ctx, topic); err != nil {
			t.Fatalf("a request after acks=0 produces: %v", err)
		}

		cons := newClient(kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		got := 0
		for got < 35 && ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			if errs := fs.Errors(); len(errs) > 0 {
				t.Fatalf("consume: %v", errs)
			}
			got += fs.NumRecords()
		}
		if got != 35 {
			t.Fatalf("consumed %d records, want 35", got)
		}
		if err := cons.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatalf("fetch offsets: %v", err)
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		if sum != 35 {
			t.Errorf("committed offsets sum to %d, want 35", sum)
		}
	})

	t.Run("addresses", func(t *testing.T) {
		// Every address a client can learn is a proxy port: FindCoordinator
		// v3 (one coordinator) and v4+ (batched), DescribeCluster, Metadata.
		mine := func(host string, port int32) bool {
			return slices.Contains(p.Addrs(), net.JoinHostPort(host, fmt.Sprint(port)))
		}
		old := newClient(kgo.MaxVersions(kversion.V2_8_0()))
		for name, c := range map[string]*kgo.Client{"v3": old, "v4+": cl} {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorKey = group
			req.CoordinatorKeys = []string{group}
			resp, err := req.RequestWith(ctx, c)
			if err != nil {
				t.Fatalf("FindCoordinator %s: %v", name, err)
			}
			if resp.Version < 4 && name == "v4+" || resp.Version >= 4 && name == "v3" {
				t.Errorf("FindCoordinator %s answered as v%d", name, resp.Version)
			}
			host, port := resp.Host, resp.Port
			if len(resp.Coordinators) > 0 {
				host, port = resp.Coordinators[0].Host, resp.Coordinators[0].Port
			}
			if !mine(host, port) {
				t.Errorf("FindCoordinator %s (v%d) names %s:%d, not a proxy port %v", name, resp.Version, host, port, p.Addrs())
			}
		}
		dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("DescribeCluster: %v", err)
		}
		if len(dc.Brokers) != brokers {
			t.Errorf("DescribeCluster lists %d brokers, want %d", len(dc.Brokers), brokers)
		}
		for _, b := range dc.Brokers {
			if !mine(b.Host, b.Port) {
				t.Errorf("DescribeCluster names %s:%d, not a proxy port", b.Host, b.Port)
			}
		}
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range md.Brokers {
			if !mine(b.Host, b.Port) {
				t.Errorf("Metadata names %s:%d, not a proxy port", b.Host, b.Port)
			}
		}
	})

	t.Run("metadata topic error", func(t *testing.T) {
		var hits atomic.Int64
		fault := TopicError(topic, kerr.LeaderNotAvailable.Code)
		p.SetHook(kmsg.Metadata, func(req kmsg.Request, resp kmsg.Response) Action {
			hits.Add(1)
			return fault(req, resp)
		})
		waitFor(t, 30*time.Second, "ListTopics to show LEADER_NOT_AVAILABLE", func() (bool, string) {
			td, err := adm.ListTopics(ctx, topic)
			if err != nil {
				return false, err.Error()
			}
			return errors.Is(td[topic].Err, kerr.LeaderNotAvailable), fmt.Sprintf("topic error %v", td[topic].Err)
		})
		if hits.Load() == 0 {
			t.Error("the hook was never called")
		}
		// Other clients of the cluster see nothing.
		if td, err := directAdm.ListTopics(ctx, topic); err != nil || td[topic].Err != nil {
			t.Errorf("directly: %v %v", td[topic].Err, err)
		}
		p.SetHook(kmsg.Metadata, nil)
		waitFor(t, 30*time.Second, "ListTopics without error after the hook is removed", func() (bool, string) {
			td, err := adm.ListTopics(ctx, topic)
			if err != nil {
				return false, err.Error()
			}
			d := td[topic]
			return d.Err == nil && len(d.Partitions) == 3, fmt.Sprintf("%v, %d partitions", d.Err, len(d.Partitions))
		})
	})

	t.Run("produce refused", func(t *testing.T) {
		before := endOffsets()
		var hits atomic.Int64
		refuse := ProduceError(kerr.NotEnoughReplicas.Code)
		p.SetAnswer(kmsg.Produce, func(req kmsg.Request, resp kmsg.Response) Action {
			hits.Add(1)
			return refuse(req, resp)
		})
		pcl := newClient(kgo.DisableIdempotentWrite(), kgo.RecordRetries(2),
			kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
		rec := &kgo.Record{Topic: topic, Partition: 1, Value: []byte("refused")}
		err := pcl.ProduceSync(ctx, rec).FirstErr()
		if !errors.Is(err, kerr.NotEnoughReplicas) {
			t.Fatalf("produce while refused: %v, want NOT_ENOUGH_REPLICAS", err)
		}
		if n := hits.Load(); n < 1 {
			t.Errorf("the answer hook ran %d times", n)
		}
		if after := endOffsets(); after != before {
			t.Errorf("a refused produce reached the broker: %d offsets, were %d", after, before)
		}
		p.SetAnswer(kmsg.Produce, nil)
		if err := pcl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 1, Value: []byte("accepted")}).FirstErr(); err != nil {
			t.Fatalf("produce after the hook is removed: %v", err)
		}
		if after := endOffsets(); after != before+1 {
			t.Errorf("%d offsets, want %d", after, before+1)
		}
	})

	t.Run("offset fetch error", func(t *testing.T) {
		p.SetHook(kmsg.OffsetFetch, OffsetFetchError(kerr.GroupAuthorizationFailed.Code))
		if _, err := adm.FetchOffsets(ctx, group); !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Errorf("FetchOffsets: %v, want GROUP_AUTHORIZATION_FAILED", err)
		}
		p.SetHook(kmsg.OffsetFetch, nil)
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatalf("FetchOffsets after the hook is removed: %v", err)
		}
		if o, ok := offs.Lookup(topic, 0); !ok || o.At <= 0 {
			t.Errorf("offset of partition 0: %+v %v", o, ok)
		}
	})

	t.Run("silent broker", func(t *testing.T) {
		var hits atomic.Int64
		silent := func(kmsg.Request, kmsg.Response) Action { hits.Add(1); return Silence }
		p.SetHook(kmsg.ListOffsets, silent)
		// The client gives up on its own deadline.
		sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
		begin := time.Now()
		_, err := adm.ListEndOffsets(sctx, topic)
		scancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("ListEndOffsets while silent: %v after %v, want the client's deadline", err, time.Since(begin))
		}
		if hits.Load() == 0 {
			t.Fatal("the hook was never called")
		}
		// Removing the hook delivers what it held. A fresh client: on
		// the first one's connection the held response holds every later
		// one (until the client's read timeout gives up on it).
		seen := hits.Load()
		res := make(chan error, 1)
		adm2 := kadm.NewClient(newClient())
		go func() {
			ends, err := adm2.ListEndOffsets(ctx, topic)
			if err == nil {
				err = ends.Error()
			}
			res <- err
		}()
		waitFor(t, 30*time.Second, "the second request to be held", func() (bool, string) {
			return hits.Load() > seen, fmt.Sprintf("%d hook calls", hits.Load())
		})
		select {
		case err := <-res:
			t.Fatalf("answered while silent: %v", err)
		default:
		}
		p.SetHook(kmsg.ListOffsets, nil)
		select {
		case err := <-res:
			if err != nil {
				t.Errorf("after the hook is removed: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no answer 30s after the hook was removed")
		}
	})

	// Close ends everything while a response is held.
	var hits atomic.Int64
	p.SetHook(kmsg.ListOffsets, func(kmsg.Request, kmsg.Response) Action { hits.Add(1); return Silence })
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	held := make(chan error, 1)
	go func() {
		_, err := adm.ListEndOffsets(hctx, topic)
		held <- err
	}()
	waitFor(t, 30*time.Second, "a held response", func() (bool, string) { return hits.Load() > 0, "" })
	if err := p.Err(); err != nil {
		t.Errorf("protocol errors: %v", err)
	}
	addrs := p.Addrs()
	begin := time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	t.Logf("Close took %v", time.Since(begin))
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("Close took %v", took)
	}
	// Close waited for them; a goroutine past its last wg.Done may still
	// be on its way out for a moment.
	waitFor(t, 30*time.Second, "no goroutine of the proxy left after Close", func() (bool, string) {
		s := proxyGoroutines()
		return s == "", s
	})
	for _, a := range addrs {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after Close", a)
		}
	}
	hcancel()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Error("the held request did not end")
	}
	dials.mu.Lock()
	defer dials.mu.Unlock()
	for d := range dials.addrs {
		if !slices.Contains(addrs, d) {
			t.Errorf("a client dialed %s, which is not a proxy port %v", d, addrs)
		}
	}
}

// proxyGoroutines returns the stacks of goroutines running the proxy's own
// code (not this test's).
func proxyGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "faultproxy.(*Proxy)") || strings.Contains(g, "faultproxy.(*conn)") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// TestAcksZeroPipelined: a Produce with acks=0 gets no response, so the
// next request's response on the same connection is matched to that
// request, not to the Produce (raw frames on one connection, as a client
// that mixes them would send).
func TestAcksZeroPipelined(t *testing.T) {
	p := kfakeProxy(t, kfake.SeedTopics(1, "t"))
	conn, err := net.DialTimeout("tcp", p.Addrs()[0], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))

	var out []byte
	for i, acks := range []int16{0, 0} {
		prod := kmsg.NewPtrProduceRequest()
		prod.SetVersion(9)
		prod.Acks = acks
		prod.TimeoutMillis = 1000
		out = appendFrame(out, requestFrame(prod, int32(i+1), nil))
	}
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(9)
	out = appendFrame(out, requestFrame(md, 3, nil))
	if _, err := conn.Write(out); err != nil {
		t.Fatal(err)
	}
	frame, err := readFrame(conn)
	if err != nil {
		t.Fatalf("reading the Metadata response: %v (proxy errors: %v)", err, p.Err())
	}
	h := reqHeader{key: int16(kmsg.Metadata), version: 9, corr: 3}
	resp, _, err := decodeResponse(h, frame)
	if err != nil {
		t.Fatal(err)
	}
	if got := int32(uint32(frame[0])<<24 | uint32(frame[1])<<16 | uint32(frame[2])<<8 | uint32(frame[3])); got != 3 {
		t.Errorf("correlation ID %d, want 3", got)
	}
	if b := resp.(*kmsg.MetadataResponse).Brokers; len(b) != 1 || net.JoinHostPort(b[0].Host, fmt.Sprint(b[0].Port)) != p.Addrs()[0] {
		t.Errorf("brokers %+v, want the proxy's %s", b, p.Addrs()[0])
	}
	if err := p.Err(); err != nil {
		t.Error(err)
	}
}

// TestLatencyPipelined: with SetLatency(d), a response comes no sooner
// than d after its request, in order, and requests a client pipelines
// stay overlapped: five pipelined requests take about one round trip, not
// five (serialized they would take 5d; the bound, 4d, leaves 3d for a
// loaded machine). ResponseBytes counts the frames the client read.
func TestLatencyPipelined(t *testing.T) {
	p := kfakeProxy(t)
	const d = 400 * time.Millisecond
	p.SetLatency(d)
	conn, err := net.DialTimeout("tcp", p.Addrs()[0], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var out []byte
	for i := range 5 {
		md := kmsg.NewPtrMetadataRequest()
		md.SetVersion(9)
		out = appendFrame(out, requestFrame(md, int32(i+1), nil))
	}
	start := time.Now()
	if _, err := conn.Write(out); err != nil {
		t.Fatal(err)
	}
	var responseBytes int64
	for i := range 5 {
		frame, err := readFrame(conn)
		if err != nil {
			t.Fatalf("response %d: %v (proxy errors: %v)", i+1, err, p.Err())
		}
		responseBytes += 4 + int64(len(frame))
		if i == 0 {
			if took := time.Since(start); took < d {
				t.Fatalf("the first response came %v after its request; want at least the latency %v", took, d)
			}
		}
		if got := int32(uint32(frame[0])<<24 | uint32(frame[1])<<16 | uint32(frame[2])<<8 | uint32(frame[3])); got != int32(i+1) {
			t.Fatalf("response %d has correlation ID %d: out of order", i+1, got)
		}
	}
	if took := time.Since(start); took >= 4*d {
		t.Fatalf("five pipelined requests took %v at %v latency: serialized, not overlapped", took, d)
	}
	// Counted once its Write returned, a moment after the client read it.
	waitFor(t, 5*time.Second, "ResponseBytes to count the five frames read", func() (bool, string) {
		got := p.ResponseBytes()
		return got == responseBytes, fmt.Sprintf("%d bytes, want %d", got, responseBytes)
	})
	if err := p.Err(); err != nil {
		t.Error(err)
	}
}

// TestDown: with SetDown(true) the connections open through the proxy are
// reset, and so is each new one, without a protocol error; a client's
// requests fail until SetDown(false), when they pass again.
func TestDown(t *testing.T) {
	p := kfakeProxy(t, kfake.SeedTopics(1, "t"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addrs()...), kgo.RetryTimeout(time.Second), kgo.RequestRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ping := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := adm.ListEndOffsets(ctx, "t")
		return err
	}
	if err := ping(); err != nil {
		t.Fatalf("through the proxy, up: %v", err)
	}
	open, err := net.DialTimeout("tcp", p.Addrs()[0], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	waitFor(t, 5*time.Second, "the raw connection to be served", func() (bool, string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.conns) >= 2, fmt.Sprintf("%d connections", len(p.conns))
	})

	p.SetDown(true)
	readFails := func(nc net.Conn, what string) {
		t.Helper()
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := nc.Read(make([]byte, 1))
		var ne net.Error
		if err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("%s: read %v, want the connection reset", what, err)
		}
	}
	readFails(open, "a connection open when the link went down")
	fresh, err := net.DialTimeout("tcp", p.Addrs()[0], 5*time.Second)
	if err == nil {
		readFails(fresh, "a connection made while the link is down")
		fresh.Close()
	}
	if err := ping(); err == nil {
		t.Fatal("a request passed while the link was down")
	}
	if n := p.Resets(); n < 3 {
		t.Errorf("Resets() = %d, want at least 3 (the client's, the raw and the fresh connection)", n)
	}

	p.SetDown(false)
	waitFor(t, 15*time.Second, "requests to pass once the link is back", func() (bool, string) {
		err := ping()
		return err == nil, fmt.Sprint(err)
	})
	if err := p.Err(); err != nil {
		t.Errorf("resets are no protocol errors: %v", err)
	}
}
