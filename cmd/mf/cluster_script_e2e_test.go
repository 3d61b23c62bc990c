package main

import (
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
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
	for range 50 {
		base := 20000 + rand.IntN(40000)
		ok := true
		for p := base; p < base+n && ok; p++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				ok = false
				continue
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no range of free ports found")
	return 0
}
