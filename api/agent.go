package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The agent-facing server (../shared/contracts/agents.md, docs/agents.md):
// the reporting API offered to AI agents over the Model Context Protocol,
// Streamable HTTP at /mcp on the reporting listener. Fiber authenticates
// and counts the budget (gate); the official Go SDK speaks MCP behind a
// net/http adaptor (serve); each tool answers through the REST handlers
// themselves (agent_tools.go).

// agentPolicy names the agent budget in the RateLimit headers.
const agentPolicy = "agent"

// agentVia marks access records of the agent-facing server.
const agentVia = "mcp"

// agentEndpoint is the endpoint recorded for a refusal at /mcp itself.
const agentEndpoint = "POST /mcp"

// agentServer is the MCP server and its HTTP face.
type agentServer struct {
	rep     *Reporting
	server  *mcp.Server
	handler fiber.Handler
	inner   func(*agentCall) // the reporting routes without the REST gate
}

// agentIdentity is what the gate hands to the tool handlers through the
// SDK's token info.
type agentIdentity struct {
	id   *identity
	base string // the API's base address, ending in /api/v1
}

const tokenInfoIdentity = "mf.agent"

// newAgent builds the MCP server with every tool of the contract.
func (r *Reporting) newAgent() (*agentServer, error) {
	a := &agentServer{rep: r, inner: r.newInner()}
	a.server = mcp.NewServer(&mcp.Implementation{Name: "mf", Title: "mf reporting", Version: buildVersion()},
		&mcp.ServerOptions{
			Instructions: agentInstructions,
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		})
	for _, t := range agentTools() {
		tool, err := t.mcpTool()
		if err != nil {
			return nil, err
		}
		a.server.AddTool(tool, a.call(t))
	}
	// Stateless with JSON answers: every POST carries its own call and
	// gets one JSON answer, so any process of a deployment can take any
	// request and the adaptor needs no streaming (RATIONALE.md, issue 21).
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return a.server },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	withIdentity := auth.RequireBearerToken(agentVerifier, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	a.handler = adaptor.HTTPHandler(withIdentity(h))
	return a, nil
}

// agentVerifier hands the identity the gate admitted (a fiber local, which
// the adaptor's request context carries) to the SDK as token info: the
// credential was checked by the gate already.
func agentVerifier(ctx context.Context, _ string, req *http.Request) (*auth.TokenInfo, error) {
	id, ok := req.Context().Value(localIdentity).(*identity)
	if !ok {
		return nil, fmt.Errorf("%w: the request passed no gate", auth.ErrInvalidToken)
	}
	base, _ := req.Context().Value(localBaseURL).(string)
	return &auth.TokenInfo{UserID: id.user.ID, Extra: map[string]any{tokenInfoIdentity: &agentIdentity{id: id, base: base}}}, nil
}

// buildVersion is the module version of the binary, "dev" when unknown.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// gate authenticates every HTTP request to /mcp before the SDK reads it,
// and counts tool calls against the person's agent budget. Every answer
// carries the rate headers: the agent budget's, or the refused-credential
// budget's for a refused credential.
func (a *agentServer) gate(c *fiber.Ctx) error {
	r := a.rep
	now := r.deps.Clock()
	id, outcome, owner, name := r.resolve(c, now)
	if id == nil {
		return r.refuseCredential(c, now, networkOf(clientAddr(c)), outcome, owner,
			AccessRecord{At: now, Credential: name, Endpoint: agentEndpoint, Via: agentVia})
	}
	calls, tool := countToolCalls(c)
	st := r.agents.peek(id.user.ID, now)
	st.Allowed = true // what is not a tool call is not counted, nor refused
	if calls > 0 {
		if st.Remaining >= calls {
			for range calls {
				st = r.agents.take(id.user.ID, now)
			}
		} else {
			st.Allowed = false
		}
	}
	setRateHeaders(c, agentPolicy, st)
	if !st.Allowed {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(st.resetSeconds()))
		r.access.record(id.user.ID, AccessRecord{At: now, Credential: id.credential, App: id.app, Endpoint: agentEndpoint,
			Via: agentVia, Tool: tool, Status: fiber.StatusTooManyRequests, Outcome: outcomeRateLimited})
		return sendError(c, refuse(fiber.StatusTooManyRequests, "rate_limited", "",
			fmt.Sprintf("over the limit of %d tool calls per minute on the agent-facing server, shared by all your keys and tokens; retry after %d seconds",
				st.Quota, st.resetSeconds())))
	}
	c.Locals(localBaseURL, r.baseURL(c))
	c.Locals(localIdentity, id)
	return c.Next()
}

// serve hands the request to the SDK.
func (a *agentServer) serve(c *fiber.Ctx) error { return a.handler(c) }

// countToolCalls counts the tools/call requests of a POST body (one
// message or a batch) and names the first tool. Anything else (initialize,
// notifications, listings, GET streams) is not counted; a body that is not
// JSON is left to the SDK to refuse.
func countToolCalls(c *fiber.Ctx) (int, string) {
	if c.Method() != fiber.MethodPost {
		return 0, ""
	}
	type msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	body := c.Body()
	var batch []msg
	if len(body) > 0 && body[0] == '[' {
		if json.Unmarshal(body, &batch) != nil {
			return 0, ""
		}
	} else {
		var m msg
		if json.Unmarshal(body, &m) != nil {
			return 0, ""
		}
		batch = []msg{m}
	}
	n, first := 0, ""
	for _, m := range batch {
		if m.Method == "tools/call" {
			if n == 0 {
				first = clipValue(m.Params.Name)
			}
			n++
		}
	}
	return n, first
}

// agentInstructions is what the server tells a connecting agent.
const agentInstructions = `mf reporting: read-only analytics of the projects your credential can see, the same numbers as the dashboard and the REST API (/api/v1).
Start with list_projects to find a project's id (a UUID; slugs are refused), then ask overview, list_people, list_events, list_goals, goal_report, funnel, channels, search_summary or ads_summary with that project_id.
Periods: period is 1h, 24h, 7d, 30d (default), 90d, 12m or custom with from and to (YYYY-MM-DD, project time zone). Lists come 50 at a time: pass meta.nextCursor as cursor with the same other parameters.
Every tool returns the REST answer's JSON:API document as structured content and a short summary. Tool calls have a budget of their own: 120 a minute per person.`

// now is the clock of the agent-facing server.
func (a *agentServer) now() time.Time { return a.rep.deps.Clock() }
