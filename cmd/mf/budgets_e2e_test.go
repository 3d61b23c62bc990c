package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/storagetest"
)

// sharedBurst is testdata/budgets/shared_burst.json.
type sharedBurst struct {
	RateLimitScale string `json:"rateLimitScale"`
	EventsPerBatch int    `json:"eventsPerBatch"`
	Sends          []struct {
		Process, Status int
	} `json:"sends"`
	RetryAfterMin int `json:"retryAfterMin"`
	RetryAfterMax int `json:"retryAfterMax"`
}

// TestSharedRateBudgets runs two `mf ingest` processes on one external
// NATS log and one store: each learns from the log that two ingest
// processes are live and allows half of every rate budget, so a burst
// split across both gets the specification's 429 rate_limited with
// Retry-After once the one budget is spent, not twice the budget. One
// stopped gives its share back to the other at once.
func TestSharedRateBudgets(t *testing.T) {
	raw, err := os.ReadFile("testdata/budgets/shared_burst.json")
	if err != nil {
		t.Fatal(err)
	}
	var c sharedBurst
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	server := startLogServer(t)
	shared := []string{"--log", server.ClientURL(), "--store", storagetest.StartMinIO(t)}
	if code, out, errOut := runMF(t, nil, append(append([]string{"provision"}, shared...), demoFile)...); code != 0 {
		t.Fatalf("mf provision on the shared log: exit %d\n%s%s", code, out, errOut)
	}
	args := append([]string{"--rate-limit-scale", c.RateLimitScale}, shared...)
	ings := []*mfProc{startRole(t, "ingest", args...), startRole(t, "ingest", args...)}
	for i, p := range ings {
		waitFor(t, time.Minute, func() bool { return sharingWith(p) == 2 })
		t.Logf("mf ingest %d shares the budgets with the other", i)
	}

	now := time.Now().UnixMilli()
	for i, s := range c.Sends {
		events := make([]string, c.EventsPerBatch)
		for j := range events {
			events[j] = fmt.Sprintf(`{"name":"burst","time":%d,"anonymousId":"burst-%d-%d"}`, now-int64(j), i, j)
		}
		code, hdr, resp := do(t, "POST", ings[s.Process].ingest+"/v1/batch/"+demoWebsiteKey,
			batchBody(fmt.Sprintf("5b5b5b5b-0000-4000-8000-%012d", i), "full", events...),
			"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
		if code != s.Status {
			t.Fatalf("send %d to mf ingest %d: %d %s, want %d", i, s.Process, code, resp, s.Status)
		}
		if code != 429 {
			continue
		}
		ra, err := strconv.Atoi(hdr.Get("Retry-After"))
		var body struct{ Code string }
		_ = json.Unmarshal(resp, &body)
		if body.Code != "rate_limited" || err != nil || ra < c.RetryAfterMin || ra > c.RetryAfterMax {
			t.Fatalf("send %d: 429 %s with Retry-After %q, want rate_limited and %d..%d s",
				i, resp, hdr.Get("Retry-After"), c.RetryAfterMin, c.RetryAfterMax)
		}
	}

	// A SIGTERM gives the lease up: the other is alone at once.
	if code := ings[1].stop(time.Minute); code != 0 {
		t.Errorf("mf ingest: exit %d on SIGTERM; output:\n%s", code, ings[1].out)
	}
	waitFor(t, 30*time.Second, func() bool { return sharingWith(ings[0]) == 1 })
	if code := ings[0].stop(time.Minute); code != 0 {
		t.Errorf("mf ingest: exit %d on SIGTERM; output:\n%s", code, ings[0].out)
	}
}

var sharingLine = regexp.MustCompile(`ingest processes sharing the rate budgets.*processes"?[=:](\d+)`)

// sharingWith returns how many ingest processes p last said share the
// rate budgets (0 before it said so).
func sharingWith(p *mfProc) int {
	n := 0
	for _, line := range strings.Split(p.out.String(), "\n") {
		if m := sharingLine.FindStringSubmatch(line); m != nil {
			n, _ = strconv.Atoi(m[1])
		}
	}
	return n
}
