package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOpenFeatureGoProvider runs the Go OpenFeature provider's tests
// (ingest/client/openfeature-go, a module of its own, so `go test ./...`
// does not reach it) against this binary with the demo project.
func TestOpenFeatureGoProvider(t *testing.T) {
	p := startMF(t, t.TempDir(), "serve", "--provision", demoFile)
	cmd := exec.Command("go", "test", "-count=1", "-v", "./...")
	cmd.Dir = "../../ingest/client/openfeature-go"
	cmd.Env = append(cmd.Environ(), "MF_INGEST="+p.ingest, "MF_SECRET_KEY="+demoSecretKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test in ingest/client/openfeature-go: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestProvider") {
		t.Fatalf("the provider's test did not run:\n%s", out)
	}
}
