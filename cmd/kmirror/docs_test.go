package main

// The docs as tests: every YAML config block of the Markdown docs loads,
// every CLI example that needs no cluster runs, and the plugin page's code
// builds as the page says.
//
// Conventions for a ```yaml block, in comment lines at its top:
//
//	# fragment of: deploy/examples/single.yaml
//	    The block is part of that file (a path from the repository root),
//	    as it is: every key of the block is in the file, at the same
//	    place, with the same value. The file is loaded.
//	# add to: deploy/examples/single.yaml
//	    The block adds to that file: it is merged into it and the result
//	    is loaded. Merging: a mapping's keys are merged into the file's
//	    mapping of the same place; a list of mappings element by element,
//	    an element with a name into the file's element of that name (the
//	    block's mirror east-to-west into the file's, one of another name
//	    added), one without by position; anything else replaces what the
//	    file has.
//	# not a kmirror config: prometheus.yml
//	    The block is another program's file; it is not loaded.
//	# env: NAME=value NAME2=value
//	    The block refers to ${NAME}: it is loaded with these set.
//
// A block without "fragment of" or "not a kmirror config" is a whole
// config. Files a block names that must exist (a plugin's path, *_file
// keys) are created, empty but for one line, next to the config (an
// absolute path under the test's directory, the block pointing there), so
// a block can name /etc/kmirror/http.token.

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/kmirror/kmirror/config"
)

// docFiles are the Markdown files whose blocks are tested.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs: %v", err)
	}
	return append([]string{"../../README.md", "../../deploy/README.md"}, files...)
}

// block is one fenced code block of a Markdown file.
type block struct {
	file string
	line int // of the opening fence, 1-based
	lang string
	text string
}

func (b block) String() string {
	return fmt.Sprintf("%s:%d", strings.TrimPrefix(b.file, "../../"), b.line)
}

func readBlocks(t *testing.T, file string) []block {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out []block
	var cur *block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{file: file, line: n, lang: strings.TrimPrefix(line, "```")}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: unclosed code block", file, cur.line)
	}
	return out
}

// conventions are the convention comments at the top of a YAML block.
type conventions struct {
	fragmentOf, addTo string // the file the block is part of, or adds to
	foreign           bool
	env               map[string]string
}

// base is the file the block is part of or adds to; "" for a whole config.
func (c conventions) base() string { return cmp.Or(c.fragmentOf, c.addTo) }

// directives reads the convention comments at the top of a YAML block.
func directives(text string) conventions {
	c := conventions{env: map[string]string{}}
	for line := range strings.SplitSeq(text, "\n") {
		comment, ok := strings.CutPrefix(line, "#")
		if !ok {
			break
		}
		comment = strings.TrimSpace(comment)
		if v, ok := strings.CutPrefix(comment, "fragment of:"); ok {
			c.fragmentOf = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(comment, "add to:"); ok {
			c.addTo = strings.TrimSpace(v)
		}
		if strings.HasPrefix(comment, "not a kmirror config") {
			c.foreign = true
		}
		if v, ok := strings.CutPrefix(comment, "env:"); ok {
			for kv := range strings.FieldsSeq(v) {
				k, v, _ := strings.Cut(kv, "=")
				c.env[k] = v
			}
		}
	}
	return c
}

// TestDocsYAML loads every YAML block of the docs as a config (see the
// conventions above).
func TestDocsYAML(t *testing.T) {
	n := 0
	for _, file := range docFiles(t) {
		for _, b := range readBlocks(t, file) {
			if b.lang != "yaml" {
				continue
			}
			conv := directives(b.text)
			if conv.foreign {
				continue
			}
			n++
			t.Run(b.String(), func(t *testing.T) {
				for k, v := range conv.env {
					t.Setenv(k, v)
				}
				doc := parseYAML(t, b.text)
				if file := conv.base(); file != "" {
					base, err := os.ReadFile(filepath.Join("../..", file))
					if err != nil {
						t.Fatalf("%s: %v", b, err)
					}
					d := parseYAML(t, string(base))
					if conv.fragmentOf != "" {
						if diffs := notIn(d.Content[0], doc.Content[0], ""); len(diffs) > 0 {
							t.Errorf("%s says \"fragment of: %s\", but the file does not hold the block as it is: %s; a block that adds to the file says \"add to: %s\"", b, file, strings.Join(diffs, ", "), file)
						}
					}
					merge(d.Content[0], doc.Content[0])
					doc = d
				}
				dir := t.TempDir()
				createNamedFiles(t, dir, doc.Content[0], "")
				var buf bytes.Buffer
				enc := yaml.NewEncoder(&buf)
				enc.SetIndent(2)
				if err := enc.Encode(doc); err != nil {
					t.Fatal(err)
				}
				if _, err := config.Load(buf.Bytes(), filepath.Join(dir, "kmirror.yaml")); err != nil {
					t.Errorf("%s does not load:\n%v\nas loaded:\n%s", b, err, buf.String())
				}
			})
		}
	}
	if n < 10 {
		t.Errorf("only %d YAML blocks found", n)
	}
}

// TestFragmentCheck: a block labelled "fragment of" must be in the file as
// it is; TestDocsYAML reports every key the file lacks or holds with
// another value, and nothing for a true fragment, whatever its style.
func TestFragmentCheck(t *testing.T) {
	base := parseYAML(t, `clusters:
  east: {bootstrap_servers: ["a:9092", "b:9092"]}
mirrors:
  - name: east-to-west
    source: east
    replication_factor: 3
`)
	for frag, want := range map[string]string{
		"clusters:\n  east:\n    bootstrap_servers:\n      - a:9092\n      - \"b:9092\"\n": "",
		"mirrors:\n  - name: east-to-west\n    replication_factor: 3\n":                    "",
		"mirrors:\n  - name: east-to-west\n    exactly_once: true\n":                       "mirrors[0].exactly_once (not in the file)",
		"mirrors:\n  - name: east-to-west\n    replication_factor: 2\n":                    "mirrors[0].replication_factor (another value in the file)",
		"mirrors:\n  - name: billing-only\n    source: east\n":                             "mirrors[0] (not in the file)",
		"http: {listen: \"0.0.0.0:9644\"}\n":                                               "http (not in the file)",
		"clusters:\n  east: {bootstrap_servers: [\"a:9092\"]}\n":                           "clusters.east.bootstrap_servers (another value in the file)",
	} {
		if got := strings.Join(notIn(base.Content[0], parseYAML(t, frag).Content[0], ""), ", "); got != want {
			t.Errorf("fragment\n%sgot %q, want %q", frag, got, want)
		}
	}
}

func parseYAML(t *testing.T, text string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("not YAML: %v\n%s", err, text)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		t.Fatalf("not a YAML mapping:\n%s", text)
	}
	return &doc
}

// merge merges frag into base, as the "fragment of" convention says.
func merge(base, frag *yaml.Node) {
	switch {
	case base.Kind == yaml.MappingNode && frag.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(frag.Content); i += 2 {
			k, v := frag.Content[i], frag.Content[i+1]
			if bv := mapValue(base, k.Value); bv != nil {
				merge(bv, v)
			} else {
				base.Content = append(base.Content, k, v)
			}
		}
	case base.Kind == yaml.SequenceNode && frag.Kind == yaml.SequenceNode && allMappings(base) && allMappings(frag):
		for i, v := range frag.Content {
			if bv := sameItem(base, v, i); bv != nil {
				merge(bv, v)
			} else {
				base.Content = append(base.Content, v)
			}
		}
	default:
		*base = *frag
	}
}

// sameItem is the element of the list of mappings base that item, the
// i-th of a block's list, stands for: the one of the same name when item
// has a name, else the i-th; nil when there is none.
func sameItem(base, item *yaml.Node, i int) *yaml.Node {
	if name := mapValue(item, "name"); name != nil {
		for _, bv := range base.Content {
			if n := mapValue(bv, "name"); n != nil && n.Value == name.Value {
				return bv
			}
		}
		return nil
	}
	if i < len(base.Content) {
		return base.Content[i]
	}
	return nil
}

// notIn lists what of frag, the block at path, is not in base as it is: a
// key base lacks, a list element it has not, a value it has another of.
func notIn(base, frag *yaml.Node, path string) []string {
	var out []string
	switch {
	case base.Kind == yaml.MappingNode && frag.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(frag.Content); i += 2 {
			k, v := frag.Content[i].Value, frag.Content[i+1]
			p := strings.TrimPrefix(path+"."+k, ".")
			if bv := mapValue(base, k); bv != nil {
				out = append(out, notIn(bv, v, p)...)
			} else {
				out = append(out, p+" (not in the file)")
			}
		}
	case base.Kind == yaml.SequenceNode && frag.Kind == yaml.SequenceNode && allMappings(base) && allMappings(frag):
		for i, v := range frag.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if bv := sameItem(base, v, i); bv != nil {
				out = append(out, notIn(bv, v, p)...)
			} else {
				out = append(out, p+" (not in the file)")
			}
		}
	case !sameValue(base, frag):
		out = append(out, path+" (another value in the file)")
	}
	return out
}

// sameValue reports whether two nodes hold the same YAML value, whatever
// their style (flow or block, quoted or not).
func sameValue(a, b *yaml.Node) bool {
	if a.Kind != b.Kind || len(a.Content) != len(b.Content) {
		return false
	}
	if a.Kind == yaml.ScalarNode {
		return a.Value == b.Value
	}
	for i := range a.Content {
		if !sameValue(a.Content[i], b.Content[i]) {
			return false
		}
	}
	return true
}

func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func allMappings(s *yaml.Node) bool {
	for _, n := range s.Content {
		if n.Kind != yaml.MappingNode {
			return false
		}
	}
	return true
}

// createNamedFiles creates the files n names that must exist: a plugin's
// or a plugin listener's path, and every *_file key, outside of config
// maps (a plugin's or listener's own settings, which kmirror does not
// read). An absolute name is created under dir and n is changed to point
// there.
func createNamedFiles(t *testing.T, dir string, n *yaml.Node, key string) {
	t.Helper()
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i].Value; k != "config" {
				createNamedFiles(t, dir, n.Content[i+1], k)
			}
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			createNamedFiles(t, dir, c, key)
		}
	case yaml.ScalarNode:
		if key != "path" && !strings.HasSuffix(key, "_file") || n.Value == "" || strings.Contains(n.Value, "${") {
			return
		}
		name := filepath.Join(dir, n.Value)
		if filepath.IsAbs(n.Value) {
			n.Value = name
		}
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte("fixture\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// noCluster are the commands a docs example may run without a cluster.
var noCluster = []string{"validate", "version", "--version", "--help", "help", "import-mm2"}

// TestDocsCLI runs every kmirror command line in the docs' sh blocks that
// needs no cluster (validate, version, help, any --help), in a directory
// whose kmirror.yaml is the first whole config of the same file, and
// expects exit status 0. The others must at least name a command.
func TestDocsCLI(t *testing.T) {
	ran := 0
	for _, file := range docFiles(t) {
		blocks := readBlocks(t, file)
		var cfg string
		for _, b := range blocks {
			if c := directives(b.text); b.lang == "yaml" && c.base() == "" && !c.foreign {
				cfg = b.text
				break
			}
		}
		for _, b := range blocks {
			if b.lang != "sh" {
				continue
			}
			for i, line := range strings.Split(b.text, "\n") {
				line, _, _ = strings.Cut(line, "#")
				args := strings.Fields(line)
				if len(args) < 2 || (args[0] != "kmirror" && args[0] != "./bin/kmirror") {
					continue
				}
				args = args[1:]
				where := fmt.Sprintf("%s:%d", strings.TrimPrefix(file, "../../"), b.line+1+i)
				if !slices.Contains(noCluster, args[0]) && !slices.Contains(args, "--help") {
					if !slices.Contains([]string{"run", "plan", "topics", "translate", "verify", "status", "demo", "failover", "failback", "cutover"}, args[0]) {
						t.Errorf("%s: unknown command %q", where, args[0])
					}
					continue
				}
				t.Run(where, func(t *testing.T) {
					dir := t.TempDir()
					if cfg != "" {
						if err := os.WriteFile(filepath.Join(dir, "kmirror.yaml"), []byte(cfg), 0o644); err != nil {
							t.Fatal(err)
						}
					}
					if args[0] == "import-mm2" {
						// Its input: MirrorMaker 2's own example file, or
						// Strimzi's for a .yaml, under the name the example
						// gives.
						example := "connect-mirror-maker.properties"
						if strings.HasSuffix(args[len(args)-1], ".yaml") {
							example = "strimzi-v1-tls-auth.yaml"
						}
						in, err := os.ReadFile("../../internal/mm2import/testdata/" + example)
						if err != nil {
							t.Fatal(err)
						}
						if err := os.WriteFile(filepath.Join(dir, args[len(args)-1]), in, 0o644); err != nil {
							t.Fatal(err)
						}
					}
					t.Chdir(dir)
					code, stdout, stderr := runIn(args...)
					if args[0] == "import-mm2" && code == exitNegative && strings.Contains(stderr, "not mapped") {
						code = exitOK // converted, with settings to review
					}
					if code != exitOK {
						t.Errorf("kmirror %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
					}
				})
				ran++
			}
		}
	}
	if ran < 3 {
		t.Errorf("only %d CLI examples ran", ran)
	}
}

// TestDocsPluginBuilds follows docs/plugins.md "Write one" (a filter) and
// "Write a listener" on fresh modules: a section's sh blocks run in order
// in an empty directory (with $KMIRROR the repository, as the page says),
// its Go block is main.go, and the result must be a plugin binary that
// validate accepts, without a warning, as what the page's config names it
// (validate starts the plugin and warns about one whose capabilities its
// entry never calls). Go runs with the environment's settings, as for a
// user (by default -mod=readonly: go build needs the page's go mod tidy);
// modules come from the module cache, where building kmirror put them, or
// the proxy.
func TestDocsPluginBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds plugin modules")
	}
	for _, c := range []struct{ section, next, bin string }{
		{"Write one", "Build and pin", "prefix-filter"},
		{"Write a listener", "Use a filter plugin in a mirror", "notify-listener"},
	} {
		t.Run(c.bin, func(t *testing.T) { followPluginSection(t, c.section, c.next, c.bin) })
	}
}

// followPluginSection builds the plugin bin as docs/plugins.md's section
// (up to the heading next) says, and validates the page's config of it.
func followPluginSection(t *testing.T, section, next, bin string) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readBlocks(t, "../../docs/plugins.md")
	text, err := os.ReadFile("../../docs/plugins.md")
	if err != nil {
		t.Fatal(err)
	}
	lineOf := func(heading string) int {
		i := bytes.Index(text, []byte("\n## "+heading+"\n"))
		if i < 0 {
			t.Fatalf("docs/plugins.md has no section %q", heading)
		}
		return bytes.Count(text[:i], []byte("\n")) + 1
	}
	start, end := lineOf(section), lineOf(next)
	var script strings.Builder
	script.WriteString("set -e\n")
	gos := 0
	for _, b := range blocks {
		if b.line < start || b.line > end {
			continue
		}
		switch b.lang {
		case "sh":
			script.WriteString(b.text)
		case "go":
			gos++
			fmt.Fprintf(&script, "cat > main.go <<'KMIRROR_EOF'\n%sKMIRROR_EOF\n", b.text)
		}
	}
	if gos != 1 || !strings.Contains(script.String(), "go build") {
		t.Fatalf("docs/plugins.md %q: want one go block and the sh blocks that build it, got:\n%s", section, script.String())
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KMIRROR="+root)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the page's steps fail: %v\n%s\nscript:\n%s", err, out, script.String())
	}
	bins, _ := filepath.Glob(filepath.Join(dir, "*", "bin", bin))
	if len(bins) != 1 {
		t.Fatalf("no bin/%s built under %s: %v", bin, dir, bins)
	}

	// The page's config, with the real pin: validate starts the plugin
	// and finds the capability its entry calls (no warning).
	path := bins[0]
	sum, err := exec.Command("sha256sum", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	var page string
	for _, b := range blocks {
		if b.lang == "yaml" && strings.Contains(b.text, "./bin/"+bin) {
			page = b.text
		}
	}
	pin := regexp.MustCompile(`sha256: "[0-9a-f]{64}"`)
	if !pin.MatchString(page) {
		t.Fatalf("no pinned %s config in docs/plugins.md", bin)
	}
	doc := parseYAML(t, strings.ReplaceAll(pin.ReplaceAllString(page, fmt.Sprintf("sha256: %q", strings.Fields(string(sum))[0])), "./bin/"+bin, path))
	baseText, err := os.ReadFile(filepath.Join(root, directives(page).base()))
	if err != nil {
		t.Fatal(err)
	}
	base := parseYAML(t, string(baseText))
	merge(base.Content[0], doc.Content[0])
	out, err := yaml.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "kmirror.yaml")
	if err := os.WriteFile(cfg, out, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runIn("validate", "--config", cfg)
	if code != exitOK || strings.Contains(stderr, "warning") {
		t.Errorf("validate: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestDocsShellPaths checks, in the docs' sh blocks, the paths a step
// needs before it runs, as from the repository root (where the docs'
// steps start): a directory to cd into, the source of an install, a
// package to go build, a make target. A path an earlier step of the block
// makes (mkdir, go build -o, a make target's -o) counts as there; an
// absolute path or one with a variable is the host's, not checked.
func TestDocsShellPaths(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	targets := makeTargets(t, filepath.Join(root, "Makefile"))
	checked := 0
	for _, file := range docFiles(t) {
		for _, b := range readBlocks(t, file) {
			if b.lang != "sh" {
				continue
			}
			sh := shellCheck{root: root, cwd: root, made: map[string]bool{}, targets: targets}
			for i, line := range strings.Split(b.text, "\n") {
				line, _, _ = strings.Cut(line, "#")
				for step := range strings.SplitSeq(line, "&&") {
					where := fmt.Sprintf("%s:%d", strings.TrimPrefix(file, "../../"), b.line+1+i)
					for _, p := range sh.step(strings.Fields(step)) {
						t.Errorf("%s: %s", where, p)
					}
				}
			}
			checked += sh.checked
		}
	}
	if checked < 5 {
		t.Errorf("only %d paths checked", checked)
	}
}

// shellCheck follows one sh block's steps.
type shellCheck struct {
	root, cwd string
	made      map[string]bool     // paths earlier steps make
	targets   map[string][]string // make targets and what their recipes write (-o)
	checked   int
}

// step checks one command and records what it makes; it returns the
// problems.
func (s *shellCheck) step(args []string) []string {
	if len(args) == 0 {
		return nil
	}
	operands := shellOperands(args[1:], "mogtS")
	switch {
	case args[0] == "cd" && len(operands) == 1:
		p := s.need(operands[0], "cd into")
		s.cwd = cmp.Or(s.path(operands[0]), s.cwd)
		return p
	case args[0] == "mkdir":
		for _, o := range operands {
			s.made[s.path(o)] = true
		}
	case args[0] == "make":
		var out []string
		for _, target := range operands {
			written, ok := s.targets[target]
			if !ok {
				out = append(out, fmt.Sprintf("make %s: no such target in the Makefile", target))
			}
			for _, w := range written {
				s.made[filepath.Join(s.root, w)] = true
			}
		}
		return out
	case args[0] == "go" && len(args) > 1 && args[1] == "build":
		var out []string
		build := shellOperands(args[2:], "o")
		for _, pkg := range build {
			if strings.HasPrefix(pkg, "./") {
				out = append(out, s.need(strings.TrimSuffix(pkg, "/..."), "build")...)
			}
		}
		if i := slices.Index(args, "-o"); i >= 0 && i+1 < len(args) {
			s.made[s.path(args[i+1])] = true
		}
		return out
	case args[0] == "install" && !slices.Contains(args, "-d") && len(operands) >= 2:
		var out []string
		for _, src := range operands[:len(operands)-1] {
			out = append(out, s.need(src, "install")...)
		}
		return out
	}
	return nil
}

// path is name as an absolute path from the current directory; "" for a
// path of the host (absolute) or one with a variable.
func (s *shellCheck) path(name string) string {
	if filepath.IsAbs(name) || strings.ContainsAny(name, "$~") {
		return ""
	}
	return filepath.Join(s.cwd, name)
}

// need reports name missing unless it exists or an earlier step made it
// (or a directory holding it).
func (s *shellCheck) need(name, what string) []string {
	p := s.path(name)
	if p == "" {
		return nil
	}
	s.checked++
	for d := p; d != s.root && d != "/"; d = filepath.Dir(d) {
		if s.made[d] {
			return nil
		}
	}
	if _, err := os.Stat(p); err != nil {
		rel, _ := filepath.Rel(s.root, p)
		return []string{fmt.Sprintf("%s %s: there is no %s from the repository root (say where the step runs, or how to make it)", what, name, rel)}
	}
	return nil
}

// shellOperands are args without their options; the single-letter options
// in withValue take the next argument as their value.
func shellOperands(args []string, withValue string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "-") && len(a) == 2 && strings.ContainsRune(withValue, rune(a[1])):
			i++
		case strings.HasPrefix(a, "-"), strings.Contains(a, "="):
		default:
			out = append(out, a)
		}
	}
	return out
}

// makeTargets reads the Makefile's targets and, for each, the -o outputs
// of its recipe.
func makeTargets(t *testing.T, makefile string) map[string][]string {
	t.Helper()
	text, err := os.ReadFile(makefile)
	if err != nil {
		t.Fatal(err)
	}
	targetRE, outRE := regexp.MustCompile(`^([A-Za-z0-9_.-]+):`), regexp.MustCompile(`-o\s+(\S+)`)
	out := map[string][]string{}
	var cur string
	for line := range strings.SplitSeq(string(text), "\n") {
		if m := targetRE.FindStringSubmatch(line); m != nil {
			cur = m[1]
			out[cur] = nil
			continue
		}
		if strings.HasPrefix(line, "\t") && cur != "" {
			for _, m := range outRE.FindAllStringSubmatch(line, -1) {
				out[cur] = append(out[cur], m[1])
			}
		}
	}
	return out
}
