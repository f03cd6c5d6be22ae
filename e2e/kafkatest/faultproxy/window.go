package faultproxy

import (
	"net"
	"time"
)

// Receive windows (SetReceiveWindows).
//
// Across a real link a TCP sender may have at most the receiver's window
// unacknowledged: a byte is acknowledged a round trip after it left (half
// to arrive, half for the ACK to come back), so one connection carries at
// most one window per round trip, whatever the link's bandwidth. That is
// why a Java consumer with its default receive.buffer.bytes of 64 KiB
// crawls across an ocean. On loopback the round trip is microseconds and
// the window never binds, so the proxy, which holds the bytes for the
// round trip it adds, applies it itself: the broker's side of the link is
// the proxy reading the broker's response, and the response's bytes leave
// (and arrive half a round trip later) only as the window allows.
//
// The window is the one the client's own socket advertises to the proxy
// (TCP_INFO's tcpi_snd_wnd on the accepted connection, read before each
// chunk): fixed when the client set SO_RCVBUF (Java's receive.buffer.bytes),
// growing by the kernel's auto-tuning up to net.ipv4.tcp_rmem's maximum when
// it did not (Go's net package, so franz-go, and Java's -1), and smaller
// while the client leaves bytes unread, as on a real link.

const (
	// maxChunk is the most a response sends at once under a window: less
	// than a window, so that a connection's bytes leave through a round
	// trip rather than in one burst per round trip.
	maxChunk = 64 << 10
	// minWindow is the window assumed when the client advertises less (a
	// full buffer: its next read opens it; the proxy's write then blocks
	// in the kernel, which is TCP's own zero-window wait).
	minWindow = 4 << 10
)

// SetReceiveWindows makes every connection's responses keep to the receive
// window their client advertises, from now on, as TCP does across a link
// of the round trip SetLatency adds (see the comment above). Off by
// default; without latency it changes nothing.
func (p *Proxy) SetReceiveWindows(on bool) {
	p.mu.Lock()
	p.windows = on
	p.mu.Unlock()
}

// MaxInFlight returns the most response bytes that were on their way to a
// client at once, over one connection, under receive windows, since the
// proxy started or ResetMaxInFlight, and the window advertised then: how
// far the pacing let a connection go.
func (p *Proxy) MaxInFlight() (bytes, window int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxInFlight, p.maxInFlightWindow
}

// ResetMaxInFlight starts MaxInFlight over.
func (p *Proxy) ResetMaxInFlight() {
	p.mu.Lock()
	p.maxInFlight, p.maxInFlightWindow = 0, 0
	p.mu.Unlock()
}

// linkState is what writeResponses needs to send one response.
func (p *Proxy) linkState() (half time.Duration, windows bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency / 2, p.windows
}

func (p *Proxy) noteInFlight(n, wnd int) {
	p.mu.Lock()
	if n > p.maxInFlight {
		p.maxInFlight, p.maxInFlightWindow = n, wnd
	}
	p.mu.Unlock()
}

// sendWindowed writes a response frame (size included), which the broker
// sent at ready, to the client under its receive window: chunk by chunk,
// each leaving when the bytes sent over the round trip before it leave
// room for it, and written when it arrives, half a round trip later.
func (c *conn) sendWindowed(frame []byte, ready time.Time, half time.Duration) (int, error) {
	written := 0
	for len(frame) > 0 {
		wnd := minWindow
		if w, ok := advertisedWindow(c.client); ok && w > wnd {
			wnd = w
		}
		n := min(len(frame), maxChunk, wnd)
		at, inFlight := c.link.depart(ready, n, wnd, 2*half)
		c.p.noteInFlight(inFlight, wnd)
		if !sleepUntil(at.Add(half), c.done) {
			return written, net.ErrClosed
		}
		m, err := c.client.Write(frame[:n])
		written += m
		if err != nil {
			return written, err
		}
		frame = frame[n:]
	}
	return written, nil
}

// link is one connection's response direction under a receive window:
// the chunks that left within the last round trip, oldest first, and
// their bytes (unacknowledged yet).
type link struct {
	sent     []sentChunk
	inFlight int
}

type sentChunk struct {
	n  int
	at time.Time
}

// depart returns when n bytes, ready at ready, may leave under window wnd
// on a link of round trip rtt: the earliest time from ready at which the
// bytes that left less than a round trip before, and n, fit in the
// window (n itself at most wnd); and the bytes in flight then, n included.
// Departures never go back in time, so the chunks stay in order.
func (l *link) depart(ready time.Time, n, wnd int, rtt time.Duration) (time.Time, int) {
	t := ready
	if len(l.sent) > 0 {
		t = maxTime(t, l.sent[len(l.sent)-1].at)
	}
	for len(l.sent) > 0 {
		acked := l.sent[0].at.Add(rtt)
		if acked.After(t) {
			if l.inFlight+n <= wnd {
				break
			}
			t = acked // wait for the oldest chunk's acknowledgement
		}
		l.inFlight -= l.sent[0].n
		l.sent = l.sent[1:]
	}
	l.sent = append(l.sent, sentChunk{n: n, at: t})
	l.inFlight += n
	return t, l.inFlight
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// sleepUntil waits until at, or until done (false).
func sleepUntil(at time.Time, done <-chan struct{}) bool {
	d := time.Until(at)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
