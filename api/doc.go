// Package api serves the reporting API (/api/v1, JSON:API), the
// agent-facing server beside it (/mcp: the same reporting endpoints as
// Model Context Protocol tools, with a budget of its own; agent*.go) and
// the admin API (/admin/v1).
package api
