package api

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The agent-facing server's tests: the real reporting app on a loopback
// listener, driven by the official Go SDK's client over Streamable HTTP.
// (cmd/mf/mcp_e2e_test.go drives the real binary with the official
// TypeScript client.)

// contractTools are the tool names of ../shared/contracts/agents.md.
var contractTools = []string{"list_projects", "get_project", "overview", "list_people", "get_person", "list_events",
	"list_goals", "goal_report", "funnel", "channels", "search_summary", "ads_summary"}

// listenEnv serves env's app on a loopback port and returns its base URL.
func listenEnv(t testing.TB, env *testEnv) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = env.rep.App().Listener(ln) }()
	t.Cleanup(func() { _ = env.rep.App().ShutdownWithTimeout(5 * time.Second) })
	return "http://" + ln.Addr().String()
}

// bearer adds a credential to every request.
type bearer struct {
	auth string
	rt   http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", b.auth)
	return b.rt.RoundTrip(req)
}

// connectAgent opens an MCP session to base/mcp with auth.
func connectAgent(t testing.TB, base, auth string) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "mf-test", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: base + "/mcp", DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: bearer{auth, http.DefaultTransport}}}
	cs, err := c.Connect(ctx, tr, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func callTool(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tool %s: %v", name, err)
	}
	return res
}

// structured decodes a result's structured content.
func structured(t testing.TB, res *mcp.CallToolResult) any {
	t.Helper()
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestAgentToolsList(t *testing.T) {
	env := newTestEnv(t, DefaultReportingConfig())
	cs, err := connectAgent(t, listenEnv(t, env), adaKey)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		in, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Type       string                    `json:"type"`
			Properties map[string]map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(in, &schema); err != nil || schema.Type != "object" {
			t.Errorf("%s: input schema %s", tool.Name, in)
		}
		for p, s := range schema.Properties {
			if d, _ := s["description"].(string); d == "" {
				t.Errorf("%s: parameter %s has no description", tool.Name, p)
			}
		}
		if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint || tool.Description == "" {
			t.Errorf("%s: not described as read-only with a description", tool.Name)
		}
	}
	slices.Sort(names)
	want := slices.Clone(contractTools)
	slices.Sort(want)
	if !reflect.DeepEqual(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
}

type agentCase struct {
	Tool    string         `json:"tool"`
	Args    map[string]any `json:"args"`
	REST    string         `json:"rest"`
	Refused string         `json:"refused"`
	Why     string         `json:"why"`
}

// TestAgentCalls calls each case's tool and compares it with the REST
// answer to the same parameters.
func TestAgentCalls(t *testing.T) {
	raw, err := os.ReadFile("testdata/agent/calls.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Cases []agentCase }
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	env := newTestEnv(t, DefaultReportingConfig())
	base := listenEnv(t, env)
	cs, err := connectAgent(t, base, adaKey)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	seen := map[string]bool{}
	for _, tc := range file.Cases {
		seen[tc.Tool] = true
		res := callTool(t, cs, tc.Tool, tc.Args)
		text := resultText(res)
		if tc.Refused != "" {
			if !res.IsError || !strings.Contains(text, "parameter "+tc.Refused+" ") || !strings.Contains(text, "accepts") || !strings.Contains(text, "refused: ") {
				t.Errorf("%s %v: isError %v, text %q; want a refusal naming %s and what it accepts", tc.Tool, tc.Args, res.IsError, text, tc.Refused)
			}
		} else if res.IsError {
			t.Errorf("%s %v: refused: %s", tc.Tool, tc.Args, text)
		}
		if tc.REST == "" {
			continue
		}
		status, _, body := env.send(t, "GET", "/api/v1"+tc.REST, adaKey, "")
		if (status >= 400) != (tc.Refused != "") {
			t.Errorf("%s: REST %s answered %d", tc.Tool, tc.REST, status)
		}
		// The REST links are built on the request's host: the agent's
		// are on the listener's, so compare with the host put right.
		want := strings.ReplaceAll(string(body), "http://example.com", base)
		var w any
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatalf("REST %s: %v", tc.REST, err)
		}
		if got := structured(t, res); !reflect.DeepEqual(got, w) {
			g, _ := json.Marshal(got)
			t.Errorf("%s %v:\n tool %s\n REST %s", tc.Tool, tc.Args, g, want)
		}
		if !res.IsError && (len(res.Content) < 1 || text == "") {
			t.Errorf("%s: no text summary", tc.Tool)
		}
	}
	for _, name := range contractTools {
		if !seen[name] {
			t.Errorf("no case calls %s", name)
		}
	}
}

func TestAgentAuthentication(t *testing.T) {
	env := newTestEnv(t, DefaultReportingConfig())
	base := listenEnv(t, env)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, auth := range []string{"", "Bearer nonsense", "Bearer mf_pat_ada00002_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"} {
		req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" || resp.Header.Get("RateLimit") == "" {
			t.Errorf("credential %q: %d, WWW-Authenticate %q, RateLimit %q; want 401 with both", auth, resp.StatusCode,
				resp.Header.Get("WWW-Authenticate"), resp.Header.Get("RateLimit"))
		}
	}
	if _, err := connectAgent(t, base, "Bearer mf_pat_ada00003_CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC"); err == nil {
		t.Error("an expired key initialized a session")
	}
	// The revoked and expired keys were recorded against Ada, as from the
	// agent-facing server.
	recs, err := env.rep.RecentAccess(context.Background(), adaID)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]bool{}
	for _, r := range recs {
		if r.Via == agentVia && r.Endpoint == agentEndpoint {
			outcomes[r.Outcome] = true
		}
	}
	if !outcomes[outcomeRevoked] || !outcomes[outcomeExpired] {
		t.Errorf("recent access of Ada: %+v; want the revoked and expired keys at /mcp", recs)
	}
}

// TestAgentBudget: tool calls spend the agent budget only, REST requests
// the REST budget only; over it, 429 with Retry-After; listings are free;
// recent access shows the tool calls.
func TestAgentBudget(t *testing.T) {
	cfg := DefaultReportingConfig()
	cfg.AgentCallsPerMinute, cfg.RequestsPerMinute = 3, 2
	env := newTestEnv(t, cfg)
	base := listenEnv(t, env)
	var last http.Header
	cs, err := connectAgent(t, base, adaKey)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatalf("listing %d: %v", i, err)
		}
	}
	// Spend the REST budget: the agent budget stays whole.
	for range 3 {
		env.send(t, "GET", "/api/v1/projects", adaKey, "")
	}
	if st, _, _ := env.send(t, "GET", "/api/v1/projects", adaKey, ""); st != 429 {
		t.Fatalf("REST over its budget of 2: %d", st)
	}
	for i := range 3 {
		if res := callTool(t, cs, "list_projects", map[string]any{}); res.IsError {
			t.Fatalf("tool call %d of 3: %s", i+1, resultText(res))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_projects", Arguments: map[string]any{}}); err == nil {
		t.Fatal("tool call 4 of a budget of 3 answered")
	}
	// The raw answer of call 5: 429, Retry-After and the agent's headers.
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"list_projects","arguments":{}}}`
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", adaKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	last = resp.Header
	if resp.StatusCode != 429 || last.Get("Retry-After") == "" || last.Get("RateLimit-Policy") != `"agent";q=3;w=60` ||
		!strings.HasPrefix(last.Get("RateLimit"), `"agent";r=0;t=`) {
		t.Errorf("over the agent budget: %d, Retry-After %q, RateLimit-Policy %q, RateLimit %q", resp.StatusCode,
			last.Get("Retry-After"), last.Get("RateLimit-Policy"), last.Get("RateLimit"))
	}
	// Over the budget, what is not a tool call still answers.
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Errorf("listing over the tool-call budget: %v", err)
	}
	recs, err := env.rep.RecentAccess(context.Background(), adaID)
	if err != nil {
		t.Fatal(err)
	}
	var tools, limited, rest int
	for _, r := range recs {
		switch {
		case r.Via == agentVia && r.Tool == "list_projects" && r.Endpoint == "GET /projects" && r.Status == 200:
			tools++
		case r.Via == agentVia && r.Status == 429 && r.Outcome == outcomeRateLimited:
			limited++
		case r.Via == "":
			rest++
		}
	}
	if tools != 3 || limited != 2 || rest != 4 {
		t.Errorf("recent access: %d tool calls, %d refused over the agent budget, %d REST; want 3, 2, 4\n%+v", tools, limited, rest, recs)
	}
}
