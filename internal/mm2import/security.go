package mm2import

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// security maps a cluster's security.protocol, ssl.* and sasl.* settings
// (its own, else the top-level defaults) to kmirror's tls and sasl blocks.
// kmirror reads PEM files only and takes passwords from the environment:
// the output refers to PEM files to export and to variables to set, and no
// secret value is ever written or shown.
func (c *converter) security(alias string) (tls, sasl *yaml.Node) {
	eff := map[string]Property{} // key without the alias prefix -> setting
	for _, k := range c.order {
		own, isOwn := strings.CutPrefix(k, alias+".")
		switch {
		case isOwn && (strings.HasPrefix(own, "ssl.") || strings.HasPrefix(own, "sasl.")):
			eff[own] = c.props[k]
		case !isOwn && (strings.HasPrefix(k, "ssl.") || strings.HasPrefix(k, "sasl.")):
			if _, set := eff[k]; !set {
				eff[k] = c.props[k]
			}
		}
	}
	// An own key wins over a top-level one whatever the file order.
	for k := range eff {
		if p, ok := c.props[alias+"."+k]; ok {
			eff[k] = p
		}
	}
	protocol := "PLAINTEXT"
	if p, ok := c.clusterGet(alias, "security.protocol"); ok {
		protocol = strings.ToUpper(strings.TrimSpace(p.Value))
		if !slices.Contains([]string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}, protocol) {
			c.unmapped(p, "unknown security.protocol %q for cluster %s (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL); converted as PLAINTEXT", p.Value, alias)
			protocol = "PLAINTEXT"
		}
	}
	useTLS := protocol == "SSL" || protocol == "SASL_SSL"
	useSASL := strings.HasPrefix(protocol, "SASL_")
	for _, k := range slices.Sorted(maps.Keys(eff)) {
		p := eff[k]
		if (strings.HasPrefix(k, "ssl.") && !useTLS) || (strings.HasPrefix(k, "sasl.") && !useSASL) {
			if strings.HasPrefix(p.Key, alias+".") {
				c.ignored(p, "not used: cluster %s's security.protocol is %s", alias, protocol)
			}
			delete(eff, k)
		}
	}
	switch given, ok := c.opts.security[alias]; {
	case ok:
		tls, sasl = given.tls, given.sasl
		if useTLS {
			c.hostnameCheck(alias, eff)
		}
	default:
		if useTLS {
			tls = c.tls(alias, eff)
		}
		if useSASL {
			sasl = c.sasl(alias, eff)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(eff)) {
		c.unmappedSecurity(alias, k, eff[k])
	}
	return tls, sasl
}

// unmappedSecurity notes an ssl.* or sasl.* setting tls and sasl did not
// take.
func (c *converter) unmappedSecurity(alias, k string, p Property) {
	if c.seen[p.Key] {
		return
	}
	switch {
	case strings.HasPrefix(k, "ssl."):
		c.unmapped(p, "no kmirror equivalent for cluster %s: kmirror uses Go's TLS defaults (TLS 1.2 and 1.3, Go's cipher suites, PEM files)", alias)
	default:
		c.unmapped(p, "no kmirror equivalent for cluster %s: kmirror supports SASL PLAIN and SCRAM with a username and password", alias)
	}
}

// take returns a security setting from eff and marks it used.
func (c *converter) take(eff map[string]Property, k string) (Property, bool) {
	p, ok := eff[k]
	if ok {
		c.seen[p.Key] = true
		delete(eff, k)
	}
	return p, ok
}

func (c *converter) tls(alias string, eff map[string]Property) *yaml.Node {
	var ca, cert, key *yaml.Node
	storeType := func(k string) string {
		if p, ok := c.take(eff, k); ok {
			return strings.ToUpper(strings.TrimSpace(p.Value))
		}
		return "JKS" // Kafka's default for both stores
	}
	tsType, ksType := storeType("ssl.truststore.type"), storeType("ssl.keystore.type")
	if p, ok := c.take(eff, "ssl.truststore.location"); ok {
		if tsType == "PEM" {
			ca = str(p.Value)
			if pw, ok := c.take(eff, "ssl.truststore.password"); ok {
				c.ignored(pw, "kmirror reads the PEM truststore as it is")
			}
		} else {
			pem := replaceExt(p.Value, ".pem")
			ca = str(pem)
			c.unmapped(p, "a %s truststore: kmirror reads PEM; export the CA certificates with `keytool -list -rfc -keystore %s > %s` (it asks for the store password); the output's tls.ca_file names that file", tsType, p.Value, pem)
			if pw, ok := c.take(eff, "ssl.truststore.password"); ok {
				c.ignored(pw, "unused once the truststore is exported to PEM")
			}
		}
	} else if p, ok := c.take(eff, "ssl.truststore.certificates"); ok {
		pem := alias + "-ca.pem"
		ca = str(pem)
		c.unmapped(p, "certificates inline in the properties: kmirror reads a file; write this value (the PEM certificates) to %s, next to the kmirror config", pem)
	}
	keyPassword, hasKeyPassword := c.take(eff, "ssl.key.password")
	if p, ok := c.take(eff, "ssl.keystore.location"); ok {
		switch {
		case ksType == "PEM" && !hasKeyPassword:
			cert, key = str(p.Value), str(p.Value)
		case ksType == "PEM":
			k := replaceExt(p.Value, "-key.pem")
			cert, key = str(p.Value), str(k)
			c.unmapped(p, "the PEM keystore's key is encrypted (ssl.key.password): Go reads unencrypted keys only; write it decrypted with `openssl pkey -in %s -out %s` (it asks for the key password) and keep that file private", p.Value, k)
		default:
			crt, k := replaceExt(p.Value, "-cert.pem"), replaceExt(p.Value, "-key.pem")
			p12 := p.Value
			convert := ""
			if ksType != "PKCS12" {
				p12 = replaceExt(p.Value, ".p12")
				convert = fmt.Sprintf("`keytool -importkeystore -srckeystore %s -destkeystore %s -deststoretype PKCS12`, then ", p.Value, p12)
			}
			cert, key = str(crt), str(k)
			c.unmapped(p, "a %s keystore: kmirror reads a PEM certificate and key; export them with %s`openssl pkcs12 -in %s -nokeys -out %s` and `openssl pkcs12 -in %s -nocerts -nodes -out %s` (they ask for the passwords) and keep the key file private", ksType, convert, p12, crt, p12, k)
		}
		if pw, ok := c.take(eff, "ssl.keystore.password"); ok {
			c.ignored(pw, "unused once the keystore is exported to PEM")
		}
		if hasKeyPassword {
			c.ignored(keyPassword, "unused once the key is written unencrypted")
		}
	} else if hasKeyPassword {
		c.ignored(keyPassword, "not used: cluster %s has no keystore", alias)
	}
	c.hostnameCheck(alias, eff)
	return mapping(
		pair{key: "ca_file", value: ca},
		pair{key: "cert_file", value: cert},
		pair{key: "key_file", value: key},
	)
}

// hostnameCheck notes a cluster whose clients skip host name verification.
func (c *converter) hostnameCheck(alias string, eff map[string]Property) {
	if p, ok := c.take(eff, "ssl.endpoint.identification.algorithm"); ok && strings.TrimSpace(p.Value) == "" {
		c.unmapped(p, "host name verification is off for cluster %s: kmirror always checks the brokers' names (set tls.server_name to the name their certificates hold)", alias)
	}
}

// replaceExt swaps path's extension (if any) for suffix.
func replaceExt(path, suffix string) string {
	return strings.TrimSuffix(path, filepath.Ext(path)) + suffix
}

var loginModules = map[string]string{
	"org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
	"org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
}

func (c *converter) sasl(alias string, eff map[string]Property) *yaml.Node {
	mechanism := "GSSAPI" // Kafka's default
	mp, hasMechanism := c.take(eff, "sasl.mechanism")
	if hasMechanism {
		mechanism = strings.ToUpper(strings.TrimSpace(mp.Value))
	}
	jaas, hasJAAS := c.take(eff, "sasl.jaas.config")
	where := jaas
	if hasMechanism {
		where = mp
	}
	if !slices.Contains([]string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, mechanism) {
		if !hasMechanism {
			where = c.props[alias+".security.protocol"]
			where.Key = alias + ".sasl.mechanism"
		}
		c.unmapped(where, "SASL mechanism %s for cluster %s: kmirror supports PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", mechanism, alias)
		if hasJAAS {
			c.ignored(jaas, "not used: the mechanism is not supported")
		}
		return nil
	}
	passwordEnv := c.envName(alias, "SASL_PASSWORD")
	node := func(user *yaml.Node) *yaml.Node {
		return mapping(
			pair{key: "mechanism", value: str(mechanism)},
			pair{key: "username", value: user},
			pair{key: "password", value: ref(passwordEnv)},
		)
	}
	if !hasJAAS {
		p := where
		p.Key = alias + ".sasl.jaas.config"
		userEnv := c.envName(alias, "SASL_USERNAME")
		c.unmapped(p, "missing: no SASL credentials for cluster %s; the output reads them from %s and %s", alias, userEnv, passwordEnv)
		c.res.Env = append(c.res.Env, Env{Name: userEnv, What: "cluster " + alias + "'s SASL username"}, Env{Name: passwordEnv, What: "cluster " + alias + "'s SASL password"})
		return node(ref(userEnv))
	}
	module, opts, err := parseJAAS(jaas.Value)
	want := "SCRAM"
	if mechanism == "PLAIN" {
		want = "PLAIN"
	}
	switch {
	case err != nil:
		userEnv := c.envName(alias, "SASL_USERNAME")
		c.unmapped(jaas, "cannot read it (%v); the output reads cluster %s's SASL username from %s and password from %s", err, alias, userEnv, passwordEnv)
		c.res.Env = append(c.res.Env, Env{Name: userEnv, What: "cluster " + alias + "'s SASL username"}, Env{Name: passwordEnv, What: "cluster " + alias + "'s SASL password"})
		return node(ref(userEnv))
	case loginModules[module] != want:
		c.unmapped(jaas, "login module %s with mechanism %s for cluster %s: kmirror supports PlainLoginModule (PLAIN) and ScramLoginModule (SCRAM) with a username and password", module, mechanism, alias)
		return nil
	}
	user, password := opts["username"], opts["password"]
	switch {
	case user == "" || password == "":
		c.unmapped(jaas, "no username or no password in it for cluster %s", alias)
	case strings.Contains(user+password, "${"):
		c.unmapped(jaas, "its username or password refers to a config provider (${...}), which kmirror cannot read: set the username in the output and %s to the password", passwordEnv)
	}
	if len(opts) > 2 {
		extra := slices.Sorted(maps.Keys(opts))
		extra = slices.DeleteFunc(extra, func(k string) bool { return k == "username" || k == "password" })
		c.unmapped(jaas, "login module options other than username and password (%s) have no kmirror equivalent", strings.Join(extra, ", "))
	}
	c.res.Env = append(c.res.Env, Env{Name: passwordEnv, What: "cluster " + alias + "'s SASL password (the password in " + jaas.Key + ")"})
	return node(str(user))
}

// parseJAAS reads a one-module JAAS configuration as Kafka's JaasConfig
// does: "<LoginModule class> <flag> [name=value ...];", values bare or in
// double quotes. Errors never quote the text: it holds a password.
func parseJAAS(s string) (module string, opts map[string]string, err error) {
	toks, err := jaasTokens(s)
	if err != nil {
		return "", nil, err
	}
	if len(toks) < 3 || toks[len(toks)-1] != ";" {
		return "", nil, fmt.Errorf("want \"<LoginModule> required name=value ... ;\"")
	}
	module = toks[0]
	switch strings.ToLower(toks[1]) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return "", nil, fmt.Errorf("the login module's flag is not required, requisite, sufficient or optional")
	}
	opts = map[string]string{}
	rest := toks[2 : len(toks)-1]
	for i := 0; i < len(rest); i += 3 {
		if i+2 >= len(rest) || rest[i+1] != "=" || rest[i] == "=" || rest[i] == ";" {
			if slices.Contains(rest, ";") {
				return "", nil, fmt.Errorf("it holds more than one login module; Kafka clients take one")
			}
			return "", nil, fmt.Errorf("an option is not name=value")
		}
		opts[rest[i]] = rest[i+2]
	}
	return module, opts, nil
}

// jaasTokens splits JAAS text into words, quoted strings (unquoted), "="
// and ";".
func jaasTokens(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		switch ch := s[i]; {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f':
			i++
		case ch == '=' || ch == ';':
			toks = append(toks, string(ch))
			i++
		case ch == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			if j == len(s) {
				return nil, fmt.Errorf("a quoted value is not closed")
			}
			toks = append(toks, b.String())
			i = j + 1
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n\r\f=;\"", rune(s[j])) {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks, nil
}
