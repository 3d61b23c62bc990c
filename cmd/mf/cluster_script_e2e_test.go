package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/mfhq/mf/internal/freeport"
)

// TestClusterScript runs `deploy/cluster.sh --check` (what `go tool task
// cluster` starts: three nats-server nodes, MinIO over four drives, mf
// ingest, two mf process and mf api): a batch sent to its ingest is
// counted by its reporting API, and the script stops everything it
// started.
func TestClusterScript(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("bash", "../../deploy/cluster.sh", "--check")
	cmd.Env = append(os.Environ(), "MF_CLUSTER_DIR="+dir, "MF_CLUSTER_PORT_BASE="+strconv.Itoa(freePortRange(t, 36)))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "counted by the reporting API") {
		t.Fatalf("deploy/cluster.sh --check: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "(3 replicas)") {
		t.Fatalf("the script did not say how to reach the cluster:\n%s", out)
	}
}

// freePortRange returns a port p such that p to p+n-1 are free on
// 127.0.0.1 now.
func freePortRange(t *testing.T, n int) int {
	t.Helper()
	base, err := freeport.Ports(n)
	if err != nil {
		t.Fatal(err)
	}
	return base
}
