package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkAgentOverhead compares a tool call of the agent-facing server
// with the REST call it wraps, both over loopback HTTP from a client in
// the same process (rest: the REST call; tool-raw: the tool call as one
// hand-written POST; tool: through the official Go SDK's client), and
// reports the p50 and p95 of each in one run:
//
//	go test ./api -run '^$' -bench AgentOverhead -benchtime 2000x
func BenchmarkAgentOverhead(b *testing.B) {
	cfg := DefaultReportingConfig()
	cfg.RequestsPerMinute, cfg.AgentCallsPerMinute = 1<<30, 1<<30
	env := newTestEnv(b, cfg)
	base := listenEnv(b, env)
	cs, err := connectAgent(b, base, adaKey)
	if err != nil {
		b.Fatal(err)
	}
	const project = "20000000-0000-4000-8000-000000000001"
	for _, bc := range []struct {
		name, tool, rest string
		args             map[string]any
	}{
		{"get_project", "get_project", "/projects/" + project, map[string]any{"project_id": project}},
		{"overview", "overview", "/projects/" + project + "/overview?period=30d", map[string]any{"project_id": project, "period": "30d"}},
	} {
		b.Run(bc.name+"/rest", func(b *testing.B) {
			req, _ := http.NewRequest("GET", base+"/api/v1"+bc.rest, nil)
			req.Header.Set("Authorization", adaKey)
			measure(b, func() {
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("REST %s: %v", bc.rest, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		})
		// The tool call as one raw POST: the server's cost without the
		// client SDK's.
		b.Run(bc.name+"/tool-raw", func(b *testing.B) {
			args, _ := json.Marshal(bc.args)
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + bc.tool + `","arguments":` + string(args) + `}}`
			measure(b, func() {
				req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(body))
				req.Header.Set("Authorization", adaKey)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("POST /mcp %s: %v", bc.tool, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		})
		b.Run(bc.name+"/tool", func(b *testing.B) {
			ctx := context.Background()
			measure(b, func() {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: bc.tool, Arguments: bc.args})
				if err != nil || res.IsError {
					b.Fatalf("tool %s: %v", bc.tool, err)
				}
			})
		})
	}
}

// measure runs op b.N times and reports its p50 and p95.
func measure(b *testing.B, op func()) {
	b.ReportAllocs()
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		op()
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds()), "p95-µs")
	}
}
