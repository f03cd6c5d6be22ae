package kafkatest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAuthorizerProperties(t *testing.T) {
	p := AuthorizerProperties("User:kmirror", "User:ANONYMOUS")
	if p["authorizer.class.name"] != StandardAuthorizer {
		t.Errorf("authorizer.class.name = %q", p["authorizer.class.name"])
	}
	if p["super.users"] != "User:ANONYMOUS;User:kmirror" {
		t.Errorf("super.users = %q, want User:ANONYMOUS once, then User:kmirror", p["super.users"])
	}
	rt := &Runtime{Home: t.TempDir(), Java: "java"}
	c, err := rt.NewCluster(Config{Name: "acl", Dir: filepath.Join(t.TempDir(), "acl"), Properties: p})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(c.Dir(), "server.properties"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"authorizer.class.name=" + StandardAuthorizer + "\n",
		"super.users=User:ANONYMOUS;User:kmirror\n",
		"allow.everyone.if.no.acl.found=false\n",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("server.properties lacks %q:\n%s", want, b)
		}
	}
}

func TestFastCompaction(t *testing.T) {
	if FastCompactionProperties()["log.cleaner.backoff.ms"] != "100" {
		t.Errorf("FastCompactionProperties: %v", FastCompactionProperties())
	}
	tc := FastCompactionTopicConfigs()
	if tc["cleanup.policy"] != "compact" || tc["segment.ms"] != "100" || tc["min.cleanable.dirty.ratio"] != "0.01" {
		t.Errorf("FastCompactionTopicConfigs: %v", tc)
	}
}
