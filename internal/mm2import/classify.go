package mm2import

import (
	"fmt"
	"slices"
	"strings"
)

// After the mapping, every setting it did not read is noted here: as not
// needed (kmirror does it anyway, or it configures a part of MM2 kmirror
// does not have) or as not mapped (an effect the output lacks), with why.

// Keys that configure a part of MM2 kmirror has no use for, with why.
var (
	workerReason = "configures MM2's Connect worker, which kmirror replaces"
	offsetSyncs  = "kmirror translates offsets exactly from its own offset index; it only reads the offset syncs MM2 already wrote (mm2.offset_syncs_topic), for offsets older than the adoption"
	notNeeded    = map[string]string{
		"tasks.max":                               "kmirror copies every partition concurrently (cluster mode shares a mirror between processes: docs/cluster.md)",
		"offset.lag.max":                          offsetSyncs,
		"emit.offset-syncs.enabled":               offsetSyncs,
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
		"name":                                    "MM2's dedicated mode names each connector by its class, whatever name= says (its positions are keyed by MirrorSourceConnector: mm2.source_connector)",
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
