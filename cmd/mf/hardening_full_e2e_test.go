package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/storagetest"
)

// fullBatch is batch i of the log-full test: events events of about 2 KB,
// each of its own person, so that the overview's people count the events.
func fullBatch(i, events int) []byte {
	pad := strings.Repeat("p", 2000)
	var evs []string
	for j := range events {
		evs = append(evs, fmt.Sprintf(`{"name":"$pageview","anonymousId":"full-%d-%d","page":{"url":"https://shop.example/p%d"},"properties":{"pad":%q}}`, i, j, j, pad))
	}
	return batchBody(fmt.Sprintf("f0110000-0000-4000-8000-%012d", i), "full", evs...)
}

// TestLogFullRefusesThenRecovers runs mf serve with a batches stream
// capped at 1 MiB and a log retention of 15 s, and fills it through ingest
// well within the retention (batches of 40 KB, 10 a second at most, over
// long enough that the processor notes several log positions to purge
// at): past the cap ingest answers 503
// sink_unavailable with Retry-After 30 and counts it
// (mf_ingest_log_full_total), never 202; a resend of a batch already
// stored is still answered 202 with its first receipt. Once the processor
// commits and purges what is past the retention, the refused batch,
// resent unchanged, is accepted, and so are new ones (resent until
// accepted: room returns as batches age past the retention); every event
// answered 202 is counted once by the processor and by the reporting API.
func TestLogFullRefusesThenRecovers(t *testing.T) {
	const events = 20
	p := startMF(t, t.TempDir(), "serve", "--provision", demoFile, "--log-max-bytes", "1MiB",
		"--log-retention", "15s", "--rate-limit-scale", "100")
	send := func(body []byte) (int, string, []byte) {
		code, h, resp := do(t, "POST", p.ingest+"/v1/batch", body,
			"Authorization", "Bearer "+demoSecretKey, "Content-Type", "application/json")
		return code, h.Get("Retry-After"), resp
	}
	fams := scrape(t, p)
	if got := sample(t, fams, "mf_log_max_bytes", "topic", "batches"); got != 1<<20 {
		t.Fatalf("mf_log_max_bytes{topic=batches} = %v, want %v", got, 1<<20)
	}

	accepted, refused := 0, -1
	fill := time.Now()
	for i := 0; i < 200 && refused < 0; i++ {
		code, retry, resp := send(fullBatch(i, events))
		switch code {
		case 202:
			accepted += events
		case 503:
			var prob struct{ Code string }
			if err := json.Unmarshal(resp, &prob); err != nil || prob.Code != "sink_unavailable" || retry != "30" {
				t.Fatalf("batch %d refused with %s (Retry-After %q), want code sink_unavailable and Retry-After 30", i, resp, retry)
			}
			refused = i
		default:
			t.Fatalf("batch %d: %d %s", i, code, resp)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if refused < 0 {
		t.Fatalf("200 batches of 40 KB accepted under a 1 MiB cap in %v (the purge keeps up when filling takes longer than the 15 s retention)", time.Since(fill).Round(time.Second))
	}
	if refused < 15 || refused > 30 {
		t.Errorf("the first refusal came at batch %d; 40 KB batches under 1 MiB should fill it at 20 to 26", refused)
	}
	t.Logf("log full after %d batches (%d events)", refused, accepted)
	if code, _, resp := send(fullBatch(0, events)); code != 202 {
		t.Errorf("a resend of a stored batch on a full log: %d %s, want 202 with its first receipt", code, resp)
	}
	if got := sample(t, scrape(t, p), "mf_ingest_log_full_total"); got < 1 {
		t.Errorf("mf_ingest_log_full_total = %v after a refusal, want at least 1", got)
	}

	// The processor commits and purges: the refused batch, resent
	// unchanged as a client does, goes in, and so do the next ones (each
	// resent while the purge frees room).
	start := time.Now()
	for i := refused; i < refused+4; i++ {
		waitForEvery(t, 90*time.Second, 250*time.Millisecond, func() bool {
			code, retry, resp := send(fullBatch(i, events))
			if code == 503 && retry != "30" || code != 202 && code != 503 {
				t.Fatalf("batch %d: %d %s (Retry-After %q)", i, code, resp, retry)
			}
			return code == 202
		})
		accepted += events
		if i == refused {
			t.Logf("the refused batch was accepted %v after the log filled", time.Since(start).Round(100*time.Millisecond))
		}
	}

	waitForEvery(t, 60*time.Second, 250*time.Millisecond, func() bool {
		done := sample(t, scrape(t, p), "mf_processor_events_total")
		if done > float64(accepted) {
			t.Fatalf("mf_processor_events_total %v, more than the %d events answered 202", done, accepted)
		}
		return done == float64(accepted)
	})
	waitForEvery(t, 30*time.Second, 500*time.Millisecond, func() bool {
		return overviewNumbers(t, p.api)["people"] == float64(accepted)
	})
	fams = scrape(t, p)
	if msgs := sample(t, fams, "mf_log_messages", "topic", "batches"); msgs >= float64(refused+4) {
		t.Errorf("the batches stream holds %v messages of %d stored: nothing was purged", msgs, refused+4)
	}
	if c := p.stop(time.Minute); c != 0 {
		t.Errorf("mf serve: exit %d on SIGTERM", c)
	}
}

// TestStoreFullProcessorWaitsThenCatchesUp runs mf serve on a real MinIO
// behind a proxy that refuses writes as MinIO does on full drives (507
// XMinioStorageFull). While the store is full, ingest keeps answering 202
// (the batches wait in the log), the reporting API answers from what is
// committed, /healthz stays 200, and the processor's commits fail, are
// counted (mf_processor_commits_total{outcome="failed"}) and logged with
// the store's reason, and are retried; once the store takes writes again
// the processor catches up and every event answered 202 is counted once.
func TestStoreFullProcessorWaitsThenCatchesUp(t *testing.T) {
	store := storagetest.FaultyStoreProxy(t, storagetest.StartMinIO(t))
	p := startMF(t, t.TempDir(), "serve", "--provision", demoFile, "--store", store.URL)
	accepted := 0
	send := func(i int) {
		t.Helper()
		body := batchBody(fmt.Sprintf("5f0e0000-0000-4000-8000-%012d", i), "full",
			fmt.Sprintf(`{"name":"$pageview","anonymousId":"store-full-%d","page":{"url":"https://shop.example/"}}`, i))
		if code, _, resp := do(t, "POST", p.ingest+"/v1/batch", body,
			"Authorization", "Bearer "+demoSecretKey, "Content-Type", "application/json"); code != 202 {
			t.Fatalf("batch %d: %d %s", i, code, resp)
		}
		accepted++
	}
	for i := range 3 {
		send(i)
	}
	waitForEvery(t, 30*time.Second, 250*time.Millisecond, func() bool { return overviewNumbers(t, p.api)["people"] == 3.0 })

	failedBefore := sample(t, scrape(t, p), "mf_processor_commits_total", "outcome", "failed")
	store.SetFull(true)
	for i := 3; i < 8; i++ {
		send(i)
	}
	waitForEvery(t, 30*time.Second, 250*time.Millisecond, func() bool {
		return sample(t, scrape(t, p), "mf_processor_commits_total", "outcome", "failed") >= failedBefore+2
	})
	if got := overviewNumbers(t, p.api)["people"]; got != 3.0 {
		t.Errorf("overview people %v while the store is full, want the 3 committed before", got)
	}
	for _, base := range []string{p.ingest, p.api, p.admin} {
		if code, _, body := do(t, "GET", base+"/healthz", nil); code != 200 {
			t.Errorf("%s/healthz while the store refuses writes: %d %s, want 200 (reads work, writes are retried)", base, code, body)
		}
	}
	out := p.out.String()
	if !strings.Contains(out, "cannot commit facts; retrying") || !strings.Contains(out, "minimum free drive threshold") {
		t.Errorf("mf's output does not say the commit failed and why; tail:\n%s", tail(out, 3000))
	}
	send(8)

	store.SetFull(false)
	waitForEvery(t, 90*time.Second, 250*time.Millisecond, func() bool {
		return overviewNumbers(t, p.api)["people"] == float64(accepted)
	})
	if got := sample(t, scrape(t, p), "mf_processor_events_total"); got != float64(accepted) {
		t.Errorf("mf_processor_events_total %v, want the %d events answered 202", got, accepted)
	}
	if store.Refused.Load() == 0 {
		t.Error("the store refused no write: the test did not test a full store")
	}
	if c := p.stop(time.Minute); c != 0 {
		t.Errorf("mf serve: exit %d on SIGTERM", c)
	}
}
