package mm2import

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

var separatorRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// mirror converts one enabled flow. Connector settings come from the flow
// ("A->B.key") or the top level; producer settings from the target
// cluster ("B.producer.key") or the flow ("A->B.producer.override.key").
func (c *converter) mirror(f flow) *yaml.Node {
	policy, sep := "", "."
	if p, ok := c.flowGet(f, "replication.policy.class"); ok {
		switch strings.TrimSpace(p.Value) {
		case defaultPolicyClass:
		case identityPolicyClass:
			policy = "identity"
		default:
			c.unmapped(p, "a custom replication policy: kmirror has default (<alias><separator><topic>) and identity; the output uses default")
		}
	}
	if p, ok := c.flowGet(f, "replication.policy.separator"); ok {
		if separatorRE.MatchString(p.Value) {
			sep = p.Value
		} else {
			c.unmapped(p, "separator %q: kmirror's is one or more characters from A-Z a-z 0-9 . _ - (they end up in topic names); the output uses \".\"", p.Value)
		}
	}
	var sepNode *yaml.Node
	if sep != "." && policy == "" {
		sepNode = str(sep)
	}
	var policyNode *yaml.Node
	if policy != "" || sepNode != nil {
		var typ *yaml.Node
		if policy != "" {
			typ = str(policy)
		}
		policyNode = mapping(pair{key: "type", value: typ}, pair{key: "separator", value: sepNode})
	}

	checkpoints, checkpointsInterval := c.emit(f, "emit.checkpoints", mm2CheckpointInterval)
	heartbeats, heartbeatsInterval := c.emit(f, "emit.heartbeats", mm2HeartbeatsInterval)
	if p, ok := c.flowGet(f, "replication.policy.internal.topic.separator.enabled"); ok && !strings.EqualFold(strings.TrimSpace(p.Value), "true") {
		c.ignored(p, "MM2 names its internal topics with \".\" then, as kmirror does")
	} else if sep != "." && checkpoints {
		p, _ := c.flowGet(f, "replication.policy.separator")
		c.unmapped(p, "with this separator MM2 named its checkpoints topic %s%scheckpoints%sinternal; kmirror's mm2.checkpoints writes %s.checkpoints.internal (MM2's clients of flow %s must read that one)", f.source, sep, sep, f.source, f)
	}

	topics := c.topics(f, sep)
	groupsInclude := c.patterns(f, "groups", "groups.whitelist", nil)
	if groupsInclude != nil && len(groupsInclude.Content) == 1 && groupsInclude.Content[0].Value == ".*" {
		groupsInclude = nil // kmirror's default
	}
	groups := mapping(
		pair{key: "include", value: groupsInclude},
		pair{key: "exclude", value: c.patterns(f, "groups.exclude", "groups.blacklist", nil)},
	)
	rf := int64(mm2ReplicationFactor)
	rfComment := "MirrorMaker 2's default (kmirror's is the target broker's default, -1)"
	if p, ok := c.flowGet(f, "replication.factor"); ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(p.Value), 10, 16); err == nil && (n == -1 || n >= 1) {
			rf, rfComment = n, ""
		} else {
			c.unmapped(p, "%q is not a replication factor (-1, or 1 to 32767); the output uses MM2's default, 2", p.Value)
		}
	}

	var exactlyOnce *yaml.Node
	if p, ok := c.get(f.target + ".exactly.once.source.support"); ok {
		if strings.EqualFold(strings.TrimSpace(p.Value), "enabled") {
			exactlyOnce = withComment(boolean(true), f.target+".exactly.once.source.support = enabled")
		} else {
			c.ignored(p, "exactly-once is off while it is %q", p.Value)
		}
	}

	var offsetsTopic *yaml.Node
	p, ok := c.get("offset.storage.topic") // the top level wins over the cluster's (MM2's workerConfig)
	if !ok {
		p, ok = c.get(f.target + ".offset.storage.topic")
	}
	if ok {
		offsetsTopic = str(p.Value)
	}
	mm2 := mapping(
		pair{key: "source_alias", value: str(f.source)},
		pair{key: "adopt", value: boolean(true)},
		pair{key: "offsets_topic", value: offsetsTopic},
		pair{key: "heartbeats", value: boolean(heartbeats)},
		pair{key: "heartbeats_interval", value: heartbeatsInterval},
		pair{key: "checkpoints", value: boolean(checkpoints)},
		pair{key: "checkpoints_interval", value: checkpointsInterval},
	)

	return mapping(
		pair{key: "name", value: withComment(str(f.source+"-to-"+f.target), "MirrorMaker 2 flow "+f.String())},
		pair{key: "source", value: str(f.source)},
		pair{key: "target", value: str(f.target)},
		pair{key: "replication_policy", value: policyNode},
		pair{key: "topics", value: orNil(topics)},
		pair{key: "groups", value: orNil(groups)},
		pair{key: "replication_factor", value: withComment(integer(rf), rfComment)},
		pair{key: "exactly_once", value: exactlyOnce},
		pair{key: "producer", value: orNil(c.producer(f))},
		pair{key: "sync", value: orNil(c.sync(f))},
		pair{key: "mm2", value: mm2},
	)
}

// topics converts the topic selection, with MM2's default exclusions and
// its pass for heartbeats topics.
func (c *converter) topics(f flow, sep string) *yaml.Node {
	include := c.patterns(f, "topics", "topics.whitelist", nil)
	hb, ok := c.flowGet(f, "heartbeats.replication.enabled")
	if include != nil && !(len(include.Content) == 1 && include.Content[0].Value == ".*") && (!ok || strings.EqualFold(strings.TrimSpace(hb.Value), "true")) {
		include.Style = 0 // one pattern a line, to carry the comment
		include.Content = append(include.Content, withComment(str("(?:.+"+regexp.QuoteMeta(sep)+")?heartbeats"),
			"MM2 mirrors heartbeats topics whatever topics says (heartbeats.replication.enabled)"))
	}
	exclude := c.patterns(f, "topics.exclude", "topics.blacklist", mm2TopicsExclude)
	excludeComment := ""
	if _, set := c.props[f.prefix()+"topics.exclude"]; !set && c.props["topics.exclude"].Key == "" && c.props[f.prefix()+"topics.blacklist"].Key == "" && c.props["topics.blacklist"].Key == "" {
		excludeComment = "MirrorMaker 2's default topics.exclude (kmirror never mirrors internal topics either way)"
	}
	if include != nil && len(include.Content) == 1 && include.Content[0].Value == ".*" {
		include = nil // kmirror's default
	}
	var refresh *yaml.Node
	if p, ok := c.flowGet(f, "refresh.topics.enabled"); ok && !c.boolValue(p, true) {
		c.unmapped(p, "kmirror always lists the source topics again (every topics.refresh_interval)")
	}
	if d, ok := c.interval(f, "refresh.topics.interval.seconds"); ok {
		refresh = duration(d)
	}
	return mapping(
		pair{key: "include", value: include},
		pair{key: "exclude", value: exclude, comment: excludeComment},
		pair{key: "refresh_interval", value: refresh},
	)
}

// patterns converts a comma list of Java regexes (key, else its pre-4.0
// name legacy). Without either it returns def (nil: leave kmirror's
// default).
func (c *converter) patterns(f flow, key, legacy string, def []string) *yaml.Node {
	p, ok := c.flowGet(f, key)
	if !ok {
		p, ok = c.flowGet(f, legacy)
	}
	if !ok {
		if def == nil {
			return nil
		}
		return list(def)
	}
	items := splitList(p.Value)
	for _, re := range items {
		if why := javaOnly(re); why != "" {
			c.unmapped(p, "pattern %q %s", re, why)
		}
	}
	if len(items) == 0 && (key == "topics") {
		c.unmapped(p, "empty: MM2 mirrors no topic of flow %s; kmirror needs at least one pattern (the output's [] fails kmirror validate: remove the flow or name topics)", f)
	}
	if items == nil {
		items = []string{}
	}
	return list(items)
}

// emit converts emit.checkpoints.* or emit.heartbeats.* of a flow: on or
// off, and the interval when it is not MM2's default (which kmirror's mm2
// block shares).
func (c *converter) emit(f flow, prefix string, def time.Duration) (bool, *yaml.Node) {
	on := true
	if p, ok := c.flowGet(f, prefix+".enabled"); ok {
		on = c.boolValue(p, true)
	}
	d, ok := c.interval(f, prefix+".interval.seconds")
	if !ok || d == def {
		return on, nil
	}
	if d < 0 {
		return false, nil
	}
	return on, duration(d)
}

// interval reads a flow's "*.interval.seconds" setting. A negative one
// (MM2: the task is off) comes back as is; zero is noted, as kmirror's
// intervals are greater than 0.
func (c *converter) interval(f flow, key string) (time.Duration, bool) {
	p, ok := c.flowGet(f, key)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(p.Value), 10, 32)
	switch {
	case err != nil:
		c.unmapped(p, "%q is not a number of seconds; the output keeps kmirror's default", p.Value)
		return 0, false
	case n == 0:
		c.unmapped(p, "0 seconds: kmirror's intervals are greater than 0; the output keeps kmirror's default")
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// boolValue parses a Kafka BOOLEAN ("true" or "false", any case); another
// value is noted and def used.
func (c *converter) boolValue(p Property, def bool) bool {
	switch strings.ToLower(strings.TrimSpace(p.Value)) {
	case "true":
		return true
	case "false":
		return false
	}
	c.unmapped(p, "%q is not true or false (MM2 refuses it); the output uses %t", p.Value, def)
	return def
}

// sync converts the topic config, ACL and group offset syncs, writing
// MM2's defaults where kmirror's differ (ACL sync on, group offsets off).
func (c *converter) sync(f flow) *yaml.Node {
	section := func(prefix string, mm2Default, kmirrorDefault bool) *yaml.Node {
		on := mm2Default
		if p, ok := c.flowGet(f, prefix+".enabled"); ok {
			on = c.boolValue(p, mm2Default)
		}
		var enabled, interval *yaml.Node
		if d, ok := c.interval(f, prefix+".interval.seconds"); ok {
			if d < 0 {
				on = false
			} else {
				interval = duration(d)
			}
		}
		if on != kmirrorDefault {
			enabled = boolean(on)
			if on == mm2Default {
				enabled.LineComment = "MirrorMaker 2's default"
			}
		}
		return mapping(pair{key: "enabled", value: enabled}, pair{key: "interval", value: interval})
	}
	configs := section("sync.topic.configs", true, true)
	if ex := c.patterns(f, "config.properties.exclude", "config.properties.blacklist", nil); ex != nil {
		configs.Content = append(configs.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "exclude"}, ex)
	}
	return mapping(
		pair{key: "topic_configs", value: orNil(configs)},
		pair{key: "acls", value: orNil(section("sync.topic.acls", true, false))},
		pair{key: "group_offsets", value: orNil(section("sync.group.offsets", false, true))},
	)
}

// producer converts the producer settings of the flow's writes that
// kmirror has: the target cluster's, overridden by the flow's.
func (c *converter) producer(f flow) *yaml.Node {
	get := func(k string) (Property, bool) {
		if p, ok := c.get(f.prefix() + "producer.override." + k); ok {
			return p, true
		}
		return c.get(f.target + ".producer." + k)
	}
	var compression, linger, maxBytes, delivery *yaml.Node
	if p, ok := get("compression.type"); ok {
		v := strings.ToLower(strings.TrimSpace(p.Value))
		if slices.Contains([]string{"none", "gzip", "snappy", "lz4", "zstd"}, v) {
			compression = str(v)
		} else {
			c.unmapped(p, "compression %q: kmirror's are none, gzip, snappy, lz4 and zstd", p.Value)
		}
	}
	ms := func(p Property) (time.Duration, bool) {
		n, err := strconv.ParseInt(strings.TrimSpace(p.Value), 10, 64)
		if err != nil || n < 0 {
			c.unmapped(p, "%q is not a number of milliseconds", p.Value)
			return 0, false
		}
		return time.Duration(n) * time.Millisecond, true
	}
	if p, ok := get("linger.ms"); ok {
		if d, ok := ms(p); ok {
			linger = duration(d)
		}
	}
	if p, ok := get("delivery.timeout.ms"); ok {
		if d, ok := ms(p); ok {
			delivery = duration(d)
		}
	}
	if p, ok := get("max.request.size"); ok {
		n, err := strconv.ParseInt(strings.TrimSpace(p.Value), 10, 64)
		switch {
		case err != nil || n < 1:
			c.unmapped(p, "%q is not a size in bytes", p.Value)
		case n > 64<<20:
			maxBytes = withComment(integer(64<<20), "kmirror's largest batch")
			c.unmapped(p, "%d bytes: kmirror's batches are at most 64 MiB", n)
		default:
			maxBytes = integer(n)
		}
	}
	return mapping(
		pair{key: "compression", value: compression},
		pair{key: "linger", value: linger},
		pair{key: "batch_max_bytes", value: maxBytes},
		pair{key: "delivery_timeout", value: delivery},
	)
}

// Keys that configure a part of MM2 kmirror has no use for, with why.
var (
	workerReason = "configures MM2's Connect worker, which kmirror replaces"
	offsetSyncs  = "kmirror translates offsets exactly from its own offset index, without offset syncs"
	notNeeded    = map[string]string{
		"tasks.max":                               "kmirror copies every partition concurrently (cluster mode shares a mirror between processes: docs/cluster.md)",
		"offset.lag.max":                          offsetSyncs,
		"emit.offset-syncs.enabled":               offsetSyncs,
		"offset-syncs.topic.location":             offsetSyncs,
		"offset-syncs.topic.replication.factor":   offsetSyncs,
		"checkpoints.topic.replication.factor":    "kmirror creates the topics it writes with the mirror's replication_factor",
		"heartbeats.topic.replication.factor":     "kmirror creates the topics it writes with the mirror's replication_factor",
		"consumer.poll.timeout.ms":                "kmirror sets its own timeouts",
		"admin.timeout.ms":                        "kmirror sets its own timeouts",
		"metric.names.formats":                    "kmirror exports Prometheus metrics (docs/migration.md maps MM2's)",
		"refresh.groups.enabled":                  "kmirror lists the source groups at every group sync",
		"refresh.groups.interval.seconds":         "kmirror lists the source groups at every group sync",
		"transaction.boundary":                    "kmirror commits its transactions every cluster.commit_interval",
		"exactly.once.support":                    "kmirror's exactly_once follows the target's exactly.once.source.support",
		"heartbeats.replication.enabled":          "kmirror's topic patterns decide",
		"name":                                    "set by MM2 for each connector",
		"connector.class":                         "set by MM2 for each connector",
		"source.cluster.alias":                    "set by MM2 for each flow",
		"target.cluster.alias":                    "set by MM2 for each flow",
		"dedicated.mode.enable.internal.rest":     workerReason,
		"listeners":                               workerReason,
		"group.id":                                workerReason,
		"plugin.path":                             workerReason,
		"metric.reporters":                        workerReason,
		"task.shutdown.graceful.timeout.ms":       workerReason,
		"connector.client.config.override.policy": workerReason,
		"scheduled.rebalance.max.delay.ms":        workerReason,
		"session.timeout.ms":                      workerReason,
		"heartbeat.interval.ms":                   workerReason,
		"rebalance.timeout.ms":                    workerReason,
		"topic.creation.enable":                   workerReason,
		"exactly.once.source.support":             "MM2 reads it per target cluster only (<alias>.exactly.once.source.support)",
	}
	workerPrefixes = []string{"offset.storage.", "config.storage.", "status.storage.", "offset.flush.", "rest.", "admin.listeners", "metrics.", "worker.", "inter.worker.", "plugin.", "access.control.", "response.http."}
	// Classes that are MM2's defaults, and what a different one means.
	defaultClasses = map[string][2]string{
		"topic.filter.class":           {"org.apache.kafka.connect.mirror.DefaultTopicFilter", "a custom topic filter: write a kmirror filter plugin (docs/plugins.md)"},
		"group.filter.class":           {"org.apache.kafka.connect.mirror.DefaultGroupFilter", "a custom group filter: write a kmirror filter plugin (docs/plugins.md)"},
		"config.property.filter.class": {"org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter", "a custom config filter: kmirror has sync.topic_configs.include and exclude"},
		"forwarding.admin.class":       {"org.apache.kafka.clients.admin.ForwardingAdmin", "a custom admin: kmirror creates topics and syncs configs and ACLs itself"},
		"use.defaults.from":            {"target", "kmirror leaves a config the source keeps at its default to the target's default"},
		"key.converter":                {"org.apache.kafka.connect.converters.ByteArrayConverter", "kmirror copies keys as bytes, unchanged"},
		"value.converter":              {"org.apache.kafka.connect.converters.ByteArrayConverter", "kmirror copies values as bytes, unchanged"},
		"header.converter":             {"org.apache.kafka.connect.converters.ByteArrayConverter", "kmirror copies headers as bytes, unchanged"},
	}
)

// classifyRest notes every setting the mapping did not read.
func (c *converter) classifyRest() {
	for _, k := range c.order {
		if c.seen[k] {
			continue
		}
		p := c.props[k]
		if f, rest, ok := c.flowKey(k); ok {
			switch {
			case !slices.Contains(c.flows, f):
				c.ignored(p, "not used: flow %s is not enabled", f)
			case strings.HasPrefix(rest, "producer.override."):
				c.clientKey(p, "producer", strings.TrimPrefix(rest, "producer.override."))
			case strings.HasPrefix(rest, "consumer.override."):
				c.ignored(p, "Connect applies consumer overrides to sink connectors only: MM2 ignores it")
			case strings.HasPrefix(rest, "consumer."): // MM2's source consumer reads these
				c.clientKey(p, "consumer", strings.TrimPrefix(rest, "consumer."))
			case strings.HasPrefix(rest, "producer."):
				c.ignored(p, "configures MM2's offset-syncs producer, which kmirror does not have (records go through %s.producer.* and producer.override.*)", f.target)
			case strings.HasPrefix(rest, "admin."):
				c.unmapped(p, "kmirror's admin client uses the cluster's settings (no admin-only setting)")
			default:
				c.connectorKey(p, rest, "")
			}
			continue
		}
		if strings.Contains(k, "->") {
			c.unmapped(p, "names a flow whose clusters are not both in clusters (%s): MM2 ignores it", strings.Join(c.clusters, ", "))
			continue
		}
		if alias, rest, ok := c.clusterKey(k); ok {
			c.clusterSetting(p, alias, rest)
			continue
		}
		c.connectorKey(p, k, "top")
	}
}

// flowKey splits "A->B.rest" for clusters A and B.
func (c *converter) flowKey(k string) (flow, string, bool) {
	for _, s := range c.clusters {
		for _, t := range c.clusters {
			if f := (flow{s, t}); s != t && strings.HasPrefix(k, f.prefix()) {
				return f, strings.TrimPrefix(k, f.prefix()), true
			}
		}
	}
	return flow{}, "", false
}

// clusterKey splits "A.rest" for the longest alias A that fits.
func (c *converter) clusterKey(k string) (string, string, bool) {
	best := ""
	for _, a := range c.clusters {
		if strings.HasPrefix(k, a+".") && len(a) > len(best) {
			best = a
		}
	}
	return best, strings.TrimPrefix(k, best+"."), best != ""
}

func (c *converter) isTarget(alias string) bool {
	return slices.ContainsFunc(c.flows, func(f flow) bool { return f.target == alias })
}

func (c *converter) isSource(alias string) bool {
	return slices.ContainsFunc(c.flows, func(f flow) bool { return f.source == alias })
}

func (c *converter) clusterSetting(p Property, alias, rest string) {
	switch {
	case !c.used(alias):
		c.ignored(p, "not used: cluster %s is in no enabled flow", alias)
	case strings.HasPrefix(rest, "producer."):
		if !c.isTarget(alias) {
			c.ignored(p, "not used: cluster %s is the target of no enabled flow", alias)
		} else {
			c.clientKey(p, "producer", strings.TrimPrefix(rest, "producer."))
		}
	case strings.HasPrefix(rest, "consumer."):
		if !c.isSource(alias) {
			c.ignored(p, "not used: cluster %s is the source of no enabled flow", alias)
		} else {
			c.clientKey(p, "consumer", strings.TrimPrefix(rest, "consumer."))
		}
	case strings.HasPrefix(rest, "admin."):
		c.unmapped(p, "kmirror's clients of cluster %s share one setting (%s.%s would apply to all of them)", alias, alias, strings.TrimPrefix(rest, "admin."))
	case isClientKey(rest):
		// A security or client setting the cluster did not read.
		c.ignored(p, "not used by cluster %s's settings", alias)
	default:
		if r, ok := notNeeded[rest]; ok && r == workerReason || hasAnyPrefix(rest, workerPrefixes) {
			c.ignored(p, "%s", workerReason)
			return
		}
		c.connectorKey(p, rest, alias)
	}
}

// clientKey notes a producer or consumer setting the mapping did not read.
func (c *converter) clientKey(p Property, role, k string) {
	v := strings.ToLower(strings.TrimSpace(p.Value))
	switch {
	case role == "consumer" && k == "isolation.level" && v == "read_committed":
		c.ignored(p, "kmirror always reads read_committed")
	case role == "consumer" && k == "isolation.level":
		c.unmapped(p, "kmirror always reads read_committed: records of aborted transactions are not copied")
	case role == "consumer" && k == "auto.offset.reset" && v == "earliest":
		c.ignored(p, "kmirror starts a partition it has never copied (and MM2 never committed) at its beginning")
	case role == "producer" && k == "acks" && (v == "all" || v == "-1"):
		c.ignored(p, "kmirror always writes with acks=all")
	case role == "producer" && k == "enable.idempotence" && v == "true":
		c.ignored(p, "kmirror's producer is always idempotent")
	case role == "producer" && slices.Contains([]string{"compression.type", "linger.ms", "max.request.size", "delivery.timeout.ms"}, k):
		c.ignored(p, "not used: every enabled flow that writes there overrides it (producer.override.%s)", k)
	case role == "producer" && k == "batch.size":
		c.unmapped(p, "kmirror's producer.batch_max_bytes also bounds a single record, which batch.size does not; the output keeps kmirror's default (1 MiB)")
	case isClientKey(k):
		c.unmapped(p, "kmirror uses one security setting per cluster, for all its clients")
	default:
		c.unmapped(p, "no kmirror equivalent for the %s setting %s", role, k)
	}
}

// connectorKey notes a connector, worker or unknown setting; where is
// "top" (top level), "" (a flow) or the cluster alias it was given for.
func (c *converter) connectorKey(p Property, k, where string) {
	if def, ok := defaultClasses[k]; ok {
		if strings.TrimSpace(p.Value) == def[0] {
			c.ignored(p, "MM2's default")
		} else {
			c.unmapped(p, "%s", def[1])
		}
		return
	}
	if r, ok := notNeeded[k]; ok {
		c.ignored(p, "%s", r)
		return
	}
	switch {
	case hasAnyPrefix(k, workerPrefixes):
		c.ignored(p, "%s", workerReason)
	case k == "transforms" || k == "predicates" || hasAnyPrefix(k, []string{"transforms.", "predicates."}):
		c.unmapped(p, "kmirror copies records unchanged (no single message transforms)")
	case strings.HasPrefix(k, "errors."):
		c.unmapped(p, "kmirror never skips a record: one the target refuses stops its partition, or goes to mirrors[].dead_letter")
	case k == "config.providers" || strings.HasPrefix(k, "config.providers."):
		c.unmapped(p, "kmirror does not resolve config providers: write the values they give into the output (secrets as ${VAR} or password_file)")
	case where == "top" && (isConnectorSetting(k) || k == "heartbeats.replication.enabled"):
		c.ignored(p, "not used: every enabled flow sets its own")
	case isClientKey(k) && where == "top":
		c.ignored(p, "not used: no cluster of an enabled flow reads it")
	case where == "top" && hasAnyPrefix(k, []string{"producer.", "consumer.", "admin."}):
		c.unmapped(p, "MM2 ignores client settings at the top level (write <cluster>.%s)", k)
	case where != "" && where != "top" && isConnectorSetting(k):
		c.unmapped(p, "MM2 ignores connector settings given per cluster: write it per flow (%s->B.%s) or at the top level", where, k)
	default:
		c.unmapped(p, "not a MirrorMaker 2 setting kmirror knows: MM2 ignores it (a typo?)")
	}
}

// isConnectorSetting reports whether k is one of the connector settings the
// mapping reads.
func isConnectorSetting(k string) bool {
	for _, s := range []string{"topics", "topics.exclude", "topics.blacklist", "topics.whitelist", "groups", "groups.exclude",
		"groups.blacklist", "groups.whitelist", "replication.factor", "config.properties.exclude", "config.properties.blacklist"} {
		if k == s {
			return true
		}
	}
	for _, prefix := range []string{"sync.topic.configs", "sync.topic.acls", "sync.group.offsets", "emit.checkpoints", "emit.heartbeats", "refresh.topics"} {
		if k == prefix+".enabled" || k == prefix+".interval.seconds" {
			return true
		}
	}
	return k == "replication.policy.class" || k == "replication.policy.separator" || k == "replication.policy.internal.topic.separator.enabled"
}

func hasAnyPrefix(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}

// heartbeatFlows notes, for each enabled flow A->B whose reverse is not
// enabled, the heartbeat-only flow MM2 runs B->A (to write heartbeats into
// A, which then come to B as A.heartbeats) and kmirror does not.
func (c *converter) heartbeatFlows() {
	global := true
	if p, ok := c.get("emit.heartbeats.enabled"); ok {
		global = strings.EqualFold(strings.TrimSpace(p.Value), "true")
	}
	for _, f := range c.flows {
		back := flow{f.target, f.source}
		if slices.Contains(c.flows, back) {
			continue
		}
		on := global
		if p, ok := c.get(back.prefix() + "emit.heartbeats.enabled"); ok {
			on = strings.EqualFold(strings.TrimSpace(p.Value), "true")
		}
		if on {
			c.res.Unmapped = append(c.res.Unmapped, Note{Line: c.props[f.prefix()+"enabled"].Line, Key: f.prefix() + "enabled",
				Reason: fmt.Sprintf("MM2 also runs %s for heartbeats only, writing them into %s (they reach %s as %s.heartbeats); kmirror writes heartbeats only into a mirror's target (set %s.emit.heartbeats.enabled = false to silence this)", back, f.source, f.target, f.source, back)})
		}
	}
}
