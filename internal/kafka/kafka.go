// Package kafka turns a cluster's config into franz-go client options. It is
// the only place that knows how kmirror connects (seeds, client ID,
// timeouts, TLS, SASL, logging), so every client of a cluster connects
// alike, and the one that explains a cluster's connection failures
// (cluster.go).
package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/connector/loglimit"
)

func tlsConfig(c *config.TLS) (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify, //nolint:gosec // opt-in, documented as test-only
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file: no PEM certificate in %s", c.CAFile)
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func saslMechanism(c *config.SASL) (sasl.Mechanism, error) {
	user, pass := c.Username, c.Password.Reveal()
	switch c.Mechanism {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	default:
		return nil, fmt.Errorf("mechanism: unknown SASL mechanism %q", c.Mechanism)
	}
}

// logger bridges franz-go's logs into slog, one level down for its info
// messages: franz-go reports every metadata refresh and assignment at info,
// which is debugging detail for a kmirror operator. Its warnings and errors
// (a broker unreachable, a failed request) keep their level, once a minute
// per message: franz-go says a failure on every retry (a target broker down
// for a minute gave 24 "produce partition load error" lines), where
// kmirror's own lines say it once. The lines held back go to debug, and the
// next one let through counts them (suppressed).
type logger struct {
	l     *slog.Logger
	limit *loglimit.Limiter
}

// clientLogEvery is how often one franz-go warning or error is let through.
const clientLogEvery = time.Minute

func newLogger(l *slog.Logger, every time.Duration) logger {
	return logger{l: l, limit: loglimit.New(every)}
}

func (g logger) Level() kgo.LogLevel {
	ctx := context.Background()
	switch {
	case g.l.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelDebug
	case g.l.Enabled(ctx, slog.LevelInfo):
		return kgo.LogLevelWarn
	case g.l.Enabled(ctx, slog.LevelWarn):
		return kgo.LogLevelWarn
	default:
		return kgo.LogLevelError
	}
}

func (g logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l := slogLevel(level, msg)
	if l >= slog.LevelWarn {
		// Keyed by the message alone: its keyvals name the broker,
		// partition or retry count, which change from one retry to
		// the next.
		switch ok, held := g.limit.Pass(msg); {
		case !ok:
			l = slog.LevelDebug
		case held > 0:
			keyvals = append(keyvals, "suppressed", held)
		}
	}
	g.l.Log(context.Background(), l, msg, keyvals...)
}

// slogLevel is the level kmirror logs a franz-go line at.
func slogLevel(level kgo.LogLevel, msg string) slog.Level {
	switch {
	case strings.HasPrefix(msg, "unable to open connection to broker"):
		// A broker that cannot be reached is reported by Cluster, once
		// per broker with backoff, naming what to check: franz-go says
		// it on every attempt.
		return slog.LevelDebug
	case level == kgo.LogLevelError:
		return slog.LevelError
	case level == kgo.LogLevelWarn:
		return slog.LevelWarn
	default:
		return slog.LevelDebug
	}
}
