package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kmirror/kmirror/internal/mm2import"
)

const importMM2Summary = `Converts a MirrorMaker 2 (dedicated mode) properties file into a kmirror config:
clusters with their security, one mirror per enabled flow, each taking over where MM2 stopped
(mirrors[].mm2). The YAML goes to stdout (or --output); every setting it could not carry over
is listed on stderr with the reason, and so are the environment variables the YAML reads
(passwords are never printed). Exit status 0 when everything was mapped, 3 when something was
not (review the list), 1 on error (unreadable file, syntax error), 2 on bad usage.

Usage: kmirror import-mm2 [--output FILE] mm2.properties`

func cmdImportMM2(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("import-mm2", importMM2Summary, stderr)
	output := fs.String("output", "", "write the YAML to this file instead of stdout")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "import-mm2: want the MirrorMaker 2 properties file")
		fs.Usage()
		return exitUsage
	}
	// Flags may also follow the file name.
	file := fs.Arg(0)
	if code := parse(fs, fs.Args()[1:]); code >= 0 {
		return code
	}
	return importMM2(file, *output, stdout, stderr)
}

func importMM2(file, output string, stdout, stderr io.Writer) int {
	data, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "import-mm2: %v\n", err)
		return exitError
	}
	props, err := mm2import.ParseProperties(data)
	var se *mm2import.SyntaxError
	if errors.As(err, &se) {
		fmt.Fprintf(stderr, "import-mm2: %s:%d: %s\n", file, se.Line, se.Msg)
		return exitError
	}
	res, err := mm2import.Convert(props, file)
	if err != nil {
		var ie *mm2import.InputError
		if errors.As(err, &ie) && ie.Line > 0 {
			fmt.Fprintf(stderr, "import-mm2: %s:%d: %s: %s\n", file, ie.Line, ie.Key, ie.Msg)
		} else {
			fmt.Fprintf(stderr, "import-mm2: %s: %v\n", file, err)
		}
		return exitError
	}
	if output != "" {
		if err := os.WriteFile(output, res.YAML, 0o644); err != nil {
			fmt.Fprintf(stderr, "import-mm2: %v\n", err)
			return exitError
		}
	} else if _, err := stdout.Write(res.YAML); err != nil {
		fmt.Fprintf(stderr, "import-mm2: %v\n", err)
		return exitError
	}
	for _, n := range res.Unmapped {
		fmt.Fprintf(stderr, "%s: not mapped: %s\n", where(file, n), n.Reason)
	}
	for _, n := range res.Ignored {
		fmt.Fprintf(stderr, "%s: not needed: %s\n", where(file, n), n.Reason)
	}
	for _, e := range res.Env {
		fmt.Fprintf(stderr, "set %s to %s\n", e.Name, e.What)
	}
	if len(res.Unmapped) > 0 {
		fmt.Fprintf(stderr, "import-mm2: %d setting(s) not mapped (listed above): review the YAML before use\n", len(res.Unmapped))
		return exitNegative
	}
	return exitOK
}

// where is "file:line: key" (no line for a note about no single line).
func where(file string, n mm2import.Note) string {
	if n.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", file, n.Line, n.Key)
	}
	return fmt.Sprintf("%s: %s", file, n.Key)
}
