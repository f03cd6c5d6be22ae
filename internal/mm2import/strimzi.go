package mm2import

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kmirror/kmirror/config"
)

// Strimzi's KafkaMirrorMaker2 resource runs MM2's connectors on a Connect
// cluster. ConvertStrimzi writes what Strimzi gives those connectors as the
// properties of a dedicated-mode file (the connectors' config as flow keys
// "A->B.key", each cluster's config as "A.key") and converts them with the
// mapper of properties files, so that both inputs are read by the same
// rules. Each property remembers the path in the resource it came from, and
// the notes name that path.

// SecretsDir is where the Helm chart mounts each Secret of secretMounts:
// SecretsDir/<secret name>/<key>.
const SecretsDir = "/etc/kmirror/secrets"

const (
	strimziGroup    = "kafka.strimzi.io"
	strimziKind     = "KafkaMirrorMaker2"
	strimziReplicas = 3 // AbstractKafkaConnectSpec's default
	// The Connect offsets topic of a v1beta2 resource with connectCluster
	// that does not set offset.storage.topic (KafkaMirrorMaker2Configuration).
	strimziOffsetsTopic = "mirrormaker2-cluster-offsets"
)

// StrimziResult is a converted KafkaMirrorMaker2 resource.
type StrimziResult struct {
	Result
	// Values are the Helm chart's values: replicaCount, config (the same
	// configuration as YAML), secretMounts and resources.
	Values []byte
	// Name and APIVersion identify the resource read.
	Name, APIVersion string
	// SecretMounts are the Secrets the configuration reads files from, at
	// SecretsDir/<name>/.
	SecretMounts []string
}

// strimziKindRE finds "kind: KafkaMirrorMaker2" as a YAML line (also as
// an item of a List, as kubectl writes several resources) or in JSON.
var strimziKindRE = regexp.MustCompile(`(?m)(^[ \t-]*kind:[ \t]*["']?` + strimziKind + `["']?[ \t]*(#.*)?\r?$)|("kind"[ \t]*:[ \t]*"` + strimziKind + `")`)

// IsStrimzi reports whether data holds a KafkaMirrorMaker2 resource (a
// "kind: KafkaMirrorMaker2" line, or its JSON), rather than a properties
// file.
func IsStrimzi(data []byte) bool { return strimziKindRE.Match(data) }

// resource is one YAML document of the input.
type resource struct {
	root             *yaml.Node
	kind, apiVersion string
	name             string
	line             int
	kindLine, apiVer int
}

// ConvertStrimzi converts the KafkaMirrorMaker2 resource of data, a YAML
// file that may hold other resources; name picks one when it holds more
// than one. file names the input in errors and in the output's comments.
// A YAML syntax error is a *config.Error; a resource Strimzi would refuse
// is an *InputError whose Key is the path in the resource.
func ConvertStrimzi(data []byte, file, name string) (*StrimziResult, error) {
	docs, err := resources(data, file)
	if err != nil {
		return nil, err
	}
	r, err := pick(docs, name)
	if err != nil {
		return nil, err
	}
	version, ok := strings.CutPrefix(r.apiVersion, strimziGroup+"/")
	if !ok || (version != "v1" && version != "v1beta2") {
		return nil, &InputError{Line: r.apiVer, Key: "apiVersion", Msg: fmt.Sprintf("%q: import-mm2 reads %s/v1beta2 and %s/v1 (Strimzi's own conversion tool upgrades older resources)", r.apiVersion, strimziGroup, strimziGroup)}
	}
	s := &strimzi{version: version, file: file, name: r.name, index: map[string]int{}, paths: map[string]string{}, security: map[string]clusterSecurity{}}
	if err := s.resource(r.root); err != nil {
		return nil, err
	}
	return s.convert()
}

// resources decodes every document of data.
func resources(data []byte, file string) ([]resource, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []resource
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, config.YAMLSyntaxError(file, err)
		}
		root := &doc
		if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
			root = doc.Content[0]
		}
		out = append(out, listed(root)...)
	}
}

// listed returns the resource root is, or the items of a List (kubectl's
// output for several resources).
func listed(root *yaml.Node) []resource {
	if root.Kind != yaml.MappingNode {
		return nil // an empty document, or not a resource
	}
	r := resource{root: root, line: root.Line}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], resolve(root.Content[i+1])
		switch k.Value {
		case "kind":
			r.kind, r.kindLine = v.Value, k.Line
		case "apiVersion":
			r.apiVersion, r.apiVer = v.Value, k.Line
		case "metadata":
			if v.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(v.Content); j += 2 {
					if v.Content[j].Value == "name" {
						r.name = resolve(v.Content[j+1]).Value
					}
				}
			}
		}
	}
	if r.kind == "List" && r.apiVersion == "v1" {
		var out []resource
		for i := 0; i+1 < len(root.Content); i += 2 {
			if items := resolve(root.Content[i+1]); root.Content[i].Value == "items" && items.Kind == yaml.SequenceNode {
				for _, item := range items.Content {
					out = append(out, listed(resolve(item))...)
				}
			}
		}
		return out
	}
	return []resource{r}
}

// pick returns the KafkaMirrorMaker2 resource to convert.
func pick(docs []resource, name string) (resource, error) {
	var found, others []string
	var mm2 []resource
	otherLine := 0
	for _, r := range docs {
		if r.kind != strimziKind {
			if r.kind != "" {
				others = append(others, r.kind+" "+r.name)
				otherLine = cmp.Or(otherLine, r.kindLine)
			}
			continue
		}
		found = append(found, fmt.Sprintf("%s (line %d)", r.name, r.line))
		if name == "" || r.name == name {
			mm2 = append(mm2, r)
		}
	}
	switch {
	case len(found) == 0 && len(others) > 0:
		return resource{}, &InputError{Line: otherLine, Key: "kind", Msg: fmt.Sprintf("no %s resource in the file (it holds %s)", strimziKind, strings.Join(others, ", "))}
	case len(found) == 0:
		return resource{}, &InputError{Line: 1, Key: "kind", Msg: fmt.Sprintf("no %s resource in the file", strimziKind)}
	case len(mm2) == 0:
		return resource{}, &InputError{Key: "metadata.name", Msg: fmt.Sprintf("no %s named %q (the file holds %s)", strimziKind, name, strings.Join(found, ", "))}
	case len(mm2) > 1:
		return resource{}, &InputError{Line: mm2[1].line, Key: "kind", Msg: fmt.Sprintf("%d %s resources (%s): choose one with --name", len(mm2), strimziKind, strings.Join(found, ", "))}
	}
	return mm2[0], nil
}

// strimzi collects the properties and notes of one resource.
type strimzi struct {
	version, file, name string
	props               []Property
	index               map[string]int    // property key -> index in props
	paths               map[string]string // property key -> path in the resource
	security            map[string]clusterSecurity
	mounts              []string
	notes               Result // the resource's own notes (Unmapped, Ignored)
	replicas, resources *yaml.Node
	connectShape        bool // v1beta2's connectCluster and clusters
}

func (s *strimzi) unmapped(line int, path, format string, args ...any) {
	s.notes.Unmapped = append(s.notes.Unmapped, Note{Line: line, Key: path, Reason: fmt.Sprintf(format, args...)})
}

func (s *strimzi) ignored(line int, path, format string, args ...any) {
	s.notes.Ignored = append(s.notes.Ignored, Note{Line: line, Key: path, Reason: fmt.Sprintf(format, args...)})
}

// add gives the mapper a property from path. The first of two settings of
// one key wins, as in Strimzi where a mirror's topicsPattern overrides its
// connectors' topics; the other is noted.
func (s *strimzi) add(key, value string, line int, path string) {
	if i, dup := s.index[key]; dup {
		first := s.props[i]
		if first.Value == value {
			s.ignored(line, path, "the same as %s", s.paths[key])
		} else {
			s.unmapped(line, path, "%s sets it too, and kmirror's mirror has one value: the output uses that one", s.paths[key])
		}
		return
	}
	s.index[key] = len(s.props)
	s.paths[key] = path
	s.props = append(s.props, Property{Key: key, Value: value, Line: line})
}

// force sets a flow property to what Strimzi's deployment implies,
// noting a setting of it that has no effect there.
func (s *strimzi) force(key, value, reason string) {
	if i, ok := s.index[key]; ok {
		if s.props[i].Value != value {
			s.ignored(s.props[i].Line, s.paths[key], "%s", reason)
		}
		s.props[i].Value = value
		return
	}
	s.add(key, value, 0, "")
}

// convert runs the mapper and renames the notes' keys to the resource's
// paths.
func (s *strimzi) convert() (*StrimziResult, error) {
	header := fmt.Sprintf("kmirror configuration converted by `kmirror import-mm2` from the Strimzi %s %s in %s.\n", strimziKind, s.name, s.file) +
		"Review it before use (docs/migration.md): settings it could not carry over were listed when it was\n" +
		"written. Every mirror takes over a Strimzi mirror: mm2.adopt starts each partition where its\n" +
		"MirrorSourceConnector stopped, and mm2.heartbeats/checkpoints keep writing MM2's topics where Strimzi\n" +
		"ran those connectors. Files under " + SecretsDir + "/ are in the Secrets of the chart's secretMounts."
	res, err := convertWith(s.props, options{header: header, connect: true, security: s.security})
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			ie.Key = s.path(ie.Key)
		}
		return nil, err
	}
	for _, notes := range [][]Note{res.Unmapped, res.Ignored} {
		for i := range notes {
			notes[i].Key = s.path(notes[i].Key)
		}
	}
	res.Unmapped = dedupe(append(res.Unmapped, s.notes.Unmapped...))
	res.Ignored = dedupe(append(res.Ignored, s.notes.Ignored...))
	out := &StrimziResult{Result: *res, Name: s.name, APIVersion: strimziGroup + "/" + s.version, SecretMounts: s.mounts}
	out.Values, err = s.values(res.YAML)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// path is the resource's path for a property key (the key itself for one
// the resource has no single place for).
func (s *strimzi) path(key string) string {
	if p := s.paths[key]; p != "" {
		return p
	}
	return key
}

// resolve follows a YAML alias.
func resolve(n *yaml.Node) *yaml.Node {
	if n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

// field is one key of a mapping in the resource.
type field struct {
	key  string
	line int
	node *yaml.Node
	path string
}

// fields lists a mapping's keys; another kind of node is an error.
func fields(n *yaml.Node, path string) ([]field, error) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return nil, &InputError{Line: n.Line, Key: path, Msg: "want a mapping (key: value lines)"}
	}
	var out []field
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		out = append(out, field{key: k.Value, line: k.Line, node: resolve(n.Content[i+1]), path: path + "." + k.Value})
	}
	return out, nil
}

// text is a scalar field's value; another kind of node is an error.
func (f field) text() (string, error) {
	if f.node.Kind != yaml.ScalarNode {
		return "", &InputError{Line: f.line, Key: f.path, Msg: "want a single value"}
	}
	return f.node.Value, nil
}

// items lists a sequence's items with their paths.
func items(f field) ([]field, error) {
	if f.node.Kind != yaml.SequenceNode {
		return nil, &InputError{Line: f.line, Key: f.path, Msg: "want a list"}
	}
	var out []field
	for i, n := range f.node.Content {
		n = resolve(n)
		out = append(out, field{key: f.key, line: n.Line, node: n, path: fmt.Sprintf("%s[%d]", f.path, i)})
	}
	return out, nil
}

func find(fs []field, key string) (field, bool) {
	i := slices.IndexFunc(fs, func(f field) bool { return f.key == key })
	if i < 0 {
		return field{}, false
	}
	return fs[i], true
}
