package mm2import

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// What becomes of the fields of a KafkaMirrorMaker2's spec that configure
// the Connect deployment rather than the mirroring.
var (
	specIgnored = map[string]string{
		"version":             "the Kafka version of Strimzi's Connect image; kmirror is one binary",
		"image":               "Strimzi's Connect image: the chart runs kmirror's (values image)",
		"jvmOptions":          "configures the JVM; kmirror is a Go binary",
		"jmxOptions":          "configures the JVM's JMX; kmirror exports Prometheus metrics on its HTTP port",
		"clientRackInitImage": "the image of Strimzi's rack init container; kmirror has no rack setting",
	}
	specUnmapped = map[string]string{
		"livenessProbe":         "the chart's probes are /healthz and /readyz with its own timings",
		"readinessProbe":        "the chart's probes are /healthz and /readyz with its own timings",
		"logging":               "Connect's log4j settings: kmirror logs to stderr at its config's log.level (debug, info, warn, error)",
		"metricsConfig":         "MM2's JMX metrics: kmirror's Prometheus metrics have other names (docs/migration.md maps them; the chart has a ServiceMonitor, alert rules and a dashboard)",
		"tracing":               "kmirror has no OpenTelemetry tracing",
		"template":              "Strimzi's templates of the Connect pods and services: set what the chart has in its values, or patch its manifests",
		"rack":                  "kmirror does not set client.rack: it fetches from the partitions' leaders",
		"externalConfiguration": "environment variables and volumes from Secrets and ConfigMaps: kmirror reads files (the chart's secretMounts) and ${VAR} in its config",
	}
	// workerFields of spec.target configure the Connect worker.
	workerFields = []string{"groupId", "configStorageTopic", "statusStorageTopic"}
)

// resource reads the resource's top level and its spec.
func (s *strimzi) resource(root *yaml.Node) error {
	top, err := fields(root, "")
	if err != nil {
		return err
	}
	var spec field
	found := false
	for _, f := range top {
		f.path = f.key
		switch f.key {
		case "apiVersion", "kind", "metadata", "status":
		case "spec":
			spec, found = f, true
		default:
			s.unmapped(f.line, f.path, "not a field of a %s resource: Kubernetes refuses it (a typo?)", strimziKind)
		}
	}
	if !found {
		return &InputError{Line: root.Line, Key: "spec", Msg: "missing: the resource has no spec"}
	}
	return s.spec(spec)
}

func (s *strimzi) spec(spec field) error {
	fs, err := fields(spec.node, "spec")
	if err != nil {
		return err
	}
	_, hasTarget := find(fs, "target")
	_, hasConnect := find(fs, "connectCluster")
	_, hasClusters := find(fs, "clusters")
	switch {
	case s.version == "v1" && (hasConnect || hasClusters):
		f, _ := find(fs, "connectCluster")
		if !hasConnect {
			f, _ = find(fs, "clusters")
		}
		return &InputError{Line: f.line, Key: f.path, Msg: "not in the v1 API: v1 names the target cluster in spec.target and each mirror's source cluster in spec.mirrors[].source"}
	case hasTarget && (hasConnect || hasClusters):
		f, _ := find(fs, "target")
		return &InputError{Line: f.line, Key: f.path, Msg: "spec.target goes with spec.mirrors[].source, not with spec.connectCluster and spec.clusters: use one layout"}
	case !hasTarget && s.version == "v1":
		return &InputError{Line: spec.line, Key: "spec.target", Msg: "missing: the v1 API requires the target cluster"}
	case !hasTarget && !hasConnect:
		return &InputError{Line: spec.line, Key: "spec.connectCluster", Msg: "missing: name the target cluster (spec.connectCluster and spec.clusters, or spec.target)"}
	}
	s.connectShape = !hasTarget
	var target *clusterSpec
	var clusters []*clusterSpec
	var mirrors field
	hasMirrors := false
	for _, f := range fs {
		switch f.key {
		case "replicas":
			if f.node.Tag != "!!int" {
				return &InputError{Line: f.line, Key: f.path, Msg: "want a whole number of pods"}
			}
			s.replicas = f.node
		case "resources":
			if f.node.Kind != yaml.MappingNode {
				return &InputError{Line: f.line, Key: f.path, Msg: "want a mapping (requests, limits)"}
			}
			s.resources = f.node
		case "target":
			if target, err = s.cluster(f, true); err != nil {
				return err
			}
		case "clusters":
			list, err := items(f)
			if err != nil {
				return err
			}
			for _, item := range list {
				c, err := s.cluster(item, false)
				if err != nil {
					return err
				}
				if i := slices.IndexFunc(clusters, func(o *clusterSpec) bool { return o.alias == c.alias }); i >= 0 {
					return &InputError{Line: c.aliasLine, Key: c.path + ".alias", Msg: fmt.Sprintf("%q is the alias of %s too", c.alias, clusters[i].path)}
				}
				clusters = append(clusters, c)
			}
		case "connectCluster":
		case "mirrors":
			mirrors, hasMirrors = f, true
		default:
			if r, ok := specIgnored[f.key]; ok {
				s.ignored(f.line, f.path, "%s", r)
			} else if r, ok := specUnmapped[f.key]; ok {
				s.unmapped(f.line, f.path, "%s", r)
			} else {
				s.unmapped(f.line, f.path, "not a field of %s %s: Strimzi ignores it (a typo?)", strimziKind, s.version)
			}
		}
	}
	if !hasMirrors {
		return &InputError{Line: spec.line, Key: "spec.mirrors", Msg: "missing: there is nothing to mirror"}
	}
	if s.connectShape {
		f, _ := find(fs, "connectCluster")
		alias, err := f.text()
		if err != nil {
			return err
		}
		i := slices.IndexFunc(clusters, func(c *clusterSpec) bool { return c.alias == alias })
		if i < 0 {
			return &InputError{Line: f.line, Key: f.path, Msg: fmt.Sprintf("%q is not the alias of a cluster in spec.clusters", alias)}
		}
		target = clusters[i]
		target.connect = true
	}
	return s.mirrors(mirrors, target, clusters)
}

// clusterSpec is a cluster of the resource.
type clusterSpec struct {
	alias, path string
	aliasLine   int
	fields      []field
	connect     bool // the Connect cluster (spec.target, or spec.connectCluster's)
}

// cluster reads a cluster's alias and checks its fields; its properties
// are added once a mirror uses it.
func (s *strimzi) cluster(f field, target bool) (*clusterSpec, error) {
	fs, err := fields(f.node, f.path)
	if err != nil {
		return nil, err
	}
	c := &clusterSpec{path: f.path, fields: fs, connect: target}
	a, ok := find(fs, "alias")
	if !ok {
		return nil, &InputError{Line: f.line, Key: f.path + ".alias", Msg: "missing: every cluster has an alias"}
	}
	if c.alias, err = a.text(); err != nil {
		return nil, err
	}
	c.aliasLine = a.line
	if !aliasRE.MatchString(c.alias) {
		return nil, &InputError{Line: a.line, Key: a.path, Msg: fmt.Sprintf("%q: an alias is 1-100 characters from A-Z a-z 0-9 . _ -", c.alias)}
	}
	if _, ok := find(fs, "bootstrapServers"); !ok {
		return nil, &InputError{Line: f.line, Key: f.path + ".bootstrapServers", Msg: "missing: every cluster needs its brokers"}
	}
	if target {
		if _, ok := find(fs, "offsetStorageTopic"); !ok {
			return nil, &InputError{Line: f.line, Key: f.path + ".offsetStorageTopic", Msg: "missing: the Connect cluster keeps the source connectors' positions in it"}
		}
	}
	return c, nil
}

// forbidden reports whether Strimzi drops a cluster config option (it sets
// those itself): KafkaMirrorMaker2ClusterSpec's FORBIDDEN_PREFIXES, which
// before spec.target also let the Connect cluster's worker options through.
func (s *strimzi) forbidden(k string) bool {
	if slices.Contains([]string{"ssl.endpoint.identification.algorithm", "ssl.cipher.suites", "ssl.protocol", "ssl.enabled.protocols"}, k) {
		return false
	}
	prefixes := []string{"ssl.", "sasl.", "security.", "listeners", "plugin.path", "rest.", "bootstrap.servers", "consumer.interceptor.classes", "producer.interceptor.classes"}
	if !s.connectShape {
		prefixes = append(prefixes, "group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic")
	}
	return hasAnyPrefix(k, prefixes)
}

// addCluster gives the mapper a cluster's properties: "<alias>.key".
func (s *strimzi) addCluster(c *clusterSpec) error {
	protocolLine, protocolPath := 0, ""
	var tls, auth *field
	for _, f := range c.fields {
		switch f.key {
		case "alias":
		case "bootstrapServers":
			v, err := f.text()
			if err != nil {
				return err
			}
			s.add(c.alias+".bootstrap.servers", v, f.line, f.path)
		case "tls":
			tls = &f
			protocolLine, protocolPath = f.line, f.path
		case "authentication":
			auth = &f
			if protocolLine == 0 {
				protocolLine, protocolPath = f.line, f.path
			}
		case "config":
			if err := s.clusterConfig(c, f); err != nil {
				return err
			}
		case "offsetStorageTopic":
			v, err := f.text()
			if err != nil {
				return err
			}
			// The mapper reads MM2's offsets topic from here.
			s.add("offset.storage.topic", v, f.line, f.path)
		default:
			if c.connect && slices.Contains(workerFields, f.key) {
				s.ignored(f.line, f.path, "%s", workerReason)
			} else {
				s.unmapped(f.line, f.path, "not a field of a %s cluster: Strimzi ignores it (a typo?)", strimziKind)
			}
		}
	}
	protocol, err := s.clusterSecurity(c, tls, auth)
	if err != nil {
		return err
	}
	s.add(c.alias+".security.protocol", protocol, protocolLine, protocolPath)
	if c.connect && s.connectShape {
		if _, set := s.index["offset.storage.topic"]; !set {
			s.add("offset.storage.topic", strimziOffsetsTopic, 0, "")
		}
	}
	return nil
}

// clusterConfig adds a cluster's config options, which Strimzi gives the
// connectors' clients of that cluster (and, for the Connect cluster, the
// Connect worker), as MM2's "<alias>.key" settings do.
func (s *strimzi) clusterConfig(c *clusterSpec, f field) error {
	fs, err := s.options(f)
	if err != nil {
		return err
	}
	for _, o := range fs {
		if s.forbidden(o.key) {
			s.ignored(o.line, o.path, "Strimzi drops it: it sets this option itself (from the cluster's other fields)")
			continue
		}
		if c.connect && s.connectShape && o.key == "offset.storage.topic" {
			s.add("offset.storage.topic", o.node.Value, o.line, o.path)
			continue
		}
		s.add(c.alias+"."+o.key, o.node.Value, o.line, o.path)
	}
	return nil
}

// mirrors adds the flows, each from a mirror of the resource.
func (s *strimzi) mirrors(list field, target *clusterSpec, clusters []*clusterSpec) error {
	ms, err := items(list)
	if err != nil {
		return err
	}
	if len(ms) == 0 {
		return &InputError{Line: list.line, Key: list.path, Msg: "empty: there is nothing to mirror"}
	}
	var aliases []string // the sources, then the target: the output's order
	added := map[string]bool{}
	use := func(c *clusterSpec) error {
		if added[c.alias] {
			return nil
		}
		added[c.alias] = true
		if c != target {
			aliases = append(aliases, c.alias)
		}
		return s.addCluster(c)
	}
	if err := use(target); err != nil {
		return err
	}
	for _, m := range ms {
		fs, err := fields(m.node, m.path)
		if err != nil {
			return err
		}
		src, tgt, err := s.mirrorClusters(m, fs, target, clusters)
		if err != nil {
			return err
		}
		f := flow{src.alias, tgt.alias}
		if _, dup := s.index[f.prefix()+"enabled"]; dup {
			return &InputError{Line: m.line, Key: m.path, Msg: fmt.Sprintf("a second mirror of %s: Strimzi names both connectors %s.MirrorSourceConnector", f, f)}
		}
		if err := use(src); err != nil {
			return err
		}
		if err := use(tgt); err != nil {
			return err
		}
		if err := s.mirror(m, fs, f); err != nil {
			return err
		}
	}
	for _, c := range clusters {
		if !added[c.alias] {
			s.ignored(c.aliasLine, c.path, "not used: no mirror copies from or to cluster %s", c.alias)
		}
	}
	s.add("clusters", strings.Join(append(aliases, target.alias), ","), list.line, list.path)
	return nil
}

// mirrorClusters returns a mirror's source and target clusters. The
// target is the Connect cluster, or in v1beta2 a cluster with the same
// bootstrapServers under another alias, which Strimzi names the
// connectors after.
func (s *strimzi) mirrorClusters(m field, fs []field, target *clusterSpec, clusters []*clusterSpec) (src, tgt *clusterSpec, err error) {
	if !s.connectShape {
		f, ok := find(fs, "source")
		if !ok {
			return nil, nil, &InputError{Line: m.line, Key: m.path + ".source", Msg: "missing: every mirror names its source cluster"}
		}
		if src, err = s.cluster(f, false); err != nil {
			return nil, nil, err
		}
		if src.alias == target.alias {
			return nil, nil, &InputError{Line: src.aliasLine, Key: f.path + ".alias", Msg: fmt.Sprintf("%q is the target's alias too: a mirror copies between two clusters", src.alias)}
		}
		return src, target, nil
	}
	byAlias := func(key string) (*clusterSpec, field, error) {
		f, ok := find(fs, key)
		if !ok {
			return nil, field{}, &InputError{Line: m.line, Key: m.path + "." + key, Msg: "missing: every mirror names its source and target clusters"}
		}
		alias, err := f.text()
		if err != nil {
			return nil, f, err
		}
		i := slices.IndexFunc(clusters, func(c *clusterSpec) bool { return c.alias == alias })
		if i < 0 {
			return nil, f, &InputError{Line: f.line, Key: f.path, Msg: fmt.Sprintf("%q is not the alias of a cluster in spec.clusters", alias)}
		}
		return clusters[i], f, nil
	}
	src, sf, err := byAlias("sourceCluster")
	if err != nil {
		return nil, nil, err
	}
	tgt, tf, err := byAlias("targetCluster")
	if err != nil {
		return nil, nil, err
	}
	if tgt != target && s.bootstrap(tgt) != s.bootstrap(target) {
		return nil, nil, &InputError{Line: tf.line, Key: tf.path, Msg: fmt.Sprintf("%q is not spec.connectCluster (%q): MM2 on Connect writes into the Connect cluster, and Strimzi refuses another target", tgt.alias, target.alias)}
	}
	if src.alias == target.alias || src == tgt {
		return nil, nil, &InputError{Line: sf.line, Key: sf.path, Msg: fmt.Sprintf("%q is the target too: a mirror copies between two clusters", src.alias)}
	}
	return src, tgt, nil
}

func (s *strimzi) bootstrap(c *clusterSpec) string {
	f, _ := find(c.fields, "bootstrapServers")
	return f.node.Value
}

// options lists the single-valued options of a config field, noting the
// others.
func (s *strimzi) options(f field) ([]field, error) {
	fs, err := fields(f.node, f.path)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(fs, func(o field) bool {
		if o.node.Kind != yaml.ScalarNode {
			s.unmapped(o.line, o.path, "not a single value: Strimzi refuses it")
			return true
		}
		return false
	}), nil
}
