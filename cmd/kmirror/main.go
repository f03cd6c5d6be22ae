// Command kmirror mirrors topics between Kafka clusters.
//
//	kmirror run --config kmirror.yaml       the worker
//	kmirror validate --config kmirror.yaml  check a config (and its plugins), with file:line errors
//	kmirror plan --config kmirror.yaml      what a pass would change, changing nothing
//	kmirror topics --config kmirror.yaml    the mirrored topics with their metadata
//	kmirror translate --config F --group G  a group's exact target offsets for a failover
//	kmirror failover --config F --mirror M  fence the mirror, move every group to the target
//	kmirror failback --config F --mirror R --reverse-of M  prepare the copy back after a failover
//	kmirror cutover --config F --mirror M   planned switch behind a gate: caught up, verified, fenced
//	kmirror verify --config kmirror.yaml    compare the copy with the source, record by record
//	kmirror status --config kmirror.yaml    what the running worker reports (mirrors, topics, workers)
//	kmirror import-mm2 mm2.properties       a kmirror config from a MirrorMaker 2 config (or Strimzi resource)
//	kmirror demo                            everything on two embedded clusters
//	kmirror version                         (or kmirror --version)
//
// One file per subcommand; cli.go holds what they share.
package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/kmirror/kmirror/config"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `kmirror mirrors topics from one Kafka cluster to another.

Usage:
  kmirror run --config FILE        run the mirrors in FILE until SIGINT/SIGTERM
  kmirror validate --config FILE   check FILE and its plugins as run would, starting nothing else;
                                   warnings for legal but suspicious settings
  kmirror plan --config FILE       print what one pass would create or change; change nothing
                                   (exit 0: nothing to do, 3: changes pending)
  kmirror topics --config FILE     list the mirrored topics with their metadata
  kmirror translate --config FILE --group G [--apply [--allow-rewind]]
                                   a group's target offsets for a failover (exact);
                                   --apply commits them to the target group, never
                                   moving it backwards unless --allow-rewind
  kmirror failover --config FILE [--mirror M]
                                   disaster recovery, the source reachable or not: fence the
                                   mirror, commit every group on the target, print the
                                   recovery point (docs/disaster-recovery.md)
  kmirror failback --config FILE [--mirror R] --reverse-of M
                                   after a failover of M, prepare mirror R to copy back only
                                   what the former source lacks; report its divergent tail
  kmirror cutover --config FILE [--mirror M] [--quiet D]
                                   planned switch: wait until caught up with the source quiet,
                                   verify the copy, fence, commit every group (exit 0: exact)
  kmirror verify --config FILE [--mirror M] [--topic T] [--since D]
                                   compare the copy with its source record by record through
                                   the offset index (exit 0: all matched, 3: differences,
                                   1: partitions that could not be read)
  kmirror status --config FILE     what the running worker reports: mirrors, topics, lag, and in
                                   cluster mode the workers and their slots (or --url ADDR;
                                   the config's http.auth token, or --token-file)
                                   (exit 0: ready, 3: not ready)
  kmirror import-mm2 [--output FILE] mm2.properties
                                   convert a MirrorMaker 2 properties file to a kmirror config
                                   taking over its flows (exit 0: all mapped, 3: settings not
                                   mapped, listed on stderr); or a Strimzi KafkaMirrorMaker2
                                   resource, with --helm-values FILE for the Helm chart
  kmirror demo [--duration D]      mirror between two embedded clusters, no setup
  kmirror version                  print the version (also kmirror --version)

Every command that prints takes -o table|json; every command that talks to a
cluster or a worker takes --timeout (default 30s). --config defaults to
kmirror.yaml in the working directory.
Exit status, the same for every command: 0 ok; 1 error (or an action refused);
2 bad usage; 3 the command worked and its answer is no (plan: changes pending,
status: not ready, verify: differences, import-mm2: settings not mapped).

Run 'kmirror help COMMAND' (or 'kmirror COMMAND --help') for a command's flags.
`

// commandFuncs are the subcommands, by name.
var commandFuncs = map[string]func(args []string, stdout, stderr io.Writer) int{
	"run":        func(args []string, _, stderr io.Writer) int { return cmdRun(args, stderr) },
	"validate":   cmdValidate,
	"demo":       cmdDemo,
	"plan":       cmdPlan,
	"topics":     cmdTopics,
	"translate":  cmdTranslate,
	"failover":   cmdFailover,
	"failback":   cmdFailback,
	"cutover":    cmdCutover,
	"verify":     cmdVerify,
	"status":     cmdStatus,
	"import-mm2": cmdImportMM2,
	"version":    cmdVersion,
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "--version", "-version":
		return cmdVersion(args[1:], stdout, stderr)
	case "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "help":
		return cmdHelp(args[1:], stdout, stderr)
	}
	cmd, ok := commandFuncs[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "kmirror: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	return cmd(args[1:], stdout, stderr)
}

// cmdHelp prints the general help, or with a command's name that command's
// own, as `kmirror CMD --help` does but on stdout: asked for, the help is
// the output (to page or grep), not a complaint.
func cmdHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (len(args) == 1 && args[0] == "help") {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	cmd, ok := commandFuncs[args[0]]
	switch {
	case !ok:
		fmt.Fprintf(stderr, "kmirror help: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	case len(args) > 1:
		fmt.Fprintf(stderr, "kmirror help: want one command, got %q\n", strings.Join(args, " "))
		return exitUsage
	}
	return cmd([]string{"--help"}, stdout, stdout)
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

// loadForCommand loads the config named by a command's --config flag and
// builds a logger from it; on error it prints the error and returns nil.
func loadForCommand(path string, stderr io.Writer) (*config.Config, *slog.Logger) {
	cfg, err := config.LoadFile(path)
	if err != nil {
		configError(stderr, path, err)
		return nil, nil
	}
	lc := cfg.Log
	if lc.Level == "info" {
		lc.Level = "warn" // a one-shot command prints its result, not progress
	}
	return cfg, newLogger(stderr, lc)
}
