package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// metricsCase is one batch request of testdata/metrics/batches.json and
// what its answer must add to the contract's families.
type metricsCase struct {
	Name      string
	Key       string // "website", "secret" or a literal key sent in the path
	UserAgent string // "browser" or a literal User-Agent
	Events    int
	Raw       string // a body sent as is instead of Events pageviews
	Status    int
	Accepted  int
	Dropped   int
	Reason    string
}

// scrape reads GET /metrics with the admin credential and parses it with
// Prometheus' own text parser.
func scrape(t *testing.T, p *mfProc, header ...string) map[string]*dto.MetricFamily {
	t.Helper()
	code, h, body := do(t, "GET", p.admin+"/metrics", nil, header...)
	if code != 200 {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET /metrics: Content-Type %q, want the text exposition", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("GET /metrics does not parse as the text exposition: %v\n%s", err, body)
	}
	return fams
}

// sample returns the value of the sample of family name whose labels
// include want (a counter's or gauge's value, a histogram's count); 0 when
// there is none, and it fails when several match.
func sample(t *testing.T, fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		return 0
	}
	var out float64
	found := 0
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(want); i += 2 {
			matched := false
			for _, l := range m.Label {
				if l.GetName() == want[i] && l.GetValue() == want[i+1] {
					matched = true
				}
			}
			if !matched {
				continue next
			}
		}
		found++
		switch {
		case m.Counter != nil:
			out = m.Counter.GetValue()
		case m.Gauge != nil:
			out = m.Gauge.GetValue()
		case m.Histogram != nil:
			out = float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			out = m.Untyped.GetValue()
		}
	}
	if found > 1 {
		t.Fatalf("%d samples of %s match %v; want one", found, name, want)
	}
	return out
}

// TestMetricsCountWhatWasAnswered sends the batches of
// testdata/metrics/batches.json through the real binary and checks that
// each family of the operations contract (section 4) moved by exactly what
// was answered, that the processor commits every accepted event and its
// lag returns to 0, and that /metrics needs the admin credential.
func TestMetricsCountWhatWasAnswered(t *testing.T) {
	raw, err := os.ReadFile("testdata/metrics/batches.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []metricsCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatalf("testdata/metrics/batches.json: %v", err)
	}
	const token = "metrics-test-admin-token-0123456789abcdef"
	p := startMF(t, t.TempDir(), "serve", "--provision", demoFile, "--admin-token", token)
	auth := []string{"Authorization", "Bearer " + token}

	// The admin API's authentication guards /metrics.
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong-token"}} {
		if code, _, body := do(t, "GET", p.admin+"/metrics", nil, h...); code != 401 {
			t.Errorf("GET /metrics with %v: %d %s, want 401", h, code, body)
		}
	}
	// Go's profiles are behind the same authentication, on the admin
	// listener only.
	if code, _, body := do(t, "GET", p.admin+"/debug/pprof/heap?debug=1", nil); code != 401 {
		t.Errorf("GET /debug/pprof/heap without a token: %d %s, want 401", code, body)
	}
	if code, _, body := do(t, "GET", p.admin+"/debug/pprof/heap?debug=1", nil, auth...); code != 200 || !strings.Contains(string(body), "heap profile:") {
		t.Errorf("GET /debug/pprof/heap: %d %.200s, want 200 and a heap profile", code, body)
	}
	if code, _, _ := do(t, "GET", p.api+"/debug/pprof/heap", nil, auth...); code != 404 {
		t.Errorf("GET the API's /debug/pprof/heap: %d, want 404", code)
	}
	// Only the admin listener serves it.
	for _, base := range []string{p.ingest, p.api} {
		if code, _, _ := do(t, "GET", base+"/metrics", nil, auth...); code != 404 {
			t.Errorf("GET %s/metrics: %d, want 404 (only the admin listener serves metrics)", base, code)
		}
	}

	before := scrape(t, p, auth...)
	for _, fam := range []string{"go_goroutines", "process_resident_memory_bytes", "mf_ingest_batches_total",
		"mf_ingest_events_total", "mf_http_requests_total", "mf_http_request_duration_seconds",
		"mf_processor_events_total", "mf_processor_lag_messages"} {
		if _, ok := before[fam]; !ok {
			t.Errorf("GET /metrics lacks the family %s", fam)
		}
	}
	want := map[string]float64{}
	var accepted, dropped float64
	for i, c := range cases {
		var body []byte
		if c.Raw != "" {
			body = []byte(c.Raw)
		} else {
			var events []string
			for j := 0; j < c.Events; j++ {
				events = append(events, fmt.Sprintf(`{"name":"$pageview","anonymousId":"metrics-%d-%d","page":{"url":"https://shop.example/p%d"}}`, i, j, j))
			}
			body = batchBody(fmt.Sprintf("6d657472-6963-4000-8000-%012d", i), "full", events...)
		}
		url, header := p.ingest+"/v1/batch/"+c.Key, []string{"Origin", "https://shop.example"}
		switch c.Key {
		case "website":
			url = p.ingest + "/v1/batch/" + demoWebsiteKey
		case "secret":
			url, header = p.ingest+"/v1/batch", []string{"Authorization", "Bearer " + demoSecretKey}
		}
		ua := c.UserAgent
		if ua == "browser" {
			ua = browserUA
		}
		header = append(header, "User-Agent", ua, "Content-Type", "application/json")
		code, _, resp := do(t, "POST", url, body, header...)
		if code != c.Status {
			t.Fatalf("%s: %d %s, want %d", c.Name, code, resp, c.Status)
		}
		want[fmt.Sprint(code)]++
		accepted += float64(c.Accepted)
		dropped += float64(c.Dropped)
	}

	after := scrape(t, p, auth...)
	delta := func(name string, labels ...string) float64 {
		return sample(t, after, name, labels...) - sample(t, before, name, labels...)
	}
	for status, n := range want {
		if got := delta("mf_ingest_batches_total", "status", status); got != n {
			t.Errorf("mf_ingest_batches_total{status=%q} moved by %v, want %v", status, got, n)
		}
		if got := delta("mf_http_requests_total", "listener", "ingest", "status", status); got != n {
			t.Errorf(`mf_http_requests_total{listener="ingest",status=%q} moved by %v, want %v`, status, got, n)
		}
	}
	if got := delta("mf_ingest_events_total", "outcome", "accepted"); got != accepted {
		t.Errorf(`mf_ingest_events_total{outcome="accepted"} moved by %v, want %v`, got, accepted)
	}
	if got := delta("mf_ingest_events_total", "outcome", "dropped"); got != dropped {
		t.Errorf(`mf_ingest_events_total{outcome="dropped"} moved by %v, want %v`, got, dropped)
	}
	if got := delta("mf_http_request_duration_seconds", "listener", "ingest"); got != float64(len(cases)) {
		t.Errorf(`mf_http_request_duration_seconds_count{listener="ingest"} moved by %v, want %v`, got, len(cases))
	}
	// The first scrape is counted by the admin listener once answered.
	if got := delta("mf_http_requests_total", "listener", "admin", "status", "200"); got != 1 {
		t.Errorf(`mf_http_requests_total{listener="admin",status="200"} moved by %v between two scrapes, want 1`, got)
	}

	// The processor commits every accepted event, and its lag returns to 0.
	var last map[string]*dto.MetricFamily
	deadline := time.Now().Add(30 * time.Second)
	for {
		last = scrape(t, p, auth...)
		done := sample(t, last, "mf_processor_events_total") - sample(t, before, "mf_processor_events_total")
		// The two lag gauges are read apart within a scrape (a registry
		// gathers its collectors concurrently): wait for a scrape in
		// which both say so.
		if done == accepted && sample(t, last, "mf_processor_lag_messages") == 0 && sample(t, last, "mf_processor_lag_seconds") == 0 {
			break
		}
		if done > accepted {
			t.Fatalf("mf_processor_events_total moved by %v, more than the %v events accepted", done, accepted)
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s mf_processor_events_total moved by %v (want %v), lag %v messages, %v seconds",
				done, accepted, sample(t, last, "mf_processor_lag_messages"), sample(t, last, "mf_processor_lag_seconds"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := sample(t, last, "mf_processor_lag_seconds"); got != 0 {
		t.Errorf("mf_processor_lag_seconds is %v with nothing left to commit, want 0", got)
	}
	if got := sample(t, last, "mf_processor_lease_held"); got != 1 {
		t.Errorf("mf_processor_lease_held is %v in the only processor, want 1", got)
	}
	checkDocumentedFamilies(t, last)
	if c := p.stop(time.Minute); c != 0 {
		t.Errorf("mf serve: exit %d on SIGTERM", c)
	}
}

// checkDocumentedFamilies: every mf_ family that docs/metrics.md, the
// Grafana dashboard and the example alerts name is one that mf serves, and
// every mf_ family served is documented.
func checkDocumentedFamilies(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	name := regexp.MustCompile(`\bmf_[a-z_]*[a-z]\b`)
	served := func(n string) bool {
		if _, ok := fams[n]; ok {
			return true
		}
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if base, ok := strings.CutSuffix(n, suffix); ok && fams[base] != nil {
				return true
			}
		}
		return false
	}
	documented := map[string]bool{}
	for _, path := range []string{"../../docs/metrics.md", "../../docs/grafana-dashboard.json", "../../docs/alerts.yml"} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(path, ".json"):
			var d struct {
				Panels []struct{ Targets []struct{ Expr string } }
			}
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		case strings.HasSuffix(path, ".yml"):
			var r struct {
				Groups []struct {
					Rules []struct{ Alert, Expr string }
				}
			}
			if err := yaml.Unmarshal(raw, &r); err != nil || len(r.Groups) == 0 {
				t.Fatalf("%s: %v (%d groups)", path, err, len(r.Groups))
			}
		}
		for _, n := range name.FindAllString(string(raw), -1) {
			if strings.HasSuffix(path, ".md") {
				documented[n] = true
			}
			if !served(n) {
				t.Errorf("%s names %s, which mf serve does not serve", path, n)
			}
		}
	}
	for n := range fams {
		if strings.HasPrefix(n, "mf_") && !documented[n] {
			t.Errorf("mf serves %s, which docs/metrics.md does not describe", n)
		}
	}
}

// TestMetricsLoopbackWithoutToken: without --admin-token, /metrics
// answers loopback callers, as the rest of the admin API does.
func TestMetricsLoopbackWithoutToken(t *testing.T) {
	p := startMF(t, t.TempDir(), "serve")
	fams := scrape(t, p)
	if _, ok := fams["mf_http_requests_total"]; !ok {
		t.Fatalf("GET /metrics from loopback lacks mf_http_requests_total")
	}
}
