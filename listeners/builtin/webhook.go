package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/kmirror/kmirror/listeners"
)

// WebhookOptions configure a Webhook listener.
type WebhookOptions struct {
	// URL receives the POSTs (required, http or https).
	URL string
	// Headers are added to every request (e.g. Authorization).
	Headers map[string]string
	// Timeout bounds one attempt; 0 means DefaultHTTPTimeout.
	Timeout time.Duration
	// RetryBudget bounds all attempts of one call together (and the call's
	// context bounds it too); 0 means DefaultRetryBudget, negative means a
	// single attempt.
	RetryBudget time.Duration
	// Client sends the requests; nil means a client of the listener's own.
	Client *http.Client
	// ChangesOnly leaves the full current set (topics, groups) out of the
	// body: with 100,000 topics it is megabytes per call, resent whenever
	// one topic changes.
	ChangesOnly bool
}

// Webhook POSTs one JSON document per call to a URL:
//
//	{"kind": "topics", "mirror": "east-to-west", "sequence": 4, "time": "...",
//	 "added": [topic...], "removed": [topic...], "changed": [topic...], "topics": [topic...]}
//	{"kind": "groups", "mirror": "east-to-west", "sequence": 2, "time": "...",
//	 "added": [group...], "removed": [group...], "groups": [group...]}
//
// where a topic is {"upstream", "downstream", "partitions", "state",
// "metadata"} and a group {"name", "topics"}; topics and groups are the full
// current sets. A 2xx answer is success. Network errors, timeouts, 429 and
// 5xx are retried with exponential backoff (honouring Retry-After) within
// the retry budget, after which the call fails and the dispatcher retries it
// later, coalesced with anything newer. Any other status fails the call at
// once with a *StatusError (matching ErrPermanent) carrying the status and
// the first 512 bytes of the body. Errors name the URL's scheme and host
// only, as webhook paths often hold a token.
//
// Config keys: url (required), header.<Name> (any number), timeout (per
// attempt, default 10s), retry_budget (default 30s, 0 for one attempt),
// changes_only (default false: leave topics and groups, the full sets, out).
type Webhook struct {
	mu          sync.Mutex
	p           *poster
	changesOnly bool
}

// NewWebhook returns a Webhook listener.
func NewWebhook(o WebhookOptions) (*Webhook, error) {
	w := &Webhook{}
	if err := w.apply(o); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Webhook) apply(o WebhookOptions) error {
	if o.URL == "" {
		return errors.New("webhook listener: URL is required")
	}
	p, err := newPoster(KindWebhook, o.URL, o.Headers, o.Timeout, o.RetryBudget, o.Client)
	if err != nil {
		return err
	}
	w.mu.Lock()
	old := w.p
	w.p, w.changesOnly = p, o.ChangesOnly
	w.mu.Unlock()
	old.close()
	return nil
}

// ParseWebhookOptions reads a webhook listener's config map (keys url,
// header.<Name>, timeout, retry_budget).
func ParseWebhookOptions(config map[string]string) (WebhookOptions, error) {
	r := newConfigReader(KindWebhook, config)
	var o WebhookOptions
	o.URL, _ = r.str("url")
	if o.URL == "" {
		r.errorf("url: required")
	}
	o.Headers = r.prefixed("header.")
	o.Timeout, o.RetryBudget = readHTTPTiming(r)
	o.ChangesOnly, _ = r.boolean("changes_only")
	return o, r.finish()
}

// readHTTPTiming reads timeout and retry_budget; retry_budget 0 becomes a
// negative budget (one attempt).
func readHTTPTiming(r *configReader) (timeout, budget time.Duration) {
	timeout, _ = r.duration("timeout")
	if t, set := r.duration("retry_budget"); set {
		budget = t
		if t == 0 {
			budget = -1
		}
	}
	return timeout, budget
}

// Configure implements listeners.Configurer.
func (w *Webhook) Configure(_ context.Context, config map[string]string) error {
	o, err := ParseWebhookOptions(config)
	if err != nil {
		return err
	}
	return w.apply(o)
}

// Close implements listeners.Closer: it drops idle connections.
func (w *Webhook) Close() error {
	w.mu.Lock()
	p := w.p
	w.mu.Unlock()
	p.close()
	return nil
}

// poster returns the poster and whether bodies leave the full set out.
func (w *Webhook) poster() (*poster, bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.p == nil {
		return nil, false, errors.New("webhook listener: not configured (no url)")
	}
	return w.p, w.changesOnly, nil
}

type webhookTopics struct {
	Kind     string      `json:"kind"`
	Mirror   string      `json:"mirror"`
	Sequence uint64      `json:"sequence"`
	Time     time.Time   `json:"time"`
	Added    []topicJSON `json:"added"`
	Removed  []topicJSON `json:"removed"`
	Changed  []topicJSON `json:"changed"`
	Topics   []topicJSON `json:"topics,omitzero"` // nil with changes_only
}

type webhookGroups struct {
	Kind     string      `json:"kind"`
	Mirror   string      `json:"mirror"`
	Sequence uint64      `json:"sequence"`
	Time     time.Time   `json:"time"`
	Added    []groupJSON `json:"added"`
	Removed  []groupJSON `json:"removed"`
	Groups   []groupJSON `json:"groups,omitzero"` // nil with changes_only
}

// TopicsChanged implements listeners.TopicListener.
func (w *Webhook) TopicsChanged(ctx context.Context, c listeners.TopicsChange) error {
	p, changesOnly, err := w.poster()
	if err != nil {
		return err
	}
	doc := webhookTopics{
		Kind: "topics", Mirror: c.Mirror, Sequence: c.Sequence, Time: time.Now().UTC(),
		Added: topicsJSON(c.Added), Removed: topicsJSON(c.Removed), Changed: topicsJSON(c.Changed),
	}
	if !changesOnly {
		doc.Topics = topicsJSON(c.Topics)
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return p.post(ctx, body)
}

// GroupsChanged implements listeners.GroupListener.
func (w *Webhook) GroupsChanged(ctx context.Context, c listeners.GroupsChange) error {
	p, changesOnly, err := w.poster()
	if err != nil {
		return err
	}
	doc := webhookGroups{
		Kind: "groups", Mirror: c.Mirror, Sequence: c.Sequence, Time: time.Now().UTC(),
		Added: groupsJSON(c.Added), Removed: groupsJSON(c.Removed),
	}
	if !changesOnly {
		doc.Groups = groupsJSON(c.Groups)
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return p.post(ctx, body)
}
