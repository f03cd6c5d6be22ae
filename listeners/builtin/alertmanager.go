package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kmirror/kmirror/listeners"
)

// Alert names the alertmanager listener sends.
const (
	AlertTopicSetChanged = "KmirrorReplicatedSetChanged"
	AlertGroupSetChanged = "KmirrorGroupSetChanged"
)

// Defaults of the alertmanager listener.
const (
	DefaultResolveAfter = 5 * time.Minute
	// DefaultMaxAlerts is how many topic (or group) changes one call
	// turns into alerts of their own; beyond it, one summary alert per
	// kind of change (see Alertmanager).
	DefaultMaxAlerts = 100
	DefaultSeverity  = "info"
)

// alertBatch bounds the alerts in one POST.
const alertBatch = 500

// AlertmanagerOptions configure an Alertmanager listener.
type AlertmanagerOptions struct {
	// URL is Alertmanager's base URL (required), e.g. http://alertmanager:9093;
	// alerts go to URL/api/v2/alerts. A URL that already ends in
	// /api/v2/alerts is used as it is.
	URL string
	// ResolveAfter is how long an alert stays active (its endsAt is now
	// plus this); 0 means DefaultResolveAfter.
	ResolveAfter time.Duration
	// Severity is the severity label; "" means DefaultSeverity.
	Severity string
	// GeneratorURL, when set, is every alert's generatorURL (e.g. a link
	// to kmirror's dashboard).
	GeneratorURL string
	// Labels are added to every alert (e.g. cluster, team). They cannot
	// replace alertname, mirror, topic, group, change or severity.
	Labels map[string]string
	// InitialAlerts makes the first call for each mirror after start, which
	// lists every topic and group as added, send one alert per topic and
	// group too. By default that call sends nothing, so that restarting
	// kmirror does not page with its whole set.
	InitialAlerts bool
	// MaxAlerts bounds the alerts of one call: a call with more topic (or
	// group) changes than this sends one summary alert per kind of change
	// instead of one per topic; 0 means DefaultMaxAlerts.
	MaxAlerts int
	// Headers are added to every request (e.g. Authorization).
	Headers map[string]string
	// Timeout, RetryBudget and Client are as in WebhookOptions.
	Timeout     time.Duration
	RetryBudget time.Duration
	Client      *http.Client
}

// Alertmanager sends one alert per change to Alertmanager's v2 API
// (POST /api/v2/alerts): a topic that was added, removed or changed fires
//
//	labels:      alertname=KmirrorReplicatedSetChanged mirror=<mirror> topic=<upstream> change=added|removed|changed severity=<severity>
//	annotations: summary, description (upstream -> downstream, partitions, state), sequence
//	startsAt:    now
//	endsAt:      now + resolve_after
//
// and a group that was added or removed fires KmirrorGroupSetChanged with
// the label group instead of topic. A call with more changes than
// max_alerts (the first start of a mirror of 100,000 topics, a regex that
// suddenly matches thousands) fires one alert per kind of change instead,
// with topic (or group) "*", a count annotation and the first names in the
// description: Alertmanager is not flooded. The alerts resolve on their own at
// endsAt; the same change again before then extends the same alert. Errors
// and retries are as for Webhook.
//
// Config keys: url (required), resolve_after (default 5m), severity (default
// info), generator_url, label.<name> (any number), initial_alerts (default
// false), max_alerts (default 100), header.<Name>, timeout (default 10s),
// retry_budget (default 30s, 0 for one attempt).
type Alertmanager struct {
	mu           sync.Mutex
	p            *poster
	resolveAfter time.Duration
	severity     string
	generatorURL string
	labels       map[string]string
	initial      bool
	maxAlerts    int
	// seen records, per mirror, that a topics (or groups) call arrived.
	seenTopics, seenGroups map[string]bool
	now                    func() time.Time
}

// NewAlertmanager returns an Alertmanager listener.
func NewAlertmanager(o AlertmanagerOptions) (*Alertmanager, error) {
	a := &Alertmanager{}
	if err := a.apply(o); err != nil {
		return nil, err
	}
	return a, nil
}

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

var reservedLabels = map[string]bool{"alertname": true, "mirror": true, "topic": true, "group": true, "change": true, "severity": true}

func (a *Alertmanager) apply(o AlertmanagerOptions) error {
	if o.URL == "" {
		return errors.New("alertmanager listener: URL is required")
	}
	u := strings.TrimRight(o.URL, "/")
	if !strings.HasSuffix(u, "/api/v2/alerts") {
		u += "/api/v2/alerts"
	}
	for k := range o.Labels {
		if !labelName.MatchString(k) {
			return fmt.Errorf("alertmanager listener: label %q is not a valid label name", k)
		}
		if reservedLabels[k] {
			return fmt.Errorf("alertmanager listener: label %q is set by kmirror", k)
		}
	}
	if o.ResolveAfter == 0 {
		o.ResolveAfter = DefaultResolveAfter
	}
	if o.ResolveAfter < 0 {
		return errors.New("alertmanager listener: ResolveAfter is negative")
	}
	if o.Severity == "" {
		o.Severity = DefaultSeverity
	}
	if o.MaxAlerts < 0 {
		return errors.New("alertmanager listener: MaxAlerts is negative")
	}
	if o.MaxAlerts == 0 {
		o.MaxAlerts = DefaultMaxAlerts
	}
	p, err := newPoster(KindAlertmanager, u, o.Headers, o.Timeout, o.RetryBudget, o.Client)
	if err != nil {
		return err
	}
	a.mu.Lock()
	old := a.p
	a.p = p
	a.resolveAfter = o.ResolveAfter
	a.severity = o.Severity
	a.generatorURL = o.GeneratorURL
	a.labels = o.Labels
	a.initial = o.InitialAlerts
	a.maxAlerts = o.MaxAlerts
	a.mu.Unlock()
	old.close()
	return nil
}

// ParseAlertmanagerOptions reads an alertmanager listener's config map.
func ParseAlertmanagerOptions(config map[string]string) (AlertmanagerOptions, error) {
	r := newConfigReader(KindAlertmanager, config)
	var o AlertmanagerOptions
	o.URL, _ = r.str("url")
	if o.URL == "" {
		r.errorf("url: required (Alertmanager's base URL, e.g. http://alertmanager:9093)")
	}
	if d, set := r.duration("resolve_after"); set {
		if d == 0 {
			r.errorf("resolve_after: must be positive")
		}
		o.ResolveAfter = d
	}
	o.Severity, _ = r.str("severity")
	o.GeneratorURL, _ = r.str("generator_url")
	o.Labels = r.prefixed("label.")
	o.InitialAlerts, _ = r.boolean("initial_alerts")
	if n, set := r.integer("max_alerts"); set {
		if n < 1 {
			r.errorf("max_alerts: must be at least 1")
		}
		o.MaxAlerts = n
	}
	o.Headers = r.prefixed("header.")
	o.Timeout, o.RetryBudget = readHTTPTiming(r)
	return o, r.finish()
}

// Configure implements listeners.Configurer.
func (a *Alertmanager) Configure(_ context.Context, config map[string]string) error {
	o, err := ParseAlertmanagerOptions(config)
	if err != nil {
		return err
	}
	return a.apply(o)
}

// Close implements listeners.Closer: it drops idle connections.
func (a *Alertmanager) Close() error {
	a.mu.Lock()
	p := a.p
	a.mu.Unlock()
	p.close()
	return nil
}

// amAlert is an alert of Alertmanager's v2 API (postableAlert).
type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

type amSettings struct {
	p                      *poster
	resolveAfter           time.Duration
	severity, generatorURL string
	labels                 map[string]string
	maxAlerts              int
	now                    time.Time
}

// settings returns the current settings, and whether this call is the
// first of its kind for the mirror that should send nothing.
func (a *Alertmanager) settings(mirror string, groups bool) (amSettings, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.p == nil {
		return amSettings{}, false, errors.New("alertmanager listener: not configured (no url)")
	}
	seen := &a.seenTopics
	if groups {
		seen = &a.seenGroups
	}
	if *seen == nil {
		*seen = map[string]bool{}
	}
	first := !(*seen)[mirror]
	(*seen)[mirror] = true
	now := time.Now
	if a.now != nil {
		now = a.now
	}
	s := amSettings{p: a.p, resolveAfter: a.resolveAfter, severity: a.severity,
		generatorURL: a.generatorURL, labels: a.labels, maxAlerts: a.maxAlerts, now: now().UTC()}
	return s, first && !a.initial, nil
}

func (s amSettings) alert(labels, annotations map[string]string) amAlert {
	l := make(map[string]string, len(labels)+len(s.labels)+1)
	for k, v := range s.labels {
		l[k] = v
	}
	for k, v := range labels {
		l[k] = v
	}
	l["severity"] = s.severity
	return amAlert{Labels: l, Annotations: annotations, StartsAt: s.now,
		EndsAt: s.now.Add(s.resolveAfter), GeneratorURL: s.generatorURL}
}

// TopicsChanged implements listeners.TopicListener.
func (a *Alertmanager) TopicsChanged(ctx context.Context, c listeners.TopicsChange) error {
	s, skip, err := a.settings(c.Mirror, false)
	if err != nil || skip {
		return err
	}
	var alerts []amAlert
	if len(c.Added)+len(c.Removed)+len(c.Changed) > s.maxAlerts {
		summarize := func(change string, ts []listeners.Topic) {
			names := make([]string, len(ts))
			for i, t := range ts {
				names[i] = t.Upstream
			}
			if a, ok := s.summary(AlertTopicSetChanged, "topic", c.Mirror, change, names, c.Sequence); ok {
				alerts = append(alerts, a)
			}
		}
		summarize("added", c.Added)
		summarize("removed", c.Removed)
		summarize("changed", c.Changed)
		return s.send(ctx, alerts)
	}
	add := func(change string, ts []listeners.Topic) {
		for _, t := range ts {
			alerts = append(alerts, s.alert(
				map[string]string{"alertname": AlertTopicSetChanged, "mirror": c.Mirror, "topic": t.Upstream, "change": change},
				map[string]string{
					"summary":     fmt.Sprintf("Mirror %s: topic %s %s", c.Mirror, t.Upstream, topicVerb(change)),
					"description": topicDescription(change, t),
					"sequence":    fmt.Sprint(c.Sequence),
				}))
		}
	}
	add("added", c.Added)
	add("removed", c.Removed)
	add("changed", c.Changed)
	return s.send(ctx, alerts)
}

// GroupsChanged implements listeners.GroupListener.
func (a *Alertmanager) GroupsChanged(ctx context.Context, c listeners.GroupsChange) error {
	s, skip, err := a.settings(c.Mirror, true)
	if err != nil || skip {
		return err
	}
	var alerts []amAlert
	if len(c.Added)+len(c.Removed) > s.maxAlerts {
		summarize := func(change string, gs []listeners.Group) {
			names := make([]string, len(gs))
			for i, g := range gs {
				names[i] = g.Name
			}
			if a, ok := s.summary(AlertGroupSetChanged, "group", c.Mirror, change, names, c.Sequence); ok {
				alerts = append(alerts, a)
			}
		}
		summarize("added", c.Added)
		summarize("removed", c.Removed)
		return s.send(ctx, alerts)
	}
	add := func(change string, gs []listeners.Group) {
		for _, g := range gs {
			topics := append([]string(nil), g.Topics...)
			sort.Strings(topics)
			desc := fmt.Sprintf("Consumer group %s %s the groups whose offsets mirror %s translates", g.Name,
				map[string]string{"added": "joined", "removed": "left"}[change], c.Mirror)
			if len(topics) > 0 {
				desc += "; topics: " + strings.Join(topics, ", ")
			}
			alerts = append(alerts, s.alert(
				map[string]string{"alertname": AlertGroupSetChanged, "mirror": c.Mirror, "group": g.Name, "change": change},
				map[string]string{
					"summary":     fmt.Sprintf("Mirror %s: consumer group %s %s", c.Mirror, g.Name, change),
					"description": desc,
					"sequence":    fmt.Sprint(c.Sequence),
				}))
		}
	}
	add("added", c.Added)
	add("removed", c.Removed)
	return s.send(ctx, alerts)
}

// summaryNames is how many names a summary alert's description lists.
const summaryNames = 20

// summary is the one alert for many changes of one kind: label (topic or
// group) "*", the count in an annotation, the first names (sorted) in the
// description. No names, no alert.
func (s amSettings) summary(alertname, label, mirror, change string, names []string, seq uint64) (amAlert, bool) {
	if len(names) == 0 {
		return amAlert{}, false
	}
	sorted := slices.Sorted(slices.Values(names))
	shown := sorted[:min(len(sorted), summaryNames)]
	desc := fmt.Sprintf("%d %ss %s in one change of mirror %s: %s", len(names), label, change, mirror, strings.Join(shown, ", "))
	if len(names) > len(shown) {
		desc += fmt.Sprintf(" and %d more", len(names)-len(shown))
	}
	return s.alert(
		map[string]string{"alertname": alertname, "mirror": mirror, label: "*", "change": change},
		map[string]string{
			"summary":     fmt.Sprintf("Mirror %s: %d %ss %s", mirror, len(names), label, change),
			"description": desc,
			"count":       fmt.Sprint(len(names)),
			"sequence":    fmt.Sprint(seq),
		}), true
}

func topicVerb(change string) string {
	switch change {
	case "added":
		return "is now mirrored"
	case "removed":
		return "is no longer mirrored"
	default:
		return "changed"
	}
}

func topicDescription(change string, t listeners.Topic) string {
	var prefix string
	switch change {
	case "added":
		prefix = "Now mirrored"
	case "removed":
		prefix = "No longer mirrored"
	default:
		prefix = "Changed"
	}
	d := fmt.Sprintf("%s: %s -> %s, %d partitions, state %s", prefix, t.Upstream, t.Downstream, t.Partitions, t.State)
	if gaps := sourceGapsText(nil, t.SourceGaps); gaps != "" {
		d += "; " + gaps
	}
	if div := divergentText(nil, t.Divergent); div != "" {
		d += "; " + div
	}
	return d
}

// send POSTs the alerts in batches; a change without alerts sends nothing.
func (s amSettings) send(ctx context.Context, alerts []amAlert) error {
	for len(alerts) > 0 {
		n := min(len(alerts), alertBatch)
		body, err := json.Marshal(alerts[:n])
		if err != nil {
			return err
		}
		if err := s.p.post(ctx, body); err != nil {
			return err
		}
		alerts = alerts[n:]
	}
	return nil
}
