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

// Result is a converted configuration and what the conversion could not
// carry over.
type Result struct {
	// YAML is the kmirror configuration.
	YAML []byte
	// Unmapped are the settings whose effect the YAML does not reproduce,
	// each with the reason and, where there is one, what to do.
	Unmapped []Note
	// Ignored are the settings with nothing to carry over: kmirror does it
	// anyway, or they configure a part of MM2 kmirror does not have.
	Ignored []Note
	// Env are the environment variables the YAML reads (passwords).
	Env []Env
}

// Note is one setting of the properties file and what became of it.
type Note struct {
	Line   int // 0 when it concerns no single line
	Key    string
	Reason string
}

// Env is an environment variable the YAML refers to.
type Env struct {
	Name string
	What string // what to set it to
}

// InputError is a properties file MirrorMaker 2 itself would refuse.
type InputError struct {
	Line int
	Key  string
	Msg  string
}

func (e *InputError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Defaults of MirrorMaker 2 (Kafka 4.3) that the output must state because
// kmirror's differ.
var (
	mm2TopicsExclude = []string{`.*[\-\.]internal`, `.*\.replica`, `__.*`}
	mm2GroupsExclude = []string{"console-consumer-.*", "connect-.*", "__.*"}
)

const (
	mm2ReplicationFactor  = 2
	mm2HeartbeatsInterval = time.Second
	mm2CheckpointInterval = 60 * time.Second
	mm2SourceConnector    = "MirrorSourceConnector" // the herder's name for it (MirrorMaker.java: the class's simple name)
	defaultPolicyClass    = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
	identityPolicyClass   = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
)

// Convert maps the properties of an MM2 dedicated-mode file (as read by
// ParseProperties) to a kmirror configuration. source names the file in
// the output's header comment. An *InputError is a file MM2 would refuse.
func Convert(props []Property, source string) (*Result, error) {
	return convertWith(props, options{header: header(source)})
}

// options adapt the conversion to an MM2 that ran on a Connect cluster,
// as Strimzi runs it, rather than in dedicated mode.
type options struct {
	header string // the output's head comment
	// connect: MM2 ran its connectors on a Connect cluster. Each source
	// connector is named "A->B.MirrorSourceConnector" (Strimzi's names),
	// no heartbeat-only reverse flow runs, and values come from YAML, so a
	// " #" in one is part of it.
	connect bool
	// security holds, per cluster alias, tls and sasl blocks built from a
	// structured description (Strimzi's tls and authentication) that
	// replace the ones ssl.* and sasl.* settings would give.
	security map[string]clusterSecurity
}

type clusterSecurity struct{ tls, sasl *yaml.Node }

func convertWith(props []Property, opts options) (*Result, error) {
	c := &converter{props: map[string]Property{}, seen: map[string]bool{}, envNames: map[string]bool{}, opts: opts}
	for _, p := range props {
		p = c.stripComment(p)
		c.props[p.Key] = p
		c.order = append(c.order, p.Key)
	}
	if err := c.readClusters(); err != nil {
		return nil, err
	}
	clusters, err := c.clusterNodes()
	if err != nil {
		return nil, err
	}
	var mirrors []*yaml.Node
	for _, f := range c.flows {
		mirrors = append(mirrors, c.mirror(f))
	}
	if !c.opts.connect {
		c.heartbeatFlows()
	}
	c.classifyRest()

	root := mapping(
		pair{key: "clusters", value: clusters},
		pair{key: "mirrors", value: &yaml.Node{Kind: yaml.SequenceNode, Content: mirrors}},
	)
	if c.res.YAML, err = encode(root, c.opts.header); err != nil {
		return nil, err
	}
	c.res.Unmapped = dedupe(c.res.Unmapped)
	c.res.Ignored = dedupe(c.res.Ignored)
	return &c.res, nil
}

func header(source string) string {
	return "kmirror configuration converted by `kmirror import-mm2` from the MirrorMaker 2 file " + source + ".\n" +
		"Review it before use (docs/migration.md): settings it could not carry over were listed when it was\n" +
		"written. Every mirror takes over an MM2 flow: mm2.adopt starts each partition where MM2 stopped,\n" +
		"and mm2.heartbeats/checkpoints keep writing MM2's topics for RemoteClusterUtils and MirrorClient.\n" +
		"Intervals MM2 left at its defaults keep kmirror's (shorter) ones."
}

type flow struct{ source, target string }

func (f flow) prefix() string { return f.source + "->" + f.target + "." }
func (f flow) String() string { return f.source + "->" + f.target }

type converter struct {
	props    map[string]Property
	order    []string
	seen     map[string]bool // keys that are mapped or noted
	clusters []string        // as listed in clusters
	flows    []flow          // enabled, in clusters order
	envNames map[string]bool
	res      Result
	opts     options
}

func (c *converter) unmapped(p Property, format string, args ...any) {
	c.seen[p.Key] = true
	c.res.Unmapped = append(c.res.Unmapped, Note{Line: p.Line, Key: p.Key, Reason: fmt.Sprintf(format, args...)})
}

func (c *converter) ignored(p Property, format string, args ...any) {
	c.seen[p.Key] = true
	c.res.Ignored = append(c.res.Ignored, Note{Line: p.Line, Key: p.Key, Reason: fmt.Sprintf(format, args...)})
}

// get returns a key and marks it as used.
func (c *converter) get(key string) (Property, bool) {
	p, ok := c.props[key]
	if ok {
		c.seen[key] = true
	}
	return p, ok
}

// flowGet returns a connector setting of flow f: its own, else the top
// level one (MM2's connectorBaseConfig).
func (c *converter) flowGet(f flow, key string) (Property, bool) {
	if p, ok := c.get(f.prefix() + key); ok {
		return p, true
	}
	return c.get(key)
}

var trailingComment = regexp.MustCompile(`\s+#.*$`)

// stripComment drops an end-of-line comment: java.util.Properties has
// none, so MM2 reads "topics = foo.*  # note" as part of the value, which
// is never what was meant (Kafka's own docs do it).
func (c *converter) stripComment(p Property) Property {
	if c.opts.connect || isSecret(p.Key) || !trailingComment.MatchString(p.Value) {
		return p
	}
	kept := trailingComment.ReplaceAllString(p.Value, "")
	c.res.Unmapped = append(c.res.Unmapped, Note{Line: p.Line, Key: p.Key, Reason: fmt.Sprintf(
		"the value holds %q: properties files have no end-of-line comments, so MM2 reads it as part of the value; converted as %q",
		strings.TrimSpace(strings.TrimPrefix(p.Value, kept)), kept)})
	p.Value = kept
	return p
}

// isSecret reports whether a key's value must never be shown.
func isSecret(key string) bool {
	k := strings.ToLower(key)
	return strings.Contains(k, "password") || strings.Contains(k, "jaas") || strings.Contains(k, "secret") ||
		strings.HasSuffix(k, "ssl.keystore.key") || strings.Contains(k, "token") || strings.Contains(k, "credentials") || strings.Contains(k, "user.info")
}

var aliasRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

func (c *converter) readClusters() error {
	p, ok := c.get("clusters")
	if !ok {
		return &InputError{Key: "clusters", Msg: "missing: MirrorMaker 2 needs the list of cluster aliases (clusters = A, B)"}
	}
	c.clusters = splitList(p.Value)
	if len(c.clusters) == 0 {
		return &InputError{Line: p.Line, Key: "clusters", Msg: "empty: MirrorMaker 2 needs at least one cluster alias"}
	}
	for i, a := range c.clusters {
		if a == "" || slices.Contains(c.clusters[:i], a) {
			return &InputError{Line: p.Line, Key: "clusters", Msg: fmt.Sprintf("alias %q is empty or listed twice", a)}
		}
	}
	for _, s := range c.clusters {
		for _, t := range c.clusters {
			f := flow{s, t}
			if s == t {
				continue
			}
			// MM2 reads this one with Boolean.parseBoolean, untrimmed.
			e, ok := c.get(f.prefix() + "enabled")
			switch {
			case ok && strings.EqualFold(e.Value, "true"):
				c.flows = append(c.flows, f)
			case ok && strings.EqualFold(strings.TrimSpace(e.Value), "true"):
				c.unmapped(e, "blanks around \"true\": MM2 reads the flow as disabled (it does not trim this value); converted as disabled")
			}
		}
	}
	if len(c.flows) == 0 {
		return &InputError{Line: p.Line, Key: "clusters", Msg: "no replication flow is enabled (A->B.enabled = true): there is nothing to mirror"}
	}
	return nil
}

// clientKeys are the client settings MM2 reads for a cluster from "<alias>."
// keys and, as defaults for every cluster, from top-level ones.
func isClientKey(k string) bool {
	return k == "bootstrap.servers" || k == "client.id" || k == "security.protocol" ||
		strings.HasPrefix(k, "ssl.") || strings.HasPrefix(k, "sasl.")
}

// clusterGet returns a client setting of a cluster: "<alias>.<key>", else
// the top-level "<key>" (MM2's clusterProps).
func (c *converter) clusterGet(alias, key string) (Property, bool) {
	if p, ok := c.get(alias + "." + key); ok {
		return p, true
	}
	if key == "client.id" { // not one of the top-level defaults MM2 copies
		return Property{}, false
	}
	return c.get(key)
}

func (c *converter) used(alias string) bool {
	return slices.ContainsFunc(c.flows, func(f flow) bool { return f.source == alias || f.target == alias })
}

func (c *converter) clusterNodes() (*yaml.Node, error) {
	var pairs []pair
	for _, alias := range c.clusters {
		if !c.used(alias) {
			continue
		}
		n, err := c.cluster(alias)
		if err != nil {
			return nil, err
		}
		pairs = append(pairs, pair{key: alias, value: n})
	}
	return mapping(pairs...), nil
}

var schemeRE = regexp.MustCompile(`^[A-Za-z_]+://`)

func (c *converter) cluster(alias string) (*yaml.Node, error) {
	if !aliasRE.MatchString(alias) {
		p := c.props["clusters"]
		c.unmapped(p, "cluster alias %q: kmirror aliases are 1-100 characters from A-Z a-z 0-9 . _ - (rename it in the output)", alias)
	}
	bs, ok := c.clusterGet(alias, "bootstrap.servers")
	if !ok || strings.TrimSpace(bs.Value) == "" {
		msg := "missing: every cluster of an enabled flow needs its brokers"
		for _, k := range c.order {
			if strings.EqualFold(k, alias+".bootstrap.servers") {
				msg += fmt.Sprintf(" (line %d has %s: aliases are case-sensitive)", c.props[k].Line, k)
			}
		}
		return nil, &InputError{Line: c.props["clusters"].Line, Key: alias + ".bootstrap.servers", Msg: msg}
	}
	var servers []string
	for _, s := range splitList(bs.Value) {
		s = schemeRE.ReplaceAllString(s, "")
		if !validHostPort(s) {
			return nil, &InputError{Line: bs.Line, Key: bs.Key, Msg: fmt.Sprintf("%q is not host:port", s)}
		}
		servers = append(servers, s)
	}
	var clientID *yaml.Node
	if p, ok := c.clusterGet(alias, "client.id"); ok {
		clientID = str(p.Value)
	}
	tls, sasl := c.security(alias)
	return mapping(
		pair{key: "bootstrap_servers", value: list(servers)},
		pair{key: "client_id", value: clientID},
		pair{key: "tls", value: tls},
		pair{key: "sasl", value: sasl},
	), nil
}

var hostPortRE = regexp.MustCompile(`^(\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+):([0-9]{1,5})$`)

func validHostPort(s string) bool {
	m := hostPortRE.FindStringSubmatch(s)
	if m == nil {
		return false
	}
	port, _ := strconv.Atoi(m[2])
	return port >= 1 && port <= 65535
}

// envName returns a unique environment variable name for what.
func (c *converter) envName(alias, what string) string {
	base := "KMIRROR_" + strings.ToUpper(nonWord.ReplaceAllString(alias, "_")) + "_" + what
	name := base
	for i := 2; c.envNames[name]; i++ {
		name = base + "_" + strconv.Itoa(i)
	}
	c.envNames[name] = true
	return name
}

var nonWord = regexp.MustCompile(`[^A-Za-z0-9]+`)

func dedupe(notes []Note) []Note {
	seen := map[Note]bool{}
	out := notes[:0]
	for _, n := range notes {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	slices.SortStableFunc(out, func(a, b Note) int { return a.Line - b.Line })
	return out
}
