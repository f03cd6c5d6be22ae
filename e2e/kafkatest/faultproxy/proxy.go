// Package faultproxy is a Kafka protocol proxy for tests that injects faults
// in front of any Kafka cluster: real Apache Kafka brokers (which have no
// fault hooks) as well as franz-go's kfake.
//
//	p, err := faultproxy.New([]string{"127.0.0.1:9092"}) // the real cluster
//	defer p.Close()
//	cl, _ := kgo.NewClient(kgo.SeedBrokers(p.Addrs()...)) // talks through the proxy
//	p.SetHook(kmsg.Metadata, faultproxy.TopicError("orders", kerr.LeaderNotAvailable.Code))
//	p.SetAnswer(kmsg.Produce, faultproxy.ProduceError(kerr.NotEnoughReplicas.Code))
//	p.SetHook(kmsg.Metadata, nil) // back to pass-through
//
// New asks the cluster for its brokers (a Metadata request) and listens on
// one loopback port per broker. Every connection to a port is forwarded to
// its broker, byte for byte, except the responses that carry broker
// addresses, which are rewritten so that clients keep talking through the
// proxy, and the requests and responses a hook asks for.
//
// # Hooks
//
// A Hook sees a decoded request and response and returns an Action. One
// hook per API key, set with SetHook or SetAnswer and removed by setting
// nil:
//
//   - SetHook: the request goes to the broker and the hook gets the broker's
//     response; what the hook changes in it is what the client receives.
//   - SetAnswer: the request never reaches the broker (a refused Produce
//     writes nothing); the hook gets an empty response of the request's
//     version (kmsg's Request.ResponseKind) and fills it in.
//
// Action Silence holds the response, and with it every later response on
// that connection (Kafka answers in order; their hooks run when they are
// released), until the hook is removed or replaced, when they are
// delivered, or until the proxy closes: a broker that went silent, or a
// slow one. A client that gives up on a request may keep using its
// connection, so its next requests there wait too; a fresh connection is
// held only when its own response is silenced. The client's own timeouts decide what it
// sees. Hooks run on the proxy's connection goroutines, several at once, and
// must be safe for that; a hook that blocks holds its connection.
//
// Hooks see requests as they arrive and responses as they leave, so a
// response hook set while a request is at the broker applies to that
// request's response. A response with nothing to rewrite and no hook for
// its key when its first bytes arrive from the broker passes through as it
// arrives (stream.go); a hook set after that does not see it.
//
// # A link
//
// SetLatency adds a round trip to every request, as a link between two
// sites does, each response's bytes leaving as they arrive (stream.go); SetReceiveWindows holds each connection to its client's TCP
// receive window per round trip, as such a link does (window.go); SetDown
// takes the link down (every connection reset, new ones too) until it is
// back.
//
// # Protocol rules relied on
//
//   - Framing: every request and response is an int32 size and that many
//     bytes.
//   - Request header (v0, v1, v2): api key int16, api version int16,
//     correlation ID int32, client ID (nullable string, int16 length);
//     header v2, used by flexible versions (KIP-482, kmsg's IsFlexible),
//     adds a tagged-field section. Response header: correlation ID, and for
//     flexible versions (header v1) a tagged-field section, except
//     ApiVersions responses, which always use header v0 so that a client
//     can read them before it knows the broker's versions.
//   - A broker answers the requests of one connection in order; clients
//     pipeline. The proxy keeps a queue of in-flight requests per connection
//     and checks that each response carries the correlation ID of the oldest
//     one. Produce with acks=0 gets no response, so it is not queued.
//   - Broker addresses reach clients in Metadata (brokers),
//     FindCoordinator (v0-v3 one coordinator, v4+ the batched Coordinators),
//     DescribeCluster (brokers; controllers, EndpointType 2, are not
//     proxied), and the KIP-951 leader hints (NodeEndpoints) of Produce v10+,
//     Fetch v16+, ShareFetch and ShareAcknowledge. Each is rewritten by node
//     ID to that node's proxy port; a node ID seen for the first time gets a
//     port of its own, and a node's upstream address follows what the
//     cluster advertises.
//   - ApiVersions responses are capped at the versions kmsg knows, so that
//     the proxy can decode every response it must rewrite, and Fetch at
//     v15, so that Fetch responses need no rewriting (stream.go). A response it
//     cannot decode closes the client's connection (never passed on
//     unrewritten: the client would leave the proxy) and is reported by Err.
//
// Everything else passes through unchanged and undecoded.
//
// Only PLAINTEXT listeners are supported: TLS hides the frames, and SASL's
// SaslHandshake v0 exchanges unframed tokens. The shared e2e clusters have a
// PLAINTEXT listener.
package faultproxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Action is what happens to a response after its hook ran.
type Action int

const (
	// Pass sends the response, as the hook left it, to the client.
	Pass Action = iota
	// Silence holds the response (and every later one on its connection)
	// until the hook is removed or replaced, or the proxy closes.
	Silence
)

// Hook sees one request and its response (see the package documentation
// for SetHook and SetAnswer). It may change resp in place.
type Hook func(req kmsg.Request, resp kmsg.Response) Action

// Timeouts of the proxy's own work.
const (
	metadataTimeout = 30 * time.Second // New's Metadata request
	dialTimeout     = 10 * time.Second // a connection to a broker
	closeTimeout    = 10 * time.Second // Close waiting for its goroutines
	queueLen        = 1024             // in-flight requests per connection
	maxErrs         = 20               // errors kept for Err
)

// Proxy forwards connections to a Kafka cluster, one loopback port per
// broker. Create it with New.
type Proxy struct {
	ctx    context.Context // cancelled by Close: ends dials
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loops and connections

	mu      sync.Mutex
	closed  bool
	nodes   map[int32]*node
	hooks   map[int16]*hook
	conns   map[*conn]struct{}
	errs    []error
	dropped int // errors beyond maxErrs
	// latency is the round trip the proxy adds (SetLatency): each
	// direction of every connection holds a frame latency/2 after it
	// arrived, frames overlapping as on a link.
	latency time.Duration
	// down: the link is down (SetDown); resets counts the client
	// connections reset because of it.
	down   bool
	resets int

	// windows: responses keep to their clients' receive windows
	// (SetReceiveWindows); maxInFlight and maxInFlightWindow, the most
	// bytes one connection had on their way and its window then.
	windows                        bool
	maxInFlight, maxInFlightWindow int

	// respBytes counts the bytes of the responses sent to clients.
	respBytes atomic.Int64
}

// ResponseBytes returns the bytes of every response the proxy sent to its
// clients so far, size prefixes included: what came over the link to
// them (the requests' bytes are not counted).
func (p *Proxy) ResponseBytes() int64 { return p.respBytes.Load() }

// SetDown takes the link down (true) or brings it back (false). While it
// is down, every client connection is reset (closed with a TCP RST, the
// frames in flight and held dropped): those open when it goes down, and
// each new one as soon as the proxy accepts it. Clients see their
// connections fail at once and their reconnects fail, as across a link
// whose failure the ends are told of (a router or firewall rejecting);
// a link that silently drops packets, which clients notice only by their
// timeouts, is not modelled. Once it is back, new connections pass again.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	p.down = down
	var cut []*conn
	if down {
		for c := range p.conns {
			cut = append(cut, c)
		}
		p.resets += len(cut)
	}
	p.mu.Unlock()
	for _, c := range cut {
		c.reset()
	}
}

// Resets returns how many client connections SetDown reset so far.
func (p *Proxy) Resets() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resets
}

// SetLatency makes the proxy add d to every round trip, from now on: each
// request reaches the broker d/2 after the client sent it, each response's
// bytes the client d/2 after the broker sent them (as they arrive: see
// stream.go). Frames do not wait for each other: requests a client
// pipelines stay overlapped, as on a real link.
// It models propagation delay; with SetReceiveWindows, the receive window
// that bounds each connection to a window per round trip too. Not
// bandwidth, congestion windows or loss.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// halfLatency is the delay of one direction.
func (p *Proxy) halfLatency() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency / 2
}

// delayUntil waits until at plus the proxy's one-way delay, or until done.
func (p *Proxy) delayUntil(at time.Time, done <-chan struct{}) bool {
	return sleepUntil(at.Add(p.halfLatency()), done)
}

// node is one broker and its proxy port.
type node struct {
	id       int32
	ln       net.Listener
	port     int32
	upstream string // host:port the cluster advertises; under Proxy.mu
}

type hook struct {
	fn     Hook
	answer bool          // SetAnswer: answered by the proxy, not forwarded
	gone   chan struct{} // closed when the hook is removed or replaced
}

// New learns the brokers of the cluster at upstream (bootstrap host:port
// addresses of a PLAINTEXT listener) with a Metadata request and listens on
// one loopback port per broker.
func New(upstream []string) (*Proxy, error) {
	if len(upstream) == 0 {
		return nil, errors.New("faultproxy: no upstream addresses")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(upstream...))
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), metadataTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // brokers only
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: Metadata request to %v: %w", upstream, err)
	}
	if len(resp.Brokers) == 0 {
		return nil, fmt.Errorf("faultproxy: the cluster at %v lists no brokers", upstream)
	}

	p := &Proxy{
		nodes: make(map[int32]*node),
		hooks: make(map[int16]*hook),
		conns: make(map[*conn]struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	for _, b := range resp.Brokers {
		p.mu.Lock()
		_, err := p.addNodeLocked(b.NodeID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
		p.mu.Unlock()
		if err != nil {
			p.Close()
			return nil, err
		}
	}
	return p, nil
}

// addNodeLocked opens the proxy port of a broker. p.mu is held.
func (p *Proxy) addNodeLocked(id int32, upstream string) (*node, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listening for broker %d (%s): %w", id, upstream, err)
	}
	n := &node{id: id, ln: ln, port: int32(ln.Addr().(*net.TCPAddr).Port), upstream: upstream}
	p.nodes[id] = n
	p.wg.Add(1)
	go p.accept(n)
	return n, nil
}

// Addrs returns the proxy's address for every broker it knows (bootstrap
// servers for clients), in node ID order.
func (p *Proxy) Addrs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]int32, 0, len(p.nodes))
	for id := range p.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	addrs := make([]string, 0, len(ids))
	for _, id := range ids {
		addrs = append(addrs, p.nodes[id].ln.Addr().String())
	}
	return addrs
}

// SetHook makes h see every later request of key and the broker's response
// to it; nil removes the hook of key (pass-through again). It replaces the
// key's hook or answer, which releases the responses held by its Silence.
func (p *Proxy) SetHook(key kmsg.Key, h Hook) { p.setHook(key, h, false) }

// SetAnswer makes the proxy answer every later request of key itself,
// without forwarding it: h gets the request and an empty response of its
// version to fill in. nil removes it, as with SetHook.
func (p *Proxy) SetAnswer(key kmsg.Key, h Hook) { p.setHook(key, h, true) }

func (p *Proxy) setHook(key kmsg.Key, fn Hook, answer bool) {
	if kmsg.RequestForKey(int16(key)) == nil {
		panic(fmt.Sprintf("faultproxy: api key %d is unknown to kmsg", key))
	}
	p.mu.Lock()
	old := p.hooks[int16(key)]
	if fn == nil {
		delete(p.hooks, int16(key))
	} else {
		p.hooks[int16(key)] = &hook{fn: fn, answer: answer, gone: make(chan struct{})}
	}
	p.mu.Unlock()
	if old != nil {
		close(old.gone)
	}
}

func (p *Proxy) hookFor(key int16) *hook {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hooks[key]
}

// Err returns the protocol errors the proxy met (a response it could not
// decode, a correlation ID out of order), nil if none. Each closed the
// client connection it happened on. Connections that end (a client or
// broker closing, a broker that is down) are not errors.
func (p *Proxy) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := slices.Clone(p.errs)
	if p.dropped > 0 {
		errs = append(errs, fmt.Errorf("faultproxy: and %d more errors", p.dropped))
	}
	return errors.Join(errs...)
}

func (p *Proxy) record(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errs) < maxErrs {
		p.errs = append(p.errs, err)
	} else {
		p.dropped++
	}
}

// Close closes every port and connection (held responses are dropped with
// their connections) and waits for all of its goroutines to end. It returns an error if they
// have not ended within 10s (a hook that does not return). Calling it again
// waits again.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.cancel()
		for _, n := range p.nodes {
			n.ln.Close()
		}
		for c := range p.conns {
			c.close()
		}
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(closeTimeout):
		return fmt.Errorf("faultproxy: connections still running %v after Close (a hook that does not return?)", closeTimeout)
	}
}

func (p *Proxy) accept(n *node) {
	defer p.wg.Done()
	for {
		c, err := n.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(n, c)
	}
}

// conn is one client connection and its connection to the broker.
type conn struct {
	p              *Proxy
	node           *node
	client, broker net.Conn

	// pending holds every request that gets a response, in order;
	// forwarded those of them sent to the broker.
	pending, forwarded chan *exchange
	// toBroker holds the requests to send, each with the time it
	// arrived, for writeRequests to send after the one-way delay.
	toBroker chan timedFrame
	// chunks carries the streamed responses' bytes (see readResponses),
	// in order, to writeResponses.
	chunks     chan chunk
	brokerGone chan struct{} // the broker's side ended
	done       chan struct{} // closed by close
	link       link          // the responses' bytes in flight, under windows
	once       sync.Once
}

// timedFrame is a request frame and when the client sent it.
type timedFrame struct {
	frame []byte
	at    time.Time
}

// exchange is one request and, once ready is closed, its response.
type exchange struct {
	h     reqHeader
	req   []byte // the request frame, header included
	ready chan struct{}

	resp   []byte    // from the broker
	respAt time.Time // when the broker's response arrived
	// streamed: the response passes through as it arrives, on the
	// connection's chunks, rather than in resp.
	streamed bool

	local kmsg.Response // from an answer hook
	act   Action
	hook  *hook
}

// reset closes the connection with a TCP RST to the client.
func (c *conn) reset() {
	resetConn(c.client)
	c.close()
}

// resetConn makes the next Close of a TCP connection send an RST (linger
// 0) rather than a FIN.
func resetConn(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}

func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		c.client.Close()
		c.broker.Close()
	})
}

func (p *Proxy) serve(n *node, client net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	upstream, down := n.upstream, p.down
	if down {
		p.resets++
	}
	p.mu.Unlock()
	if down {
		resetConn(client)
		client.Close()
		return
	}
	d := net.Dialer{Timeout: dialTimeout}
	broker, err := d.DialContext(p.ctx, "tcp", upstream)
	if err != nil {
		client.Close() // as if the broker were down: it is
		return
	}
	c := &conn{
		p: p, node: n, client: client, broker: broker,
		pending:    make(chan *exchange, queueLen),
		forwarded:  make(chan *exchange, queueLen),
		toBroker:   make(chan timedFrame, queueLen),
		chunks:     make(chan chunk, maxChunks),
		brokerGone: make(chan struct{}),
		done:       make(chan struct{}),
	}
	p.mu.Lock()
	if p.closed || p.down { // closed, or the link went down while dialing
		if p.down && !p.closed {
			p.resets++
			resetConn(client)
		}
		p.mu.Unlock()
		c.close()
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); c.readRequests() }()
	go func() { defer wg.Done(); c.writeRequests() }()
	go func() { defer wg.Done(); c.readResponses() }()
	go func() { defer wg.Done(); c.writeResponses() }()
	wg.Wait()

	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// fail records a protocol error of this connection and closes it.
func (c *conn) fail(err error) {
	c.p.mu.Lock()
	closing := c.p.closed
	c.p.mu.Unlock()
	if closing { // what Close cut short is no protocol error
		c.close()
		return
	}
	c.p.record(fmt.Errorf("faultproxy: broker %d (%s) via %s: %w", c.node.id, c.broker.RemoteAddr(), c.client.LocalAddr(), err))
	c.close()
}

func (c *conn) push(ch chan *exchange, x *exchange) bool {
	select {
	case ch <- x:
		return true
	case <-c.done:
		return false
	}
}

// readRequests reads the client's requests and forwards them, or has an
// answer hook answer them.
func (c *conn) readRequests() {
	defer c.close()
	for {
		frame, err := readFrame(c.client)
		if err != nil {
			if !isClosed(err) {
				c.fail(fmt.Errorf("reading a request: %w", err))
			}
			return
		}
		h, err := parseReqHeader(frame)
		if err != nil {
			c.fail(fmt.Errorf("request header: %w", err))
			return
		}
		answered := true
		if h.key == int16(kmsg.Produce) {
			acks, err := requestAcks(h, frame)
			if err != nil {
				c.fail(err)
				return
			}
			answered = acks != 0
		}
		x := &exchange{h: h, req: frame, ready: make(chan struct{})}

		if hk := c.p.hookFor(h.key); hk != nil && hk.answer {
			req, err := decodeRequest(h, frame)
			if err != nil {
				c.fail(err)
				return
			}
			resp := req.ResponseKind()
			x.act = hk.fn(req, resp)
			if !answered {
				continue
			}
			x.local, x.hook = resp, hk
			close(x.ready)
			if !c.push(c.pending, x) {
				return
			}
			continue
		}

		if answered && (!c.push(c.pending, x) || !c.push(c.forwarded, x)) {
			return
		}
		select {
		case c.toBroker <- timedFrame{frame: frame, at: time.Now()}:
		case <-c.done:
			return
		}
	}
}

// writeRequests sends the requests to the broker in order, each the
// one-way delay after it arrived.
func (c *conn) writeRequests() {
	defer c.close()
	for {
		var tf timedFrame
		select {
		case tf = <-c.toBroker:
		case <-c.done:
			return
		}
		if !c.p.delayUntil(tf.at, c.done) {
			return
		}
		if _, err := c.broker.Write(appendFrame(nil, tf.frame)); err != nil {
			return
		}
	}
}

// requestAcks reads the acks of a Produce request frame.
func requestAcks(h reqHeader, frame []byte) (int16, error) {
	off, err := reqBodyOffset(frame, h.version >= 9) // Produce is flexible from v9
	if err != nil {
		return 0, fmt.Errorf("Produce v%d request header: %w", h.version, err)
	}
	acks, err := produceAcks(frame[off:], h.version)
	if err != nil {
		return 0, fmt.Errorf("Produce v%d request acks: %w", h.version, err)
	}
	return acks, nil
}

// readResponses matches the broker's responses to the forwarded requests.
// A response the proxy need not change (no hook for its key, nothing to
// rewrite: streams) passes through as it arrives, chunk by chunk, as on a
// link; the others are read whole, for writeResponses to decode.
func (c *conn) readResponses() {
	defer close(c.brokerGone)
	br := bufio.NewReaderSize(c.broker, maxChunk)
	for {
		var hdr [8]byte // size, correlation ID
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if !isClosed(err) {
				c.fail(fmt.Errorf("reading a response: %w", err))
			}
			return
		}
		size := int32(binary.BigEndian.Uint32(hdr[:4]))
		if size < 4 || size > maxFrame {
			c.fail(fmt.Errorf("response frame size %d is out of range (4 bytes of correlation ID to %d)", size, maxFrame))
			return
		}
		corr := int32(binary.BigEndian.Uint32(hdr[4:]))
		var x *exchange
		select {
		case x = <-c.forwarded:
		default:
			c.fail(fmt.Errorf("response with correlation ID %d to no request in flight", corr))
			return
		}
		if x.h.corr != corr {
			c.fail(fmt.Errorf("response with correlation ID %d, want %d (%s v%d): out of order", corr, x.h.corr, kmsg.NameForKey(x.h.key), x.h.version))
			return
		}
		if !c.p.streams(x.h) {
			frame := make([]byte, size)
			copy(frame, hdr[4:])
			if _, err := io.ReadFull(br, frame[4:]); err != nil {
				if !isClosed(err) {
					c.fail(fmt.Errorf("reading a response: %w", err))
				}
				return
			}
			x.resp, x.respAt = frame, time.Now()
			close(x.ready)
			continue
		}
		x.streamed = true
		close(x.ready)
		if !c.stream(br, hdr, int(size)-4) {
			return
		}
	}
}

// writeResponses sends the responses to the client in request order,
// through the hooks and address rewriting.
func (c *conn) writeResponses() {
	defer c.close()
	for {
		var x *exchange
		select {
		case x = <-c.pending:
		case <-c.brokerGone:
			select { // deliver what is queued, then end
			case x = <-c.pending:
			default:
				return
			}
		case <-c.done:
			return
		}
		select {
		case <-x.ready:
		case <-c.brokerGone:
			select { // answered before the broker left?
			case <-x.ready:
			default:
				return
			}
		case <-c.done:
			return
		}
		if x.streamed {
			if !c.writeStream() {
				return
			}
			continue
		}
		half, windows := c.p.linkState()
		windowed := windows && half > 0 && !x.respAt.IsZero()
		if !windowed && !x.respAt.IsZero() && !c.p.delayUntil(x.respAt, c.done) {
			return
		}
		out, act, hk, err := c.p.respond(x)
		if err != nil {
			c.fail(err)
			return
		}
		if act == Silence && hk != nil {
			select {
			case <-hk.gone:
			case <-c.done:
				return
			}
		}
		var n int
		if windowed {
			n, err = c.sendWindowed(appendFrame(nil, out), x.respAt, half)
		} else {
			n, err = c.client.Write(appendFrame(nil, out))
		}
		c.p.respBytes.Add(int64(n))
		if err != nil {
			return
		}
	}
}

// respond returns the response frame for x (without the size), the hook's
// action and the hook.
func (p *Proxy) respond(x *exchange) ([]byte, Action, *hook, error) {
	if x.local != nil {
		return x.local.AppendTo(newResponseHeader(x.h, x.local)), x.act, x.hook, nil
	}
	hk := p.hookFor(x.h.key)
	if hk != nil && hk.answer {
		hk = nil // set after this request was forwarded
	}
	if hk == nil && !mustRewrite(x.h, x.resp) {
		return x.resp, Pass, nil, nil
	}
	resp, hdr, err := decodeResponse(x.h, x.resp)
	if err != nil {
		return nil, Pass, nil, err
	}
	changed, err := p.rewrite(resp)
	if err != nil {
		return nil, Pass, nil, err
	}
	act := Pass
	if hk != nil {
		req, err := decodeRequest(x.h, x.req)
		if err != nil {
			return nil, Pass, nil, err
		}
		act = hk.fn(req, resp)
		changed = true
	}
	if !changed {
		return x.resp, act, hk, nil
	}
	return resp.AppendTo(slices.Clone(hdr)), act, hk, nil
}

// rewrites reports whether the responses to h may carry what the proxy
// rewrites: broker addresses, or the versions of ApiVersions.
func rewrites(h reqHeader) bool {
	switch kmsg.Key(h.key) {
	case kmsg.Metadata, kmsg.FindCoordinator, kmsg.DescribeCluster, kmsg.ShareFetch, kmsg.ShareAcknowledge:
		return true
	case kmsg.Produce:
		return h.version >= 10
	case kmsg.Fetch:
		return h.version >= 16 // not offered (maxFetchVersion), unless a client insists
	case kmsg.ApiVersions:
		// Versions newer than kmsg's cannot be decoded and pass.
		return h.version <= kmsg.NewPtrApiVersionsRequest().MaxVersion()
	}
	return false
}

// mustRewrite reports whether resp, the response to h, must be decoded for
// what the proxy rewrites.
func mustRewrite(h reqHeader, resp []byte) bool {
	if !rewrites(h) {
		return false
	}
	if kmsg.Key(h.key) == kmsg.ApiVersions {
		// A broker answers a version it does not support with
		// UNSUPPORTED_VERSION in a v0 body (the client then retries
		// with a version it offers); there is nothing to cap in it.
		return len(resp) >= 6 && resp[4] == 0 && resp[5] == 0 // ErrorCode 0
	}
	return true
}

// rewrite points every broker address in resp at the proxy and caps
// ApiVersions; it reports whether it changed anything.
func (p *Proxy) rewrite(resp kmsg.Response) (bool, error) {
	changed := false
	var err error
	route := func(id int32, host *string, port *int32) {
		if id < 0 || err != nil {
			return // no node (an error answer)
		}
		*host, *port, err = p.route(id, *host, *port)
		changed = true
	}
	switch r := resp.(type) {
	case *kmsg.ApiVersionsResponse:
		for i := range r.ApiKeys {
			k := &r.ApiKeys[i]
			req := kmsg.RequestForKey(k.ApiKey)
			if req == nil {
				continue
			}
			most := req.MaxVersion()
			if k.ApiKey == int16(kmsg.Fetch) {
				most = min(most, maxFetchVersion)
			}
			if k.MaxVersion > most {
				k.MaxVersion = most
				changed = true
			}
		}
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			b := &r.Brokers[i]
			route(b.NodeID, &b.Host, &b.Port)
		}
	case *kmsg.FindCoordinatorResponse:
		if r.Version < 4 {
			if r.ErrorCode == 0 {
				route(r.NodeID, &r.Host, &r.Port)
			}
		}
		for i := range r.Coordinators {
			c := &r.Coordinators[i]
			if c.ErrorCode == 0 {
				route(c.NodeID, &c.Host, &c.Port)
			}
		}
	case *kmsg.DescribeClusterResponse:
		if r.EndpointType == 2 {
			break // controllers: clients reach them directly, not through broker ports
		}
		for i := range r.Brokers {
			b := &r.Brokers[i]
			route(b.NodeID, &b.Host, &b.Port)
		}
	case *kmsg.ProduceResponse:
		for i := range r.Brokers {
			b := &r.Brokers[i]
			route(b.NodeID, &b.Host, &b.Port)
		}
	case *kmsg.FetchResponse:
		for i := range r.Brokers {
			b := &r.Brokers[i]
			route(b.NodeID, &b.Host, &b.Port)
		}
	case *kmsg.ShareFetchResponse:
		for i := range r.NodeEndpoints {
			b := &r.NodeEndpoints[i]
			route(b.NodeID, &b.Host, &b.Port)
		}
	case *kmsg.ShareAcknowledgeResponse:
		for i := range r.NodeEndpoints {
			b := &r.NodeEndpoints[i]
			route(b.NodeID, &b.Host, &b.Port)
		}
	}
	return changed, err
}

// route returns the proxy's address for node id, which the cluster
// advertises at host:port: a new node gets a port, a known one follows
// the cluster's address.
func (p *Proxy) route(id int32, host string, port int32) (string, int32, error) {
	upstream := net.JoinHostPort(host, strconv.Itoa(int(port)))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return "", 0, errors.New("proxy closed")
	}
	n := p.nodes[id]
	if n == nil {
		var err error
		if n, err = p.addNodeLocked(id, upstream); err != nil {
			return "", 0, err
		}
	}
	n.upstream = upstream
	return "127.0.0.1", n.port, nil
}

// isClosed reports whether err only says that a connection ended.
func isClosed(err error) bool {
	var ne *net.OpError
	return errors.Is(err, net.ErrClosed) || errors.Is(err, context.Canceled) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne)
}
