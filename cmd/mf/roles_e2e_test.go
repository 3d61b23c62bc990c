package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/storagetest"
)

// startRole starts `mf <role>` (ingest, process or api) on fresh ports and
// waits until the listeners the role opens answer /healthz.
func startRole(t *testing.T, role string, extra ...string) *mfProc {
	t.Helper()
	p := &mfProc{t: t, data: t.TempDir(), out: &syncBuffer{}, done: make(chan struct{})}
	p.ingestAddr, p.apiAddr, p.admn = freeAddr(t), freeAddr(t), freeAddr(t)
	p.ingest, p.api, p.admin = "http://"+p.ingestAddr, "http://"+p.apiAddr, "http://"+p.admn
	p.only = map[string][]string{"ingest": {p.ingest}, "process": {p.admin}, "api": {p.api, p.admin}}[role]
	args := append([]string{role, "--data", p.data,
		"--ingest-addr", p.ingestAddr, "--api-addr", p.apiAddr, "--admin-addr", p.admn}, extra...)
	p.cmd = exec.Command(mfBinary, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("cannot start mf %s: %v", role, err)
	}
	go func() { p.exitErr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	p.waitHealthy(60 * time.Second)
	return p
}

// TestRolesApart runs mf ingest, mf process and mf api as three processes
// sharing an external NATS JetStream log (a server this test runs, reached
// over TCP) and a real MinIO: a batch accepted by the ingest process is
// processed by the processor process and answered by the API process; each
// exits 0 on SIGTERM. A second mf process waits as a standby while the
// first holds the processor lease, and takes over when the first stops.
func TestRolesApart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lcfg := eventlog.DefaultConfig()
	lcfg.Dir, lcfg.ListenAddr = t.TempDir(), "127.0.0.1:0"
	server, err := eventlog.Open(ctx, lcfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("cannot start the NATS server standing for the cluster: %v", err)
	}
	defer server.Close()
	shared := []string{"--log", server.ClientURL(), "--store", storagetest.StartMinIO(t)}

	if code, out, errOut := runMF(t, nil, append(append([]string{"provision"}, shared...), demoFile)...); code != 0 {
		t.Fatalf("mf provision on the shared log: exit %d\n%s%s", code, out, errOut)
	}
	ing := startRole(t, "ingest", shared...)
	proc := startRole(t, "process", shared...)
	waitFor(t, time.Minute, func() bool { return strings.Contains(proc.out.String(), "processor started") })
	standby := startRole(t, "process", shared...)
	rep := startRole(t, "api", shared...)

	now := time.Now().UnixMilli()
	// send posts a batch of pageviews of the browsers named to mf ingest,
	// then waits until mf api lists want events.
	send := func(batch string, want int, browsers ...string) {
		t.Helper()
		var events []string
		for i, b := range browsers {
			events = append(events, fmt.Sprintf(`{"name":"$pageview","time":%d,"anonymousId":%q,"page":{"url":"https://shop.example/"}}`,
				now-int64(20_000-5_000*i), b))
		}
		code, _, resp := do(t, "POST", ing.ingest+"/v1/batch/"+demoWebsiteKey, batchBody(batch, "full", events...),
			"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
		if code != 202 {
			t.Fatalf("batch to mf ingest: %d %s", code, resp)
		}
		waitFor(t, time.Minute, func() bool {
			code, _, b := do(t, "GET", rep.api+"/api/v1/projects/"+demoProject+"/events?period=1h", nil, "Authorization", "Bearer "+demoPAT)
			var doc struct{ Data []json.RawMessage }
			return code == 200 && json.Unmarshal(b, &doc) == nil && len(doc.Data) == want
		})
	}
	send("7a7a7a7a-0000-4000-8000-000000000001", 2, "apart-a", "apart-b")
	if out := standby.out.String(); strings.Contains(out, "processor started") || !strings.Contains(out, "another process holds the lease") {
		t.Fatalf("the second mf process did not wait as a standby; output:\n%s", out)
	}

	// The first processor stops: the standby takes the log over.
	if c := proc.stop(time.Minute); c != 0 {
		t.Errorf("mf process: exit %d on SIGTERM; output:\n%s", c, proc.out)
	}
	send("7a7a7a7a-0000-4000-8000-000000000002", 3, "apart-c")
	if !strings.Contains(standby.out.String(), "processor started") {
		t.Fatalf("the standby processed without saying it started; output:\n%s", standby.out)
	}
	for name, p := range map[string]*mfProc{"ingest": ing, "standby process": standby, "api": rep} {
		if c := p.stop(time.Minute); c != 0 {
			t.Errorf("mf %s: exit %d on SIGTERM; output:\n%s", name, c, p.out)
		}
	}
}
