package faultproxy

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// TestLinkDepart: a chunk leaves once the bytes that left within the
// round trip before it, and it, fit in the window; an acknowledged chunk
// frees its bytes; departures keep their order.
func TestLinkDepart(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rtt := time.Second
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	var l link
	steps := []struct {
		name         string
		ready        time.Time
		n, wnd       int
		want         time.Time
		wantInFlight int
	}{
		{"the first chunk leaves when ready", t0, 40, 100, t0, 40},
		{"a second fits in the window beside it", t0, 40, 100, t0, 80},
		{"a third waits for the acknowledgement of both, a round trip after they left", ms(10), 40, 100, ms(1000), 40},
		{"ready later, a fourth fits beside the third", ms(1500), 30, 100, ms(1500), 70},
		{"a window grown by auto-tuning lets more go at once", ms(1500), 60, 200, ms(1500), 130},
		{"a window shrunk (unread bytes) holds the next back until enough is acknowledged", ms(1600), 50, 90, ms(2500), 50},
		{"never before the chunk sent before it", ms(100), 1, 1000, ms(2500), 51},
		{"once everything is acknowledged, the whole window is free", ms(5000), 100, 100, ms(5000), 100},
	}
	for _, s := range steps {
		got, inFlight := l.depart(s.ready, s.n, s.wnd, rtt)
		if !got.Equal(s.want) || inFlight != s.wantInFlight {
			t.Fatalf("%s: depart(ready +%v, %d B, window %d) = +%v with %d B in flight; want +%v with %d", s.name,
				s.ready.Sub(t0), s.n, s.wnd, got.Sub(t0), inFlight, s.want.Sub(t0), s.wantInFlight)
		}
	}
}

// TestReceiveWindows: a client whose socket has a small receive buffer
// (SO_RCVBUF, as Java's receive.buffer.bytes sets it) fetches a response
// of 1 MiB through the proxy at 40 ms: under SetReceiveWindows the bytes on
// their way never exceed the window the client advertises, so the response
// takes at least a round trip per window (a lower bound: a slow machine
// only adds to it), and it arrives whole and in order. Without windows,
// the same response arrives in about one round trip (not asserted: it
// would be a bound on the machine's speed), which it logs.
func TestReceiveWindows(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	direct, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const total = 1 << 20 // in records of 128 KiB (a batch is at most 1 MB)
	for range total / (128 << 10) {
		value := make([]byte, 128<<10)
		for i := range value {
			value[i] = byte(i * 7)
		}
		if err := direct.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	p, err := New(c.ListenAddrs())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const rtt = 40 * time.Millisecond
	p.SetLatency(rtt)

	fetch := func(rcvbuf int) (time.Duration, int) {
		t.Helper()
		d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
			}); err != nil {
				return err
			}
			return serr
		}}
		conn, err := d.Dial("tcp", p.Addrs()[0])
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(4)
		req.ReplicaID = -1
		req.MaxWaitMillis = 100
		req.MaxBytes = 4 << 20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "t"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 4 << 20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		start := time.Now()
		if _, err := conn.Write(appendFrame(nil, requestFrame(req, 7, nil))); err != nil {
			t.Fatal(err)
		}
		frame, err := readFrame(conn)
		if err != nil {
			t.Fatalf("the fetch's response: %v (proxy errors: %v)", err, p.Err())
		}
		took := time.Since(start)
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(4)
		if err := resp.ReadFrom(frame[4:]); err != nil {
			t.Fatalf("the fetch's response does not decode: %v", err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || len(resp.Topics[0].Partitions[0].RecordBatches) < total {
			t.Fatalf("the fetch's response lacks the 1 MiB record: %d bytes", len(frame))
		}
		return took, len(frame) + 4
	}

	plain, size := fetch(16 << 10)
	t.Logf("without receive windows: %d B in %v at a %v round trip", size, plain, rtt)
	if b, _ := p.MaxInFlight(); b != 0 {
		t.Fatalf("MaxInFlight = %d before SetReceiveWindows", b)
	}

	p.SetReceiveWindows(true)
	took, size := fetch(16 << 10)
	inFlight, wnd := p.MaxInFlight()
	t.Logf("under the window: %d B in %v; at most %d B in flight, window %d B", size, took, inFlight, wnd)
	if inFlight == 0 || inFlight > wnd {
		t.Fatalf("at most %d B were in flight under a window of %d B; want 0 < in flight <= window", inFlight, wnd)
	}
	if wnd > 256<<10 {
		t.Fatalf("the window is %d B for a client with SO_RCVBUF 16 KiB (the kernel doubles it); want a small one", wnd)
	}
	// A window per round trip: the last byte leaves no sooner than
	// (size/window − 1) round trips after the first, and arrives half a
	// round trip later, the request having taken the other half.
	if min := time.Duration(size/wnd-1) * rtt; took < min {
		t.Fatalf("%d B under a %d B window at %v took %v; want at least %v (a window per round trip)", size, wnd, rtt, took, min)
	}
	p.ResetMaxInFlight()
	if b, w := p.MaxInFlight(); b != 0 || w != 0 {
		t.Errorf("MaxInFlight = %d, %d after ResetMaxInFlight", b, w)
	}
	if err := p.Err(); err != nil {
		t.Error(err)
	}
}
