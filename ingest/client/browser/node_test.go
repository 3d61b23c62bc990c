package browser

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNode runs the module's Node tests (node --test: *.test.mjs).
func TestNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is needed for the browser client's tests: bash .ci/tools.sh")
	}
	cmd := exec.Command(node, "--test")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test failed: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "# pass") || strings.HasPrefix(line, "# fail") {
			t.Log(line)
		}
	}
}

// TestVersion: the module's VERSION is the package's version.
func TestVersion(t *testing.T) {
	var pkg struct{ Version string }
	b, err := os.ReadFile("package.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatalf("package.json: %v", err)
	}
	if v := Version(); v == "" || v != pkg.Version {
		t.Fatalf("mf.mjs VERSION %q, package.json version %q: they must be equal", v, pkg.Version)
	}
}
