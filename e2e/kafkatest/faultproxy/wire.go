package faultproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxFrame bounds one request or response. Kafka's own limit on requests is
// socket.request.max.bytes (100 MiB by default); a larger size prefix means
// the stream is not Kafka (or not PLAINTEXT: a TLS record starts with 0x16
// 0x03, which reads as a size of about 369 MB).
const maxFrame = 256 << 20

// readFrame reads one size-prefixed frame and returns it without the size.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > maxFrame {
		return nil, fmt.Errorf("frame size %d is out of range (not a PLAINTEXT Kafka stream?)", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// appendFrame appends the size prefix and the frame.
func appendFrame(dst, frame []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(frame)))
	return append(dst, frame...)
}

// reqHeader is the fixed start of every request header (v0, v1 and v2):
// api key, api version, correlation ID.
type reqHeader struct {
	key     int16
	version int16
	corr    int32
}

var errShort = errors.New("frame too short")

func parseReqHeader(frame []byte) (reqHeader, error) {
	if len(frame) < 8 {
		return reqHeader{}, errShort
	}
	return reqHeader{
		key:     int16(binary.BigEndian.Uint16(frame[0:])),
		version: int16(binary.BigEndian.Uint16(frame[2:])),
		corr:    int32(binary.BigEndian.Uint32(frame[4:])),
	}, nil
}

// reqBodyOffset returns where the request body starts: after api key,
// version and correlation ID (8 bytes), the client ID (a nullable string
// with an int16 length, in every header version) and, for flexible
// requests (header v2), the header's tagged fields.
func reqBodyOffset(frame []byte, flexible bool) (int, error) {
	if len(frame) < 10 {
		return 0, errShort
	}
	off := 8
	n := int(int16(binary.BigEndian.Uint16(frame[off:])))
	off += 2
	if n > 0 {
		off += n
	}
	if off > len(frame) {
		return 0, errShort
	}
	if flexible {
		end, err := skipTags(frame, off)
		if err != nil {
			return 0, err
		}
		off = end
	}
	return off, nil
}

// respBodyOffset returns where the response body starts: after the
// correlation ID and, for response header v1 (flexible responses except
// ApiVersions, whose response header is always v0 so that a client can read
// it before it knows the broker's versions), the header's tagged fields.
func respBodyOffset(frame []byte, key int16, flexible bool) (int, error) {
	if len(frame) < 4 {
		return 0, errShort
	}
	if !flexible || key == int16(kmsg.ApiVersions) {
		return 4, nil
	}
	return skipTags(frame, 4)
}

// skipTags skips a tagged-field section (KIP-482): an unsigned varint count,
// then per field an unsigned varint tag, an unsigned varint size and the
// data.
func skipTags(b []byte, off int) (int, error) {
	count, err := uvarint(b, &off)
	if err != nil {
		return 0, err
	}
	for range count {
		if _, err := uvarint(b, &off); err != nil { // tag
			return 0, err
		}
		size, err := uvarint(b, &off)
		if err != nil {
			return 0, err
		}
		if uint64(len(b)-off) < size {
			return 0, errShort
		}
		off += int(size)
	}
	return off, nil
}

func uvarint(b []byte, off *int) (uint64, error) {
	if *off > len(b) {
		return 0, errShort
	}
	v, n := binary.Uvarint(b[*off:])
	if n <= 0 {
		return 0, errors.New("bad unsigned varint")
	}
	*off += n
	return v, nil
}

// produceAcks reads the acks of a Produce request body (after the header):
// v3+ starts with the transactional ID (a nullable string, compact from v9),
// then comes acks (int16) in every version.
func produceAcks(body []byte, version int16) (int16, error) {
	off := 0
	switch {
	case version >= 9:
		n, err := uvarint(body, &off) // length+1, 0 is null
		if err != nil {
			return 0, err
		}
		if n > 1 {
			off += int(n - 1)
		}
	case version >= 3:
		if len(body) < 2 {
			return 0, errShort
		}
		n := int(int16(binary.BigEndian.Uint16(body)))
		off = 2
		if n > 0 {
			off += n
		}
	}
	if off < 0 || off+2 > len(body) {
		return 0, errShort
	}
	return int16(binary.BigEndian.Uint16(body[off:])), nil
}

// decodeRequest decodes a request frame (header included) with kmsg.
func decodeRequest(h reqHeader, frame []byte) (kmsg.Request, error) {
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		return nil, fmt.Errorf("api key %d is unknown to kmsg", h.key)
	}
	if h.version > req.MaxVersion() {
		return nil, fmt.Errorf("%s v%d is newer than kmsg's v%d", kmsg.NameForKey(h.key), h.version, req.MaxVersion())
	}
	req.SetVersion(h.version)
	off, err := reqBodyOffset(frame, req.IsFlexible())
	if err != nil {
		return nil, fmt.Errorf("%s v%d request header: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	if err := req.ReadFrom(frame[off:]); err != nil {
		return nil, fmt.Errorf("decoding %s v%d request: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	return req, nil
}

// decodeResponse decodes a response frame (header included) to the request
// h and returns it with the header bytes, which are kept as they came.
func decodeResponse(h reqHeader, frame []byte) (kmsg.Response, []byte, error) {
	resp := kmsg.ResponseForKey(h.key)
	if resp == nil {
		return nil, nil, fmt.Errorf("api key %d is unknown to kmsg", h.key)
	}
	if h.version > resp.MaxVersion() {
		return nil, nil, fmt.Errorf("%s v%d is newer than kmsg's v%d", kmsg.NameForKey(h.key), h.version, resp.MaxVersion())
	}
	resp.SetVersion(h.version)
	off, err := respBodyOffset(frame, h.key, resp.IsFlexible())
	if err != nil {
		return nil, nil, fmt.Errorf("%s v%d response header: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	if err := resp.ReadFrom(frame[off:]); err != nil {
		return nil, nil, fmt.Errorf("decoding %s v%d response: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	return resp, frame[:off], nil
}

// newResponseHeader is the header of a response the proxy makes itself: the
// correlation ID and, for header v1, an empty tagged-field section.
func newResponseHeader(h reqHeader, resp kmsg.Response) []byte {
	hdr := binary.BigEndian.AppendUint32(nil, uint32(h.corr))
	if resp.IsFlexible() && h.key != int16(kmsg.ApiVersions) {
		hdr = append(hdr, 0)
	}
	return hdr
}
