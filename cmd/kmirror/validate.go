package main

import (
	"fmt"
	"io"

	"github.com/kmirror/kmirror/config"
)

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
