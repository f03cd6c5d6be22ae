package faultproxy

import "github.com/twmb/franz-go/pkg/kmsg"

// Ready-made hooks for the faults the e2e tests inject. Each does what a
// broker does when it answers with that error, so that clients take the
// same paths as against a real fault.

// TopicError is a hook for SetHook(kmsg.Metadata, ...): every Metadata
// response lists topic (when it lists it at all) with the topic-level error
// code, as a broker does for a topic whose leaders are not available (a
// controller move, a broker restart): name and topic ID kept, no
// partitions. Other topics pass unchanged.
func TopicError(topic string, code int16) Hook {
	return func(_ kmsg.Request, resp kmsg.Response) Action {
		r, ok := resp.(*kmsg.MetadataResponse)
		if !ok {
			return Pass
		}
		for i := range r.Topics {
			t := &r.Topics[i]
			if t.Topic != nil && *t.Topic == topic {
				t.ErrorCode = code
				t.Partitions = nil
			}
		}
		return Pass
	}
}

// ProduceError is a hook for SetAnswer(kmsg.Produce, ...): every partition
// of every Produce request is refused with the error code (base offset,
// log append time and log start offset -1, as a broker answers an error),
// and no record reaches the broker. Used with SetHook instead, the records
// are written but the client is told they were not.
func ProduceError(code int16) Hook {
	return func(req kmsg.Request, resp kmsg.Response) Action {
		pr, ok1 := req.(*kmsg.ProduceRequest)
		r, ok2 := resp.(*kmsg.ProduceResponse)
		if !ok1 || !ok2 {
			return Pass
		}
		r.Topics = r.Topics[:0]
		for _, t := range pr.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = code
				rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
		return Pass
	}
}

// OffsetFetchError is a hook for SetHook(kmsg.OffsetFetch, ...): every
// group of every OffsetFetch response fails with the error code and lists
// no offsets (v8+: each group's error; v2-v7: the response's error; v0-v1,
// which have no group error: each partition's error, offset -1).
func OffsetFetchError(code int16) Hook {
	return func(_ kmsg.Request, resp kmsg.Response) Action {
		r, ok := resp.(*kmsg.OffsetFetchResponse)
		if !ok {
			return Pass
		}
		switch {
		case r.Version >= 8:
			for i := range r.Groups {
				r.Groups[i].ErrorCode = code
				r.Groups[i].Topics = nil
			}
		case r.Version >= 2:
			r.ErrorCode = code
			r.Topics = nil
		default:
			for i := range r.Topics {
				for j := range r.Topics[i].Partitions {
					p := &r.Topics[i].Partitions[j]
					p.ErrorCode, p.Offset = code, -1
				}
			}
		}
		return Pass
	}
}
