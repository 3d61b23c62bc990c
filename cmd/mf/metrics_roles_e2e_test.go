package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/storagetest"
)

// TestRoleMetrics runs mf ingest (given --admin-addr), mf process and mf
// api apart on a shared log and store: each serves /metrics on its admin
// listener with the families of the parts it runs, and a batch accepted by
// the ingest process is counted there and committed by the processor.
func TestRoleMetrics(t *testing.T) {
	server := startLogServer(t)
	shared := []string{"--log", server.ClientURL(), "--store", storagetest.StartMinIO(t)}
	if code, out, errOut := runMF(t, nil, append(append([]string{"provision"}, shared...), demoFile)...); code != 0 {
		t.Fatalf("mf provision on the shared log: exit %d\n%s%s", code, out, errOut)
	}
	ing := startRole(t, "ingest", shared...)
	proc := startRole(t, "process", shared...)
	rep := startRole(t, "api", shared...)

	families := map[*mfProc]struct{ has, hasNot []string }{
		ing:  {[]string{"mf_ingest_batches_total", "mf_ingest_events_total", "mf_http_requests_total"}, []string{"mf_processor_events_total", "mf_reader_cache_hits_total"}},
		proc: {[]string{"mf_processor_events_total", "mf_processor_lag_messages", "mf_http_requests_total"}, []string{"mf_ingest_batches_total"}},
		rep:  {[]string{"mf_reader_cache_hits_total", "mf_http_requests_total"}, []string{"mf_ingest_batches_total", "mf_processor_events_total"}},
	}
	for p, f := range families {
		fams := scrape(t, p)
		for _, n := range f.has {
			if fams[n] == nil {
				t.Errorf("%s: /metrics lacks %s", p.cmd.Args[1], n)
			}
		}
		for _, n := range f.hasNot {
			if fams[n] != nil {
				t.Errorf("%s: /metrics has %s, of a part it does not run", p.cmd.Args[1], n)
			}
		}
	}

	var events []string
	for i := 0; i < 3; i++ {
		events = append(events, fmt.Sprintf(`{"name":"$pageview","anonymousId":"roles-%d","page":{"url":"https://shop.example/"}}`, i))
	}
	if code, _, resp := do(t, "POST", ing.ingest+"/v1/batch/"+demoWebsiteKey, batchBody("70e1e500-0000-4000-8000-000000000001", "full", events...),
		"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json"); code != 202 {
		t.Fatalf("batch: %d %s", code, resp)
	}
	if got := sample(t, scrape(t, ing), "mf_ingest_events_total", "outcome", "accepted"); got != 3 {
		t.Errorf(`mf ingest: mf_ingest_events_total{outcome="accepted"} = %v, want 3`, got)
	}
	waitFor(t, time.Minute, func() bool {
		fams := scrape(t, proc)
		return sample(t, fams, "mf_processor_events_total") == 3 && sample(t, fams, "mf_processor_lag_messages") == 0
	})
	for name, p := range map[string]*mfProc{"ingest": ing, "process": proc, "api": rep} {
		if c := p.stop(time.Minute); c != 0 {
			t.Errorf("mf %s: exit %d on SIGTERM", name, c)
		}
	}
}
