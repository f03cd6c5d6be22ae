package plugins

import (
	"errors"
	"fmt"
)

// ErrPluginShutdown is returned (wrapped with the plugin's name) by every
// call to a plugin that is not running: it exited or was killed, is being
// restarted, or its host was closed. Nothing was decided; retry later.
var ErrPluginShutdown = errors.New("plugin is not running")

// ErrChecksumMismatch is wrapped by the error Start returns when the binary
// does not match its pinned sha256; the plugin was not started.
var ErrChecksumMismatch = errors.New("sha256 mismatch")

// ChecksumError says which binary failed its sha256 pin and why. It
// matches errors.Is(err, ErrChecksumMismatch).
type ChecksumError struct {
	Plugin   string
	Path     string
	Expected string // hex, from the Spec
	Actual   string // hex, of the file on disk
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("plugin %q: refusing to start %s: sha256 mismatch: expected %s, actual %s (rebuild the plugin or update its pinned sha256: sha256sum %s)",
		e.Plugin, e.Path, e.Expected, e.Actual, e.Path)
}

// Is reports whether target is ErrChecksumMismatch.
func (e *ChecksumError) Is(target error) bool { return target == ErrChecksumMismatch }
