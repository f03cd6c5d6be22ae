package main

// The pieces every subcommand shares, so that they all look and behave
// alike: the flag set and its help, --config, -o, --timeout, the exit
// codes and JSON output. A new subcommand builds on these.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/config"
)

// Exit codes, the same for every command (README.md, "Exit codes").
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed: a bad config, a cluster error
	exitUsage = 2 // bad flags or arguments; for plan also "changes pending"
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
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

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

// pickMirror resolves --mirror for a command that works on one mirror:
// the config's only one when name is empty. code >= 0 ends the command
// with that status (2 when the config has several and none was named, 1
// when no mirror has the name), the reason printed.
func pickMirror(cfg *config.Config, path, name string, stderr io.Writer) (mirror string, code int) {
	switch {
	case name == "" && len(cfg.Mirrors) == 1:
		return cfg.Mirrors[0].Name, -1
	case name == "":
		fmt.Fprintf(stderr, "--mirror is required: %s has %d mirrors\n", path, len(cfg.Mirrors))
		return "", exitUsage
	case cfg.Mirror(name) == nil:
		fmt.Fprintf(stderr, "--mirror: no mirror named %q in %s\n", name, path)
		return "", exitError
	}
	return name, -1
}
