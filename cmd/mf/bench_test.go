package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/eventlog"
	"github.com/mfhq/mf/storage/storagetest"
)

// BenchmarkFreshnessThroughBinary measures, through the real binary on
// embedded defaults, how long an accepted event takes to be readable in the
// tables: from sending a one-event batch (202) to the events table holding
// it, read through a rollups reader on the same object store as the
// reporting API reads it. It reports p50 and p99 in milliseconds.
func BenchmarkFreshnessThroughBinary(b *testing.B) {
	data := b.TempDir()
	p := startMF(b, data, "serve", "--provision", demoFile, "--rate-limit-scale", "1000")
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("0f0f0f0f-0000-4000-8000-%012x", i)
		body := batchBody(id, "full", fmt.Sprintf(`{"name":"$pageview","anonymousId":"fresh-%d","page":{"url":"https://shop.example/"}}`, i))
		start := time.Now()
		code, _, resp := do(b, "POST", p.ingest+"/v1/batch/"+demoWebsiteKey, body,
			"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
		if code != 202 {
			b.Fatalf("batch: %d %s", code, resp)
		}
		for eventsStored(data) < i+1 {
			if time.Since(start) > time.Minute {
				b.Fatalf("event %d not readable after a minute", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
		lat = append(lat, time.Since(start))
		// Idle between events, as the freshness target assumes.
		time.Sleep(200 * time.Millisecond)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
	p.stop(time.Minute)
}

// BenchmarkProcessPartitioned measures the processor role apart, through
// the binary, on a backlog of eight projects' traffic (50,000 events
// each) waiting on an external log: one `mf process` with both cores,
// then two `mf process` sharing the partitions with one core each
// (GOMAXPROCS=1), each run from an empty store. It reports events/s of
// each run, from the processes' start to every project's tables holding
// its last batch.
//
//	go test ./cmd/mf -run '^$' -bench BenchmarkProcessPartitioned -benchtime 1x
func BenchmarkProcessPartitioned(b *testing.B) {
	const projects, perProject = 8, 50_000
	server := startLogServer(b)
	prov, keys, ids := manyProjects(b, projects)
	shared := []string{"--log", server.ClientURL(), "--rate-limit-scale", "1000"}
	intake := storagetest.StartMinIO(b)
	if code, out, errOut := runMF(b, nil, "provision", "--log", server.ClientURL(), "--store", intake, prov); code != 0 {
		b.Fatalf("mf provision: exit %d\n%s%s", code, out, errOut)
	}
	ing := startRole(b, "ingest", append(shared, "--store", intake)...)
	base := time.Now().Add(-7 * 24 * time.Hour).Truncate(time.Hour)
	for k, key := range keys {
		for _, bt := range genTraffic(uint64(10+k), 1, perProject, base) {
			code, _, resp := do(b, "POST", ing.ingest+"/v1/batch/"+key, bt.body,
				"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
			if code != 202 {
				b.Fatalf("batch: %d %s", code, resp)
			}
		}
	}
	ing.stop(time.Minute)
	last := map[string]uint64{}
	for _, id := range ids {
		seq, err := server.LastSeqKey(context.Background(), eventlog.TopicBatches, id)
		if err != nil {
			b.Fatal(err)
		}
		last[id] = seq
	}
	run := func(name string, n int, env ...string) {
		dir := storagetest.StartMinIO(b)
		start := time.Now()
		var ps []*mfProc
		for range n {
			p := startRoleEnv(b, "process", env, append(shared, "--store", dir)...)
			ps = append(ps, p)
		}
		waitFor(b, 30*time.Minute, func() bool {
			for id, seq := range last {
				if checkpointOf(dir, id) < seq {
					return false
				}
			}
			return true
		})
		took := time.Since(start)
		for _, p := range ps {
			p.stop(time.Minute)
		}
		b.ReportMetric(float64(projects*perProject)/took.Seconds(), name+"-events/s")
	}
	for range b.N {
		run("one", 1)
		run("two-GOMAXPROCS1", 2, "GOMAXPROCS=1")
	}
}

// startLogServer runs a NATS server with JetStream in the test process,
// reached over TCP, standing for an external log.
func startLogServer(t testing.TB) *eventlog.Log {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lcfg := eventlog.DefaultConfig()
	lcfg.Dir, lcfg.ListenAddr = t.TempDir(), "127.0.0.1:0"
	server, err := eventlog.Open(ctx, lcfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("cannot start the NATS server standing for the log: %v", err)
	}
	t.Cleanup(func() { server.Close() })
	return server
}

// manyProjects writes a provisioning file of n projects like the demo
// project (a website source each, no actions or segments) and returns its
// path, the website keys and the project ids.
func manyProjects(t testing.TB, n int) (string, []string, []string) {
	t.Helper()
	var keys, ids []string
	path := editedDemo(t, func(f map[string]any) {
		org := f["organizations"].([]any)[0].(map[string]any)
		demo := org["projects"].([]any)[0].(map[string]any)
		var projects []any
		for i := range n {
			p := map[string]any{}
			for k, v := range demo {
				p[k] = v
			}
			id := fmt.Sprintf("9a8b7c6d-5e4f-4a3b-8c2d-%012d", i+1)
			key := fmt.Sprintf("mf_bench%03d_Website-Key_1", i)
			p["id"], p["slug"], p["name"] = id, fmt.Sprintf("bench-%d", i), fmt.Sprintf("Bench %d", i)
			p["sources"] = []any{map[string]any{"id": fmt.Sprintf("c1d2e3f4-a5b6-4c7d-8e9f-%012d", i+1), "name": "Website",
				"kind": "website", "mode": "full", "key": key, "allowedOrigins": []any{"https://shop.example"}}}
			p["actions"], p["funnels"], p["segments"], p["flags"] = []any{}, []any{}, []any{}, []any{}
			projects = append(projects, p)
			keys, ids = append(keys, key), append(ids, id)
		}
		org["projects"] = projects
	})
	return path, keys, ids
}

// checkpointOf returns the log position a project's tables hold in a data
// directory's object store, 0 before the first commit.
func checkpointOf(data, project string) uint64 {
	b, err := storage.Open(context.Background(), storeOf(data), nil)
	if err != nil {
		return 0
	}
	defer b.Close()
	st, err := rollups.NewStore(b, rollups.DefaultConfig(), nil)
	if err != nil {
		return 0
	}
	m, err := st.Load(context.Background(), rollups.Live(project))
	if err != nil {
		return 0
	}
	var cp struct {
		Seq uint64 `json:"seq"`
	}
	_ = json.Unmarshal([]byte(m.Checkpoint("processor")), &cp)
	return cp.Seq
}
