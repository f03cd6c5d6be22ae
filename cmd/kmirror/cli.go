package main

// The pieces every subcommand shares, so that they all look and behave
// alike: the flag set and its help, --config, -o, --timeout, the exit
// codes and JSON output. A new subcommand builds on these.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/internal/app"
	"github.com/kmirror/kmirror/internal/english"
)

// Exit codes, the same for every command (README.md, "Exit status"). A
// script tells an answer it must act on (3) from a failure (1) and from a
// mistake in its own command line (2).
const (
	exitOK    = 0
	exitError = 1 // the command failed or refused: a bad config, a cluster error, a refused failover
	exitUsage = 2 // bad flags or arguments, as Go's flag package reports them
	// exitNegative: the command worked and its answer is no: plan has
	// changes pending, status a mirror not ready, verify differences,
	// import-mm2 settings it could not map.
	exitNegative = 3
)

// defaultTimeout is --timeout's default on every command that talks to a
// cluster or a worker: one value, so no command waits longer than another.
const defaultTimeout = 30 * time.Second

// defaultConfig is --config's default, looked for in the working directory.
const defaultConfig = "kmirror.yaml"

// newFlagSet returns a command's flag set. Its help shows long flags as
// --flag (as the docs write them; Go's flag package accepts -flag and
// --flag alike) and one-letter flags as -o.
func newFlagSet(name, summary string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: kmirror %s [flags]\n\n%s\n\nFlags:\n", name, summary)
		printFlags(w, fs)
	}
	return fs
}

// printFlags is flag.PrintDefaults with --name for long names.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		typ, usage := flag.UnquoteUsage(f)
		line := "  " + dash + f.Name
		if typ != "" {
			line += " " + typ
		}
		line += "\n        " + strings.ReplaceAll(usage, "\n", "\n        ")
		if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "0s" {
			line += " (default " + def + ")"
		}
		fmt.Fprintln(w, line)
	})
}

// parse returns the exit code to use when parsing ended the command
// (-1 to go on): 0 for --help, 2 for bad flags or arguments.
func parse(fs *flag.FlagSet, args []string) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		fs.Usage()
		return exitUsage
	}
	return -1
}

// configFlag adds --config.
func configFlag(fs *flag.FlagSet, usage string) *string {
	return fs.String("config", defaultConfig, "`FILE`: "+usage)
}

// timeoutFlag adds --timeout.
func timeoutFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("timeout", defaultTimeout, "give up after this long")
}

// output is the value of -o: a flag.Value, so a bad value is a usage error
// (exit 2) reported by the flag package like any other bad flag.
type output struct {
	value   string
	allowed []string
	aliases map[string]string // another name -> its allowed value
}

func (o *output) String() string { return o.value }

func (o *output) Set(s string) error {
	if a, ok := o.aliases[s]; ok {
		s = a
	}
	if !slices.Contains(o.allowed, s) {
		return fmt.Errorf("want %s", strings.Join(o.allowed, " or "))
	}
	o.value = s
	return nil
}

// JSON reports whether -o json was asked for.
func (o *output) JSON() bool { return o.value == "json" }

// outputFlag adds -o table|json, table by default. aliases are accepted
// and not advertised (plan's former "text" is table).
func outputFlag(fs *flag.FlagSet, aliases ...string) *output {
	o := &output{value: "table", allowed: []string{"table", "json"}, aliases: map[string]string{}}
	for _, a := range aliases {
		o.aliases[a] = "table"
	}
	fs.Var(o, "o", "`table|json`: the output format")
	return o
}

// writeJSON prints v indented, as every -o json does.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// plural is "1 partition", "2 partitions".
func plural(n int, noun string) string { return english.Count(n, noun) }

// configError prints err from loading the config at path, with a hint on
// how to name a config when the file does not exist.
func configError(stderr io.Writer, path string, err error) {
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "%v\n", err)
		if path == defaultConfig {
			fmt.Fprintf(stderr, "kmirror looked for its default config %s in the working directory; give the file with --config FILE\n", defaultConfig)
		} else {
			fmt.Fprintln(stderr, "give an existing config file with --config FILE")
		}
		return
	}
	fmt.Fprintln(stderr, err)
}

// openMirror starts the app of cfg (no worker: its mirrors' clients
// connect on use) and returns the mirror named name, or the only one when
// name is empty. On failure it has said why on stderr and returns the
// exit code with a nil mirror.
func openMirror(cfg *config.Config, log *slog.Logger, path, name string, stderr io.Writer) (*app.App, *connector.Mirror, int) {
	switch {
	case name == "" && len(cfg.Mirrors) == 1:
		name = cfg.Mirrors[0].Name
	case name == "":
		fmt.Fprintf(stderr, "--mirror is required: %s has %d mirrors\n", path, len(cfg.Mirrors))
		return nil, nil, exitUsage
	case cfg.Mirror(name) == nil:
		fmt.Fprintf(stderr, "--mirror: no mirror named %q in %s\n", name, path)
		return nil, nil, exitError
	}
	a, err := app.New(app.Options{Config: cfg, Logger: log, Version: getVersion()})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, nil, exitError
	}
	for _, m := range a.Mirrors() {
		if m.Name() == name {
			return a, m, exitOK
		}
	}
	a.Close()
	fmt.Fprintf(stderr, "--mirror: no mirror named %q in %s\n", name, path)
	return nil, nil, exitError
}

// onMirror loads the config at path, opens its mirror named name (the
// only one when empty) and runs fn with a context bounded by timeout: the
// frame of every command that works on one mirror. It returns fn's exit
// code, or that of what failed before fn could run (said on stderr).
func onMirror(path, name string, timeout time.Duration, stderr io.Writer, fn func(ctx context.Context, m *connector.Mirror) int) int {
	cfg, log := loadForCommand(path, stderr)
	if cfg == nil {
		return exitError
	}
	a, m, code := openMirror(cfg, log, path, name, stderr)
	if m == nil {
		return code
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return fn(ctx, m)
}

// ageOf is how long ago t was, rounded to the second; "unknown" when t is
// zero.
func ageOf(t time.Time) string {
	if t.IsZero() {
		return "at an unknown time"
	}
	return time.Since(t).Round(time.Second).String()
}

// orDash is s, or "-" when empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
