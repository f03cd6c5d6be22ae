// Command kmirror mirrors topics between Kafka clusters.
//
//	kmirror run --config kmirror.yaml       the worker
//	kmirror validate --config kmirror.yaml  check a config, with file:line errors
//	kmirror demo                            everything on two embedded clusters
//	kmirror version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/internal/app"
	"github.com/kmirror/kmirror/internal/demo"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `kmirror mirrors topics from one Kafka cluster to another.

Usage:
  kmirror run --config FILE        run the mirrors in FILE until SIGINT/SIGTERM
  kmirror validate --config FILE   check FILE and exit 0 (valid) or 1 (errors, with file:line)
  kmirror demo [--duration D]      mirror between two embedded clusters, no setup
  kmirror version                  print the version

Run 'kmirror COMMAND --help' for a command's flags.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stderr)
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "demo":
		return cmdDemo(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "kmirror %s (%s)\n", getVersion(), runtime.Version())
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "kmirror: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func getVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func newFlagSet(name, summary string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kmirror %s [flags]\n\n%s\n\nFlags:\n", name, summary)
		fs.PrintDefaults()
	}
	return fs
}

// parse returns the exit code to use when parsing ended the command
// (-1 to go on): 0 for --help, 2 for bad flags.
func parse(fs *flag.FlagSet, args []string) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		fs.Usage()
		return 2
	}
	return -1
}

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate", "Checks a config file: syntax, unknown keys, every cross-field rule.\nErrors name the file, line and field. Exit status 0 when valid, 1 otherwise.", stderr)
	path := fs.String("config", "kmirror.yaml", "config file to check")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if _, err := config.LoadFile(*path); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: valid\n", *path)
	return 0
}

func cmdRun(args []string, stderr io.Writer) int {
	fs := newFlagSet("run", "Runs every mirror in the config until SIGINT or SIGTERM, then stops fetching,\nflushes the producer, persists progress and exits 0.", stderr)
	path := fs.String("config", "kmirror.yaml", "config file")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	cfg, err := config.LoadFile(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	log := newLogger(stderr, cfg.Log)
	// Signals are turned into a context here and nowhere else, so the app
	// package stays embeddable.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := app.New(app.Options{Config: cfg, Logger: log, Version: getVersion()})
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	log.Info("kmirror starting", "version", getVersion(), "config", *path, "mirrors", len(cfg.Mirrors))
	start := time.Now()
	if err := a.Run(ctx); err != nil {
		log.Error("kmirror stopped with an error", "err", err)
		return 1
	}
	log.Info("kmirror stopped", "uptime", time.Since(start).Round(time.Millisecond))
	return 0
}

func cmdDemo(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", "Starts two embedded Kafka clusters (kfake), seeds topics (one compacted, one with\nheaders) and a live producer, mirrors between them and prints what was mirrored\nand where the metrics and status are. Runs until Ctrl-C or --duration.", stderr)
	duration := fs.Duration("duration", 0, "stop after this long (0: run until Ctrl-C)")
	listen := fs.String("http", "127.0.0.1:9644", "HTTP listen address for /metrics and /api/v1/status")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	log := newLogger(stderr, config.Log{Level: "info", Format: "text"})
	if err := demo.Run(ctx, demo.Options{Out: stdout, Logger: log, HTTPListen: *listen, Version: getVersion()}); err != nil {
		log.Error("demo failed", "err", err)
		return 1
	}
	return 0
}

func newLogger(w io.Writer, lc config.Log) *slog.Logger {
	var level slog.Level
	switch lc.Level {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if lc.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
