package helm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// repoRoot is the kmirror checkout this module sits in.
const repoRoot = "../.."

// TestRenderedConfigValidates runs `kmirror validate` (built from this
// checkout) on the config each value set renders, inside a copy of the
// pod's filesystem made from the Deployment's mounts: the ConfigMap at
// /etc/kmirror, each mounted Secret's files, the plugins volume, /tmp. So
// the config is valid, and every file it names is where the chart mounts
// it; a plugin is started and its sha256 checked.
func TestRenderedConfigValidates(t *testing.T) {
	bins := buildBinaries(t)
	for _, vs := range append(valueSets[:len(valueSets):len(valueSets)], struct{ name, values string }{"plugins-built", pluginsValues(bins.pluginSHA)}) {
		if vs.name == "plugins" {
			continue // its sha256 is a placeholder; plugins-built has the real one
		}
		t.Run(vs.name, func(t *testing.T) {
			out, err := validateRendered(t, bins, render(t, vs.values), fixtureSecrets(t))
			if err != nil {
				t.Fatalf("kmirror validate: %v\n%s", err, out)
			}
			if !strings.Contains(out, ": valid") {
				t.Errorf("kmirror validate said:\n%s", out)
			}
		})
	}
}

// TestValidateCatchesMistakes: the same check fails, naming the field,
// when the config is wrong in a way the schema cannot see, and when a
// file the config names is in no mounted Secret.
func TestValidateCatchesMistakes(t *testing.T) {
	bins := buildBinaries(t)
	for _, tc := range []struct{ name, values, want string }{
		{"unknown cluster", strings.Replace(minimalValues, "target: west", "target: north", 1), "mirrors[0].target"},
		{"secret not mounted", strings.Replace(saslTLSValues, "  - name: east-scram\n", "", 1), "clusters.east.sasl.password_file"},
		{"plugin pin", pluginsValues(strings.Repeat("0", 64)), "plugins.catalog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := validateRendered(t, bins, render(t, tc.values), fixtureSecrets(t))
			if err == nil {
				t.Fatalf("kmirror validate passed; want it to fail on %s:\n%s", tc.want, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("kmirror validate failed without naming %s:\n%s", tc.want, out)
			}
		})
	}
}

// validateRendered lays out the pod's filesystem under a temporary root
// and runs kmirror validate on the ConfigMap's kmirror.yaml, its
// container paths moved under the root. It returns validate's output.
func validateRendered(t *testing.T, bins *binaries, r *rendered, secrets map[string]map[string]string) (string, error) {
	t.Helper()
	root := t.TempDir()
	pod := r.deployment(t).Spec.Template.Spec
	for _, m := range pod.Containers[0].VolumeMounts {
		dir := filepath.Join(root, m.MountPath)
		v := volume(t, pod, m.Name)
		files := map[string]string{}
		switch {
		case v.ConfigMap != nil:
			files = r.configMap(t, v.ConfigMap.Name).Data
		case v.Secret != nil:
			s, ok := secrets[v.Secret.SecretName]
			if !ok {
				t.Fatalf("the pod mounts Secret %s, which the test's cluster does not have", v.Secret.SecretName)
			}
			files = s
		case v.EmptyDir != nil:
		case m.MountPath == "/plugins":
			files = map[string]string{"catalog.json": `{"topics": ["orders"]}`}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			copyFile(t, bins.plugin, filepath.Join(dir, "catalog-filter"))
		default:
			t.Fatalf("the test cannot lay out volume %+v at %s", v, m.MountPath)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The config names container paths; here they are under root.
	cfgPath := filepath.Join(root, "etc/kmirror/kmirror.yaml")
	cfg := strings.NewReplacer("/etc/kmirror/", root+"/etc/kmirror/", "/plugins/", root+"/plugins/").Replace(r.kmirrorConfig(t))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bins.kmirror, "validate", "--config", cfgPath, "--timeout", "60s")
	// go-plugin puts its sockets in TMPDIR: the image's /tmp, the emptyDir.
	cmd.Env = append(os.Environ(), "TMPDIR="+filepath.Join(root, "tmp"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

type binaries struct {
	kmirror, plugin, pluginSHA string
}

var (
	buildOnce sync.Once
	built     *binaries
	buildErr  error
	buildOut  []byte
)

// buildBinaries builds kmirror and the catalog-filter example plugin from
// this checkout, once per test run.
func buildBinaries(t *testing.T) *binaries {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kmirror-helm-test")
		if err != nil {
			buildErr = err
			return
		}
		b := &binaries{kmirror: filepath.Join(dir, "kmirror"), plugin: filepath.Join(dir, "catalog-filter")}
		cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/kmirror", "./plugins/examples/catalog-filter")
		cmd.Dir = repoRoot
		if buildOut, buildErr = cmd.CombinedOutput(); buildErr != nil {
			return
		}
		raw, err := os.ReadFile(b.plugin)
		if err != nil {
			buildErr = err
			return
		}
		sum := sha256.Sum256(raw)
		b.pluginSHA = hex.EncodeToString(sum[:])
		built = b
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/kmirror ./plugins/examples/catalog-filter: %v\n%s", buildErr, buildOut)
	}
	return built
}

// TestMain removes the binaries buildBinaries made.
func TestMain(m *testing.M) {
	code := m.Run()
	if built != nil {
		_ = os.RemoveAll(filepath.Dir(built.kmirror))
	}
	os.Exit(code)
}

// fixtureSecrets are the Secrets of the test's cluster, by name, with
// their files: the ones the value sets mount.
func fixtureSecrets(t *testing.T) map[string]map[string]string {
	t.Helper()
	ca, _ := selfSigned(t, "kafka-ca")
	crt, key := selfSigned(t, "kmirror")
	return map[string]map[string]string{
		"east-scram":    {"password": "s3cret\n"},
		"kafka-ca":      {"ca.crt": ca},
		"west-client":   {"tls.crt": crt, "tls.key": key},
		"kmirror-https": {"tls.crt": crt, "tls.key": key},
		"kmirror-http":  {"token": "t0ken\n", "api-token": "t0ken\n"},
	}
}

// selfSigned is a PEM certificate and key, as a Secret of type tls holds.
func selfSigned(t *testing.T, cn string) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		DNSNames:              []string{cn},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
