package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// The image's user: 65532 is the "nonroot" id distroless and ko use, so
// cluster policies written for those images fit this one too.
const (
	uid      = 65532
	userName = "kmirror"
)

// file is one entry of the image's only layer.
type file struct {
	name string // relative to /, directories end in "/"
	mode int64  // permission bits, with the sticky bit where wanted
	data []byte // a regular file's content; nil for a directory
}

// rootFS lists the image's whole filesystem: the binary, the accounts the
// runtime resolves the user against, and the directories the contract
// names. Everything is root's, so the process (65532) can write nowhere but
// /tmp, read-only root filesystem or not.
func rootFS(binary []byte) []file {
	return []file{
		{name: "etc/", mode: 0o755},
		// HOME is /tmp: under a read-only root filesystem it is the one
		// place a plugin that wants a home can write.
		{name: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/tmp:/sbin/nologin\n", userName, uid, uid, userName))},
		{name: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, uid))},
		{name: "etc/kmirror/", mode: 0o755},
		{name: "plugins/", mode: 0o755},
		// 1777 as on any Linux: go-plugin makes its sockets here (TMPDIR),
		// and an emptyDir mounted over it keeps the same use.
		{name: "tmp/", mode: 0o1777},
		{name: "usr/", mode: 0o755},
		{name: "usr/bin/", mode: 0o755},
		{name: "usr/bin/kmirror", mode: 0o755, data: binary},
	}
}

// layerTar writes files as an uncompressed tar whose bytes depend on the
// files and mtime alone: entries sorted by name (a directory before its
// contents), one mtime, owner 0:0 with no user or group names, USTAR
// headers (no PAX records carrying access or change times).
func layerTar(files []file, mtime time.Time) ([]byte, error) {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b file) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range sorted {
		h := &tar.Header{
			Name:    f.name,
			Mode:    f.mode,
			ModTime: mtime,
			Format:  tar.FormatUSTAR,
		}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.name, err)
		}
		if _, err := io.Copy(tw, bytes.NewReader(f.data)); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
