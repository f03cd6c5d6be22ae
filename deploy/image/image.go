package main

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The paths and port the chart relies on (deploy/helm; the contract of
// issue 29): change them together.
const (
	binaryPath = "/usr/bin/kmirror"
	configPath = "/etc/kmirror/kmirror.yaml"
	httpPort   = 9644
)

// meta is what the image says about itself besides its files.
type meta struct {
	version  string
	revision string
	source   string
	licenses string
	arch     string
	created  time.Time
}

// labels are the OCI annotation keys (image-spec annotations.md), which
// `docker inspect` and registries show.
func (m meta) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "kmirror",
		"org.opencontainers.image.description": "Replicates Kafka topics, consumer group offsets and ACLs between clusters; a replacement for Apache MirrorMaker 2",
		"org.opencontainers.image.version":     m.version,
		"org.opencontainers.image.revision":    m.revision,
		"org.opencontainers.image.source":      m.source,
		"org.opencontainers.image.licenses":    m.licenses,
	}
}

// assemble makes the image: empty.Image, OCI media types throughout (a
// registry and skopeo keep them as they are), and one layer from rootFS.
func assemble(binary []byte, m meta) (v1.Image, error) {
	tarBytes, err := layerTar(rootFS(binary), m.created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	created := v1.Time{Time: m.created}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	base, err = mutate.ConfigFile(base, &v1.ConfigFile{
		Architecture: m.arch,
		OS:           "linux",
		Created:      created,
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Entrypoint: []string{binaryPath},
			Cmd:        []string{"run", "--config", configPath},
			User:       strconv.Itoa(uid) + ":" + strconv.Itoa(uid),
			WorkingDir: "/",
			// go-plugin puts its unix sockets in TMPDIR; the chart mounts
			// an emptyDir there so the root filesystem can be read-only.
			Env:          []string{"TMPDIR=/tmp"},
			ExposedPorts: map[string]struct{}{strconv.Itoa(httpPort) + "/tcp": {}},
			Labels:       m.labels(),
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   created,
			CreatedBy: "deploy/image: go build ./cmd/kmirror (CGO_ENABLED=0, -trimpath)",
			Comment:   "kmirror " + m.version,
		},
	})
}
