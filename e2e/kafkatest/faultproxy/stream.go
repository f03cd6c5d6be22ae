package faultproxy

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"time"
)

// Responses pass through as they arrive (cut-through).
//
// A link delivers each byte a one-way delay after it was sent: the first
// bytes of a 50 MB Fetch response reach the client while the broker is
// still sending the rest. A proxy that read each response whole before
// forwarding it would add the time to read the whole response to every
// one (store-and-forward), and a client that times its fetches would see
// a slower link than a real one. So every response the proxy need not
// change (streams) is read in chunks of at most maxChunk and each chunk is
// sent on its way as it arrives; only the responses that carry what the
// proxy rewrites, or that a hook is set for when they arrive, are read
// whole.
//
// Fetch is offered up to maxFetchVersion for that: Fetch v16 (KIP-951)
// adds leader hints with broker addresses at the end of the response,
// which would need every Fetch response whole to rewrite. Clients lose
// only the hints: they learn a partition's new leader from Metadata, as
// before v16.

// maxFetchVersion is the newest Fetch version the proxy offers: the last
// one without broker addresses in its response.
const maxFetchVersion = 15

// maxChunks bounds the chunks a connection holds on their way; beyond it
// the proxy stops reading the broker, as a full TCP window would. A chunk
// is what one read brought (up to maxChunk): on loopback, while a broker
// sends faster than the proxy reads, whole 64 KiB chunks (256 MiB in all,
// more than half a 150 ms round trip carries at loopback speed); smaller
// ones when the broker sends slower, and then fewer of them a second.
const maxChunks = 4096

// chunk is a piece of a streamed response: b (in buf, from chunkPool), the
// time it arrived from the broker, and whether it ends the response.
type chunk struct {
	buf  *[maxChunk]byte
	b    []byte
	at   time.Time
	last bool
}

var chunkPool = sync.Pool{New: func() any { return new([maxChunk]byte) }}

// streams reports whether the response to h passes through as it arrives:
// nothing in it to rewrite, and no hook for its key now.
func (p *Proxy) streams(h reqHeader) bool {
	return !rewrites(h) && p.hookFor(h.key) == nil
}

// stream passes one response on to writeResponses as it arrives: its
// header (hdr), then the rest (rest bytes) in chunks of what each read
// brought, at most maxChunk, each with the time it arrived. False: the
// connection ended.
func (c *conn) stream(br *bufio.Reader, hdr [8]byte, rest int) bool {
	first := true
	for first || rest > 0 {
		buf := chunkPool.Get().(*[maxChunk]byte)
		b := buf[:0]
		if first {
			b = append(b, hdr[:]...)
		}
		// What has arrived, up to the chunk's room: a broker that pauses
		// mid-response must not hold back the bytes before the pause.
		n, err := br.Read(buf[len(b) : len(b)+min(rest, maxChunk-len(b))])
		if err != nil {
			chunkPool.Put(buf)
			if !isClosed(err) {
				c.fail(fmt.Errorf("reading a response: %w", err))
			}
			return false
		}
		b = buf[:len(b)+n]
		rest -= n
		first = false
		select {
		case c.chunks <- chunk{buf: buf, b: b, at: time.Now(), last: rest == 0}:
		case <-c.done:
			chunkPool.Put(buf)
			return false
		}
	}
	return true
}

// writeStream sends one streamed response to the client: each chunk the
// one-way delay after it arrived (under the client's receive window when
// SetReceiveWindows is on). False: the connection ended, or the broker
// left before the response's end (the client gets what arrived, then the
// connection closes, as a broker's crash mid-response would).
func (c *conn) writeStream() bool {
	for {
		var ch chunk
		select {
		case ch = <-c.chunks:
		case <-c.done:
			return false
		case <-c.brokerGone:
			select { // what the broker sent before it left
			case ch = <-c.chunks:
			default:
				return false
			}
		}
		half, windows := c.p.linkState()
		var n int
		var err error
		if windows && half > 0 {
			n, err = c.sendWindowed(ch.b, ch.at, half)
		} else if c.p.delayUntil(ch.at, c.done) {
			n, err = c.client.Write(ch.b)
		} else {
			err = net.ErrClosed
		}
		chunkPool.Put(ch.buf)
		c.p.respBytes.Add(int64(n))
		if err != nil {
			return false
		}
		if ch.last {
			return true
		}
	}
}
