package main

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/eventlog/natstest"
	"github.com/mfhq/mf/storage/storagetest"
)

// TestClusterFaults runs mf ingest, two mf process and mf api on a real
// three-node NATS cluster (nats-server processes) and MinIO, with a load
// of batches sent all along, each resent until it is accepted: a node
// SIGKILLed leaves ingest answering 202; with a second node gone (no
// quorum) ingest answers 503 sink_unavailable and never 202; once the
// nodes are back it accepts again by itself. Afterwards the reporting API
// counts every accepted batch exactly once, and every process exits 0 on
// SIGTERM: none died of the outage.
func TestClusterFaults(t *testing.T) {
	cl := natstest.StartCluster(t, 3)
	shared := []string{"--log", cl.URL(), "--store", storagetest.StartMinIO(t), "--rate-limit-scale", "1000"}
	if code, out, errOut := runMF(t, nil, append(append([]string{"provision"}, shared[:4]...), demoFile)...); code != 0 {
		t.Fatalf("mf provision on the cluster: exit %d\n%s%s", code, out, errOut)
	}
	ing := startRole(t, "ingest", shared...)
	procs := []*mfProc{startRole(t, "process", shared...), startRole(t, "process", shared...)}
	rep := startRole(t, "api", shared...)

	// The load: batch i is one pageview of browser cl-i, sent until 202.
	var (
		accepted  atomic.Int64
		mu        sync.Mutex
		statuses  = map[string]int{}
		quorumOut atomic.Int64 // while two nodes are down: when the second died (unix ns)
		bad       []string
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	now := time.Now().UnixMilli()
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			id := fmt.Sprintf("c1c1c1c1-0000-4000-8000-%012d", i)
			body := batchBody(id, "full", fmt.Sprintf(`{"name":"$pageview","time":%d,"anonymousId":"cl-%d","page":{"url":"https://shop.example/"}}`, now-60_000, i))
			for {
				// Longer than ingest waits for the log (10 s): its answer,
				// not the client's patience, ends each try.
				sent := time.Now().UnixNano()
				code, _, resp, err := tryDoWithin(time.Minute, "POST", ing.ingest+"/v1/batch/"+demoWebsiteKey, body,
					"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
				mu.Lock()
				switch {
				case err != nil:
					statuses["transport error"]++
					bad = append(bad, err.Error())
				case code == 202:
					statuses["202"]++
					if out := quorumOut.Load(); out > 0 && sent > out {
						bad = append(bad, fmt.Sprintf("batch %d accepted without a quorum", i))
					}
				case code == 503 && strings.Contains(string(resp), "sink_unavailable"):
					statuses["503"]++
				default:
					statuses[fmt.Sprint(code)]++
					bad = append(bad, fmt.Sprintf("%d %s", code, resp))
				}
				mu.Unlock()
				if err == nil && code == 202 {
					accepted.Add(1)
					break
				}
				select {
				case <-stop:
					if code != 202 {
						t.Errorf("batch %d never accepted", i)
					}
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	waitAccepted := func(n int64, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		target := accepted.Load() + n
		waitFor(t, within, func() bool { return accepted.Load() >= target })
		return time.Since(start)
	}

	waitAccepted(100, time.Minute)
	nodes := cl.Nodes()
	cl.Kill(nodes[0])
	t.Logf("a node SIGKILLed: the next 100 batches accepted in %v", waitAccepted(100, 2*time.Minute))

	cl.Kill(nodes[1])
	quorumOut.Store(time.Now().UnixNano())
	mu.Lock()
	before := statuses["503"]
	mu.Unlock()
	waitFor(t, time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return statuses["503"] > before
	})
	quorumOut.Store(0)
	cl.Start(nodes[0])
	cl.Start(nodes[1])
	restarted := time.Now()
	waitAccepted(1, 3*time.Minute)
	t.Logf("nodes started: the first batch accepted again after %v", time.Since(restarted).Round(time.Millisecond))
	waitAccepted(100, 2*time.Minute)
	close(stop)
	<-done

	mu.Lock()
	t.Logf("answers: %v", statuses)
	if len(bad) > 0 {
		t.Errorf("%d answers that are neither 202 nor 503 sink_unavailable, or 202 without a quorum: %q", len(bad), bad[:min(len(bad), 5)])
	}
	mu.Unlock()
	want := float64(accepted.Load())
	var got any
	deadline := time.Now().Add(3 * time.Minute)
	for got = overviewNumbers(t, rep.api)["people"]; got != want; got = overviewNumbers(t, rep.api)["people"] {
		if time.Now().After(deadline) {
			for i, p := range procs {
				t.Logf("mf process %d output:\n%s", i+1, tail(p.out.String(), 6000))
			}
			t.Fatalf("the reporting API counts %v people after 3 minutes, want %v (one per accepted batch)", got, want)
		}
		time.Sleep(time.Second) // the API allows 120 requests a minute
	}
	for name, p := range map[string]*mfProc{"ingest": ing, "process 1": procs[0], "process 2": procs[1], "api": rep} {
		if c := p.stop(time.Minute); c != 0 {
			t.Errorf("mf %s: exit %d on SIGTERM; output:\n%s", name, c, tail(p.out.String(), 4000))
		}
	}
}
