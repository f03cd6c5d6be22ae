package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTagOf(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a0d4901", "a0d4901"},
		{"v1.2.3-4-gabcdef0-dirty", "v1.2.3-4-gabcdef0-dirty"},
		{"v1.2.3+build.5", "v1.2.3-build.5"},
		{"-x", "v-x"},
		{"", "v"},
		{strings.Repeat("a", 200), strings.Repeat("a", 128)},
	} {
		if got := tagOf(c.in); got != c.want {
			t.Errorf("tagOf(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSourceDate(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	got, err := sourceDate(t.TempDir())
	if err != nil || !got.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("SOURCE_DATE_EPOCH=1700000000: %v, %v", got, err)
	}
	for _, bad := range []string{"yesterday", "-5", "1.5"} {
		t.Setenv("SOURCE_DATE_EPOCH", bad)
		if _, err := sourceDate(t.TempDir()); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
			t.Errorf("SOURCE_DATE_EPOCH=%q: error %v, want one naming SOURCE_DATE_EPOCH", bad, err)
		}
	}
}

// TestSourceDateOutsideGit: without SOURCE_DATE_EPOCH and a commit, the
// build stops rather than stamp the clock's time.
func TestSourceDateOutsideGit(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "") // restored after the test
	os.Unsetenv("SOURCE_DATE_EPOCH")
	dir := t.TempDir()
	// git must not find a repository above the temporary directory.
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
	if _, err := sourceDate(dir); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Errorf("no git, no SOURCE_DATE_EPOCH: error %v, want one asking for SOURCE_DATE_EPOCH", err)
	}
}

// TestLayerTarOrder: the layer's bytes do not depend on the order the
// files are listed in.
func TestLayerTarOrder(t *testing.T) {
	files := rootFS([]byte("binary"))
	mtime := time.Unix(1700000000, 0)
	a, err := layerTar(files, mtime)
	if err != nil {
		t.Fatal(err)
	}
	rev := make([]file, len(files))
	for i, f := range files {
		rev[len(files)-1-i] = f
	}
	b, err := layerTar(rev, mtime)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("the same files in another order gave another layer")
	}
}

// TestClearLayoutRefuses: a mistyped -out naming a directory with other
// files in it is an error, not a removal.
func TestClearLayoutRefuses(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := clearLayout(dir); err == nil || !strings.Contains(err.Error(), "no OCI layout") {
		t.Errorf("clearLayout on a directory with notes.txt: %v, want a refusal", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("notes.txt is gone: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := clearLayout(dir); err != nil {
		t.Errorf("clearLayout on an old layout: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the old layout is still there (%v)", err)
	}
}
