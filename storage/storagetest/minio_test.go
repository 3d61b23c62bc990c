package storagetest

import (
	"os"
	"strings"
	"testing"
)

// .ci/minio.sh installs the MinIO version this package names.
func TestMinIOVersionMatchesInstallScript(t *testing.T) {
	script, err := os.ReadFile("../../.ci/minio.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "\nversion="+MinIOVersion+"\n") {
		t.Fatalf(".ci/minio.sh does not pin version=%s; keep the two in step", MinIOVersion)
	}
	if !strings.Contains(string(script), "\nmodule="+MinIOModule+"\n") {
		t.Fatalf(".ci/minio.sh does not install module %s", MinIOModule)
	}
}

// FreshBucket gives a new, valid bucket name each time and keeps the
// server and credentials.
func TestFreshBucket(t *testing.T) {
	const base = "s3://user:pass@127.0.0.1:1/old?secure=false"
	a, b := FreshBucket(t, base), FreshBucket(t, base)
	if a == b {
		t.Fatalf("FreshBucket returned %q twice", a)
	}
	for _, u := range []string{a, b} {
		if !strings.HasPrefix(u, "s3://user:pass@127.0.0.1:1/mf-test-") || !strings.HasSuffix(u, "?secure=false") {
			t.Errorf("FreshBucket(%q) = %q", base, u)
		}
	}
}
