package faultproxy

import (
	"context"
	"encoding/binary"
	"net"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestFrame encodes req as a client sends it (without the size): header
// v0/v1, or v2 with a tagged field when req is flexible.
func requestFrame(req kmsg.Request, corr int32, clientID *string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if clientID == nil {
		b = binary.BigEndian.AppendUint16(b, 0xffff)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(*clientID)))
		b = append(b, *clientID...)
	}
	if req.IsFlexible() {
		b = append(b, 1, 7, 3, 'x', 'y', 'z') // one tagged field: tag 7, 3 bytes
	}
	return req.AppendTo(b)
}

// responseFrame encodes resp as a broker sends it (without the size),
// with a tagged field in header v1.
func responseFrame(resp kmsg.Response, corr int32) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(corr))
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		b = append(b, 1, 2, 1, 'h')
	}
	return resp.AppendTo(b)
}

func TestRequestHeaderAndAcks(t *testing.T) {
	id := "client-1"
	txn := "txn-abc"
	for _, v := range []int16{3, 8, 9, 11, 13} {
		for _, acks := range []int16{-1, 0, 1} {
			for _, tx := range []*string{nil, &txn} {
				for _, cid := range []*string{nil, &id} {
					req := kmsg.NewPtrProduceRequest()
					req.SetVersion(v)
					req.Acks = acks
					req.TransactionID = tx
					req.TimeoutMillis = 1234
					frame := requestFrame(req, 42, cid)
					h, err := parseReqHeader(frame)
					if err != nil || h.key != 0 || h.version != v || h.corr != 42 {
						t.Fatalf("v%d: header %+v, %v", v, h, err)
					}
					got, err := requestAcks(h, frame)
					if err != nil || got != acks {
						t.Errorf("Produce v%d txn=%v clientID=%v: acks %d (%v), want %d", v, tx != nil, cid != nil, got, err, acks)
					}
					dec, err := decodeRequest(h, frame)
					if err != nil {
						t.Fatalf("v%d: %v", v, err)
					}
					if d := dec.(*kmsg.ProduceRequest); d.TimeoutMillis != 1234 || d.Acks != acks {
						t.Errorf("v%d: decoded %+v", v, d)
					}
				}
			}
		}
	}
}

func newTestProxy(t *testing.T) *Proxy {
	p := &Proxy{nodes: map[int32]*node{}, hooks: map[int16]*hook{}, conns: map[*conn]struct{}{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// TestRewriteEveryAddress: every response kind that carries broker
// addresses comes out with the proxy's port of the node, through the whole
// response path (header v0/v1, decode, encode).
func TestRewriteEveryAddress(t *testing.T) {
	p := newTestProxy(t)
	const host, port = "10.1.2.3", 9092
	check := func(name string, gotHost string, gotPort int32) {
		t.Helper()
		n := p.nodes[7]
		if n == nil {
			t.Fatalf("%s: node 7 got no port", name)
		}
		if gotHost != "127.0.0.1" || gotPort != n.port {
			t.Errorf("%s: address %s:%d, want 127.0.0.1:%d", name, gotHost, gotPort, n.port)
		}
		if n.upstream != net.JoinHostPort(host, strconv.Itoa(port)) {
			t.Errorf("%s: upstream %s", name, n.upstream)
		}
	}
	roundTrip := func(req kmsg.Request, resp kmsg.Response) kmsg.Response {
		t.Helper()
		resp.SetVersion(req.GetVersion())
		x := &exchange{req: requestFrame(req, 9, nil), resp: responseFrame(resp, 9)}
		x.h, _ = parseReqHeader(x.req)
		out, act, _, err := p.respond(x)
		if err != nil || act != Pass {
			t.Fatalf("%s v%d: %v %v", kmsg.NameForKey(req.Key()), req.GetVersion(), act, err)
		}
		if corr := int32(binary.BigEndian.Uint32(out)); corr != 9 {
			t.Fatalf("correlation ID %d", corr)
		}
		got, hdr, err := decodeResponse(x.h, out)
		if err != nil {
			t.Fatalf("%s v%d: decoding the rewritten response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
		}
		if string(hdr) != string(x.resp[:len(hdr)]) {
			t.Errorf("header changed: %x, was %x", hdr, x.resp[:len(hdr)])
		}
		return got
	}

	for _, v := range []int16{1, 9, 12, 13} {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		resp := kmsg.NewPtrMetadataResponse()
		resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 7, Host: host, Port: port}}
		got := roundTrip(req, resp).(*kmsg.MetadataResponse)
		check("Metadata v"+strconv.Itoa(int(v)), got.Brokers[0].Host, got.Brokers[0].Port)
	}
	for _, v := range []int16{0, 3} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(v)
		resp := kmsg.NewPtrFindCoordinatorResponse()
		resp.NodeID, resp.Host, resp.Port = 7, host, port
		got := roundTrip(req, resp).(*kmsg.FindCoordinatorResponse)
		check("FindCoordinator v"+strconv.Itoa(int(v)), got.Host, got.Port)
	}
	for _, v := range []int16{4, 6} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(v)
		resp := kmsg.NewPtrFindCoordinatorResponse()
		resp.Coordinators = []kmsg.FindCoordinatorResponseCoordinator{
			{Key: "g1", NodeID: 7, Host: host, Port: port},
			{Key: "g2", NodeID: -1, Host: "", Port: -1, ErrorCode: 15}, // COORDINATOR_NOT_AVAILABLE
		}
		got := roundTrip(req, resp).(*kmsg.FindCoordinatorResponse)
		check("FindCoordinator v"+strconv.Itoa(int(v)), got.Coordinators[0].Host, got.Coordinators[0].Port)
		if c := got.Coordinators[1]; c.NodeID != -1 || c.Host != "" || c.Port != -1 {
			t.Errorf("an error coordinator was rewritten: %+v", c)
		}
	}
	{
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(1)
		resp := kmsg.NewPtrDescribeClusterResponse()
		resp.EndpointType = 1
		resp.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: 7, Host: host, Port: port}}
		got := roundTrip(req, resp).(*kmsg.DescribeClusterResponse)
		check("DescribeCluster", got.Brokers[0].Host, got.Brokers[0].Port)
	}
	{
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(10)
		req.Acks = -1
		resp := kmsg.NewPtrProduceResponse()
		resp.Brokers = []kmsg.ProduceResponseBroker{{NodeID: 7, Host: host, Port: port}}
		got := roundTrip(req, resp).(*kmsg.ProduceResponse)
		check("Produce v10", got.Brokers[0].Host, got.Brokers[0].Port)
	}
	{
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(16)
		resp := kmsg.NewPtrFetchResponse()
		resp.Brokers = []kmsg.FetchResponseBroker{{NodeID: 7, Host: host, Port: port}}
		got := roundTrip(req, resp).(*kmsg.FetchResponse)
		check("Fetch v16", got.Brokers[0].Host, got.Brokers[0].Port)
	}
	{
		req := kmsg.NewPtrShareFetchRequest()
		resp := kmsg.NewPtrShareFetchResponse()
		resp.NodeEndpoints = []kmsg.ShareFetchResponseNodeEndpoint{{NodeID: 7, Host: host, Port: port}}
		got := roundTrip(req, resp).(*kmsg.ShareFetchResponse)
		check("ShareFetch", got.NodeEndpoints[0].Host, got.NodeEndpoints[0].Port)
	}
	{
		req := kmsg.NewPtrShareAcknowledgeRequest()
		resp := kmsg.NewPtrShareAcknowledgeResponse()
		resp.NodeEndpoints = []kmsg.ShareAcknowledgeResponseNodeEndpoint{{NodeID: 7, Host: host, Port: port}}
		got := roundTrip(req, resp).(*kmsg.ShareAcknowledgeResponse)
		check("ShareAcknowledge", got.NodeEndpoints[0].Host, got.NodeEndpoints[0].Port)
	}
	if len(p.nodes) != 1 {
		t.Errorf("%d nodes, want 1 (node 7)", len(p.nodes))
	}

	// ApiVersions (header v0 even when flexible): versions above kmsg's
	// are capped, others kept.
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 3, MinVersion: 0, MaxVersion: 99},
		{ApiKey: 1, MinVersion: 4, MaxVersion: 5},
	}
	got := roundTrip(req, resp).(*kmsg.ApiVersionsResponse)
	if m := got.ApiKeys[0].MaxVersion; m != kmsg.NewPtrMetadataRequest().MaxVersion() {
		t.Errorf("Metadata max version %d, want kmsg's %d", m, kmsg.NewPtrMetadataRequest().MaxVersion())
	}
	if m := got.ApiKeys[1].MaxVersion; m != 5 {
		t.Errorf("Fetch max version %d, want 5 as the broker said", m)
	}
}

// TestPassThroughUntouched: a response nothing applies to is the broker's
// bytes, undecoded (here: bytes kmsg could not even decode).
func TestPassThroughUntouched(t *testing.T) {
	p := newTestProxy(t)
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(7)
	x := &exchange{req: requestFrame(req, 5, nil), resp: []byte{0, 0, 0, 5, 0xde, 0xad}}
	x.h, _ = parseReqHeader(x.req)
	out, act, _, err := p.respond(x)
	if err != nil || act != Pass || string(out) != string(x.resp) {
		t.Errorf("got %x %v %v, want the broker's bytes", out, act, err)
	}
}
