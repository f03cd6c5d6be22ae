package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// writeLayout writes img as an OCI image layout in dir, replacing what a
// previous build left there (layout.Write keeps old blobs and an index
// would list both images). The index entry names the version
// (org.opencontainers.image.ref.name) so `skopeo copy oci:DIR:VERSION`
// finds it, and the platform so a multi-arch tool can pick it.
func writeLayout(dir string, img v1.Image, m meta) error {
	if err := clearLayout(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	err = p.AppendImage(img,
		layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tagOf(m.version)}),
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: m.arch}))
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return nil
}

// clearLayout removes the OCI layout a previous build left in dir, and
// refuses to remove a directory that is not one (a mistyped -out).
func clearLayout(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(entries) == 0) {
		return os.RemoveAll(dir)
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return fmt.Errorf("-out %s: the directory is not empty and holds no OCI layout (no oci-layout file): not replacing it", dir)
	}
	return os.RemoveAll(dir)
}

// writeTarball writes img as `docker save` does, tagged kmirror:VERSION, for
// `docker load` and `podman load`.
func writeTarball(path string, img v1.Image, m meta) error {
	tag, err := name.NewTag("kmirror:" + tagOf(m.version))
	if err != nil {
		return fmt.Errorf("image tag for version %q: %w", m.version, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return fmt.Errorf("image tarball %s: %w", path, err)
	}
	return nil
}

var notTagChar = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// tagOf makes a version a valid image tag (letters, digits, _ . -, at most
// 128, not starting with . or -): a semver build suffix's "+" becomes "-".
func tagOf(version string) string {
	t := notTagChar.ReplaceAllString(version, "-")
	if t == "" || t[0] == '.' || t[0] == '-' {
		t = "v" + t
	}
	if len(t) > 128 {
		t = t[:128]
	}
	return t
}
