package main

import (
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
	p := startMF(t, t.TempDir(), "serve", "--provision", filepath.Join(reportDir, "provision.json"))
	sendReportBatches(t, p, c, events.Batches)
	importReportRows(t, p, c, imports.Imports)
	waitReportProcessed(t, p, events.Batches)

	cmd := exec.Command(node, "--test", "--test-concurrency=1", "--test-timeout=180000", ".")
	cmd.Dir = e2e
	cmd.Env = append(os.Environ(),
		"MF_URL="+p.api,
		"MF_INGEST="+p.ingest,
		"MF_WEBSITE_KEY="+reportSources["shop/website"].key,
		"MF_WEBSITE_ORIGIN="+reportSources["shop/website"].origin,
		"MF_KEY="+reportKeys["ada"],
		"MF_CHECK_KEY="+reportKeys["bea"],
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

// summaryLines keeps node:test's result lines.
func summaryLines(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		s := strings.TrimSpace(l)
		if strings.HasPrefix(s, "✔") || strings.HasPrefix(s, "✖") || strings.HasPrefix(s, "ℹ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
