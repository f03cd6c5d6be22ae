package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/filters"
)

var (
	// nameRE is what mirror names and cluster aliases must match: both end
	// up inside Kafka topic names.
	nameRE      = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
	separatorRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

const nameRule = "want 1-100 characters from A-Z a-z 0-9 . _ -"

var (
	compressions       = []string{"source", "none", "gzip", "snappy", "lz4", "zstd"}
	offsetCompressions = []string{"none", "gzip", "zlib", "snappy", "lz4", "zstd"}
	sourceGapPolicies  = []string{"skip", "fail"}
	logLevels          = []string{"debug", "info", "warn", "error"}
	logFormats         = []string{"text", "json"}
)

// validator checks the cross-field rules of a decoded Config and compiles its
// patterns. lines comes from the decoder and maps field paths to lines.
type validator struct {
	fieldLines
	dir  string // relative paths in the file are relative to it
	errs []*Error
}

func (v *validator) err() error { return joinErrors(v.errs) }

// errorf reports a problem with the field at path, on the line of that field
// or, when it is absent from the file, of its nearest present parent.
func (v *validator) errorf(path, format string, args ...any) {
	v.errs = append(v.errs, v.errorAt(path, format, args...))
}

// fieldLines says where a loaded config's fields are: the file and, by
// field path, the line of each key or list item.
type fieldLines struct {
	file  string
	lines map[string]int
}

// errorAt is a problem with the field at path, placed as errorf places it.
func (f fieldLines) errorAt(path, format string, args ...any) *Error {
	file := f.file
	if file == "" {
		file = "<config>" // a Config built in code, as Load names one without a file name
	}
	return &Error{File: file, Line: f.line(path), Field: path, Msg: fmt.Sprintf(format, args...)}
}

func (f fieldLines) line(path string) int {
	for {
		if l, ok := f.lines[path]; ok {
			return l
		}
		if path == "" {
			return 0
		}
		if i := strings.LastIndexAny(path, ".["); i >= 0 {
			path = path[:i]
		} else {
			path = ""
		}
	}
}

// topicNameRE is Kafka's rule for topic names.
var topicNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

func (v *validator) validate(c *Config) {
	aliases := slices.Sorted(maps.Keys(c.Clusters))
	if len(aliases) == 0 {
		v.errorf("clusters", "at least one cluster is required")
	}
	for _, alias := range aliases {
		v.cluster(c.Clusters[alias], "clusters."+alias, alias)
	}

	if len(c.Mirrors) == 0 {
		v.errorf("mirrors", "at least one mirror is required")
	}
	names := map[string]int{} // mirror name -> index of its first use
	for i, m := range c.Mirrors {
		path := fmt.Sprintf("mirrors[%d]", i)
		v.mirror(m, path, c.Clusters, aliases)
		if m.Name == "" || !nameRE.MatchString(m.Name) {
			continue
		}
		if first, dup := names[m.Name]; dup {
			v.errorf(path+".name", "duplicate mirror name %q (first defined at line %d)", m.Name, v.line(fmt.Sprintf("mirrors[%d].name", first)))
			continue
		}
		names[m.Name] = i
	}

	if !validHostPort(c.HTTP.Listen, true, 0) {
		v.errorf("http.listen", "invalid listen address %q (want host:port, such as \"127.0.0.1:9644\"; the host may be empty and the port 0)", c.HTTP.Listen)
	}
	if t := c.HTTP.TLS; t != nil {
		v.httpTLS(t, "http.tls")
	}
	if a := c.HTTP.Auth; a != nil {
		v.httpAuth(a, "http.auth")
	}
	if !slices.Contains(MetricsDetails, c.HTTP.MetricsDetail) {
		v.errorf("http.metrics_detail", "unknown detail %q (want %s)", c.HTTP.MetricsDetail, orList(MetricsDetails))
	}
	if !slices.Contains(logLevels, c.Log.Level) {
		v.errorf("log.level", "unknown log level %q (want %s)", c.Log.Level, orList(logLevels))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Plugins)) {
		v.plugin(c.Plugins[name], "plugins."+name, name)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Listeners)) {
		v.listener(c.Listeners[name], "listeners."+name, name)
	}
	for i, m := range c.Mirrors {
		path := fmt.Sprintf("mirrors[%d]", i)
		for j, f := range m.Filters {
			v.filterRef(f, fmt.Sprintf("%s.filters[%d]", path, j), c.Plugins)
		}
		for j, l := range m.Listeners {
			if _, ok := c.Listeners[l]; !ok {
				v.errorf(fmt.Sprintf("%s.listeners[%d]", path, j), "unknown listener %q (known: %s)", l, known(c.Listeners))
			}
		}
	}
	if c.Offsets.IndexMemory < minIndexMemory {
		v.errorf("offsets.index_memory", "%s is too small (want at least %s)", c.Offsets.IndexMemory, minIndexMemory)
	}
	if !slices.Contains(offsetCompressions, c.Offsets.Compression) {
		v.errorf("offsets.compression", "unknown compression %q (want %s)", c.Offsets.Compression, orList(offsetCompressions))
	}
	if !slices.Contains(logFormats, c.Log.Format) {
		v.errorf("log.format", "unknown log format %q (want %s)", c.Log.Format, orList(logFormats))
	}
	v.positive("shutdown_timeout", c.ShutdownTimeout)
}

func (v *validator) cluster(c *Cluster, path, alias string) {
	if !nameRE.MatchString(alias) {
		v.errorf(path, "invalid cluster alias %q (%s)", alias, nameRule)
	}
	if len(c.BootstrapServers) == 0 {
		v.errorf(path+".bootstrap_servers", "at least one broker address is required")
	}
	for i, addr := range c.BootstrapServers {
		if !validHostPort(addr, false, 1) {
			v.errorf(fmt.Sprintf("%s.bootstrap_servers[%d]", path, i), "invalid broker address %q (want host:port, such as \"127.0.0.1:9092\")", addr)
		}
	}
	if c.ClientID == "" {
		v.errorf(path+".client_id", "must not be empty")
	}
	v.positive(path+".dial_timeout", c.DialTimeout)
	if c.RequestTimeout < minRequestTimeout || c.RequestTimeout > maxRequestTimeout {
		v.errorf(path+".request_timeout", "must be between %s and %s, got %s", minRequestTimeout, maxRequestTimeout, c.RequestTimeout)
	}
	if c.TLS != nil {
		v.tls(c.TLS, path+".tls")
	}
	if c.SASL != nil {
		v.sasl(c.SASL, path+".sasl")
	}
}

var saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

func (v *validator) tls(t *TLS, path string) {
	t.CAFile = v.file_(path+".ca_file", t.CAFile)
	t.CertFile = v.file_(path+".cert_file", t.CertFile)
	t.KeyFile = v.file_(path+".key_file", t.KeyFile)
	if (t.CertFile == "") != (t.KeyFile == "") {
		v.errorf(path, "cert_file and key_file go together: set both for client authentication, or neither")
	}
}

func (v *validator) sasl(s *SASL, path string) {
	if !slices.Contains(saslMechanisms, s.Mechanism) {
		v.errorf(path+".mechanism", "unknown SASL mechanism %q (want %s)", s.Mechanism, orList(saslMechanisms))
	}
	if s.Username == "" {
		v.errorf(path+".username", "required field missing")
	}
	switch {
	case s.Password != "" && s.PasswordFile != "":
		v.errorf(path+".password_file", "set password or password_file, not both")
	case s.Password == "" && s.PasswordFile == "":
		v.errorf(path+".password", "required field missing (or set password_file)")
	case s.PasswordFile != "":
		s.PasswordFile, s.Password = v.secretFile(path+".password_file", s.PasswordFile)
	}
}

func (v *validator) httpTLS(t *HTTPTLS, path string) {
	if t.CertFile == "" {
		v.errorf(path+".cert_file", "required field missing (the server's PEM certificate)")
	}
	if t.KeyFile == "" {
		v.errorf(path+".key_file", "required field missing (the server certificate's PEM key)")
	}
	t.CertFile = v.file_(path+".cert_file", t.CertFile)
	t.KeyFile = v.file_(path+".key_file", t.KeyFile)
	t.ClientCAFile = v.file_(path+".client_ca_file", t.ClientCAFile)
}

// envNameRE is what an environment variable name must look like.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (v *validator) httpAuth(a *HTTPAuth, path string) {
	switch {
	case a.BearerTokenFile != "" && a.BearerTokenEnv != "":
		v.errorf(path+".bearer_token_env", "set bearer_token_file or bearer_token_env, not both")
	case a.BearerTokenFile == "" && a.BearerTokenEnv == "":
		v.errorf(path+".bearer_token_file", "required field missing (or set bearer_token_env)")
	case a.BearerTokenEnv != "":
		if !envNameRE.MatchString(a.BearerTokenEnv) {
			v.errorf(path+".bearer_token_env", "invalid environment variable name %q", a.BearerTokenEnv)
			return
		}
		tok, ok := os.LookupEnv(a.BearerTokenEnv)
		if !ok || strings.TrimSpace(tok) == "" {
			v.errorf(path+".bearer_token_env", "environment variable %s is not set or empty", a.BearerTokenEnv)
			return
		}
		a.token = Secret(tok)
	default:
		a.BearerTokenFile, a.token = v.secretFile(path+".bearer_token_file", a.BearerTokenFile)
		if strings.ContainsAny(string(a.token), "\r\n") {
			v.errorf(path+".bearer_token_file", "file %s holds more than one line (want just the token)", a.BearerTokenFile)
		}
	}
}

// secretFile resolves and reads a file holding one secret (one trailing
// newline dropped). It returns the resolved name and the secret, or ""
// twice after reporting a problem.
func (v *validator) secretFile(path, name string) (string, Secret) {
	name = v.file_(path, name)
	if name == "" {
		return "", ""
	}
	b, err := os.ReadFile(name)
	if err != nil {
		v.errorf(path, "%v", err)
		return "", ""
	}
	secret := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if strings.TrimSpace(secret) == "" {
		v.errorf(path, "file %s is empty", name)
		return "", ""
	}
	return name, Secret(secret)
}

// file_ resolves a path from the config against the config's directory and
// checks that it can be read. It returns "" for "" and on error.
func (v *validator) file_(path, name string) string {
	if name == "" {
		return ""
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(v.dir, name)
	}
	f, err := os.Open(name)
	if err != nil {
		v.errorf(path, "cannot read %s: %v", name, errors.Unwrap(err))
		return ""
	}
	_ = f.Close()
	return name
}

func (v *validator) mirror(m *Mirror, path string, clusters map[string]*Cluster, aliases []string) {
	switch {
	case m.Name == "":
		v.errorf(path+".name", "required field missing")
	case !nameRE.MatchString(m.Name):
		v.errorf(path+".name", "invalid mirror name %q (%s)", m.Name, nameRule)
	}

	known := "none"
	if len(aliases) > 0 {
		known = strings.Join(aliases, ", ")
	}
	sourceOK := v.clusterRef(m.Source, path+".source", clusters, known)
	targetOK := v.clusterRef(m.Target, path+".target", clusters, known)
	if sourceOK && targetOK && m.Source == m.Target {
		v.errorf(path+".target", "must differ from source (both are %q)", m.Source)
	}

	rp := path + ".replication_policy"
	if m.ReplicationPolicy.Type != PolicyDefault && m.ReplicationPolicy.Type != PolicyIdentity {
		v.errorf(rp+".type", "unknown replication policy type %q (want default or identity)", m.ReplicationPolicy.Type)
	}
	if !separatorRE.MatchString(m.ReplicationPolicy.Separator) {
		v.errorf(rp+".separator", "invalid separator %q (want one or more characters from A-Z a-z 0-9 . _ -)", m.ReplicationPolicy.Separator)
	}

	tp := path + ".topics"
	if len(m.Topics.Include) == 0 {
		v.errorf(tp+".include", "at least one pattern is required (leave the key out to mirror every topic)")
	}
	m.Topics.include = v.patterns(tp+".include", m.Topics.Include)
	m.Topics.exclude = v.patterns(tp+".exclude", m.Topics.Exclude)
	v.positive(tp+".refresh_interval", m.Topics.RefreshInterval)

	gp := path + ".groups"
	m.Groups.include = v.patterns(gp+".include", m.Groups.Include)
	m.Groups.exclude = v.patterns(gp+".exclude", m.Groups.Exclude)

	if n := m.StatePartitions; n < 1 || n > maxStatePartitions {
		v.errorf(path+".state_partitions", "invalid partition count %d (want 1 to %d)", n, maxStatePartitions)
	}
	if rf := m.ReplicationFactor; rf == 0 || rf < -1 || rf > maxReplicationFactor {
		v.errorf(path+".replication_factor", "invalid replication factor %d (want -1 for the target broker default, or 1 to %d)", rf, maxReplicationFactor)
	}

	pp := path + ".producer"
	if m.Producer.Linger < 0 {
		v.errorf(pp+".linger", "must not be negative, got %s", m.Producer.Linger)
	}
	if b := m.Producer.BatchMaxBytes; b < 1 || b > maxBatchMaxBytes {
		v.errorf(pp+".batch_max_bytes", "must be from 1 to %d (64 MiB), got %d", maxBatchMaxBytes, b)
	}
	if !slices.Contains(compressions, m.Producer.Compression) {
		v.errorf(pp+".compression", "unknown compression %q (want %s)", m.Producer.Compression, orList(compressions))
	}

	if m.Producer.DeliveryTimeout < 0 {
		v.errorf(pp+".delivery_timeout", "must not be negative, got %s", m.Producer.DeliveryTimeout)
	}

	v.positive(path+".progress_interval", m.ProgressInterval)
	if m.Cluster == nil {
		m.Cluster = &MirrorCluster{}
		m.Cluster.setDefaults()
	}
	{
		cl, cp := m.Cluster, path+".cluster"
		if cl.Slots < 1 || cl.Slots > maxSlots {
			v.errorf(cp+".slots", "must be from 1 to %d, got %d", maxSlots, cl.Slots)
		}
		v.positive(cp+".session_timeout", cl.SessionTimeout)
		v.positive(cp+".commit_interval", cl.CommitInterval)
	}
	if !slices.Contains(sourceGapPolicies, m.OnSourceGap) {
		v.errorf(path+".on_source_gap", "unknown policy %q (want %s)", m.OnSourceGap, orList(sourceGapPolicies))
	}
	if dl := m.DeadLetter; dl != nil {
		switch {
		case dl.Topic == "":
			v.errorf(path+".dead_letter.topic", "required field missing (a topic on the target cluster)")
		case !topicNameRE.MatchString(dl.Topic) || dl.Topic == "." || dl.Topic == "..":
			v.errorf(path+".dead_letter.topic", "invalid topic name %q (want 1-249 characters from A-Z a-z 0-9 . _ -)", dl.Topic)
		}
	}

	if mm := m.MM2; mm != nil {
		mp := path + ".mm2"
		if mm.SourceAlias == "" {
			mm.SourceAlias = m.Source
		}
		if mm.OffsetsTopic == "" {
			mm.OffsetsTopic = "mm2-offsets." + mm.SourceAlias + ".internal"
		}
		if !topicNameRE.MatchString(mm.OffsetsTopic) {
			v.errorf(mp+".offsets_topic", "invalid topic name %q (want 1-249 characters from A-Z a-z 0-9 . _ -)", mm.OffsetsTopic)
		}
		if mm.SourceConnector == "" {
			mm.SourceConnector = "MirrorSourceConnector" // MM2's dedicated mode names it so
		}
		switch mm.OffsetSyncsLocation {
		case "", "source":
			mm.OffsetSyncsLocation = "source"
			if mm.OffsetSyncsTopic == "" {
				mm.OffsetSyncsTopic = "mm2-offset-syncs." + m.Target + ".internal"
			}
		case "target":
			if mm.OffsetSyncsTopic == "" {
				mm.OffsetSyncsTopic = "mm2-offset-syncs." + mm.SourceAlias + ".internal"
			}
		default:
			v.errorf(mp+".offset_syncs_location", "unknown location %q (want source or target, MM2's offset-syncs.topic.location)", mm.OffsetSyncsLocation)
		}
		if mm.OffsetSyncsTopic != "" && !topicNameRE.MatchString(mm.OffsetSyncsTopic) {
			v.errorf(mp+".offset_syncs_topic", "invalid topic name %q (want 1-249 characters from A-Z a-z 0-9 . _ -)", mm.OffsetSyncsTopic)
		}
		v.positive(mp+".heartbeats_interval", mm.HeartbeatsInterval)
		v.positive(mp+".checkpoints_interval", mm.CheckpointsInterval)
	}

	sp := path + ".sync.topic_configs"
	m.Sync.TopicConfigs.include = v.patterns(sp+".include", m.Sync.TopicConfigs.Include)
	m.Sync.TopicConfigs.exclude = v.patterns(sp+".exclude", m.Sync.TopicConfigs.Exclude)
	v.positive(sp+".interval", m.Sync.TopicConfigs.Interval)
	v.positive(path+".sync.acls.interval", m.Sync.ACLs.Interval)
	v.positive(path+".sync.group_offsets.interval", m.Sync.GroupOffsets.Interval)

	for i, up := range m.Metadata.TrustedUpstreams {
		upPath := fmt.Sprintf("%s.metadata.trusted_upstreams[%d]", path, i)
		switch {
		case !nameRE.MatchString(up):
			v.errorf(upPath, "invalid mirror name %q (%s)", up, nameRule)
		case up == m.Name:
			v.errorf(upPath, "a mirror's own metadata is on its target, not its source: name the mirror that writes to %s", m.Source)
		}
	}

	if b := m.Fetch.MaxBytes; b < minFetchMaxBytes || b > maxFetchMaxBytes {
		v.errorf(path+".fetch.max_bytes", "must be from %s to %s, got %s", minFetchMaxBytes, maxFetchMaxBytes, b)
	}
	if m.RateLimit < 0 {
		v.errorf(path+".rate_limit", "must not be negative (bytes per second; 0 or unset: no limit)")
	}
	for i, r := range m.TopicRateLimits {
		rp := fmt.Sprintf("%s.topic_rate_limits[%d]", path, i)
		if r.Match == "" && len(r.Labels) == 0 {
			v.errorf(rp, "name the topics: match (a regexp over source topic names), labels, or both")
		}
		if r.Match != "" {
			if _, err := regexp.Compile(r.Match); err != nil {
				v.errorf(rp+".match", "invalid regexp %q: %s", r.Match, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			} else {
				r.match = regexp.MustCompile(anchor(r.Match))
			}
		}
		if r.RateLimit <= 0 {
			v.errorf(rp+".rate_limit", "required field missing or not positive (bytes per second, e.g. 10MB)")
		}
	}

	for i, l := range m.Labels {
		lp := fmt.Sprintf("%s.labels[%d]", path, i)
		if l.Partition != nil || l.Partitions != nil {
			key := "partition"
			if l.Partitions != nil {
				key = "partitions"
			}
			v.errorf(lp+"."+key, "labels apply to whole topics: kmirror keeps no per-partition metadata (remove %s)", key)
		}
		if l.Match == "" {
			v.errorf(lp+".match", "required field missing (a regexp over source topic names)")
		} else if _, err := regexp.Compile(l.Match); err != nil {
			v.errorf(lp+".match", "invalid regexp %q: %s", l.Match, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		} else {
			l.match = regexp.MustCompile(anchor(l.Match))
		}
		if len(l.Set) == 0 {
			v.errorf(lp+".set", "required field missing (the labels to set)")
		}
		for _, k := range slices.Sorted(maps.Keys(l.Set)) {
			switch {
			case k == "":
				v.errorf(lp+".set", "label keys must not be empty")
			case strings.HasPrefix(k, "kmirror."):
				v.errorf(lp+".set."+k, "label keys starting with \"kmirror.\" are reserved for provenance")
			}
		}
	}
}

// clusterRef checks that ref names a cluster.
func (v *validator) clusterRef(ref, path string, clusters map[string]*Cluster, known string) bool {
	if ref == "" {
		v.errorf(path, "required field missing (known clusters: %s)", known)
		return false
	}
	if _, ok := clusters[ref]; !ok {
		v.errorf(path, "unknown cluster %q (known: %s)", ref, known)
		return false
	}
	return true
}

func (v *validator) positive(path string, d Duration) {
	if d <= 0 {
		v.errorf(path, "must be greater than 0, got %s", d)
	}
}

// patterns compiles each pattern anchored; an invalid one is reported with
// the compiler's message for the pattern as written.
func (v *validator) patterns(path string, patterns []string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, 0, len(patterns))
	for i, p := range patterns {
		if _, err := regexp.Compile(p); err != nil {
			v.errorf(fmt.Sprintf("%s[%d]", path, i), "invalid regexp %q: %s", p, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			continue
		}
		// Wrapping a pattern that compiles in a group cannot break it.
		out = append(out, regexp.MustCompile(anchor(p)))
	}
	return out
}

// validHostPort reports whether s is "host:port" with a numeric port from
// minPort to 65535 and, unless emptyHost, a non-empty host.
func validHostPort(s string, emptyHost bool, minPort int) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || (host == "" && !emptyHost) || strings.ContainsAny(host, " \t/") {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= minPort && n <= 65535 && port[0] != '+' && port[0] != '-'
}

// orList formats ["a", "b", "c"] as "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

var (
	listenerTypes = []string{"log", "file", "webhook", "alertmanager", "plugin"}
	sha256RE      = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// known lists a map's keys for an error message.
func known[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// binary checks a plugin binary's path and pin, resolving the path.
func (v *validator) binary(path, file, sum string) string {
	hint := "<the plugin binary>"
	if file == "" {
		v.errorf(path+".path", "required field missing (the plugin binary)")
	} else {
		// file_ returns "" for a file it cannot read; the hint still
		// names it, as file_'s own error does.
		hint = file
		if !filepath.IsAbs(hint) {
			hint = filepath.Join(v.dir, hint)
		}
		file = v.file_(path+".path", file)
	}
	if !sha256RE.MatchString(strings.ToLower(sum)) {
		v.errorf(path+".sha256", "want the binary's sha256 as 64 hex digits (sha256sum %s), got %q", hint, sum)
	}
	return file
}

func (v *validator) plugin(p *Plugin, path, name string) {
	if !nameRE.MatchString(name) {
		v.errorf(path, "invalid plugin name %q (%s)", name, nameRule)
	}
	p.Path = v.binary(path, p.Path, p.SHA256)
	p.SHA256 = strings.ToLower(p.SHA256)
}

func (v *validator) listener(l *Listener, path, name string) {
	if !nameRE.MatchString(name) {
		v.errorf(path, "invalid listener name %q (%s)", name, nameRule)
	}
	if !slices.Contains(listenerTypes, l.Type) {
		v.errorf(path+".type", "unknown listener type %q (want %s)", l.Type, orList(listenerTypes))
	}
	if l.Timeout < 0 {
		v.errorf(path+".timeout", "must not be negative, got %s", l.Timeout)
	}
	switch l.Type {
	case "plugin":
		l.Path = v.binary(path, l.Path, l.SHA256)
		l.SHA256 = strings.ToLower(l.SHA256)
	default:
		if l.Path != "" || l.SHA256 != "" {
			v.errorf(path+".path", "path and sha256 are for listeners of type plugin; %s listeners take their settings in config", l.Type)
		}
	}
	switch l.Type {
	case "file":
		if l.Config["path"] == "" {
			v.errorf(path+".config", "a file listener needs config.path (the JSON file to write)")
		} else if !filepath.IsAbs(l.Config["path"]) {
			l.Config["path"] = filepath.Join(v.dir, l.Config["path"])
		}
	case "webhook", "alertmanager":
		if u := l.Config["url"]; !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			v.errorf(path+".config", "a %s listener needs config.url (http:// or https://), got %q", l.Type, u)
		}
	}
}

func (v *validator) filterRef(f *FilterRef, path string, plugins map[string]*Plugin) {
	switch {
	case f.Plugin != "" && f.Property != nil:
		v.errorf(path, "set plugin or property, not both (one filter per entry)")
	case f.Plugin == "" && f.Property == nil:
		v.errorf(path, "set plugin (a filter plugin) or property (the built-in property filter)")
	case f.Plugin != "":
		if _, ok := plugins[f.Plugin]; !ok {
			v.errorf(path+".plugin", "unknown plugin %q (known: %s)", f.Plugin, known(plugins))
		}
	default:
		if f.Properties != nil {
			v.errorf(path+".properties", "properties go with plugin filters")
		}
		p := f.Property
		if p.Combine == "" {
			p.Combine = string(filters.All)
		}
		if p.Combine != string(filters.All) && p.Combine != string(filters.Any) {
			v.errorf(path+".property.combine", "unknown combine %q (want all or any)", p.Combine)
		}
		if len(p.Conditions) == 0 {
			v.errorf(path+".property.conditions", "at least one condition is required")
		}
		for i, c := range p.Conditions {
			if _, err := filters.ParseCondition(c); err != nil {
				v.errorf(fmt.Sprintf("%s.property.conditions[%d]", path, i), "%v", err)
			}
		}
	}
}
