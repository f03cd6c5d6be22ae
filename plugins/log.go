package plugins

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"slices"
	"sync"

	hclog "github.com/hashicorp/go-hclog"
)

// hclogBridge is an hclog.Logger writing to an *slog.Logger: go-plugin logs
// through it, and so does every line a plugin writes to its stderr (the
// SDK's logger writes hclog's JSON there, which go-plugin parses back into
// level, message and fields).
type hclogBridge struct {
	l       *slog.Logger
	name    string
	implied []any
}

var _ hclog.Logger = (*hclogBridge)(nil)

func newHCLogBridge(l *slog.Logger) *hclogBridge { return &hclogBridge{l: l} }

// levelTrace is the slog level hclog's Trace maps to.
const levelTrace = slog.LevelDebug - 4

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return levelTrace
	case hclog.Debug, hclog.NoLevel:
		return slog.LevelDebug
	case hclog.Info:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (b *hclogBridge) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	lvl := slogLevel(level)
	ctx := context.Background()
	if !b.l.Enabled(ctx, lvl) {
		return
	}
	all := make([]any, 0, len(b.implied)+len(args)+2)
	if b.name != "" {
		all = append(all, "logger", b.name)
	}
	all = append(all, b.implied...)
	// go-plugin appends the plugin's own "timestamp" to every line it
	// parses from the plugin's stderr; our handler stamps the record.
	if n := len(args); n >= 2 && args[n-2] == "timestamp" {
		args = args[:n-2]
	}
	args = slices.Clone(args)
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "plugin":
			// go-plugin's own lines name the binary "plugin"; the
			// logger says plugin=<name> already.
			args[i] = "path"
		case "error":
			// A plugin ended by SIGTERM or SIGINT was asked to
			// stop (with kmirror's process group, or by someone):
			// the supervisor says what happens next.
			if e, ok := args[i+1].(string); ok && lvl == slog.LevelError && (e == "signal: terminated" || e == "signal: interrupt") {
				lvl = slog.LevelInfo
			}
		}
	}
	all = append(all, args...)
	b.l.Log(ctx, lvl, msg, all...)
}

func (b *hclogBridge) Trace(msg string, args ...any) { b.Log(hclog.Trace, msg, args...) }
func (b *hclogBridge) Debug(msg string, args ...any) { b.Log(hclog.Debug, msg, args...) }
func (b *hclogBridge) Info(msg string, args ...any)  { b.Log(hclog.Info, msg, args...) }
func (b *hclogBridge) Warn(msg string, args ...any)  { b.Log(hclog.Warn, msg, args...) }
func (b *hclogBridge) Error(msg string, args ...any) { b.Log(hclog.Error, msg, args...) }

func (b *hclogBridge) enabled(l hclog.Level) bool {
	return b.l.Enabled(context.Background(), slogLevel(l))
}
func (b *hclogBridge) IsTrace() bool { return b.enabled(hclog.Trace) }
func (b *hclogBridge) IsDebug() bool { return b.enabled(hclog.Debug) }
func (b *hclogBridge) IsInfo() bool  { return b.enabled(hclog.Info) }
func (b *hclogBridge) IsWarn() bool  { return b.enabled(hclog.Warn) }
func (b *hclogBridge) IsError() bool { return b.enabled(hclog.Error) }

func (b *hclogBridge) ImpliedArgs() []any { return b.implied }

func (b *hclogBridge) With(args ...any) hclog.Logger {
	c := *b
	c.implied = append(append([]any(nil), b.implied...), args...)
	return &c
}

func (b *hclogBridge) Name() string { return b.name }

func (b *hclogBridge) Named(name string) hclog.Logger {
	c := *b
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (b *hclogBridge) ResetNamed(name string) hclog.Logger {
	c := *b
	c.name = name
	return &c
}

// SetLevel is a no-op: the slog handler decides.
func (b *hclogBridge) SetLevel(hclog.Level) {}

// GetLevel returns the lowest level the slog handler takes, so go-plugin
// only skips what slog would drop anyway.
func (b *hclogBridge) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn} {
		if b.enabled(l) {
			return l
		}
	}
	return hclog.Error
}

func (b *hclogBridge) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(b.StandardWriter(opts), "", 0)
}

func (b *hclogBridge) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return &lineLogger{l: b.l, level: slog.LevelInfo}
}

// lineLogger logs every line written to it. go-plugin hands it what a
// plugin writes to os.Stdout/os.Stderr after Serve (its "synced" stdio).
type lineLogger struct {
	l     *slog.Logger
	level slog.Level
	attrs []any

	mu  sync.Mutex
	buf []byte
}

const maxLogLine = 64 << 10

func (w *lineLogger) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) >= maxLogLine {
				w.emit(w.buf)
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

func (w *lineLogger) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 {
		return
	}
	w.l.Log(context.Background(), w.level, string(line), w.attrs...)
}
