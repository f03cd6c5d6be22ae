package sdk

import (
	"io"
	"log/slog"
	"os"
	"sync"
)

// stderr is the process's real stderr, captured before go-plugin's Serve
// redirects os.Stderr.
var stderr = os.Stderr

var (
	loggerOnce sync.Once
	logger     *slog.Logger
)

// Logger returns the plugin's logger. It writes JSON lines in the shape
// go-plugin's host parses (hclog's @level, @message, @timestamp), so each
// record shows up in kmirror's log with its level and attributes, tagged
// plugin=<name>. Every level down to Debug is written; kmirror's log
// level decides what is kept.
func Logger() *slog.Logger {
	loggerOnce.Do(func() {
		logger = slog.New(newHCLogHandler(stderr, slog.LevelDebug))
	})
	return logger
}

// hclogTimeFormat is the @timestamp layout go-plugin's host accepts.
const hclogTimeFormat = "2006-01-02T15:04:05.000000Z07:00"

func newHCLogHandler(w io.Writer, level slog.Level) slog.Handler {
	return slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				return slog.String("@timestamp", a.Value.Time().Format(hclogTimeFormat))
			case slog.LevelKey:
				return slog.String("@level", hclogLevel(a.Value.Any().(slog.Level)))
			case slog.MessageKey:
				return slog.String("@message", a.Value.String())
			}
			return a
		},
	})
}

func hclogLevel(l slog.Level) string {
	switch {
	case l < slog.LevelDebug:
		return "trace"
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	default:
		return "error"
	}
}
