package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOpenFeatureWebProvider runs the OpenFeature web provider's Node tests
// (ingest/client/openfeature-web) against this binary with the demo
// project: @openfeature/web-sdk resolves through the provider, the mf
// browser client and mf's flag endpoints.
func TestOpenFeatureWebProvider(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is needed: bash .ci/tools.sh")
	}
	p := startMF(t, t.TempDir(), "serve", "--provision", demoFile)
	cmd := exec.Command(node, "--test")
	cmd.Dir = "../../ingest/client/openfeature-web"
	cmd.Env = append(cmd.Environ(), "MF_INGEST="+p.ingest, "MF_WEBSITE_KEY="+demoWebsite)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test (run bash .ci/tools.sh for its npm packages): %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "# pass 2") {
		t.Fatalf("the provider's tests did not all run:\n%s", out)
	}
}
