// Command image builds kmirror's container image without a container
// daemon, with go-containerregistry as ko does: it cross-builds
// cmd/kmirror, puts it with a minimal root filesystem in one deterministic
// layer on an empty base, and writes an OCI image layout and a
// `docker load` tarball. The same source and Go version give the same
// digest. It is a module of its own so that kmirror's module does not
// depend on go-containerregistry. `make image` runs it; deploy/README.md
// ("Container image") says how to load and push the result.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// result is what a build made, for the caller and the tests.
type result struct {
	meta   meta
	digest string // the image manifest's digest
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "../..", "the kmirror repository to build from")
	out := fs.String("out", "", "the OCI image layout's directory (default ROOT/bin/image)")
	tarPath := fs.String("tar", "", "the docker-loadable tarball (default ROOT/bin/kmirror-image.tar)")
	arch := fs.String("arch", runtime.GOARCH, "the image's CPU architecture (GOARCH)")
	version := fs.String("version", "", "the version stamped into the binary, the labels and the tag (default: git describe --tags --always --dirty, as make build)")
	source := fs.String("source", "https://github.com/kmirror/kmirror", "the org.opencontainers.image.source label")
	// The repository declares no licence yet: NOASSERTION is SPDX's word
	// for "not stated", until one is chosen and named here.
	licenses := fs.String("licenses", "NOASSERTION", "the org.opencontainers.image.licenses label (an SPDX expression)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags only)", fs.Arg(0))
	}
	r, err := build(options{root: *root, out: *out, tar: *tarPath, arch: *arch, version: *version, source: *source, licenses: *licenses})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kmirror:%s linux/%s %s\n", tagOf(r.meta.version), r.meta.arch, r.digest)
	return nil
}

// options are the flags; empty paths and version take their defaults.
type options struct {
	root, out, tar   string
	arch, version    string
	source, licenses string
}

func build(o options) (result, error) {
	root, err := filepath.Abs(o.root)
	if err != nil {
		return result{}, err
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "kmirror")); err != nil {
		return result{}, fmt.Errorf("-root %s: not a kmirror checkout (no cmd/kmirror)", root)
	}
	out, tarPath, version := o.out, o.tar, o.version
	if out == "" {
		out = filepath.Join(root, "bin", "image")
	}
	if tarPath == "" {
		tarPath = filepath.Join(root, "bin", "kmirror-image.tar")
	}
	if version == "" {
		version = defaultVersion(root)
	}
	created, err := sourceDate(root)
	if err != nil {
		return result{}, err
	}
	m := meta{version: version, revision: defaultRevision(root), source: o.source, licenses: o.licenses, arch: o.arch, created: created}

	tmp, err := os.MkdirTemp("", "kmirror-image-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(tmp)
	binPath, err := buildKmirror(root, m.arch, version, tmp)
	if err != nil {
		return result{}, err
	}
	binary, err := os.ReadFile(binPath)
	if err != nil {
		return result{}, err
	}
	img, err := assemble(binary, m)
	if err != nil {
		return result{}, err
	}
	if err := writeLayout(out, img, m); err != nil {
		return result{}, err
	}
	if err := writeTarball(tarPath, img, m); err != nil {
		return result{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return result{}, err
	}
	return result{meta: m, digest: d.String()}, nil
}
