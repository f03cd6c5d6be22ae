package faultproxy

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// stallingBroker is a one-node Kafka broker that answers ApiVersions and
// Metadata (enough for New) and answers every Fetch with a response of
// 2*half body bytes, of which it sends the first half, then the rest once
// the test closes release: a broker in the middle of a large response.
type stallingBroker struct {
	ln      net.Listener
	half    int
	release chan struct{}
	wg      sync.WaitGroup
}

func newStallingBroker(t *testing.T, half int) *stallingBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &stallingBroker{ln: ln, half: half, release: make(chan struct{})}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.wg.Add(1)
			go func() { defer b.wg.Done(); defer c.Close(); b.serve(t, c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		select {
		case <-b.release:
		default:
			close(b.release)
		}
		b.wg.Wait()
	})
	return b
}

// fetchBody is the body of the stalling broker's Fetch response: bytes a
// proxy that decoded it would choke on, which one passing it through
// does not look at.
func fetchBody(n int) []byte {
	body := make([]byte, n)
	for i := range body {
		body[i] = byte(i * 7)
	}
	return body
}

func (b *stallingBroker) serve(t *testing.T, c net.Conn) {
	for {
		frame, err := readFrame(c)
		if err != nil {
			return
		}
		h, err := parseReqHeader(frame)
		if err != nil {
			t.Errorf("stalling broker: %v", err)
			return
		}
		var resp kmsg.Response
		switch kmsg.Key(h.key) {
		case kmsg.ApiVersions:
			r := kmsg.NewPtrApiVersionsResponse()
			for _, k := range []kmsg.Key{kmsg.ApiVersions, kmsg.Metadata, kmsg.Fetch} {
				r.ApiKeys = append(r.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: int16(k), MaxVersion: kmsg.RequestForKey(int16(k)).MaxVersion()})
			}
			resp = r
		case kmsg.Metadata:
			host, port, _ := net.SplitHostPort(b.ln.Addr().String())
			p, _ := strconv.Atoi(port)
			r := kmsg.NewPtrMetadataResponse()
			r.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: int32(p)}}
			resp = r
		case kmsg.Fetch:
			body := fetchBody(2 * b.half)
			out := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
			out = binary.BigEndian.AppendUint32(out, uint32(h.corr))
			if _, err := c.Write(append(out, body[:b.half]...)); err != nil {
				return
			}
			<-b.release
			if _, err := c.Write(body[b.half:]); err != nil {
				return
			}
			continue
		default:
			t.Errorf("stalling broker: unexpected %s request", kmsg.NameForKey(h.key))
			return
		}
		resp.SetVersion(h.version)
		if _, err := c.Write(appendFrame(nil, resp.AppendTo(newResponseHeader(h, resp)))); err != nil {
			return
		}
	}
}

// TestResponsesStream: a response the proxy does not change passes through
// as it arrives (cut-through), as on a link: the first half of a Fetch
// response reaches the client while the broker still holds the second,
// with and without a round trip and receive windows; the whole response
// arrives intact. Store-and-forward would hold the first half until the
// second came. The proxy offers Fetch only up to maxFetchVersion, whose
// responses carry no broker address to rewrite.
func TestResponsesStream(t *testing.T) {
	const half = 1 << 20
	for _, tc := range []struct {
		name    string
		latency time.Duration
		windows bool
	}{
		{"loopback", 0, false},
		{"latency", 200 * time.Millisecond, false},
		{"latency and windows", 200 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newStallingBroker(t, half)
			p, err := New([]string{b.ln.Addr().String()})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			p.SetLatency(tc.latency)
			p.SetReceiveWindows(tc.windows)
			conn, err := net.DialTimeout("tcp", p.Addrs()[0], 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))

			av := kmsg.NewPtrApiVersionsRequest()
			av.SetVersion(3)
			av.ClientSoftwareName, av.ClientSoftwareVersion = "t", "1"
			if _, err := conn.Write(appendFrame(nil, requestFrame(av, 1, nil))); err != nil {
				t.Fatal(err)
			}
			frame, err := readFrame(conn)
			if err != nil {
				t.Fatalf("ApiVersions: %v (proxy errors: %v)", err, p.Err())
			}
			avr := kmsg.NewPtrApiVersionsResponse()
			avr.SetVersion(3)
			if err := avr.ReadFrom(frame[4:]); err != nil {
				t.Fatal(err)
			}
			for _, k := range avr.ApiKeys {
				if k.ApiKey == int16(kmsg.Fetch) && k.MaxVersion != maxFetchVersion {
					t.Errorf("Fetch offered up to v%d, want v%d (the broker offers v%d)", k.MaxVersion, maxFetchVersion, kmsg.NewPtrFetchRequest().MaxVersion())
				}
			}

			fetch := kmsg.NewPtrFetchRequest()
			fetch.SetVersion(maxFetchVersion)
			start := time.Now()
			if _, err := conn.Write(appendFrame(nil, requestFrame(fetch, 2, nil))); err != nil {
				t.Fatal(err)
			}
			// The size, the correlation ID and the first half, while the
			// broker holds the rest (it waits for release).
			got := make([]byte, 8+half)
			_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
			if _, err := io.ReadFull(conn, got); err != nil {
				t.Fatalf("the first half of the response, sent by the broker, did not reach the client: %v (store-and-forward?) (proxy errors: %v)", err, p.Err())
			}
			if took := time.Since(start); took < tc.latency {
				t.Errorf("the first bytes came %v after the request; want at least the round trip %v", took, tc.latency)
			}
			close(b.release)
			rest := make([]byte, half)
			if _, err := io.ReadFull(conn, rest); err != nil {
				t.Fatalf("the rest of the response: %v (proxy errors: %v)", err, p.Err())
			}
			if size := binary.BigEndian.Uint32(got); size != 4+2*half {
				t.Errorf("size %d, want %d", size, 4+2*half)
			}
			if corr := binary.BigEndian.Uint32(got[4:]); corr != 2 {
				t.Errorf("correlation ID %d, want 2", corr)
			}
			if !bytes.Equal(append(got[8:], rest...), fetchBody(2*half)) {
				t.Error("the response's body changed on its way")
			}
			waitFor(t, 5*time.Second, "ResponseBytes to count the response", func() (bool, string) {
				n := p.ResponseBytes()
				return n == int64(len(frame)+4+8+2*half), strconv.FormatInt(n, 10)
			})
			if err := p.Err(); err != nil {
				t.Error(err)
			}
		})
	}
}
