package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/eventlog/natstest"
)

// TestLogStallIsNotDeath runs mf serve on an external NATS server and
// stalls the server (SIGSTOP) past the processor's lease TTL: mf stays up
// throughout; ingest answers 503 sink_unavailable (never 202) and its
// /healthz 503 naming the log, while the reporting API goes on answering;
// the processor loses its partitions' leases and waits as a standby. Once
// the server goes on (SIGCONT), ingest accepts again, the batches refused
// meanwhile are resent with their ids, and the reporting API counts every
// batch exactly once.
func TestLogStallIsNotDeath(t *testing.T) {
	nats := natstest.StartServer(t, "nats", "")
	node := nats.Nodes()[0]
	const ttl = 3 * time.Second
	p := startMF(t, t.TempDir(), "serve", "--provision", demoFile, "--log", nats.URL(), "--lease-ttl", ttl.String())
	sent := 0
	batch := func(i int) []byte {
		return batchBody(fmt.Sprintf("5a5a5a5a-0000-4000-8000-%012d", i), "full",
			fmt.Sprintf(`{"name":"$pageview","anonymousId":"stall-%d","page":{"url":"https://shop.example/"}}`, i))
	}
	post := func(i int) (int, string, error) {
		code, _, b, err := tryDoWithin(time.Minute, "POST", p.ingest+"/v1/batch/"+demoWebsiteKey, batch(i),
			"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
		return code, string(b), err
	}
	for ; sent < 10; sent++ {
		if code, b, err := post(sent); code != 202 {
			t.Fatalf("batch %d before the stall: %d %s %v", sent, code, b, err)
		}
	}
	waitForEvery(t, 30*time.Second, 500*time.Millisecond, func() bool { return overviewNumbers(t, p.api)["people"] == float64(sent) })

	nats.Pause(node)
	stalled := time.Now()
	// Ingest refuses, and says why.
	code, b, err := post(sent)
	if err != nil || code != 503 || !strings.Contains(b, "sink_unavailable") {
		nats.Resume(node)
		t.Fatalf("a batch while the log is stalled: %d %s %v, want 503 sink_unavailable", code, b, err)
	}
	waitFor(t, 20*time.Second, func() bool {
		code, _, b, err := tryDo("GET", p.ingest+"/healthz", nil)
		return err == nil && code == 503 && strings.Contains(string(b), `"failing":["log"]`)
	})
	// The reporting API answers from the store.
	if got := overviewNumbers(t, p.api)["people"]; got != float64(sent) {
		t.Errorf("the reporting API during the stall counts %v people, want %v", got, sent)
	}
	// The processor's leases run out.
	waitFor(t, 20*time.Second, func() bool {
		return strings.Contains(p.out.String(), "not renewed within its TTL") || strings.Contains(p.out.String(), "partition stopped")
	})
	t.Logf("leases lost %v after the stall began", time.Since(stalled).Round(time.Millisecond))
	select {
	case <-p.done:
		nats.Resume(node)
		t.Fatalf("mf exited during the stall (%v); output:\n%s", p.exitErr, tail(p.out.String(), 6000))
	default:
	}
	nats.Resume(node)
	resumed := time.Now()

	// The refused batch is resent until accepted, then more.
	waitFor(t, 60*time.Second, func() bool { code, _, _ := post(sent); return code == 202 })
	t.Logf("ingest accepts again %v after the log resumed", time.Since(resumed).Round(time.Millisecond))
	sent++
	for end := sent + 10; sent < end; sent++ {
		if code, b, err := post(sent); code != 202 {
			t.Fatalf("batch %d after the stall: %d %s %v", sent, code, b, err)
		}
	}
	waitFor(t, 20*time.Second, func() bool {
		code, _, _, err := tryDo("GET", p.ingest+"/healthz", nil)
		return err == nil && code == 200
	})
	waitForEvery(t, 60*time.Second, 500*time.Millisecond, func() bool { return overviewNumbers(t, p.api)["people"] == float64(sent) })
	if c := p.stop(time.Minute); c != 0 {
		t.Errorf("mf serve: exit %d on SIGTERM after the stall", c)
	}
}
