// Package api serves the reporting API (/api/v1, JSON:API), the
// agent-facing server beside it (/mcp: the same reporting endpoints as
// Model Context Protocol tools, with a budget of its own), the dashboard
// (api/dashboard, built only on the public API) and the admin API
// (/admin/v1, with /metrics).
//
// It owns reading: it imports storage (the catalog, the object store) and
// rollups (the reader, and rollups/tables for the tables' contract), never
// processor or ingest; a process that only reports never builds the write
// side.
//
// A map of the package, by file:
//
//   - Serving: reporting.go (Reporting: config, routes, authentication of
//     reporting calls), jsonapi.go (documents, errors, moments),
//     access.go (the access log of calls), ratelimit.go, tokens.go and
//     secret.go (app tokens sealed with the master secret), cursor.go
//     (opaque list cursors), projects.go (projects and paging).
//   - Asking: periods.go (periods and windows, pure functions of the
//     clock and the time zone), filters.go (the filters query, parsed and
//     checked).
//   - The data layer: data.go (projectData, one consistent snapshot of a
//     project's tables, and its scans), data_rows.go (the rows kept in
//     memory, refs and orders), data_decode.go (rows decoded from scanned
//     records through rollups/tables), data_cache.go (the per-project,
//     per-partition cache, rebuilt when a partition's files change),
//     data_match.go (the one event-filter matcher of every endpoint),
//     activity.go (who is active when: a per-day index of the people
//     seen).
//   - Reports, one file each: overview.go, events.go (the raw events
//     list), channels.go, goals.go, funnel.go, people.go, search.go and
//     ads.go (the imported numbers).
//   - Imports of search-console and ads numbers: imports.go (the types
//     and faults), import_parse.go (ParseImport), import_store.go
//     (Imports: merged into one stored object per project and source).
//   - Agents: agent.go (the /mcp server), agent_tools.go (the tools and
//     their REST endpoints), agent_params.go, agent_call.go (a tool call
//     answered by the REST handlers themselves), agent_summary.go.
//   - Operations: admin.go (the admin API: catalog, provisioning, imports,
//     replay jobs, GeoIP reload), jobs.go (long jobs and their states).
//
// docs/reporting-api.md fixes what the specification leaves open;
// docs/agents.md, docs/imports.md and docs/operations.md describe the rest.
package api
