package main

import (
	"fmt"
	"io"
	"runtime"
)

func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "Prints kmirror's version and the Go version that built it.", stderr)
	out := outputFlag(fs)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if out.JSON() {
		writeJSON(stdout, map[string]string{"version": getVersion(), "go": runtime.Version()})
		return exitOK
	}
	fmt.Fprintf(stdout, "kmirror %s (%s)\n", getVersion(), runtime.Version())
	return exitOK
}
