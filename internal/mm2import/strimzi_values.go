package mm2import

import (
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// values writes the Helm chart's values (deploy/helm/kmirror): the
// converted configuration under config, the Secrets it reads files from,
// and the replicas and resources of the Strimzi deployment.
func (s *strimzi) values(configYAML []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(configYAML, &doc); err != nil {
		return nil, err
	}
	cfg := doc.Content[0]
	replicas := withComment(integer(strimziReplicas), "Strimzi's default")
	if s.replicas != nil {
		n, err := strconv.ParseInt(s.replicas.Value, 0, 32)
		if err != nil || n < 0 {
			return nil, &InputError{Line: s.replicas.Line, Key: "spec.replicas", Msg: fmt.Sprintf("%q is not a number of pods", s.replicas.Value)}
		}
		replicas = integer(n)
	}
	mounts := &yaml.Node{Kind: yaml.SequenceNode}
	for _, m := range s.mounts {
		mounts.Content = append(mounts.Content, mapping(pair{key: "name", value: str(m)}))
	}
	if len(s.mounts) == 0 {
		mounts.Style = yaml.FlowStyle // []
	}
	var resources *yaml.Node
	if s.resources != nil {
		resources = s.resources
	}
	root := mapping(
		pair{key: "replicaCount", value: replicas},
		pair{key: "config", value: cfg, comment: "The kmirror configuration (kmirror.yaml), as written by --output."},
		pair{key: "secretMounts", value: mounts, comment: "Each Secret is mounted at " + SecretsDir + "/<name>/, where config reads its files."},
		pair{key: "resources", value: resources},
	)
	return encode(root, fmt.Sprintf("Values for the kmirror Helm chart (deploy/helm/kmirror), converted by `kmirror import-mm2` from the\nStrimzi %s %s in %s. Review config before use (docs/migration.md).", strimziKind, s.name, s.file))
}
