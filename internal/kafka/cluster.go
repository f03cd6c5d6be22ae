package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/config"
)

// Cluster is one cluster as kmirror connects to it: the options every
// client of the cluster shares, and what those clients learned about its
// brokers through franz-go's connection hooks. It turns an error of a
// request to the cluster into one that names the cluster, the brokers and
// what to check (Explain), reports the brokers that fail (Faults, for
// /api/v1/status) and, once Report is called, logs each failing broker
// once, again with backoff while it keeps failing, and when it recovers.
// One Cluster per alias is shared by every mirror using it, so a broker
// down is one line however many mirrors and clients see it.
type Cluster struct {
	alias                       string
	brokers                     []string
	dialTimeout, requestTimeout time.Duration
	opts                        []kgo.Opt
	now                         func() time.Time // tests move it

	failing atomic.Bool // any broker in faults: the hooks' fast path
	mu      sync.Mutex
	log     *slog.Logger // nil until Report: failures are not logged
	faults  map[string]*brokerFault
}

// brokerFault is a broker whose last connection attempt, or last request,
// failed.
type brokerFault struct {
	Fault
	loggedAt time.Time
	every    time.Duration // until the next reminder
}

// Fault is a failing broker, for the status API.
type Fault struct {
	Address  string
	Error    string
	Check    string // what to look at
	Since    time.Time
	Failures int
	err      error
}

// Backoff of the lines about a broker that keeps failing: the first at
// once, reminders after firstReminder, then twice as long each time up to
// maxReminder.
const (
	firstReminder = time.Minute
	maxReminder   = 15 * time.Minute
)

// NewCluster builds the connection options of the cluster named alias: its
// seeds, client ID, timeouts, TLS and SASL, franz-go's logs (into log, nil
// for none) and the hooks that watch its brokers. It fails when a TLS file
// cannot be parsed; errors name the config field.
func NewCluster(alias string, c *config.Cluster, log *slog.Logger) (*Cluster, error) {
	cl := &Cluster{
		alias:          alias,
		brokers:        slices.Clone(c.BootstrapServers),
		dialTimeout:    time.Duration(c.DialTimeout),
		requestTimeout: time.Duration(c.RequestTimeout),
		now:            time.Now,
		faults:         make(map[string]*brokerFault),
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.BootstrapServers...),
		kgo.ClientID(c.ClientID),
		kgo.WithHooks(hooks{cl}),
		// No KIP-714 client metrics pushed to the brokers: kmirror
		// exports its own (and its clients', kprom-style) on /metrics,
		// and each client's push buffers cost about 200 KB, times the
		// dozens of clients a worker with exactly_once runs.
		kgo.DisableClientMetrics(),
	}
	// A broker that accepts connections and never answers would
	// otherwise hold every request for franz-go's defaults (10s a read,
	// retried for 30s): requests, retries included, give up after the
	// request timeout instead (a silent broker costs two of them: a
	// failed connection is retried once on a new one). Group membership
	// requests keep their own bound, the session (connector/slots sets
	// it).
	if cl.dialTimeout > 0 {
		opts = append(opts, kgo.DialTimeout(cl.dialTimeout))
	}
	if cl.requestTimeout > 0 {
		opts = append(opts, kgo.RequestTimeoutOverhead(cl.requestTimeout), kgo.RetryTimeout(cl.requestTimeout))
	}
	if c.TLS != nil {
		tc, err := tlsConfig(c.TLS)
		if err != nil {
			return nil, fmt.Errorf("clusters.%s.tls: %w", alias, err)
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if c.SASL != nil {
		m, err := saslMechanism(c.SASL)
		if err != nil {
			return nil, fmt.Errorf("clusters.%s.sasl: %w", alias, err)
		}
		opts = append(opts, kgo.SASL(m))
	}
	if log != nil {
		opts = append(opts, kgo.WithLogger(newLogger(log.With("cluster", alias), clientLogEvery)))
	}
	cl.opts = opts
	return cl, nil
}

// Alias is the cluster's name in the config.
func (c *Cluster) Alias() string { return c.alias }

// BootstrapServers are the cluster's seed brokers.
func (c *Cluster) BootstrapServers() []string { return slices.Clone(c.brokers) }

// Opts are the connection options; consumer and producer behaviour is the
// caller's.
func (c *Cluster) Opts() []kgo.Opt { return slices.Clip(c.opts) }

// Report starts logging failing brokers to log (kmirror run; a one-shot
// command prints the error it returns instead).
func (c *Cluster) Report(log *slog.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = log.With("cluster", c.alias)
}

// Faults are the brokers failing now, by address.
func (c *Cluster) Faults() []Fault {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Fault, 0, len(c.faults))
	for _, f := range c.faults {
		out = append(out, f.Fault)
	}
	slices.SortFunc(out, func(a, b Fault) int { return strings.Compare(a.Address, b.Address) })
	return out
}

// failed records a failed connection or request to the broker at addr.
func (c *Cluster) failed(addr string, err error) {
	now := c.now()
	check := c.check(err, addr)
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.faults[addr]
	if f == nil {
		f = &brokerFault{Fault: Fault{Address: addr, Since: now}}
		c.faults[addr] = f
		c.failing.Store(true)
	}
	changed := f.Check != check
	f.Error, f.Check, f.err = err.Error(), check, err
	f.Failures++
	if c.log == nil {
		return
	}
	switch {
	case f.loggedAt.IsZero() || changed:
		f.every = firstReminder
	case now.Sub(f.loggedAt) >= f.every:
		f.every = min(2*f.every, maxReminder)
	default:
		return
	}
	f.loggedAt = now
	args := []any{"broker", addr, "err", err, "check", check}
	if f.Failures > 1 {
		args = append(args, "failing_for", now.Sub(f.Since).Round(time.Second), "failures", f.Failures)
	}
	c.log.Error("cannot reach a broker of the cluster; retrying", args...)
}

// ok records a successful connection to, or answer from, the broker at
// addr.
func (c *Cluster) ok(addr string) {
	if !c.failing.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.faults[addr]
	if f == nil {
		return
	}
	delete(c.faults, addr)
	c.failing.Store(len(c.faults) > 0)
	if c.log != nil && !f.loggedAt.IsZero() {
		c.log.Info("broker of the cluster reachable again", "broker", addr, "after", c.now().Sub(f.Since).Round(time.Second), "failures", f.Failures)
	}
}

// hooks feed a Cluster from every client built with its options.
type hooks struct{ c *Cluster }

var (
	_ kgo.HookBrokerConnect = hooks{}
	_ kgo.HookBrokerE2E     = hooks{}
)

func (h hooks) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	switch {
	case err == nil:
		h.c.ok(addr)
	case closing(err):
	default:
		h.c.failed(addr, err)
	}
}

// OnBrokerE2E catches a broker that stopped answering on a connection it
// accepted (a read timing out) and a broker answering again.
func (h hooks) OnBrokerE2E(meta kgo.BrokerMetadata, _ int16, e kgo.BrokerE2E) {
	addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	switch err := e.Err(); {
	case err == nil:
		h.c.ok(addr)
	case isTimeout(err):
		h.c.failed(addr, err)
	}
}

// closing reports errors of a client or request being cancelled: not the
// broker's doing.
func closing(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// check says what to look at for an error of a connection to addr ("" when
// the error is not about reaching the cluster).
func (c *Cluster) check(err error, addr string) string {
	var (
		op   *net.OpError
		dns  *net.DNSError
		cert *tls.CertificateVerificationError
		ua   x509.UnknownAuthorityError
		host x509.HostnameError
		rec  tls.RecordHeaderError
		eof  *kgo.ErrFirstReadEOF
	)
	if errors.As(err, &op) && op.Addr != nil {
		addr = op.Addr.String()
	}
	servers := "clusters." + c.alias + ".bootstrap_servers"
	tlsKey, saslKey := "clusters."+c.alias+".tls", "clusters."+c.alias+".sasl"
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "" // the request's own deadline: no broker's doing (Explain looks at the brokers)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("nothing listens at %s: is the broker running, and is the address right (%s)?", addr, servers)
	case errors.As(err, &dns):
		return fmt.Sprintf("the host %q does not resolve: is the address right (%s)?", dns.Name, servers)
	case errors.As(err, &op) && op.Op == "dial" && op.Timeout():
		return fmt.Sprintf("%s did not accept a connection within dial_timeout (%v): is the host right and reachable (a firewall dropping packets)?", addr, c.dialTimeout)
	case errors.As(err, &cert), errors.As(err, &ua), errors.As(err, &host), errors.As(err, &rec), strings.Contains(err.Error(), "tls: "):
		return fmt.Sprintf("the TLS handshake with %s failed: check %s (ca_file, server_name, cert_file) and that the listener speaks TLS", addr, tlsKey)
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.IllegalSaslState):
		return fmt.Sprintf("%s refused the credentials: check %s (mechanism, username, password)", addr, saslKey)
	case errors.As(err, &eof), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return fmt.Sprintf("%s closed the connection: does %s match the listener (TLS or plaintext), and %s its authentication?", addr, tlsKey, saslKey)
	case isTimeout(err):
		return fmt.Sprintf("%s accepts connections but did not answer within request_timeout (%v): is it a Kafka listener's port, does %s match the listener (TLS or plaintext), is the broker overloaded?", addr, c.requestTimeout, tlsKey)
	case strings.Contains(err.Error(), "invalid large response size"):
		return fmt.Sprintf("%s answered with something other than Kafka: is it a Kafka listener's port, and does %s match the listener (TLS or plaintext)?", addr, tlsKey)
	}
	return ""
}

// Error is an error of a request to a cluster, with the cluster's alias,
// its bootstrap servers and, when the error is about reaching it, what to
// check.
type Error struct {
	Alias   string
	Brokers []string
	// Check says what to look at, with the broker's address; empty when
	// the error is the cluster's answer (a refused request) rather than
	// a failure to reach it.
	Check string
	// Cause is the failing broker's own error, when Err does not say it
	// (a request that timed out as a whole while a broker failed).
	Cause error
	Err   error
	// logged is true when the Cluster logged the failure that explains
	// Err (see Logged).
	logged bool
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster %s (%s): %v", e.Alias, strings.Join(e.Brokers, ", "), e.Err)
	if e.Cause != nil {
		fmt.Fprintf(&b, " (last failure: %v)", e.Cause)
	}
	if e.Check != "" {
		b.WriteString(": " + e.Check)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Unreachable reports whether the error is a failure to reach the cluster
// (rather than its answer).
func (e *Error) Unreachable() bool { return e.Check != "" }

// Logged reports whether the Cluster has logged the broker failure behind
// this error already (with backoff while it lasts): whoever gets the error
// need not log it again.
func (e *Error) Logged() bool { return e.logged }

// Explain wraps err, an error of a request to this cluster, in an *Error
// naming the cluster and its brokers, with what to check. An error that
// says nothing about a broker (a request timing out as a whole) is
// explained by the brokers failing at the moment. nil and errors already
// explained are returned as they are.
func (c *Cluster) Explain(err error) error {
	if err == nil {
		return nil
	}
	var done *Error
	if errors.As(err, &done) && done.Alias == c.alias {
		return err
	}
	e := &Error{Alias: c.alias, Brokers: c.brokers, Err: err, Check: c.check(err, "")}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Check != "" {
		// The error itself is a broker's failure: logged when the
		// hooks saw that broker fail.
		for _, f := range c.faults {
			if f.Check == e.Check {
				e.logged = !f.loggedAt.IsZero()
			}
		}
		return e
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, kgo.ErrClientClosed) && !isTimeout(err) {
		return e // the cluster's answer
	}
	// Timed out as a whole: the failing broker says why.
	var latest *brokerFault
	for _, f := range c.faults {
		if latest == nil || f.Since.After(latest.Since) {
			latest = f
		}
	}
	if latest == nil {
		e.Check = fmt.Sprintf("no broker answered in time (request_timeout %v): are they running and reachable at these addresses?", c.requestTimeout)
		return e
	}
	e.Cause, e.Check, e.logged = latest.err, latest.Check, !latest.loggedAt.IsZero()
	return e
}
