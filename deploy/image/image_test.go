package main

import (
	"archive/tar"
	"crypto/sha256"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// built is the image TestMain builds once from this checkout, as
// `make image` does, for the tests to open.
var built struct {
	dir, tar string
	res      result
}

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "kmirror-image-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	built.dir, built.tar = filepath.Join(tmp, "image"), filepath.Join(tmp, "kmirror-image.tar")
	built.res, err = build(testOptions(built.dir, built.tar))
	code := 1
	if err != nil {
		fmt.Fprintln(os.Stderr, "building the image:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(tmp)
	os.Exit(code)
}

// testOptions are make image's defaults, for this checkout and the host's
// CPU (the tests run the binary), writing to out and tar.
func testOptions(out, tar string) options {
	return options{root: "../..", out: out, tar: tar, arch: runtime.GOARCH,
		source: "https://github.com/kmirror/kmirror", licenses: "NOASSERTION"}
}

// openLayout opens an OCI layout as a registry or skopeo would: through
// its index, which must list exactly one image.
func openLayout(t *testing.T, dir string) (v1.Image, v1.Descriptor) {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img, desc
}

// layerFiles reads the built image's only layer, once for all tests:
// every entry's header by absolute path, and the content of regular files.
var layerFiles = sync.OnceValues(func() (layerContent, error) {
	p, err := layout.FromPath(built.dir)
	if err != nil {
		return layerContent{}, err
	}
	img, err := p.Image(mustHash(built.res.digest))
	if err != nil {
		return layerContent{}, err
	}
	layers, err := img.Layers()
	if err != nil {
		return layerContent{}, err
	}
	if len(layers) != 1 {
		return layerContent{}, fmt.Errorf("%d layers, want 1", len(layers))
	}
	if mt, err := layers[0].MediaType(); err != nil || mt != types.OCILayer {
		return layerContent{}, fmt.Errorf("layer media type %q (%v), want %q", mt, err, types.OCILayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return layerContent{}, err
	}
	defer rc.Close()
	lc := layerContent{headers: map[string]*tar.Header{}, data: map[string][]byte{}}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return lc, nil
		}
		if err != nil {
			return layerContent{}, err
		}
		n := "/" + strings.TrimSuffix(h.Name, "/")
		lc.headers[n] = h
		if h.Typeflag == tar.TypeReg {
			if lc.data[n], err = io.ReadAll(tr); err != nil {
				return layerContent{}, err
			}
		}
	}
})

type layerContent struct {
	headers map[string]*tar.Header
	data    map[string][]byte
}

func mustHash(s string) v1.Hash {
	h, err := v1.NewHash(s)
	if err != nil {
		panic(err)
	}
	return h
}

func TestImageConfig(t *testing.T) {
	img, desc := openLayout(t, built.dir)
	if desc.Digest.String() != built.res.digest {
		t.Errorf("index.json lists %s, the build reported %s", desc.Digest, built.res.digest)
	}
	version := built.res.meta.version
	if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != tagOf(version) {
		t.Errorf("index ref.name %q, want %q", got, tagOf(version))
	}
	if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != runtime.GOARCH {
		t.Errorf("index platform %+v, want linux/%s", desc.Platform, runtime.GOARCH)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %q, want %q", mt, types.OCIManifestSchema1)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("config platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if !cf.Created.Time.Equal(built.res.meta.created) || cf.Created.Time.IsZero() {
		t.Errorf("created %v, want the source date %v", cf.Created.Time, built.res.meta.created)
	}
	c := cf.Config
	for _, check := range []struct{ field, got, want string }{
		{"User", c.User, "65532:65532"},
		{"Entrypoint", fmt.Sprint(c.Entrypoint), "[/usr/bin/kmirror]"},
		{"Cmd", fmt.Sprint(c.Cmd), "[run --config /etc/kmirror/kmirror.yaml]"},
		{"Env", fmt.Sprint(c.Env), "[TMPDIR=/tmp]"},
		{"WorkingDir", c.WorkingDir, "/"},
		{"ExposedPorts", fmt.Sprint(c.ExposedPorts), "map[9644/tcp:{}]"},
	} {
		if check.got != check.want {
			t.Errorf("config %s = %s, want %s", check.field, check.got, check.want)
		}
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": built.res.meta.revision,
		"org.opencontainers.image.source":   "https://github.com/kmirror/kmirror",
		"org.opencontainers.image.title":    "kmirror",
		"org.opencontainers.image.licenses": "NOASSERTION",
	}
	for k, want := range wantLabels {
		if got := c.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if c.Labels["org.opencontainers.image.description"] == "" {
		t.Error("no org.opencontainers.image.description label")
	}
	if len(built.res.meta.revision) != 40 {
		t.Errorf("revision label %q is not a commit id (the test runs in a checkout)", built.res.meta.revision)
	}
}

func TestImageFilesystem(t *testing.T) {
	lc, err := layerFiles()
	if err != nil {
		t.Fatal(err)
	}
	headers, data := lc.headers, lc.data
	for _, sh := range []string{"/bin/sh", "/usr/bin/sh", "/bin/bash", "/bin/busybox"} {
		if _, ok := headers[sh]; ok {
			t.Errorf("%s is in the image: it must have no shell", sh)
		}
	}
	for n, h := range headers {
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d, want root's (the process must not write it)", n, h.Uid, h.Gid)
		}
		if !h.ModTime.Equal(built.res.meta.created) {
			t.Errorf("%s mtime %v, want the source date %v", n, h.ModTime, built.res.meta.created)
		}
	}
	for _, d := range []struct {
		path string
		mode int64
	}{{"/etc/kmirror", 0o755}, {"/plugins", 0o755}, {"/tmp", 0o1777}} {
		h, ok := headers[d.path]
		switch {
		case !ok:
			t.Errorf("no %s in the image", d.path)
		case h.Typeflag != tar.TypeDir || h.Mode != d.mode:
			t.Errorf("%s: type %c mode %o, want a directory with mode %o", d.path, h.Typeflag, h.Mode, d.mode)
		}
	}
	if h := headers["/usr/bin/kmirror"]; h == nil || h.Typeflag != tar.TypeReg || h.Mode != 0o755 {
		t.Errorf("/usr/bin/kmirror: %+v, want a 0755 file", h)
	}
	if !strings.Contains(string(data["/etc/passwd"]), "\nkmirror:x:65532:65532:") {
		t.Errorf("/etc/passwd has no kmirror user 65532:\n%s", data["/etc/passwd"])
	}
	if !strings.Contains(string(data["/etc/group"]), "\nkmirror:x:65532:") {
		t.Errorf("/etc/group has no kmirror group 65532:\n%s", data["/etc/group"])
	}
}

// TestImageBinaryRuns takes the binary out of the layer and runs it: the
// static build works with nothing from the build machine, and it carries
// the version the labels name.
func TestImageBinaryRuns(t *testing.T) {
	lc, err := layerFiles()
	if err != nil {
		t.Fatal(err)
	}
	data := lc.data
	bin := filepath.Join(t.TempDir(), "kmirror")
	if err := os.WriteFile(bin, data["/usr/bin/kmirror"], 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("kmirror --version: %v\n%s", err, out)
	}
	want := "kmirror " + built.res.meta.version + " (" + runtime.Version() + ")\n"
	if string(out) != want {
		t.Errorf("kmirror --version printed %q, want %q", out, want)
	}
	// Static: no program interpreter (ld.so) to find in the image.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader (PT_INTERP): the image has none")
		}
	}
}

// TestImageTarball opens the docker-loadable tarball by its tag: it holds
// the same image as the layout.
func TestImageTarball(t *testing.T) {
	tag, err := name.NewTag("kmirror:" + tagOf(built.res.meta.version))
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(built.tar, &tag)
	if err != nil {
		t.Fatalf("%s has no image tagged %s: %v", built.tar, tag, err)
	}
	want, _ := openLayout(t, built.dir)
	for _, part := range []struct {
		what string
		of   func(v1.Image) (v1.Hash, error)
	}{{"config", v1.Image.ConfigName}, {"layer", lastLayerDigest}} {
		got, err1 := part.of(img)
		exp, err2 := part.of(want)
		if err1 != nil || err2 != nil || got != exp {
			t.Errorf("tarball %s %s (%v), layout's %s (%v)", part.what, got, err1, exp, err2)
		}
	}
}

func lastLayerDigest(img v1.Image) (v1.Hash, error) {
	ls, err := img.Layers()
	if err != nil || len(ls) == 0 {
		return v1.Hash{}, fmt.Errorf("layers: %d, %v", len(ls), err)
	}
	return ls[len(ls)-1].Digest()
}

// TestImageReproducible builds again from the same checkout, into other
// directories (a second go build, not a copy): same digest, same tarball.
func TestImageReproducible(t *testing.T) {
	dir := t.TempDir()
	again, err := build(testOptions(filepath.Join(dir, "image"), filepath.Join(dir, "kmirror-image.tar")))
	if err != nil {
		t.Fatal(err)
	}
	if again.digest != built.res.digest {
		t.Errorf("second build's digest %s, first %s", again.digest, built.res.digest)
	}
	a, b := fileSum(t, built.tar), fileSum(t, filepath.Join(dir, "kmirror-image.tar"))
	if a != b {
		t.Errorf("tarballs differ: %x and %x", a, b)
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
