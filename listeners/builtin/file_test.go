package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/listeners"
)

type fileDocForTest struct {
	Mirrors map[string]struct {
		Sequence       uint64      `json:"sequence"`
		GroupsSequence uint64      `json:"groups_sequence"`
		Updated        time.Time   `json:"updated"`
		Topics         []topicJSON `json:"topics"`
		Groups         []groupJSON `json:"groups"`
	} `json:"mirrors"`
}

func readDoc(t *testing.T, path string) fileDocForTest {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d fileDocForTest
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v\n%s", path, err, data)
	}
	return d
}

func onlyFile(t *testing.T, dir, name string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	if !reflect.DeepEqual(names, []string{name}) {
		t.Fatalf("directory holds %v, want only %s (no temporary files left)", names, name)
	}
}

func TestFileSeveralMirrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mirrored.json")
	f, err := NewFile(FileOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := sample()
	if err := f.TopicsChanged(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := f.GroupsChanged(ctx, sampleGroups()); err != nil {
		t.Fatal(err)
	}
	other := listeners.TopicsChange{Mirror: "west-to-east", Sequence: 1,
		Topics: []listeners.Topic{{Upstream: "clicks", Downstream: "west.clicks", Partitions: 12, State: "pending"}}}
	if err := f.TopicsChanged(ctx, other); err != nil {
		t.Fatal(err)
	}

	d := readDoc(t, path)
	if len(d.Mirrors) != 2 {
		t.Fatalf("mirrors: %v", d.Mirrors)
	}
	m := d.Mirrors["east-to-west"]
	if m.Sequence != 7 || m.GroupsSequence != 3 || m.Updated.IsZero() {
		t.Errorf("east-to-west: sequence %d, groups_sequence %d, updated %v", m.Sequence, m.GroupsSequence, m.Updated)
	}
	if !reflect.DeepEqual(m.Topics, topicsJSON(c.Topics)) {
		t.Errorf("topics %+v, want %+v", m.Topics, topicsJSON(c.Topics))
	}
	if m.Topics[0].Metadata["kmirror.source.cluster"] != "east" {
		t.Errorf("metadata lost: %+v", m.Topics[0])
	}
	if !reflect.DeepEqual(m.Groups, []groupJSON{{Name: "billing", Topics: []string{"orders", "payments"}}}) {
		t.Errorf("groups %+v", m.Groups)
	}
	w := d.Mirrors["west-to-east"]
	if w.Sequence != 1 || len(w.Topics) != 1 || w.Groups == nil || len(w.Groups) != 0 {
		t.Errorf("west-to-east: %+v", w)
	}
	// Pretty JSON, [] rather than null, a trailing newline.
	data, _ := os.ReadFile(path)
	if data[len(data)-1] != '\n' || !json.Valid(data) ||
		!strings.Contains(string(data), "\n  \"mirrors\": {") || !strings.Contains(string(data), `"groups": []`) {
		t.Errorf("file is not pretty JSON with []:\n%s", data)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	onlyFile(t, dir, "mirrored.json")

	// A removal shows as the topic missing from the full set.
	c2 := listeners.TopicsChange{Mirror: "east-to-west", Sequence: 8, Topics: c.Topics[:1], Removed: c.Topics[1:]}
	if err := f.TopicsChanged(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if m := readDoc(t, path).Mirrors["east-to-west"]; m.Sequence != 8 || len(m.Topics) != 1 || m.Topics[0].Upstream != "orders" || len(m.Groups) != 1 {
		t.Errorf("after removal: %+v", m)
	}
}

// Readers racing with many concurrent writers always see a complete, valid
// document, and no temporary file is left behind.
func TestFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "set.json")
	f, err := NewFile(FileOptions{Path: path, Mode: 0o600})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Big enough that a torn write would be visible.
	var topics []listeners.Topic
	for i := range 600 {
		topics = append(topics, listeners.Topic{Upstream: fmt.Sprintf("topic-%04d", i), Downstream: fmt.Sprintf("east.topic-%04d", i),
			Partitions: int32(i%12 + 1), State: "mirroring", Metadata: map[string]string{"team": "t"}})
	}
	if err := f.TopicsChanged(ctx, listeners.TopicsChange{Mirror: "m0", Sequence: 1, Topics: topics}); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var readers, reading sync.WaitGroup
	var reads, bad int
	var mu sync.Mutex
	for range 2 {
		readers.Add(1)
		reading.Add(1)
		go func() {
			defer readers.Done()
			for first := true; ; first = false {
				if !first {
					select {
					case <-stop:
						return
					default:
					}
				}
				data, err := os.ReadFile(path)
				var d fileDocForTest
				ok := err == nil && json.Unmarshal(data, &d) == nil && len(d.Mirrors) >= 1
				mu.Lock()
				reads++
				if !ok {
					bad++
				}
				mu.Unlock()
				if first {
					reading.Done()
				}
			}
		}()
	}
	// The writers start once both readers are reading, however late the
	// scheduler runs them.
	reading.Wait()
	var writers sync.WaitGroup
	for w := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			mirror := fmt.Sprintf("m%d", w)
			for seq := uint64(2); seq < 12; seq++ {
				n := len(topics) - int(seq)*10
				if err := f.TopicsChanged(ctx, listeners.TopicsChange{Mirror: mirror, Sequence: seq, Topics: topics[:n]}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	if reads == 0 || bad > 0 {
		t.Fatalf("%d of %d reads saw a missing or invalid file", bad, reads)
	}
	d := readDoc(t, path)
	for w := range 4 {
		if m := d.Mirrors[fmt.Sprintf("m%d", w)]; m.Sequence != 11 || len(m.Topics) != len(topics)-11*10 {
			t.Errorf("m%d: sequence %d, %d topics", w, m.Sequence, len(m.Topics))
		}
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	onlyFile(t, dir, "set.json")
	t.Logf("%d reads, all valid", reads)
}

// A failed write returns an error, leaves the old file and no temporary
// file, and the next call writes everything.
func TestFileWriteError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "set.json")
	f, err := NewFile(FileOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := f.TopicsChanged(ctx, sample()); err != nil {
		t.Fatal(err)
	}
	// Make the rename fail: the target is now a non-empty directory.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.GroupsChanged(ctx, sampleGroups()); err == nil {
		t.Fatal("write over a directory succeeded")
	}
	onlyFile(t, dir, "set.json")
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	if err := f.TopicsChanged(ctx, listeners.TopicsChange{Mirror: "other", Sequence: 1}); err != nil {
		t.Fatal(err)
	}
	d := readDoc(t, path)
	if m := d.Mirrors["east-to-west"]; m.GroupsSequence != 3 || len(m.Groups) != 1 || m.Sequence != 7 {
		t.Errorf("the failed call's state was not kept: %+v", m)
	}
	onlyFile(t, dir, "set.json")

	// A missing directory fails too.
	g, _ := NewFile(FileOptions{Path: filepath.Join(dir, "missing", "set.json")})
	if err := g.TopicsChanged(ctx, sample()); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}
