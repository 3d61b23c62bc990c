package main

import (
	"strings"
	"testing"
	"time"
)

// TestAccessLog: with --access-log every answered request is one line of
// the log, naming the listener, route pattern and status, and never the
// path as asked, a query string or the client address; without it there
// is none.
func TestAccessLog(t *testing.T) {
	p := startMF(t, t.TempDir(), "serve", "--provision", demoFile, "--access-log")
	const secretQuery = "q-7d1f0c9b-access-log-test"
	if code, _, body := do(t, "GET", p.api+"/api/v1/projects/"+demoProject+"/overview?period=24h&search="+secretQuery, nil,
		"Authorization", "Bearer "+demoPAT); code != 200 {
		t.Fatalf("overview: %d %s", code, body)
	}
	if code, _, body := do(t, "POST", p.ingest+"/v1/batch/"+demoWebsiteKey, batchBody("acce5500-0000-4000-8000-000000000001", "full",
		`{"name":"$pageview","anonymousId":"acc","page":{"url":"https://shop.example/"}}`),
		"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json"); code != 202 {
		t.Fatalf("batch: %d %s", code, body)
	}
	want := []string{
		`listener=api method=GET route=/api/v1/projects/:project_id/overview status=200`,
		`listener=ingest method=POST route=/v1/batch/:key status=202`,
	}
	waitFor(t, 10*time.Second, func() bool {
		out := p.out.String()
		for _, w := range want {
			if !strings.Contains(out, w) {
				return false
			}
		}
		return true
	})
	for _, line := range strings.Split(p.out.String(), "\n") {
		if !strings.Contains(line, "log=access") {
			continue
		}
		for _, secret := range []string{secretQuery, demoProject, demoWebsiteKey, "127.0.0.1", "period="} {
			if strings.Contains(line, secret) {
				t.Errorf("an access log line holds %q: %s", secret, line)
			}
		}
	}

	q := startMF(t, t.TempDir(), "serve")
	do(t, "GET", q.ingest+"/healthz", nil)
	if c := q.stop(time.Minute); c != 0 {
		t.Fatalf("exit %d", c)
	}
	if strings.Contains(q.out.String(), "log=access") {
		t.Errorf("without --access-log the log holds access lines:\n%s", q.out)
	}
}
