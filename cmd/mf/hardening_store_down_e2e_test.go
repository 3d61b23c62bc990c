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

// storeOutage is how long TestStoreDownForAMinute keeps the store away.
const storeOutage = time.Minute

// TestStoreDownForAMinute runs mf ingest, mf process and mf api apart on
// an external NATS server and a real MinIO reached through a proxy that
// goes down for a minute (its port refuses connections, those open are
// cut), under a steady load of batches each resent until accepted.
// Throughout the outage ingest answers every batch 202, the reporting API
// answers (503 store_unavailable while it cannot read) and every
// /healthz answers (the API's and the processor's naming the store), and
// no process exits; the processor's commits fail and are
// retried. Once the store is back the processor catches up and the
// reporting API counts every accepted batch once; every process exits 0
// on SIGTERM. Slow (over a minute): skipped with -short.
func TestStoreDownForAMinute(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: the store is down for a minute")
	}
	ns := natstest.StartServer(t, "nats", "")
	store := storagetest.FaultyStoreProxy(t, storagetest.StartMinIO(t))
	shared := []string{"--log", ns.URL(), "--store", store.URL}
	if code, out, errOut := runMF(t, nil, append(append([]string{"provision"}, shared...), demoFile)...); code != 0 {
		t.Fatalf("mf provision: exit %d\n%s%s", code, out, errOut)
	}
	env := []string{"MF_LOG_LEVEL=debug"}
	ing := startRoleEnv(t, "ingest", env, shared...)
	proc := startRoleEnv(t, "process", env, shared...)
	rep := startRoleEnv(t, "api", env, shared...)
	roles := map[string]*mfProc{"ingest": ing, "process": proc, "api": rep}

	var (
		accepted atomic.Int64
		down     atomic.Bool
		mu       sync.Mutex
		refused  []string // answers other than 202 while the store is down
	)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			body := batchBody(fmt.Sprintf("d0d0d0d0-0000-4000-8000-%012d", i), "full",
				fmt.Sprintf(`{"name":"$pageview","anonymousId":"down-%d","page":{"url":"https://shop.example/"}}`, i))
			for {
				code, _, resp, err := tryDoWithin(time.Minute, "POST", ing.ingest+"/v1/batch", body,
					"Authorization", "Bearer "+demoSecretKey, "Content-Type", "application/json")
				if err == nil && code == 202 {
					accepted.Add(1)
					break
				}
				if down.Load() {
					mu.Lock()
					refused = append(refused, fmt.Sprintf("%d %s %v", code, resp, err))
					mu.Unlock()
				}
				time.Sleep(100 * time.Millisecond)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	waitFor(t, time.Minute, func() bool { return accepted.Load() >= 10 })
	waitForEvery(t, time.Minute, 500*time.Millisecond, func() bool { return overviewNumbers(t, rep.api)["people"].(float64) >= 10 })

	store.Down()
	down.Store(true)
	outage := time.Now()
	atOutage := accepted.Load()
	// The API's and the processor's /healthz name the store within a few
	// probes; ingest's stays 200 (it does not need the store).
	waitForEvery(t, 30*time.Second, 250*time.Millisecond, func() bool {
		code, _, body := do(t, "GET", rep.api+"/healthz", nil)
		return code == 503 && strings.Contains(string(body), `"store"`)
	})
	waitForEvery(t, 30*time.Second, 250*time.Millisecond, func() bool {
		code, _, body := do(t, "GET", proc.admin+"/healthz", nil)
		return code == 503 && strings.Contains(string(body), `"store"`)
	})
	for time.Since(outage) < storeOutage {
		if code, _, body := do(t, "GET", ing.ingest+"/healthz", nil); code != 200 {
			t.Fatalf("ingest /healthz %d %s while only the store is down", code, body)
		}
		// The reporting API answers: from what it read, or 503
		// store_unavailable with a Retry-After (never a 500).
		code, hdr, body, err := tryDoWithin(30*time.Second, "GET", rep.api+"/api/v1/projects/"+demoProject+"/overview?period=24h", nil,
			"Authorization", "Bearer "+demoPAT)
		if err != nil || code != 200 && !(code == 503 && strings.Contains(string(body), `"code":"store_unavailable"`) && hdr.Get("Retry-After") != "") {
			t.Fatalf("overview while the store is down: %d %s %v", code, body, err)
		}
		for name, p := range roles {
			select {
			case <-p.done:
				t.Fatalf("mf %s exited while the store was down: %v\n%s", name, p.exitErr, tail(p.out.String(), 4000))
			default:
			}
		}
		time.Sleep(2 * time.Second)
	}
	if got := accepted.Load() - atOutage; got < 30 {
		t.Errorf("%d batches accepted during a %v store outage, want a steady flow (at least 30)", got, storeOutage)
	}
	if !strings.Contains(proc.out.String(), "cannot commit facts; retrying") {
		t.Errorf("the processor did not log failed commits during the outage; tail:\n%s", tail(proc.out.String(), 3000))
	}
	store.Up()
	down.Store(false)
	back := time.Now()
	close(stop)
	<-done
	want := float64(accepted.Load())
	waitForEvery(t, 2*time.Minute, time.Second, func() bool {
		code, _, _ := do(t, "GET", rep.api+"/healthz", nil)
		return code == 200 && overviewNumbers(t, rep.api)["people"] == want
	})
	t.Logf("store down %v: %d batches accepted in all, %d during the outage; counted %v after it came back",
		storeOutage, int64(want), int64(want)-atOutage, time.Since(back).Round(100*time.Millisecond))
	mu.Lock()
	if len(refused) > 0 {
		t.Errorf("%d batches not answered 202 while the store was down: %q", len(refused), refused[:min(len(refused), 5)])
	}
	mu.Unlock()
	for name, p := range roles {
		if c := p.stop(time.Minute); c != 0 {
			t.Errorf("mf %s: exit %d on SIGTERM; output:\n%s", name, c, tail(p.out.String(), 4000))
		}
	}
}
