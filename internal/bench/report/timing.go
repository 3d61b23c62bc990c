package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/mfhq/mf/api"
)

// question is one report the bench times: the API path (under the
// project) and query, and the DuckDB query's name in bench.mjs.
type question struct {
	Name  string // overview, funnel, channels, people
	Label string // as printed
	Path  string // after /api/v1/projects/<id>
}

func questions() []question {
	return []question{
		{"overview", "overview 30d", "/overview?period=30d"},
		{"funnel", "funnel 4 steps 30d", "/funnel?funnel=" + benchFunnel + "&period=30d"},
		{"channels", "channels 30d", "/acquisition/channels?period=30d"},
		{"people", "people page 1 (30d)", "/people?period=30d"},
	}
}

// timing is what one question measured.
type timing struct {
	Status int       // the last answer's status
	Body   []byte    // the last answer
	Ms     []float64 // the timed calls, milliseconds
	First  float64   // the first call (warm-up or timed), milliseconds
	Err    error
}

// serveAPI serves the reporting API of e on a loopback listener and
// returns its base address (ending in /api/v1) and a stop function.
func serveAPI(ctx context.Context, e *env, logger *slog.Logger) (string, func(), error) {
	cfg := api.DefaultReportingConfig()
	cfg.RequestsPerMinute = 1_000_000 // the bench is not to be rate limited
	if e.dayCache > 0 {
		cfg.CacheBytes = e.dayCache
	}
	rep, err := api.NewReporting(ctx, cfg, api.ReportingDeps{Catalog: e.cat, Bucket: e.bucket, Reader: e.reader},
		func() bool { return true }, logger)
	if err != nil {
		return "", nil, fmt.Errorf("cannot build the reporting API: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = rep.Close()
		return "", nil, fmt.Errorf("cannot listen on loopback: %w", err)
	}
	app := rep.App()
	go func() { _ = app.Listener(ln) }()
	stop := func() {
		_ = app.ShutdownWithTimeout(10 * time.Second)
		_ = rep.Close()
	}
	return "http://" + ln.Addr().String() + "/api/v1", stop, nil
}

// timeAPI calls each question warmup times, then n times, one call after
// the other over one keep-alive connection, timing each until its body is
// read.
func timeAPI(ctx context.Context, base, project string, qs []question, warmup, n int, out io.Writer) map[string]*timing {
	client := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	res := map[string]*timing{}
	for k, q := range qs {
		t := &timing{}
		res[q.Name] = t
		url := base + "/projects/" + project + q.Path
		for i := range warmup + n {
			start := time.Now()
			status, body, err := get(ctx, client, url)
			ms := float64(time.Since(start).Microseconds()) / 1000
			if err != nil {
				t.Err = err
				break
			}
			t.Status, t.Body = status, body
			if i == 0 {
				t.First = ms
			}
			if status != http.StatusOK {
				break
			}
			if i >= warmup {
				t.Ms = append(t.Ms, ms)
			}
		}
		switch {
		case t.Err != nil:
			fmt.Fprintf(out, "  %-22s cannot be called: %v\n", q.Label, t.Err)
		case t.Status != http.StatusOK:
			fmt.Fprintf(out, "  %-22s answers %d, not timed: %.200s\n", q.Label, t.Status, t.Body)
		default:
			fmt.Fprintf(out, "  %-22s p50 %8.2f ms  p95 %8.2f ms  (%d calls, %d bytes)\n", q.Label, pct(t.Ms, 50), pct(t.Ms, 95), len(t.Ms), len(t.Body))
			if k == 0 {
				fmt.Fprintf(out, "  %-22s first call %.0f ms (the API had just started: nothing decoded yet)\n", "", t.First)
			}
		}
	}
	return res
}

func get(ctx context.Context, c *http.Client, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+benchAPIKey)
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// pct is the p-th percentile of ms by the nearest-rank method (the
// smallest value with at least p% of the values at or below it); NaN-free:
// 0 for no values.
func pct(ms []float64, p float64) float64 {
	if len(ms) == 0 {
		return 0
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	rank := int(float64(len(s))*p/100+0.999999999) - 1
	return s[max(0, min(rank, len(s)-1))]
}
