// Command kmirror mirrors topics between Kafka clusters.
//
//	kmirror run --config kmirror.yaml       the worker
//	kmirror validate --config kmirror.yaml  check a config, with file:line errors
//	kmirror plan --config kmirror.yaml      what a pass would change, changing nothing
//	kmirror topics --config kmirror.yaml    the mirrored topics with their metadata
//	kmirror translate --config F --group G  a group's exact target offsets for a failover
//	kmirror status --config kmirror.yaml    what the running worker reports (mirrors, topics, workers)
//	kmirror import-mm2 mm2.properties       a kmirror config from a MirrorMaker 2 config
//	kmirror demo                            everything on two embedded clusters
//	kmirror version
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/kmirror/kmirror/config"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `kmirror mirrors topics from one Kafka cluster to another.

Usage:
  kmirror run --config FILE        run the mirrors in FILE until SIGINT/SIGTERM
  kmirror validate --config FILE   check FILE and exit 0 (valid) or 1 (errors, with file:line)
  kmirror plan --config FILE       print what one pass would create or change; change nothing
                                   (exit 0: nothing to do, 2: changes pending, 1: error)
  kmirror topics --config FILE     list the mirrored topics with their metadata
  kmirror translate --config FILE --group G [--apply [--allow-rewind]]
                                   a group's target offsets for a failover (exact);
                                   --apply commits them to the target group, never
                                   moving it backwards unless --allow-rewind
  kmirror status --config FILE     what the running worker reports: mirrors, topics, lag, and in
                                   cluster mode the workers and their slots (or --url ADDR;
                                   the config's http.auth token, or --token-file)
  kmirror import-mm2 [--output FILE] mm2.properties
                                   convert a MirrorMaker 2 properties file to a kmirror config
                                   taking over its flows (exit 0: all mapped, 2: settings not
                                   mapped, listed on stderr, 1: error)
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
	case "plan":
		return cmdPlan(args[1:], stdout, stderr)
	case "topics":
		return cmdTopics(args[1:], stdout, stderr)
	case "translate":
		return cmdTranslate(args[1:], stdout, stderr)
	case "status":
		return cmdStatus(args[1:], stdout, stderr)
	case "import-mm2":
		return cmdImportMM2(args[1:], stdout, stderr)
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

// oneOf reports whether a flag's value is one of the allowed ones, and
// says which are when it is not.
func oneOf(stderr io.Writer, flagName, value string, allowed ...string) bool {
	if slices.Contains(allowed, value) {
		return true
	}
	fmt.Fprintf(stderr, "%s: unknown value %q (want %s)\n", flagName, value, strings.Join(allowed, " or "))
	return false
}

// loadForCommand loads the config named by a command's --config flag and
// builds a logger from it; on error it prints the error and returns nil.
func loadForCommand(path string, stderr io.Writer) (*config.Config, *slog.Logger) {
	cfg, err := config.LoadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, nil
	}
	lc := cfg.Log
	if lc.Level == "info" {
		lc.Level = "warn" // a one-shot command prints its result, not progress
	}
	return cfg, newLogger(stderr, lc)
}
