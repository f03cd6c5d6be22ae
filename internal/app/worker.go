package app

import (
	"regexp"
	"runtime"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/internal/httpapi"
)

// The status page's view of the worker: what runs (version, since when)
// and the config in force, with every secret masked.

// Worker implements httpapi.WorkerSource.
func (a *App) Worker() httpapi.WorkerInfo {
	a.mu.Lock()
	cfg := a.cfg
	a.mu.Unlock()
	return httpapi.WorkerInfo{Version: a.opts.Version, GoVersion: runtime.Version(), StartedAt: a.started, Config: maskedConfig(cfg.String())}
}

// History implements httpapi.HistorySource.
func (a *App) History() httpapi.History { return a.sampler }

// TopicPartitions implements httpapi.PartitionSource.
func (a *App) TopicPartitions(mirror, topic string) ([]connector.PartitionStatus, bool) {
	for _, m := range a.mirrors {
		if m.Name() == mirror {
			return m.TopicPartitions(topic)
		}
	}
	return nil, false
}

const secretMask = "<secret>"

// secretKey matches the settings whose value is a secret. config.Secret
// masks the config's own (SASL passwords, the HTTP token); a plugin's or
// a listener's config is free-form strings, where a webhook's token is
// as secret as a password. A *_file or *_env setting names where the
// secret is, and is shown.
var secretKey = regexp.MustCompile(`(?i)(pass|secret|token|credential|auth|api[_-]?key|private|signature|cookie)`)

// maskedConfig is the config's YAML (config.Config.String, whose Secrets
// already read "<secret>") with every secret-looking setting masked too,
// and a URL's password. It never fails open: YAML it cannot read is
// withheld whole.
func maskedConfig(s string) string {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		return "# the config could not be shown: " + err.Error() + "\n"
	}
	maskNode(&doc)
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return "# the config could not be shown: " + err.Error() + "\n"
	}
	_ = enc.Close()
	return b.String()
}

var urlPassword = regexp.MustCompile(`://([^/@:\s]*):[^/@\s]*@`)

func maskNode(n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind == yaml.ScalarNode && v.Value != "" && isSecretKey(k.Value) {
				v.Value, v.Tag, v.Style = secretMask, "!!str", 0
				continue
			}
			maskNode(v)
		}
		return
	}
	if n.Kind == yaml.ScalarNode {
		n.Value = urlPassword.ReplaceAllString(n.Value, "://$1:"+secretMask+"@")
		return
	}
	for _, c := range n.Content {
		maskNode(c)
	}
}

func isSecretKey(k string) bool {
	k = strings.ToLower(k)
	if strings.HasSuffix(k, "_file") || strings.HasSuffix(k, "_env") || k == "auth" {
		return false
	}
	return secretKey.MatchString(k)
}
