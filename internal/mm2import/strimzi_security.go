package mm2import

import (
	"fmt"
	"path"
	"regexp"
	"slices"

	"go.yaml.in/yaml/v3"
)

// clusterSecurity builds a cluster's tls and sasl blocks from its tls and
// authentication fields, and returns the security.protocol Strimzi gives
// its clients. Every Secret becomes files under SecretsDir/<secret>/, and
// the Secret one of the chart's secretMounts.
func (s *strimzi) clusterSecurity(c *clusterSpec, tls, auth *field) (string, error) {
	var sec clusterSecurity
	protocol := "PLAINTEXT"
	if tls != nil {
		protocol = "SSL"
		ca, err := s.trustedCertificates(c, *tls)
		if err != nil {
			return "", err
		}
		sec.tls = mapping(pair{key: "ca_file", value: ca})
	}
	if auth != nil {
		fs, err := fields(auth.node, auth.path)
		if err != nil {
			return "", err
		}
		typ, ok := find(fs, "type")
		if !ok {
			return "", &InputError{Line: auth.line, Key: auth.path + ".type", Msg: "missing: tls, scram-sha-256, scram-sha-512, plain or custom"}
		}
		switch typ.node.Value {
		case "scram-sha-256", "scram-sha-512", "plain":
			if tls != nil {
				protocol = "SASL_SSL"
			} else {
				protocol = "SASL_PLAINTEXT"
			}
			if sec.sasl, err = s.sasl(fs, *auth, typ.node.Value); err != nil {
				return "", err
			}
		case "tls":
			ck, ok := find(fs, "certificateAndKey")
			if !ok {
				return "", &InputError{Line: auth.line, Key: auth.path + ".certificateAndKey", Msg: "missing: type tls needs the Secret with the client certificate and key"}
			}
			if sec.tls == nil {
				s.ignored(typ.line, auth.path, "not used: Strimzi connects to cluster %s without TLS (no tls field), so there is no client certificate to present", c.alias)
				break
			}
			cert, err := s.secretFile(ck, "certificate")
			if err != nil {
				return "", err
			}
			key, err := s.secretFile(ck, "key")
			if err != nil {
				return "", err
			}
			sec.tls.Content = append(sec.tls.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "cert_file"}, cert,
				&yaml.Node{Kind: yaml.ScalarNode, Value: "key_file"}, key)
		default:
			s.unmapped(typ.line, auth.path, "authentication type %s for cluster %s: kmirror supports scram-sha-256, scram-sha-512, plain and tls", typ.node.Value, c.alias)
		}
	}
	s.security[c.alias] = sec
	return protocol, nil
}

// trustedCertificates returns the ca_file of a cluster's tls field (nil:
// the system's roots).
func (s *strimzi) trustedCertificates(c *clusterSpec, tls field) (*yaml.Node, error) {
	if tls.node.Kind == yaml.ScalarNode && tls.node.Tag == "!!null" {
		return nil, nil
	}
	fs, err := fields(tls.node, tls.path)
	if err != nil {
		return nil, err
	}
	var ca *yaml.Node
	for _, f := range fs {
		if f.key != "trustedCertificates" {
			s.unmapped(f.line, f.path, "not a field of a cluster's tls: Strimzi ignores it (a typo?)")
			continue
		}
		certs, err := items(f)
		if err != nil {
			return nil, err
		}
		for i, cert := range certs {
			if i > 0 {
				s.unmapped(cert.line, cert.path, "kmirror reads one CA file per cluster (tls.ca_file, the first entry): put every certificate cluster %s's brokers may present into that Secret key", c.alias)
				continue
			}
			cf, err := fields(cert.node, cert.path)
			if err != nil {
				return nil, err
			}
			if _, ok := find(cf, "certificate"); ok {
				if ca, err = s.secretFile(cert, "certificate"); err != nil {
					return nil, err
				}
				continue
			}
			p, ok := find(cf, "pattern")
			if !ok {
				return nil, &InputError{Line: cert.line, Key: cert.path, Msg: "want certificate or pattern: the Secret's key holding the CA certificate"}
			}
			// A Strimzi cluster CA Secret holds ca.crt, and during a CA
			// renewal the old certificates too, which a pattern such as
			// "*.crt" trusts as well; kmirror reads one file.
			if ok, _ := path.Match(p.node.Value, "ca.crt"); !ok {
				return nil, &InputError{Line: p.line, Key: p.path, Msg: fmt.Sprintf("%q: kmirror reads one CA file per cluster; name the Secret's key with certificate", p.node.Value)}
			}
			if ca, err = s.secretFile(cert, "pattern"); err != nil {
				return nil, err
			}
			ca.Value = path.Join(path.Dir(ca.Value), "ca.crt")
			s.unmapped(p.line, p.path, "%q: kmirror reads one CA file, so the output reads ca.crt, the current CA of a Strimzi cluster CA Secret; while that CA is renewed the Secret also holds the old one, which brokers may still present: concatenate both into one key then", p.node.Value)
		}
	}
	return ca, nil
}

// sasl builds a sasl block: the username, and the password from the
// Secret's file.
func (s *strimzi) sasl(fs []field, auth field, typ string) (*yaml.Node, error) {
	mechanism := map[string]string{"scram-sha-256": "SCRAM-SHA-256", "scram-sha-512": "SCRAM-SHA-512", "plain": "PLAIN"}[typ]
	user, ok := find(fs, "username")
	if !ok {
		return nil, &InputError{Line: auth.line, Key: auth.path + ".username", Msg: "missing: " + typ + " needs a username"}
	}
	name, err := user.text()
	if err != nil {
		return nil, err
	}
	ps, ok := find(fs, "passwordSecret")
	if !ok {
		return nil, &InputError{Line: auth.line, Key: auth.path + ".passwordSecret", Msg: "missing: " + typ + " needs the Secret with the password"}
	}
	file, err := s.secretFile(ps, "password")
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if !slices.Contains([]string{"type", "username", "passwordSecret"}, f.key) {
			s.unmapped(f.line, f.path, "not used with authentication type %s", typ)
		}
	}
	return mapping(
		pair{key: "mechanism", value: str(mechanism)},
		pair{key: "username", value: str(name)},
		pair{key: "password_file", value: file},
	), nil
}

// secretFile returns the file of a Secret reference's key (f has
// secretName and the field keyField naming the key), and mounts the
// Secret.
func (s *strimzi) secretFile(f field, keyField string) (*yaml.Node, error) {
	fs, err := fields(f.node, f.path)
	if err != nil {
		return nil, err
	}
	var name, key string
	for _, want := range []string{"secretName", keyField} {
		v, ok := find(fs, want)
		if !ok {
			return nil, &InputError{Line: f.line, Key: f.path + "." + want, Msg: "missing: a Secret reference names the Secret and its key"}
		}
		t, err := v.text()
		if err != nil {
			return nil, err
		}
		if !secretNameRE.MatchString(t) && want == "secretName" || t == "" || t == "." || t == ".." || !secretKeyRE.MatchString(t) && want != "secretName" {
			return nil, &InputError{Line: v.line, Key: v.path, Msg: fmt.Sprintf("%q is not a Secret's name or key", t)}
		}
		if want == "secretName" {
			name = t
		} else {
			key = t
		}
	}
	if !slices.Contains(s.mounts, name) {
		s.mounts = append(s.mounts, name)
	}
	return str(path.Join(SecretsDir, name, key)), nil
}

// Kubernetes' rules: a Secret's name is a DNS subdomain, a key is
// [-._a-zA-Z0-9]+ (a pattern is checked against ca.crt instead).
var (
	secretNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	secretKeyRE  = regexp.MustCompile(`^[-._a-zA-Z0-9*?\[\]]+$`)
)
