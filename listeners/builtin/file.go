package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/kmirror/kmirror/listeners"
)

// FileOptions configure a File listener.
type FileOptions struct {
	// Path is the JSON file to write (required). Its directory must exist.
	Path string
	// Mode is the file's permission bits; 0 means 0644.
	Mode os.FileMode
}

// File keeps the current mirrored set of every mirror it hears about in one
// JSON file, rewritten on every call:
//
//	{
//	  "mirrors": {
//	    "east-to-west": {
//	      "sequence": 4,
//	      "groups_sequence": 2,
//	      "updated": "2025-01-01T10:00:00Z",
//	      "topics": [{"upstream": "orders", "downstream": "east.orders", "partitions": 3, "state": "mirroring", "metadata": {}}],
//	      "groups": [{"name": "billing", "topics": ["orders"]}]
//	    }
//	  }
//	}
//
// sequence is the last TopicsChanged call's, groups_sequence the last
// GroupsChanged call's. The file is replaced atomically (a temporary file in
// the same directory, synced, then renamed over it), so a reader always sees
// a complete document. The state lives in memory: after a restart the file
// lists a mirror again once its first call arrives.
//
// Config keys: path (required), mode (octal, default 0644).
type File struct {
	mu      sync.Mutex
	path    string
	mode    os.FileMode
	mirrors map[string]*fileMirror
	now     func() time.Time
}

type fileMirror struct {
	Sequence       uint64      `json:"sequence"`
	GroupsSequence uint64      `json:"groups_sequence"`
	Updated        time.Time   `json:"updated"`
	Topics         []topicJSON `json:"topics"`
	Groups         []groupJSON `json:"groups"`
}

type fileDoc struct {
	Mirrors map[string]*fileMirror `json:"mirrors"`
}

// NewFile returns a File listener writing to o.Path. It does not touch the
// file until the first call.
func NewFile(o FileOptions) (*File, error) {
	f := &File{}
	if err := f.apply(o); err != nil {
		return nil, err
	}
	return f, nil
}

// ParseFileOptions reads a file listener's config map (keys path, mode).
func ParseFileOptions(config map[string]string) (FileOptions, error) {
	r := newConfigReader(KindFile, config)
	var o FileOptions
	o.Path, _ = r.str("path")
	if o.Path == "" {
		r.errorf("path: required (the JSON file to write)")
	}
	if v, ok := r.str("mode"); ok {
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil || m > 0o777 {
			r.errorf("mode: %q is not octal permission bits (e.g. 0644)", v)
		}
		o.Mode = os.FileMode(m)
	}
	return o, r.finish()
}

func (f *File) apply(o FileOptions) error {
	if o.Path == "" {
		return errors.New("file listener: Path is required")
	}
	if o.Mode == 0 {
		o.Mode = 0o644
	}
	if o.Mode&^os.ModePerm != 0 {
		return fmt.Errorf("file listener: Mode %v has more than permission bits", o.Mode)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.path = o.Path
	f.mode = o.Mode
	return nil
}

// Configure implements listeners.Configurer.
func (f *File) Configure(_ context.Context, config map[string]string) error {
	o, err := ParseFileOptions(config)
	if err != nil {
		return err
	}
	return f.apply(o)
}

// Close implements listeners.Closer; the file is complete after every call,
// so there is nothing to flush.
func (f *File) Close() error { return nil }

// TopicsChanged implements listeners.TopicListener.
func (f *File) TopicsChanged(ctx context.Context, c listeners.TopicsChange) error {
	return f.update(ctx, c.Mirror, func(m *fileMirror) {
		m.Sequence = c.Sequence
		m.Topics = topicsJSON(c.Topics)
	})
}

// GroupsChanged implements listeners.GroupListener.
func (f *File) GroupsChanged(ctx context.Context, c listeners.GroupsChange) error {
	return f.update(ctx, c.Mirror, func(m *fileMirror) {
		m.GroupsSequence = c.Sequence
		m.Groups = groupsJSON(c.Groups)
	})
}

func (f *File) update(ctx context.Context, mirror string, change func(*fileMirror)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.path == "" {
		return errors.New("file listener: not configured (no path)")
	}
	if f.mirrors == nil {
		f.mirrors = map[string]*fileMirror{}
	}
	m := f.mirrors[mirror]
	if m == nil {
		m = &fileMirror{Topics: []topicJSON{}, Groups: []groupJSON{}}
		f.mirrors[mirror] = m
	}
	change(m)
	now := time.Now
	if f.now != nil {
		now = f.now
	}
	m.Updated = now().UTC()
	// The state is kept even when the write fails: the next call (the
	// dispatcher retries) writes it, whichever mirror it is for.
	data, err := json.MarshalIndent(fileDoc{Mirrors: f.mirrors}, "", "  ")
	if err != nil {
		return fmt.Errorf("file listener: %w", err)
	}
	data = append(data, '\n')
	if err := writeFileAtomic(f.path, data, f.mode); err != nil {
		return fmt.Errorf("file listener: %w", err)
	}
	return nil
}

// writeFileAtomic replaces path with data: a temporary file in the same
// directory is written, synced and renamed over path, then the directory is
// synced so the rename survives a crash. On error no temporary file is left.
func writeFileAtomic(path string, data []byte, mode os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(mode); err != nil {
		return err
	}
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// Best effort: some file systems cannot sync a directory.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
