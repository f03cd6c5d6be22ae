package main

import (
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFallbackRoots runs this test binary again on a system with no CA
// bundle, as in the container image (SSL_CERT_FILE and SSL_CERT_DIR name
// nothing, and crypto/x509 reads only those): the system pool still holds
// the public roots, from x509roots/fallback. A child process, because
// crypto/x509 loads the system roots once per process.
func TestFallbackRoots(t *testing.T) {
	if os.Getenv("KMIRROR_TEST_ROOTS_CHILD") == "1" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		//lint:ignore SA1019 on Linux the system pool is a plain pool and Subjects lists it
		fmt.Printf("roots: %d\n", len(pool.Subjects()))
		return
	}
	empty := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFallbackRoots$")
	cmd.Env = append(os.Environ(), "KMIRROR_TEST_ROOTS_CHILD=1",
		"SSL_CERT_FILE="+filepath.Join(empty, "none.pem"), "SSL_CERT_DIR="+empty)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var n int
	for _, line := range strings.Split(string(out), "\n") {
		if _, err := fmt.Sscanf(line, "roots: %d", &n); err == nil {
			break
		}
	}
	// Mozilla's list has about 150 roots; a few dozen would mean a
	// truncated bundle, none that the fallback is not linked in.
	if n < 100 {
		t.Errorf("with no CA bundle on the system, the system pool has %d roots, want Mozilla's (over 100):\n%s", n, out)
	}
}
