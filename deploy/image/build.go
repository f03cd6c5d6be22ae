package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// buildKmirror cross-builds cmd/kmirror from the repository at root for
// linux/arch into dir and returns the binary's path. The flags are the ones
// that make the output depend on the source and the Go version alone:
// CGO_ENABLED=0 gives a static binary (the image has no libc), -trimpath
// drops the build machine's paths, -buildvcs=false the checkout's state
// (the version comes in by -X as `make build` puts it), and -buildid= the
// build ID, which hashes the inputs' paths and the action graph.
func buildKmirror(root, arch, version, dir string) (string, error) {
	out := filepath.Join(dir, "kmirror")
	cmd := exec.Command("go", "build",
		"-trimpath", "-buildvcs=false",
		"-ldflags", "-X main.version="+version+" -buildid=",
		"-o", out, "./cmd/kmirror")
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch,
		// The caller's GOFLAGS (a -tags=pprof left from a bench, say)
		// would change what goes into the image without showing in it.
		"GOFLAGS=")
	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/kmirror (GOOS=linux GOARCH=%s) in %s: %w\n%s", arch, root, err, strings.TrimSpace(output.String()))
	}
	return out, nil
}
