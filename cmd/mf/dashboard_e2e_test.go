package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDashboard runs the dashboard's end-to-end tests (api/dashboard/e2e,
// node:test driving headless Chromium through playwright-core) against the
// real binary serving the golden reporting dataset: every page's numbers
// are read from its DOM and compared with the API's answers.
//
// MF_DASHBOARD_SHOTS=DIR keeps the screenshots of every page at desktop
// and phone width there (`go tool task dashboard:shots` writes docs/dashboard).
func TestDashboard(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is needed for the dashboard test: bash .ci/tools.sh installs it")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is needed for the dashboard test: apt-get install chromium")
	}
	e2e, err := filepath.Abs(filepath.Join("..", "..", "api", "dashboard", "e2e"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e2e, "node_modules", "playwright-core")); err != nil {
		t.Fatalf("playwright-core is not installed: run npm ci in %s (bash .ci/tools.sh does)", e2e)
	}
	shots := os.Getenv("MF_DASHBOARD_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if shots, err = filepath.Abs(shots); err != nil {
		t.Fatal(err)
	}

	c := newReportClock(t)
	var events struct{ Batches []reportBatch }
	readReportJSON(t, "events.json", &events)
	var imports struct{ Imports []reportImport }
	readReportJSON(t, "imports.json", &imports)
	p := startMF(t, t.TempDir(), "serve", "--provision", dashboardProvision(t))
	sendReportBatches(t, p, c, events.Batches)
	importReportRows(t, p, c, imports.Imports)
	crowd := sendDashboardCrowd(t, p)
	waitReportProcessed(t, p, append(events.Batches, crowd))

	files, err := filepath.Glob(filepath.Join(e2e, "*.test.mjs"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no browser tests in %s (%v)", e2e, err)
	}
	cmd := exec.Command(node, append([]string{"--test", "--test-concurrency=1", "--test-timeout=180000"}, files...)...)
	cmd.Dir = e2e
	cmd.Env = append(os.Environ(),
		"MF_URL="+p.api,
		"MF_INGEST="+p.ingest,
		"MF_WEBSITE_KEY="+reportSources["shop/website"].key,
		"MF_WEBSITE_ORIGIN="+reportSources["shop/website"].origin,
		"MF_KEY="+dashboardKeys[0],
		"MF_PAGES_KEY="+dashboardKeys[1],
		"MF_CHECK_KEY="+dashboardKeys[2],
		"MF_LIMITED_KEY="+reportKeys["cy"],
		"MF_EXPIRED_KEY="+reportKeys["expired"],
		"MF_REVOKED_KEY="+reportKeys["revoked"],
		"MF_SHOP="+reportShop,
		"MF_CALM="+reportCalm,
		"MF_CHROMIUM="+chromium,
		"MF_SHOTS="+shots,
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the dashboard's browser tests failed (%v):\n%s\nmf's output:\n%s", err, out, tail(p.out.String(), 4000))
	}
	t.Logf("dashboard browser tests:\n%s", summaryLines(string(out)))
}

// dashboardKeys are the API keys of three people that dashboardProvision
// adds to the golden dataset's organizations, so that each browser test
// file and the direct API checks have a request budget of their own.
var dashboardKeys = []string{
	"mf_pat_dash0001_" + strings.Repeat("Dash1", 8),
	"mf_pat_dash0002_" + strings.Repeat("Dash2", 8),
	"mf_pat_dash0003_" + strings.Repeat("Check", 8),
}

// dashboardProvision writes the golden dataset's provisioning file with
// the people of dashboardKeys added to the organizations Ada is in.
func dashboardProvision(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(reportDir, "provision.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	users, _ := doc["users"].([]any)
	orgs := users[0].(map[string]any)["organizations"]
	for i, key := range dashboardKeys {
		users = append(users, map[string]any{
			"id":            fmt.Sprintf("d0000000-0000-4000-8000-%012d", i+1),
			"name":          fmt.Sprintf("Dashboard %d", i+1),
			"email":         fmt.Sprintf("dash%d@acme.example", i+1),
			"organizations": orgs,
			"apiKeys":       []any{map[string]any{"token": key, "expiresAt": nil, "revoked": false}},
		})
	}
	doc["users"] = users
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "provision.json")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// dashboardCrowd is how many visitors sendDashboardCrowd adds: more than a
// page of the people list (50), so that the dashboard's paging is tested.
const dashboardCrowd = 55

// sendDashboardCrowd sends one pageview each of dashboardCrowd visitors of
// the shop, an hour ago, and returns them as a batch of the dataset's form
// (for waitReportProcessed's count).
func sendDashboardCrowd(t *testing.T, p *mfProc) reportBatch {
	t.Helper()
	at := time.Now().Add(-time.Hour).UnixMilli()
	crowd := reportBatch{Project: "shop"}
	var evs []string
	for i := range dashboardCrowd {
		e := reportEvent{ID: fmt.Sprintf("c0000000-0000-4000-8000-%012d", i+1), Day: 0}
		crowd.Events = append(crowd.Events, e)
		evs = append(evs, fmt.Sprintf(`{"id":%q,"name":"$pageview","anonymousId":"crowd-%02d","time":%d,"page":{"url":"https://shop.example/crowd"}}`, e.ID, i, at))
	}
	src := reportSources["shop/website"]
	code, _, resp := do(t, "POST", p.ingest+"/v1/batch/"+src.key, batchBody("c0000000-0000-4000-8000-0000000000ff", "full", evs...),
		"Origin", src.origin, "User-Agent", browserUA, "Content-Type", "text/plain;charset=UTF-8")
	if code != 202 {
		t.Fatalf("the crowd's batch: %d %s", code, resp)
	}
	return crowd
}

// waitReportProcessed waits until the raw event lists of the last seven
// days hold every event of the dataset in them (Dee's budget only).
func waitReportProcessed(t *testing.T, p *mfProc, batches []reportBatch) {
	t.Helper()
	want := map[string]int{}
	for _, b := range batches {
		for _, e := range b.Events {
			if e.Day >= -6 {
				want[b.Project]++
			}
		}
	}
	ids := map[string]string{"shop": reportShop, "calm": reportCalm}
	deadline := time.Now().Add(2 * time.Minute)
	for project, n := range want {
		for {
			got := 0
			next := p.api + "/api/v1/projects/" + ids[project] + "/events?period=7d"
			for next != "" {
				code, _, doc, body := reportGet(t, "GET", next, reportKeys["dee"])
				if code == 429 {
					got = -1
					break
				}
				if code != 200 {
					t.Fatalf("raw events: %d %s", code, body)
				}
				got += len(reportDataIDs(doc))
				links, _ := doc.(map[string]any)["links"].(map[string]any)
				next, _ = links["next"].(string)
			}
			if got == n {
				break
			}
			if got > n || time.Now().After(deadline) {
				t.Fatalf("project %s lists %d raw events in 7d, want %d", project, got, n)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// summaryLines keeps node:test's result lines (TAP: "ok 1 - name",
// "# pass 14").
func summaryLines(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		s := strings.TrimSpace(l)
		if strings.HasPrefix(s, "ok ") || strings.HasPrefix(s, "not ok ") || strings.HasPrefix(s, "# pass") || strings.HasPrefix(s, "# fail") {
			keep = append(keep, s)
		}
	}
	return strings.Join(keep, "\n")
}
