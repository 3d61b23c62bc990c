package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/storagetest"
)

// startRole starts `mf <role>` (ingest, process or api) on fresh ports and
// waits until the listeners the role opens answer /healthz.
func startRole(t testing.TB, role string, extra ...string) *mfProc {
	t.Helper()
	return startRoleEnv(t, role, nil, extra...)
}

// startRoleEnv is startRole with variables added to the environment.
func startRoleEnv(t testing.TB, role string, env []string, extra ...string) *mfProc {
	t.Helper()
	p := &mfProc{t: t, data: t.TempDir(), out: &syncBuffer{}, done: make(chan struct{})}
	p.ingestAddr, p.apiAddr, p.admn = freeAddr(t), freeAddr(t), freeAddr(t)
	p.ingest, p.api, p.admin = "http://"+p.ingestAddr, "http://"+p.apiAddr, "http://"+p.admn
	p.only = map[string][]string{"ingest": {p.ingest}, "process": {p.admin}, "api": {p.api, p.admin}}[role]
	args := append([]string{role, "--data", p.data,
		"--ingest-addr", p.ingestAddr, "--api-addr", p.apiAddr, "--admin-addr", p.admn}, extra...)
	p.cmd = exec.Command(mfBinary, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("cannot start mf %s: %v", role, err)
	}
	go func() { p.exitErr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	p.waitHealthy(60 * time.Second)
	return p
}

// TestRolesApart runs mf ingest, mf api and three mf process as separate
// processes sharing an external NATS JetStream log (a server this test
// runs, reached over TCP) and a real MinIO: a batch accepted by the ingest
// process is processed by whichever processor holds its project's
// partition and answered by the API process. The processors share the
// log's partitions (the lease table on the log says who holds which):
// one alone holds all, a second one joining takes half, a third a third;
// one SIGKILLed leaves its partitions to the others once its leases
// expire, one stopped hands them over at once. Every batch is counted
// once throughout; each process exits 0 on SIGTERM.
func TestRolesApart(t *testing.T) {
	server := startLogServer(t)
	shared := []string{"--log", server.ClientURL(), "--store", storagetest.StartMinIO(t)}

	if code, out, errOut := runMF(t, nil, append(append([]string{"provision"}, shared...), demoFile)...); code != 0 {
		t.Fatalf("mf provision on the shared log: exit %d\n%s%s", code, out, errOut)
	}
	ing := startRole(t, "ingest", shared...)
	rep := startRole(t, "api", shared...)
	procs := []*mfProc{startRole(t, "process", shared...)}
	waitShares(t, server, procs, []int{eventlog.DefaultPartitions})

	now := time.Now().UnixMilli()
	total := 0
	// send posts a batch of pageviews of the browsers named to mf ingest,
	// then waits until mf api lists them all.
	send := func(batch string, browsers ...string) {
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
		total += len(browsers)
		waitFor(t, time.Minute, func() bool {
			code, _, b := do(t, "GET", rep.api+"/api/v1/projects/"+demoProject+"/events?period=1h", nil, "Authorization", "Bearer "+demoPAT)
			var doc struct{ Data []json.RawMessage }
			return code == 200 && json.Unmarshal(b, &doc) == nil && len(doc.Data) == total
		})
	}
	send("7a7a7a7a-0000-4000-8000-000000000001", "apart-a", "apart-b")

	procs = append(procs, startRole(t, "process", shared...))
	waitShares(t, server, procs, []int{16, 16})
	send("7a7a7a7a-0000-4000-8000-000000000002", "apart-c")

	procs = append(procs, startRole(t, "process", shared...))
	waitShares(t, server, procs, []int{11, 11, 10})
	send("7a7a7a7a-0000-4000-8000-000000000003", "apart-d")

	// A SIGKILL: its partitions come back when their leases expire.
	procs[0].kill()
	procs = procs[1:]
	waitShares(t, server, procs, []int{16, 16})
	send("7a7a7a7a-0000-4000-8000-000000000004", "apart-e", "apart-f")

	// A SIGTERM: it commits, then hands its partitions over at once.
	if c := procs[0].stop(time.Minute); c != 0 {
		t.Errorf("mf process: exit %d on SIGTERM; output:\n%s", c, procs[0].out)
	}
	procs = procs[1:]
	waitShares(t, server, procs, []int{eventlog.DefaultPartitions})
	send("7a7a7a7a-0000-4000-8000-000000000005", "apart-g")

	for name, p := range map[string]*mfProc{"ingest": ing, "process": procs[0], "api": rep} {
		if c := p.stop(time.Minute); c != 0 {
			t.Errorf("mf %s: exit %d on SIGTERM; output:\n%s", name, c, p.out)
		}
	}
}

// waitShares waits until the processes hold the numbers of partitions
// given (in any order), as the log's lease table says, and fails at
// once when a partition lease is held by a process not listed.
func waitShares(t *testing.T, lg *eventlog.Log, procs []*mfProc, want []int) {
	t.Helper()
	var got map[int]int
	ok := func() bool {
		leases, err := lg.Leases(context.Background(), "processor.p.", eventlog.DefaultLeaseConfig())
		if err != nil {
			t.Fatal(err)
		}
		got = map[int]int{}
		for _, holder := range leases {
			parts := strings.Split(holder, ":")
			pid, _ := strconv.Atoi(parts[len(parts)-2])
			got[pid]++
		}
		var counts []int
		for _, p := range procs {
			counts = append(counts, got[p.cmd.Process.Pid])
			delete(got, p.cmd.Process.Pid)
		}
		slices.Sort(counts)
		w := slices.Clone(want)
		slices.Sort(w)
		// Partitions of a process SIGKILLed are held until they expire.
		return slices.Equal(counts, w)
	}
	deadline := time.Now().Add(90 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("partitions held by pid %v after 90s, want shares %v among %d processes", got, want, len(procs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
