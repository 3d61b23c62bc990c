package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mcpClientDir holds the tests of the agent-facing server with the
// official MCP TypeScript client (npm ci there: .ci/tools.sh).
const mcpClientDir = "testdata/mcp"

// TestMCPWithTypeScriptClient seeds the golden dataset into the real
// binary and runs testdata/mcp/client.test.mjs against it: initialize,
// the tool listing and its schemas, every tool against the REST answer,
// 401, refusals, the two budgets apart, recent access and the stdio
// bridge (mf mcp).
func TestMCPWithTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is needed (Node.js 20+): run .ci/tools.sh")
	}
	if _, err := os.Stat(filepath.Join(mcpClientDir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("the MCP TypeScript client is not installed: run .ci/tools.sh (npm ci in cmd/mf/%s)", mcpClientDir)
	}
	p, c := seedReportGolden(t)

	raw, err := os.ReadFile(filepath.Join(mcpClientDir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := filepath.Join(t.TempDir(), "cases.json")
	if err := os.WriteFile(cases, []byte(c.expand(t, string(raw))), 0o644); err != nil {
		t.Fatal(err)
	}
	keys, _ := json.Marshal(reportKeys)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "client.test.mjs")
	cmd.Dir = mcpClientDir
	cmd.Env = append(os.Environ(),
		"MF_TEST_API="+p.api, "MF_TEST_ADMIN="+p.admin, "MF_TEST_CASES="+cases, "MF_TEST_KEYS="+string(keys),
		"MF_TEST_ADA=a0000000-0000-4000-8000-000000000001", "MF_TEST_BIN="+mfBinary)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the MCP client tests failed (%v):\n%s\nmf's output:\n%s", err, out, tail(p.out.String(), 4000))
	}
	t.Logf("MCP client tests:\n%s", tail(string(out), 3000))

	// The bridge with a refused credential says so and exits 1.
	bridge := exec.Command(mfBinary, "mcp", "--api-url", p.api)
	bridge.Env = []string{"PATH=" + os.Getenv("PATH"), "MF_API_KEY=" + reportKeys["revoked"]}
	bout, _ := bridge.CombinedOutput()
	if bridge.ProcessState.ExitCode() != 1 || !containsAll(string(bout), "refused the credential in MF_API_KEY (401)") ||
		strings.Contains(string(bout), reportKeys["revoked"]) {
		t.Errorf("mf mcp with a revoked key: exit %d, %s; want 1, the refusal named, the key not shown", bridge.ProcessState.ExitCode(), bout)
	}
}

// TestMCPBridgeNeedsCredential: mf mcp takes its credential from the
// environment only and says so.
func TestMCPBridgeNeedsCredential(t *testing.T) {
	cmd := exec.Command(mfBinary, "mcp", "--api-url", "http://127.0.0.1:1")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 || !containsAll(string(out), "MF_API_KEY", "never a flag") {
		t.Errorf("mf mcp without MF_API_KEY: exit %d, %s", cmd.ProcessState.ExitCode(), out)
	}
	if code, _, errOut := runMF(t, nil, "mcp", "--api-key", "x"); code != 2 || !containsAll(errOut, "flag provided but not defined") {
		t.Errorf("mf mcp --api-key: exit %d, %s; want a usage error: the credential is never a flag", code, errOut)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
