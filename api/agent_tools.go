package api

import (
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// agentTool is one tool of the agent-facing server: one reporting
// endpoint (../shared/contracts/agents.md, "Tools").
type agentTool struct {
	name, title, desc string
	// route is the REST endpoint under /api/v1, with {placeholders} for
	// the path parameters.
	route   string
	params  []*agentParam
	summary func(doc map[string]any) string
}

// param finds a parameter by name.
func (t *agentTool) param(name string) *agentParam {
	for _, p := range t.params {
		if p.name == name {
			return p
		}
	}
	return nil
}

// Descriptions shared by several tools.
const (
	descProjectID = "The project's id, a UUID as list_projects gives it (slugs are refused)."
	descCursor    = "Next page: meta.nextCursor of the previous answer, with the same other parameters. Pages hold 50."
	descCompare   = `"previous" adds the window before, of the same length, for comparison.`
	descFromTo    = "a day YYYY-MM-DD in the project's time zone; only with period custom (required then)"
)

func periodParam(presets []string, custom bool, def string) *agentParam {
	enum := append([]string(nil), presets...)
	if custom {
		enum = append(enum, "custom")
	}
	d := "The period read, ending now: " + strings.Join(presets, ", ")
	if custom {
		d += ", or custom with from and to"
	}
	d += ". Default " + def + "."
	return &agentParam{name: "period", query: "period", kind: kindString, enum: enum, desc: d}
}

func fromParam() *agentParam {
	return &agentParam{name: "from", query: "from", kind: kindString, pattern: `^[0-9]{4}-[0-9]{2}-[0-9]{2}$`,
		desc: "First day of a custom period: " + descFromTo + "."}
}

func toParam() *agentParam {
	return &agentParam{name: "to", query: "to", kind: kindString, pattern: `^[0-9]{4}-[0-9]{2}-[0-9]{2}$`,
		desc: "Last day (inclusive) of a custom period: " + descFromTo + "; a day after today reads up to today."}
}

func projectParam() *agentParam {
	return &agentParam{name: "project_id", path: true, kind: kindString, required: true, desc: descProjectID}
}

func cursorParam() *agentParam {
	return &agentParam{name: "cursor", query: "cursor", kind: kindString, desc: descCursor}
}

func compareParam() *agentParam {
	return &agentParam{name: "compare", query: "compare", kind: kindCompare, enum: []string{"previous"}, desc: descCompare}
}

// reportPeriod is the period, from and to of the report endpoints.
func reportPeriod() []*agentParam {
	return []*agentParam{periodParam(Presets, true, "30d"), fromParam(), toParam()}
}

// agentTools is the contract's tool table, in its order.
func agentTools() []*agentTool {
	eventFilters := &agentParam{name: "filters", kind: kindFilters, max: MaxEventFilters, maxValue: maxEventValue,
		fields: eventFieldDocs(), desc: "Event filters, all of which must hold: a list of {field, op, value}."}
	personFilters := &agentParam{name: "filters", kind: kindFilters, max: MaxPersonFilters, maxValue: maxPersonValue,
		fields: personFieldDocs(), desc: "Person filters, all of which must hold: a list of {field, op, value}."}
	return []*agentTool{
		{name: "list_projects", title: "List projects", route: "/projects",
			desc:    "Every project of every organization you belong to, archived included, oldest first, 50 per page (GET /projects).",
			params:  []*agentParam{cursorParam()},
			summary: summarizeProjects},
		{name: "get_project", title: "Get a project", route: "/projects/{project_id}",
			desc: "One project: name, time zone, reporting currency, plan and the history it keeps (GET /projects/{project_id}).",
			params: []*agentParam{projectParam(),
				{name: "fields", query: "fields[projects]", kind: kindList, join: ",",
					desc: "Sparse fieldset: the attributes to keep (name, slug, timezone, reportingCurrency, archived, createdAt, organization, plan, retentionDays). Default all."}},
			summary: summarizeProject},
		{name: "overview", title: "Overview report", route: "/projects/{project_id}/overview",
			desc: "The dashboard's key numbers of a period with the previous period's values, and the trend (GET /projects/{project_id}/overview). " +
				"With consent: people, newPeople, known, buyers, revenue; a consentless project: visits, pageviews, conversions, conversionRate.",
			params:  append(append([]*agentParam{projectParam()}, reportPeriod()...), compareParam(), eventFilters),
			summary: summarizeOverview},
		{name: "list_people", title: "List people", route: "/projects/{project_id}/people",
			desc:   "People active in the period, 50 per page, sorted descending (GET /projects/{project_id}/people).",
			params: append(append([]*agentParam{projectParam()}, reportPeriod()...), peopleParams(personFilters)...),
			summary: func(doc map[string]any) string {
				return summarizeList(doc, "people", func(r map[string]any) string {
					return orText(attr(r, "name"), str(r["id"])) + " (" + str(attr(r, "stage")) + ", " + num(attr(r, "visits")) + " visits)"
				})
			}},
		{name: "get_person", title: "Get a person", route: "/projects/{project_id}/people/{ref}",
			desc: "One person's profile over the retained history (GET /projects/{project_id}/people/{ref}).",
			params: []*agentParam{projectParam(),
				{name: "ref", path: true, kind: kindString, required: true, desc: "The person's ref, a UUID (data[].id of list_people)."},
				{name: "fields", query: "fields[people]", kind: kindList, join: ",",
					desc: "Sparse fieldset: the attributes to keep (for example name, stage, visits, revenue). Default all."}},
			summary: summarizePerson},
		{name: "list_events", title: "List raw events", route: "/projects/{project_id}/events",
			desc: "Raw events, newest first, 50 per page (GET /projects/{project_id}/events). The period ends now; no custom period.",
			params: []*agentParam{projectParam(), periodParam([]string{"1h", "24h", "7d"}, false, "24h"),
				eventFilters, cursorParam()},
			summary: func(doc map[string]any) string {
				return summarizeList(doc, "events", func(r map[string]any) string {
					return str(attr(r, "name")) + " at " + str(attr(r, "occurredAt"))
				})
			}},
		{name: "list_goals", title: "List goals", route: "/projects/{project_id}/goals",
			desc:    "Active goals with their conversions, people and rate in the period (GET /projects/{project_id}/goals).",
			params:  append([]*agentParam{projectParam()}, reportPeriod()...),
			summary: summarizeGoals},
		{name: "goal_report", title: "Goal report", route: "/projects/{project_id}/goals/{goal_id}",
			desc: "One goal's conversions, people, rate, revenue and trends (GET /projects/{project_id}/goals/{goal_id}).",
			params: append(append([]*agentParam{projectParam(),
				{name: "goal_id", path: true, kind: kindString, required: true, desc: "The goal's id (data[].id of list_goals)."}},
				reportPeriod()...), compareParam()),
			summary: summarizeGoalReport},
		{name: "funnel", title: "Funnel report", route: "/projects/{project_id}/funnel",
			desc: "How many people (or visits) went through 2 to 6 steps in order (GET /projects/{project_id}/funnel). " +
				"Pass a saved funnel's id, or steps.",
			params: append([]*agentParam{projectParam(),
				{name: "funnel", query: "funnel", kind: kindString,
					desc: "A saved funnel's id: takes its steps, window and basis (then steps, window and basis are refused)."},
				{name: "steps", query: "steps[]", kind: kindList, min: funnelMinSteps, maxItems: funnelMaxSteps,
					desc: "2 to 6 action or goal ids of the project, in order (goal ids come from list_goals). Required without funnel."},
				{name: "window", query: "window", kind: kindInteger, intEnum: funnelWindows,
					desc: "Days the last step may follow the first: 1, 7 (default), 14 or 30."},
				{name: "basis", query: "basis", kind: kindString, enum: []string{"person", "visit"},
					desc: "Count people (person, default) or visits (visit)."}},
				reportPeriod()...),
			summary: summarizeFunnel},
		{name: "channels", title: "Acquisition channels", route: "/projects/{project_id}/acquisition/channels",
			desc: "Visits and people per channel, people credited by first or last touch (GET /projects/{project_id}/acquisition/channels).",
			params: append(append([]*agentParam{projectParam(),
				{name: "touch", query: "touch", kind: kindString, enum: []string{"first", "last"},
					desc: "Credit each person to the channel of their first (default) or last touch."}},
				reportPeriod()...), eventFilters),
			summary: summarizeChannels},
		{name: "search_summary", title: "Search summary", route: "/projects/{project_id}/acquisition/search",
			desc: "Imported search-engine clicks, impressions, click-through rate and position, with the previous period (GET /projects/{project_id}/acquisition/search).",
			params: append(append([]*agentParam{projectParam(),
				{name: "engine", query: "engine", kind: kindString, enum: []string{"engine_a", "engine_b"},
					desc: "The search engine: engine_a (default) or engine_b; their numbers are not to be added."}},
				reportPeriod()...), compareParam()),
			summary: summarizeSearch},
		{name: "ads_summary", title: "Ads summary", route: "/projects/{project_id}/acquisition/ads",
			desc:    "Imported ad spend, clicks, impressions, and return on ad spend from paid visits (GET /projects/{project_id}/acquisition/ads).",
			params:  append([]*agentParam{projectParam()}, reportPeriod()...),
			summary: summarizeAds},
	}
}

// peopleParams are the people list's own parameters.
func peopleParams(filters *agentParam) []*agentParam {
	return []*agentParam{
		{name: "view", query: "view", kind: kindString, enum: peopleViews,
			desc: "everyone (default), customers (bought), known (signed in) or high-intent (showed intent, not bought)."},
		{name: "sort", query: "sort", kind: kindString, enum: peopleSorts,
			desc: "last_seen (default), first_seen, value (revenue in the reporting currency) or visits; always descending."},
		{name: "window", query: "window", kind: kindString, enum: []string{"all"},
			desc: "all lists everyone in the retained history instead of the period (slower)."},
		{name: "new", query: "new", kind: kindFlag,
			desc: "true keeps only people first seen in the period."},
		{name: "segment", query: "segment", kind: kindString, desc: "A saved segment's id: keeps its members."},
		filters,
		cursorParam(),
	}
}

// mcpTool is the tool as the SDK lists it.
func (t *agentTool) mcpTool() (*mcp.Tool, error) {
	props := map[string]any{}
	var required []string
	for _, p := range t.params {
		props[p.name] = p.schema()
		if p.required {
			required = append(required, p.name)
		}
	}
	in := map[string]any{"type": "object", "properties": props}
	if required != nil {
		in["required"] = required
	}
	return &mcp.Tool{
		Name: t.name, Title: t.title, Description: t.desc,
		InputSchema:  in,
		OutputSchema: outputSchema,
		Annotations:  &mcp.ToolAnnotations{Title: t.title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)},
	}, nil
}

// outputSchema is every tool's: the REST answer's JSON:API document.
var outputSchema = map[string]any{
	"type":        "object",
	"description": "The REST answer's JSON:API document: data (a resource or a list), meta, links; on a refusal, errors.",
	"properties": map[string]any{
		"data":   map[string]any{"type": []string{"object", "array"}},
		"meta":   map[string]any{"type": "object"},
		"links":  map[string]any{"type": "object"},
		"errors": map[string]any{"type": "array"},
	},
}

// passThrough holds every query parameter of any tool by argument name
// (the first tool's form of it), for arguments a tool does not list.
var passThrough = func() map[string]*agentParam {
	m := map[string]*agentParam{}
	for _, t := range agentTools() {
		for _, p := range t.params {
			if !p.path && m[p.name] == nil {
				m[p.name] = p
			}
		}
	}
	m["compare"] = compareParam()
	return m
}()
