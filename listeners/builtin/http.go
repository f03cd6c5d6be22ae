package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults of the webhook and alertmanager listeners.
const (
	// DefaultHTTPTimeout bounds one HTTP attempt.
	DefaultHTTPTimeout = 10 * time.Second
	// DefaultRetryBudget bounds all attempts of one call together.
	DefaultRetryBudget = 30 * time.Second
)

// ErrPermanent is matched (errors.Is) by the error of a call that the
// receiver refused with a status that retrying will not change: any status
// other than 2xx, 429 and 5xx, typically a 4xx. The dispatcher still retries
// it later (with a newer state); it is there for logs and tests.
var ErrPermanent = errors.New("permanent error")

// StatusError is a non-2xx answer. The webhook and alertmanager listeners
// return it wrapped, after their retries when it is retryable.
type StatusError struct {
	// StatusCode and Status are the response's ("404", "404 Not Found").
	StatusCode int
	Status     string
	// Body is the start of the response body, at most 512 bytes.
	Body string
	// RetryAfter is the response's Retry-After, when it had a valid one.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	msg := "HTTP " + e.Status
	if b := strings.TrimSpace(e.Body); b != "" {
		msg += ": " + b
	}
	return msg
}

// Retryable reports whether the status may change by retrying (429 and 5xx).
func (e *StatusError) Retryable() bool {
	return e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
}

// Is makes errors.Is(err, ErrPermanent) true for statuses that are not
// retryable.
func (e *StatusError) Is(target error) bool {
	return target == ErrPermanent && !e.Retryable()
}

const maxErrorBody = 512

// poster sends one JSON body to a URL, retrying network errors, 429 and 5xx
// with exponential backoff within a budget.
type poster struct {
	name       string // "webhook", "alertmanager": prefix of errors
	client     *http.Client
	ownClient  bool
	url        string
	safeURL    string // scheme://host only: paths and queries often hold tokens
	headers    http.Header
	timeout    time.Duration
	budget     time.Duration // < 0: one attempt
	minBackoff time.Duration
	maxBackoff time.Duration
}

func newPoster(name, rawURL string, headers map[string]string, timeout, budget time.Duration, client *http.Client) (*poster, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s listener: URL %q is not an http(s) URL", name, redactURL(rawURL))
	}
	p := &poster{
		name:       name,
		client:     client,
		url:        u.String(),
		safeURL:    u.Scheme + "://" + u.Host,
		headers:    http.Header{},
		timeout:    timeout,
		budget:     budget,
		minBackoff: 100 * time.Millisecond,
		maxBackoff: 5 * time.Second,
	}
	if p.timeout == 0 {
		p.timeout = DefaultHTTPTimeout
	}
	if p.budget == 0 {
		p.budget = DefaultRetryBudget
	}
	for k, v := range headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("%s listener: invalid header %q", name, k)
		}
		p.headers.Set(k, v)
	}
	if p.client == nil {
		p.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		p.ownClient = true
	}
	return p, nil
}

// redactURL keeps the scheme and host of a URL for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "<invalid URL>"
	}
	return u.Scheme + "://" + u.Host
}

func (p *poster) close() {
	if p != nil && p.ownClient {
		p.client.CloseIdleConnections()
	}
}

// post sends body, retrying within the budget. It returns nil on a 2xx, at
// once on a permanent status, and the last error once the budget, or ctx, is
// spent.
func (p *poster) post(ctx context.Context, body []byte) error {
	// The first attempt gets the whole timeout; retries start only within
	// the budget and end by it, so a call takes at most max(timeout, budget).
	start := time.Now()
	deadline := start.Add(p.budget)
	var last error
	attempts := 0
	for {
		attempts++
		attemptDeadline := time.Now().Add(p.timeout)
		if attempts > 1 && attemptDeadline.After(deadline) {
			attemptDeadline = deadline
		}
		err := p.once(ctx, attemptDeadline, body)
		if err == nil {
			return nil
		}
		last = err
		var se *StatusError
		if errors.As(err, &se) && !se.Retryable() {
			return fmt.Errorf("%s %s: %w", p.name, p.safeURL, err)
		}
		if ctx.Err() != nil || p.budget < 0 {
			break
		}
		wait := p.backoff(attempts)
		if se != nil && se.RetryAfter > wait {
			wait = se.RetryAfter
		}
		if time.Now().Add(wait).Add(10 * time.Millisecond).After(deadline) {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		if ctx.Err() != nil {
			break
		}
	}
	if attempts == 1 {
		return fmt.Errorf("%s %s: %w", p.name, p.safeURL, last)
	}
	return fmt.Errorf("%s %s: giving up after %d attempts in %s: %w",
		p.name, p.safeURL, attempts, time.Since(start).Round(time.Millisecond), last)
}

// backoff is the wait after the given failed attempt: minBackoff doubling up
// to maxBackoff, with up to 25% jitter either way.
func (p *poster) backoff(attempt int) time.Duration {
	d := p.minBackoff
	for i := 1; i < attempt && d < p.maxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.maxBackoff)
	j := time.Duration(rand.Int64N(int64(d)/2+1)) - d/4
	return d + j
}

func (p *poster) once(ctx context.Context, deadline time.Time, body []byte) error {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "kmirror-"+p.name)
	for k, vs := range p.headers {
		if k == "Host" {
			req.Host = vs[0]
			continue
		}
		req.Header[k] = vs
	}
	resp, err := p.client.Do(req)
	if err != nil {
		// net/http's *url.Error repeats the full URL, which may hold a
		// token: keep only what went wrong.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil
	}
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	se := &StatusError{StatusCode: resp.StatusCode, Status: resp.Status, Body: string(head)}
	if se.Status == "" {
		se.Status = strconv.Itoa(resp.StatusCode)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if s, err := strconv.Atoi(ra); err == nil && s >= 0 {
			se.RetryAfter = time.Duration(s) * time.Second
		} else if t, err := http.ParseTime(ra); err == nil {
			se.RetryAfter = max(time.Until(t), 0)
		}
	}
	return se
}
