package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/valyala/fasthttp"
)

// A tool call is answered by the REST handlers themselves: the tool's
// arguments become the endpoint's path and query, and an in-process
// request runs through the same routes (Reporting.routes) without the
// REST gate, whose authentication, budget and access record the agent
// gate and the tool handler stand in for. The structured content is the
// REST answer's body, byte for byte.

// localContext carries the tool call's context into the internal request.
const localContext = "mf.context"

// agentCall is one internal request and its answer.
type agentCall struct {
	ctx    context.Context
	who    *agentIdentity
	uri    string // path and query under /api/v1
	status int
	body   []byte
}

// newInner builds the reporting routes without the REST gate and returns
// a function that answers one internal request.
func (r *Reporting) newInner() func(*agentCall) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true, ErrorHandler: r.onError})
	app.Use(func(c *fiber.Ctx) error {
		if ctx, ok := c.Locals(localContext).(context.Context); ok {
			c.SetUserContext(ctx)
		}
		return c.Next()
	})
	r.routes(app.Group("/api/v1"))
	app.Use(noEndpoint)
	h := app.Handler()
	return func(call *agentCall) {
		var req fasthttp.Request
		req.Header.SetMethod(fiber.MethodGet)
		req.SetRequestURI("/api/v1" + call.uri)
		var fc fasthttp.RequestCtx
		fc.Init(&req, nil, nil)
		fc.SetUserValue(localIdentity, call.who.id)
		fc.SetUserValue(localBaseURL, call.who.base)
		fc.SetUserValue(localContext, call.ctx)
		h(&fc)
		call.status = fc.Response.StatusCode()
		call.body = slices.Clone(fc.Response.Body())
	}
}

// call is the MCP handler of tool t.
func (a *agentServer) call(t *agentTool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var who *agentIdentity
		if req.Extra != nil && req.Extra.TokenInfo != nil {
			who, _ = req.Extra.TokenInfo.Extra[tokenInfoIdentity].(*agentIdentity)
		}
		if who == nil {
			return nil, fmt.Errorf("tool %s: the request carries no identity", t.name)
		}
		rec := AccessRecord{At: a.now(), Credential: who.id.credential, App: who.id.app,
			Endpoint: "GET " + t.route, Via: agentVia, Tool: t.name}
		uri, project, perr := t.request(req.Params.Arguments)
		rec.Project = project
		if perr != nil {
			rec.Status, rec.Outcome = fiber.StatusBadRequest, "invalid_parameter"
			a.rep.access.record(who.id.user.ID, rec)
			return refusal(t, perr.param, perr.detail, nil), nil
		}
		call := &agentCall{ctx: ctx, who: who, uri: uri}
		a.inner(call)
		rec.Status, rec.Outcome = call.status, outcomeOK
		if call.status >= 400 {
			rec.Outcome = errorCode(call.body, call.status)
		}
		a.rep.access.record(who.id.user.ID, rec)
		return t.result(call.status, call.body), nil
	}
}

// result turns the REST answer into the tool result: the document as
// structured content, a summary and the document as text; a refusal as
// an error result naming the parameter.
func (t *agentTool) result(status int, body []byte) *mcp.CallToolResult {
	if status >= 400 {
		var doc struct {
			Errors []struct {
				Code   string `json:"code"`
				Detail string `json:"detail"`
				Source *struct {
					Parameter string `json:"parameter"`
				} `json:"source"`
			} `json:"errors"`
		}
		param, detail := "", fmt.Sprintf("the reporting API answered %d", status)
		if json.Unmarshal(body, &doc) == nil && len(doc.Errors) > 0 {
			e := doc.Errors[0]
			detail = e.Detail
			if e.Source != nil {
				param = e.Source.Parameter
			}
			if param == "" {
				param = notFoundParam[e.Code]
			}
		}
		return refusal(t, toolParamName(param), toolWording(detail), json.RawMessage(body))
	}
	var doc map[string]any
	summary := "answer of " + t.name
	if json.Unmarshal(body, &doc) == nil {
		summary = t.summary(doc)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: summary}, &mcp.TextContent{Text: string(body)}},
		StructuredContent: json.RawMessage(body),
	}
}

// notFoundParam names the path parameter of a 404 without one.
var notFoundParam = map[string]string{
	"project_not_found": "project_id",
	"person_not_found":  "ref",
	"goal_not_found":    "goal_id",
}

var reFilterName = regexp.MustCompile(`filters\[([0-9]+)\]\[([a-z]+)\]`)

// toolParamName turns a REST query parameter into the tool's argument:
// filters[2][op] → filters[2].op, steps[] → steps, fields[people] → fields.
func toolParamName(p string) string {
	switch {
	case p == "steps[]":
		return "steps"
	case strings.HasPrefix(p, "fields["):
		return "fields"
	}
	return reFilterName.ReplaceAllString(p, "filters[$1].$2")
}

// toolWording rewrites the REST names in a message into the tool's.
func toolWording(detail string) string {
	detail = reFilterName.ReplaceAllString(detail, "filters[$1].$2")
	detail = strings.ReplaceAll(detail, "steps[] repeated once per step", "steps as a list")
	detail = strings.ReplaceAll(detail, "repeat steps[] once per step", "list them in steps")
	return strings.ReplaceAll(detail, "steps[]", "steps")
}

// refusal is a tool error result: the parameter at fault, the reason and
// what the parameter accepts. doc, when set, is the REST errors document.
func refusal(t *agentTool, param, detail string, doc json.RawMessage) *mcp.CallToolResult {
	var b bytes.Buffer
	if param != "" {
		fmt.Fprintf(&b, "parameter %s refused: %s", param, detail)
		base, _, _ := strings.Cut(param, "[")
		if p := t.param(base); p != nil {
			fmt.Fprintf(&b, ". %s accepts: %s", param, p.accepts())
		} else {
			names := make([]string, len(t.params))
			for i, p := range t.params {
				names[i] = p.name
			}
			fmt.Fprintf(&b, ". %s accepts no %s; it takes %s", t.name, base, strings.Join(names, ", "))
		}
	} else {
		fmt.Fprintf(&b, "%s refused: %s", t.name, detail)
	}
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}
	if doc != nil {
		res.StructuredContent = doc
	}
	return res
}

// errorCode reads the code of a REST errors document.
func errorCode(body []byte, status int) string {
	var doc struct {
		Errors []struct {
			Code string `json:"code"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &doc) == nil && len(doc.Errors) > 0 && doc.Errors[0].Code != "" {
		return doc.Errors[0].Code
	}
	return fmt.Sprintf("http_%d", status)
}
