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

// sendAndWait sends n batches of per pageviews to mf and waits until its
// processor has committed every event (read from /metrics with auth).
func sendAndWait(t *testing.T, p *mfProc, n, per int, auth ...string) int {
	t.Helper()
	now := time.Now().UnixMilli()
	for i := 0; i < n; i++ {
		var events []string
		for j := 0; j < per; j++ {
			events = append(events, fmt.Sprintf(`{"name":"$pageview","time":%d,"anonymousId":"job-%d-%d","page":{"url":"https://shop.example/p/%d"}}`,
				now-int64(60_000-j), i, j, j))
		}
		code, _, resp := do(t, "POST", p.ingest+"/v1/batch/"+demoWebsiteKey, batchBody(fmt.Sprintf("6a6f6273-0000-4000-8000-%012d", i), "full", events...),
			"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
		if code != 202 {
			t.Fatalf("batch %d: %d %s", i, code, resp)
		}
	}
	want := n * per
	// Committed to tables: what a replay reads.
	waitFor(t, time.Minute, func() bool {
		fams := scrape(t, p, auth...)
		return sample(t, fams, "mf_processor_events_total") == float64(want) && sample(t, fams, "mf_processor_lag_messages") == 0
	})
	return want
}

// TestReplayJob: a replay through the admin API is a job: POST answers
// 202 with its id at once, GET reports its progress and, once done, its
// result; `mf replay --admin-url` follows it and shows progress (one line
// when its output is not a terminal).
func TestReplayJob(t *testing.T) {
	const token = "replay-job-test-admin-token-0123456789ab"
	p := startMF(t, t.TempDir(), "serve", "--provision", demoFile, "--admin-token", token)
	auth := []string{"Authorization", "Bearer " + token}
	events := sendAndWait(t, p, 4, 25, auth...)

	jobs := p.admin + "/admin/v1/projects/" + demoProject + "/replays"
	code, h, body := do(t, "POST", jobs, nil, auth...)
	if code != 202 {
		t.Fatalf("POST %s: %d %s, want 202", jobs, code, body)
	}
	var job struct {
		ID, State string
		Progress  *replayProgress
		Result    *replayReport
		Error     string
	}
	if err := json.Unmarshal(body, &job); err != nil || job.ID == "" || job.State != "running" {
		t.Fatalf("POST %s: %s (%v), want a running job with an id", jobs, body, err)
	}
	if loc := h.Get("Location"); !strings.HasSuffix(loc, "/replays/"+job.ID) {
		t.Errorf("Location %q does not name the job", loc)
	}
	waitFor(t, time.Minute, func() bool {
		code, _, body := do(t, "GET", jobs+"/"+job.ID, nil, auth...)
		if code != 200 {
			t.Fatalf("GET job: %d %s", code, body)
		}
		if err := json.Unmarshal(body, &job); err != nil {
			t.Fatal(err)
		}
		return job.State != "running"
	})
	if job.State != "done" || job.Result == nil || job.Result.Events != int64(events) {
		t.Fatalf("the replay job ended %q (%s) with %+v; want done with %d events", job.State, job.Error, job.Result, events)
	}
	if pr := job.Progress; pr == nil || pr.BytesTotal <= 0 || pr.BytesRead <= 0 || pr.FilesWritten <= 0 || pr.BytesWritten <= 0 {
		t.Errorf("the finished job reports progress %+v; want bytes read of a known total and files written", job.Progress)
	}
	for _, c := range []struct {
		method, url string
		want        int
	}{
		{"GET", jobs + "/0123456789abcdef", 404},
		{"POST", p.admin + "/admin/v1/projects/00000000-0000-4000-8000-000000000000/replays", 404},
		{"POST", jobs + "?from=yesterday", 422},
		{"GET", jobs + "/" + job.ID + "x", 404},
	} {
		if code, _, body := do(t, c.method, c.url, nil, auth...); code != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.url, code, body, c.want)
		}
	}
	if code, _, _ := do(t, "GET", jobs+"/"+job.ID, nil); code != 401 {
		t.Errorf("GET job without the admin token: %d, want 401", code)
	}

	// The command follows a job; not on a terminal, it writes lines.
	code, out, errOut := runMF(t, nil, "replay", "--admin-url", p.admin, "--admin-token", token, "--project", demoProject)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d events", events)) {
		t.Fatalf("mf replay --admin-url: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "replay job ") || !strings.Contains(errOut, "replay: done, 100%") || strings.Contains(errOut, "\r") {
		t.Errorf("mf replay --admin-url without a terminal printed %q; want the job's start and a last progress line", errOut)
	}
}

// TestReplayProgressInTerminal runs `mf replay --admin-url` in a real
// terminal (tmux) and reads the screen: a progress bar at 100% and the
// result.
func TestReplayProgressInTerminal(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is needed for the terminal test: bash .ci/tools.sh (apt-get install tmux)")
	}
	p := startMF(t, t.TempDir(), "serve", "--provision", demoFile)
	events := sendAndWait(t, p, 2, 10)
	dir := t.TempDir()
	session := fmt.Sprintf("mf-replay-%d", os.Getpid())
	done := filepath.Join(dir, "done")
	script := fmt.Sprintf("%s replay --admin-url %s --project %s; echo exit=$? > %s", mfBinary, p.admin, demoProject, done)
	tmux := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("tmux", append([]string{"-L", session}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "20", "sh", "-c", script+"; sleep 600")
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", session, "kill-server").Run() })
	waitFor(t, time.Minute, func() bool { _, err := os.Stat(done); return err == nil })
	if b, _ := os.ReadFile(done); strings.TrimSpace(string(b)) != "exit=0" {
		t.Fatalf("mf replay in a terminal: %s\n%s", b, tmux("capture-pane", "-p", "-t", session))
	}
	screen := tmux("capture-pane", "-p", "-t", session)
	if !strings.Contains(screen, "replay [========================] 100%") {
		t.Errorf("the terminal shows no full progress bar:\n%s", screen)
	}
	if !strings.Contains(screen, fmt.Sprintf("replayed project %s from the archive: %d events", demoProject, events)) {
		t.Errorf("the terminal shows no result:\n%s", screen)
	}
	t.Logf("the terminal after mf replay:\n%s", screen)
}
