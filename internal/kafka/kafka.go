// Package kafka turns a cluster's config into franz-go client options. It is
// the only place that knows how kmirror connects (seeds, client ID, logging,
// and later TLS and SASL), so every client of a cluster connects alike.
package kafka

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/config"
)

// ClientOpts returns the connection options for the cluster named alias.
// Consumer and producer behaviour is left to the caller.
func ClientOpts(alias string, c *config.Cluster, log *slog.Logger) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.BootstrapServers...),
		kgo.ClientID(c.ClientID),
	}
	if log != nil {
		opts = append(opts, kgo.WithLogger(logger{log.With("cluster", alias)}))
	}
	return opts
}

// logger bridges franz-go's logs into slog, one level down for its info
// messages: franz-go reports every metadata refresh and assignment at info,
// which is debugging detail for a kmirror operator. Its warnings and errors
// (a broker unreachable, a failed request) keep their level.
type logger struct{ l *slog.Logger }

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
	var l slog.Level
	switch level {
	case kgo.LogLevelError:
		l = slog.LevelError
	case kgo.LogLevelWarn:
		l = slog.LevelWarn
	default:
		l = slog.LevelDebug
	}
	g.l.Log(context.Background(), l, msg, keyvals...)
}
