package mm2import

import "go.yaml.in/yaml/v3"

// A mirror's patterns, as Strimzi writes them into its connectors' config.
// The v1beta2 *BlacklistPattern fields give way to *ExcludePattern ones.
var (
	mirrorPatterns = map[string]string{
		"topicsPattern":        "topics",
		"topicsExcludePattern": "topics.exclude",
		"groupsPattern":        "groups",
		"groupsExcludePattern": "groups.exclude",
	}
	legacyPatterns = map[string]string{
		"topicsBlacklistPattern": "topicsExcludePattern",
		"groupsBlacklistPattern": "groupsExcludePattern",
	}
)

// mirror adds the flow f of one mirror: its patterns first, as Strimzi
// lets them override the connectors' config, then each connector's config.
func (s *strimzi) mirror(m field, fs []field, f flow) error {
	s.add(f.prefix()+"enabled", "true", m.line, m.path)
	has := map[string]bool{}
	for _, o := range fs {
		if key, ok := mirrorPatterns[o.key]; ok {
			v, err := o.text()
			if err != nil {
				return err
			}
			s.add(f.prefix()+key, v, o.line, o.path)
		}
		has[o.key] = true
	}
	for _, o := range fs {
		switch {
		case mirrorPatterns[o.key] != "":
		case legacyPatterns[o.key] != "" && s.version == "v1beta2":
			if has[legacyPatterns[o.key]] {
				s.ignored(o.line, o.path, "Strimzi ignores it next to %s", legacyPatterns[o.key])
				continue
			}
			v, err := o.text()
			if err != nil {
				return err
			}
			s.add(f.prefix()+mirrorPatterns[legacyPatterns[o.key]], v, o.line, o.path)
		case o.key == "source" && !s.connectShape, (o.key == "sourceCluster" || o.key == "targetCluster") && s.connectShape:
		case o.key == "heartbeatConnector" && s.version == "v1", o.key == "heartbeatConnector" && !s.connectShape:
			s.unmapped(o.line, o.path, "not a field of %s %s with spec.target: Strimzi runs no heartbeat connector", strimziKind, s.version)
		case o.key == "sourceConnector" || o.key == "checkpointConnector" || o.key == "heartbeatConnector":
			if err := s.connector(o, f); err != nil {
				return err
			}
		default:
			s.unmapped(o.line, o.path, "not a field of a %s mirror: Strimzi ignores it (a typo?)", strimziKind)
		}
	}
	// A connector the mirror does not list does not run.
	if !has["sourceConnector"] {
		s.unmapped(m.line, m.path+".sourceConnector", "missing: Strimzi copies no records for this mirror, and kmirror's mirror copies its topics (remove the mirror from the output if that is not wanted)")
	}
	if !has["checkpointConnector"] {
		reason := "Strimzi runs no MirrorCheckpointConnector for this mirror (no checkpointConnector): no checkpoints and no group offset sync"
		s.force(f.prefix()+"emit.checkpoints.enabled", "false", reason)
		s.force(f.prefix()+"sync.group.offsets.enabled", "false", reason)
	}
	if !has["heartbeatConnector"] || !s.connectShape {
		s.force(f.prefix()+"emit.heartbeats.enabled", "false", "Strimzi runs no MirrorHeartbeatConnector for this mirror: no heartbeats")
	}
	return nil
}

// Connector fields that say how Connect runs a connector, with what
// becomes of them.
var connectorFields = map[string]string{
	"version":      "the connector plugin's version: kmirror is one binary",
	"autoRestart":  "kmirror has no Connect connector or task to restart",
	"listOffsets":  "Connect's offsets API: kmirror keeps its positions in its own topics (kmirror status shows them)",
	"alterOffsets": "Connect's offsets API: kmirror keeps its positions in its own topics (kmirror status shows them)",
}

// connector adds one connector's config as flow settings.
func (s *strimzi) connector(c field, f flow) error {
	if c.node.Kind == yaml.ScalarNode && c.node.Tag == "!!null" {
		return nil // listed without settings: it runs with its defaults
	}
	fs, err := fields(c.node, c.path)
	if err != nil {
		return err
	}
	for _, o := range fs {
		switch o.key {
		case "config":
			opts, err := s.options(o)
			if err != nil {
				return err
			}
			for _, p := range opts {
				s.add(f.prefix()+p.key, p.node.Value, p.line, p.path)
			}
		case "tasksMax":
			s.ignored(o.line, o.path, "%s", notNeeded["tasks.max"])
		case "pause":
			if o.node.Value == "true" {
				s.unmapped(o.line, o.path, "the connector is paused in Strimzi; kmirror's mirror runs")
			}
		case "state":
			if o.node.Value != "running" {
				s.unmapped(o.line, o.path, "the connector is %s in Strimzi; kmirror's mirror runs", o.node.Value)
			}
		default:
			if r, ok := connectorFields[o.key]; ok {
				s.ignored(o.line, o.path, "%s", r)
			} else {
				s.unmapped(o.line, o.path, "not a field of a %s connector: Strimzi ignores it (a typo?)", strimziKind)
			}
		}
	}
	return nil
}
