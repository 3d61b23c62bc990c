package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestLateEventsReadColdDaysBack sends a day's events three days late,
// waits until they are committed (the day then goes cold: its visits ended
// long before the hot window), and sends more events for the same day:
// one that continues a visit of the cold day and one that starts a new
// visit. The processor reads the day back (mf_processor_days_read_back_total)
// and the reporting API counts the merged visit once. Meanwhile no event
// stays in memory (mf_processor_events_in_memory is 0 after each commit);
// an event of now does.
func TestLateEventsReadColdDaysBack(t *testing.T) {
	const token = "cold-days-test-admin-token-0123456789abcdef"
	p := startMF(t, t.TempDir(), "serve", "--provision", demoFile, "--admin-token", token)
	auth := []string{"Authorization", "Bearer " + token}
	base := time.Now().Add(-72 * time.Hour).Truncate(time.Hour)
	at := func(d time.Duration) int64 { return base.Add(d).UnixMilli() }
	pageview := func(anon string, t int64, path string) string {
		return fmt.Sprintf(`{"name":"$pageview","time":%d,"anonymousId":%q,"page":{"url":"https://shop.example%s"}}`, t, anon, path)
	}
	send := func(id string, events ...string) {
		t.Helper()
		code, _, body := do(t, "POST", p.ingest+"/v1/batch/"+demoWebsiteKey, batchBody(id, "full", events...),
			"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
		if code != 202 {
			t.Fatalf("batch %s: %d %s", id, code, body)
		}
	}
	committed := func(events float64) map[string]float64 {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			fams := scrape(t, p, auth...)
			got := sample(t, fams, "mf_processor_events_total")
			if got == events && sample(t, fams, "mf_processor_lag_messages") == 0 {
				return map[string]float64{"read_back": sample(t, fams, "mf_processor_days_read_back_total"),
					"in_memory": sample(t, fams, "mf_processor_events_in_memory")}
			}
			if got > events || time.Now().After(deadline) {
				t.Fatalf("mf_processor_events_total is %v, want %v", got, events)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	send("c01d0000-0000-4000-8000-000000000001",
		pageview("cold-x", at(0), "/a"), pageview("cold-x", at(5*time.Minute), "/b"),
		pageview("cold-y", at(2*time.Hour), "/a"))
	first := committed(3)
	if first["read_back"] != 0 || first["in_memory"] != 0 {
		t.Fatalf("days read back before any late event: %v; events in memory after the day went cold: %v", first["read_back"], first["in_memory"])
	}
	// cold-x's next pageview continues its visit (10 minutes after its
	// last); cold-z's starts a visit of its own.
	send("c01d0000-0000-4000-8000-000000000002",
		pageview("cold-x", at(15*time.Minute), "/c"), pageview("cold-z", at(4*time.Hour), "/a"))
	second := committed(5)
	if second["read_back"] < 1 || second["in_memory"] != 0 {
		t.Fatalf("mf_processor_days_read_back_total is %v after a late event for a cold day, want at least 1; events in memory %v, want 0 (the day went cold again)",
			second["read_back"], second["in_memory"])
	}

	// The people list: three people of one visit each (cold-x's late
	// pageview joined its visit on the cold day instead of making one).
	var got []int
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, b := do(t, "GET", p.api+"/api/v1/projects/"+demoProject+"/people?period=7d", nil, "Authorization", "Bearer "+demoPAT)
		if code != 200 {
			t.Fatalf("people: %d %s", code, b)
		}
		var doc struct {
			Data []struct {
				Attributes struct{ Visits int }
			}
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, d := range doc.Data {
			got = append(got, d.Attributes.Visits)
		}
		slices.Sort(got)
		want := []int{1, 1, 1}
		if slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("visits of the people listed: %v, want %v", got, want)
		}
		time.Sleep(time.Second) // the reporting API allows 120 requests a minute
	}

	// An event of now stays in memory: its visit is open.
	send("c01d0000-0000-4000-8000-000000000003", pageview("hot-x", time.Now().UnixMilli(), "/a"))
	if third := committed(6); third["in_memory"] != 1 {
		t.Fatalf("mf_processor_events_in_memory is %v after an event of now, want 1", third["in_memory"])
	}
}
