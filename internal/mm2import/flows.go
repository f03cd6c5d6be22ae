package mm2import

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

var (
	separatorRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	// splitRepeat is a list item ending inside a {m,n} repetition.
	splitRepeat = regexp.MustCompile(`\{\d*$`)
)

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
	// Offsets older than the adoption are translated from MM2's offset
	// syncs; the topic's name follows from its location as in MM2.
	var syncsLocation *yaml.Node
	if p, ok := c.flowGet(f, "offset-syncs.topic.location"); ok {
		switch v := strings.TrimSpace(p.Value); v {
		case "source", "target":
			syncsLocation = str(v)
		default:
			c.unmapped(p, "%q is not source or target (MM2 refuses it); the output keeps kmirror's default, source", p.Value)
		}
	}
	mm2 := mapping(
		pair{key: "source_alias", value: str(f.source)},
		pair{key: "adopt", value: boolean(true)},
		pair{key: "offsets_topic", value: offsetsTopic},
		// The herder names each connector by its class whatever name= says,
		// and Connect keys the positions by that name.
		pair{key: "source_connector", value: c.sourceConnector(f)},
		pair{key: "offset_syncs_location", value: syncsLocation},
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
	for i := 1; i < len(items); i++ {
		if splitRepeat.MatchString(items[i-1]) {
			c.unmapped(p, "the comma of %q splits the pattern in two, in MM2 as here (the list is split at every comma): write the repetition without a comma", items[i-1]+","+items[i])
		}
	}
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

// sourceConnector is the name MM2's source connector of flow f committed
// its positions under.
func (c *converter) sourceConnector(f flow) *yaml.Node {
	if c.opts.connect {
		return withComment(str(f.String()+"."+mm2SourceConnector), "Strimzi's name for the flow's source connector")
	}
	return withComment(str(mm2SourceConnector), "MM2's dedicated mode names its source connector so; under Connect it is the connector's name")
}
