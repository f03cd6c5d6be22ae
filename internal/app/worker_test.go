package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/config"
)

// TestWorkerConfigMasked: the config GET /api/v1/worker shows holds no
// secret, wherever it came from: a SASL password inline or from a file,
// the HTTP token from a file or the environment, a listener's token or a
// password in its URL. The files are named; the settings that are not
// secret are shown.
func TestWorkerConfigMasked(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	passFile := write("pass.txt", "FilePassword-83hd\n")
	tokenFile := write("token.txt", "FileToken-kq02nd\n")
	t.Setenv("KMIRROR_TEST_TOKEN_ENV", "EnvToken-zz81")
	yml := `clusters:
  a: {bootstrap_servers: ["h:1"], sasl: {mechanism: PLAIN, username: alice, password: InlinePassword-x7}}
  b: {bootstrap_servers: ["h:2"], sasl: {mechanism: SCRAM-SHA-512, username: bob, password_file: ` + passFile + `}}
mirrors: [{name: m, source: a, target: b, listeners: [hook]}]
listeners:
  hook: {type: webhook, config: {url: "https://svc:UrlPassword-5k@hooks.example/kmirror", bearer_token: WebhookToken-91, region: eu-west-1}}
http: {listen: "127.0.0.1:0", auth: {bearer_token_file: ` + tokenFile + `}}
`
	cfg, err := config.Load([]byte(yml), filepath.Join(dir, "kmirror.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a := &App{cfg: cfg, opts: Options{Version: "v9.9.9"}}
	got := a.Worker()
	for _, secret := range []string{"InlinePassword-x7", "FilePassword-83hd", "FileToken-kq02nd", "EnvToken-zz81", "UrlPassword-5k", "WebhookToken-91"} {
		if strings.Contains(got.Config, secret) {
			t.Errorf("the worker's config shows the secret %s:\n%s", secret, got.Config)
		}
	}
	for _, shown := range []string{passFile, tokenFile, "alice", "eu-west-1", "https://svc:<secret>@hooks.example/kmirror", "bearer_token: <secret>", "password: <secret>"} {
		if !strings.Contains(got.Config, shown) {
			t.Errorf("the worker's config lacks %q:\n%s", shown, got.Config)
		}
	}
	if got.Version != "v9.9.9" || got.GoVersion == "" {
		t.Errorf("worker %+v", got)
	}

	// The env-var token: the variable is named, its value never shown.
	cfg, err = config.Load([]byte(strings.Replace(yml, "bearer_token_file: "+tokenFile, "bearer_token_env: KMIRROR_TEST_TOKEN_ENV", 1)), filepath.Join(dir, "kmirror.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c := (&App{cfg: cfg}).Worker().Config; strings.Contains(c, "EnvToken-zz81") || !strings.Contains(c, "KMIRROR_TEST_TOKEN_ENV") {
		t.Errorf("with bearer_token_env:\n%s", c)
	}
}

// TestMaskedConfigBadYAML: YAML that cannot be read is withheld whole,
// never shown as it is.
func TestMaskedConfigBadYAML(t *testing.T) {
	if got := maskedConfig("password: [secret-value\n"); strings.Contains(got, "secret-value") || !strings.HasPrefix(got, "# the config could not be shown") {
		t.Errorf("maskedConfig of bad YAML: %q", got)
	}
}
