package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// git runs git in root and returns its trimmed output.
func git(root string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
			return "", fmt.Errorf("git %s: %s", strings.Join(args, " "), strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// defaultVersion is the Makefile's VERSION: `git describe --tags --always
// --dirty`, or "dev" outside a checkout, so that `go run .` by hand stamps
// the binary as `make build` does.
func defaultVersion(root string) string {
	v, err := git(root, "describe", "--tags", "--always", "--dirty")
	if err != nil || v == "" {
		return "dev"
	}
	return v
}

// defaultRevision is the commit the image is built from, for the
// org.opencontainers.image.revision label ("unknown" outside a checkout).
func defaultRevision(root string) string {
	r, err := git(root, "rev-parse", "HEAD")
	if err != nil || r == "" {
		return "unknown"
	}
	return r
}

// sourceDate is the image's creation time and every file's mtime: the
// SOURCE_DATE_EPOCH convention (reproducible-builds.org) if set, else the
// last commit's time. Never the clock: the same source must give the same
// digest.
func sourceDate(root string) (time.Time, error) {
	if s, ok := os.LookupEnv("SOURCE_DATE_EPOCH"); ok {
		sec, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || sec < 0 {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970 (a non-negative integer)", s)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	s, err := git(root, "log", "-1", "--format=%ct")
	if err != nil {
		return time.Time{}, fmt.Errorf("the image's creation time is the last commit's, and %v: set SOURCE_DATE_EPOCH outside a git checkout", err)
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("git log -1 --format=%%ct printed %q, not a time", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}
