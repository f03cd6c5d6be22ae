package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/internal/app"
)

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate", `Checks a config file as run does before it starts anything: syntax, unknown keys,
every cross-field rule, files that must exist, and each plugin: its binary is read
and compared with its sha256 pin, then started (to learn its capabilities, bounded
by --timeout) and stopped. No cluster is contacted. Errors name the file, line and
field. Warnings (legal but never used: a plugin or listener no mirror calls, a
listener plugin under plugins:, a trusted upstream of the file that writes to
another cluster than the mirror's source) are printed too and do not fail the
check.
Exit status 0 when valid (with or without warnings), 1 on errors, 2 on bad usage.`, stderr)
	path := configFlag(fs, "the config file to check")
	out := outputFlag(fs)
	timeout := timeoutFlag(fs)
	skipPlugins := fs.Bool("skip-plugins", false, "start no plugin: check the file alone (no pin or capability check)")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	var warnings []string
	cfg, err := config.LoadFile(*path)
	if err == nil && !*skipPlugins {
		// Plugins log through the config's logger, as in run; quieter.
		lc := cfg.Log
		lc.Level = "warn"
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		warnings, err = app.Check(ctx, cfg, newLogger(stderr, lc))
		cancel()
	}
	if out.JSON() {
		if warnings == nil {
			warnings = []string{}
		}
		writeJSON(stdout, map[string]any{"config": *path, "valid": err == nil, "errors": errorLines(err), "warnings": warnings})
	} else {
		for _, w := range warnings {
			fmt.Fprintf(stderr, "warning: %s\n", w)
		}
	}
	if err != nil {
		configError(stderr, *path, err)
		return exitError
	}
	if !out.JSON() {
		fmt.Fprintf(stdout, "%s: valid", *path)
		if len(warnings) > 0 {
			fmt.Fprintf(stdout, " (%s)", plural(len(warnings), "warning"))
		}
		fmt.Fprintln(stdout)
	}
	return exitOK
}

// errorLines is err as a list: one entry per joined error, each as
// printed (config errors are one per line).
func errorLines(err error) []string {
	out := []string{}
	if err == nil {
		return out
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		for l := range strings.SplitSeq(e.Error(), "\n") {
			if l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}
