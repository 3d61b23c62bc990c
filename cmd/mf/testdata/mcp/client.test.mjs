// The agent-facing server of a running mf, driven by the official MCP
// TypeScript client. Started by cmd/mf/mcp_e2e_test.go, which seeds the
// golden dataset and passes, in the environment:
//   MF_TEST_API     the reporting listener's base URL (http://host:port)
//   MF_TEST_ADMIN   the admin listener's base URL
//   MF_TEST_CASES   the cases file with its placeholders expanded
//   MF_TEST_KEYS    JSON {user: API key}
//   MF_TEST_ADA     Ada's user id
//   MF_TEST_BIN     the mf binary (for the stdio bridge)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const api = process.env.MF_TEST_API;
const admin = process.env.MF_TEST_ADMIN;
const keys = JSON.parse(process.env.MF_TEST_KEYS);
const { cases } = JSON.parse(readFileSync(process.env.MF_TEST_CASES, 'utf8'));

const contractTools = ['list_projects', 'get_project', 'overview', 'list_people', 'get_person', 'list_events',
  'list_goals', 'goal_report', 'funnel', 'channels', 'search_summary', 'ads_summary'];

async function connect(key) {
  const client = new Client({ name: 'mf-e2e', version: '1.0.0' });
  const headers = key === undefined ? {} : { Authorization: `Bearer ${key}` };
  await client.connect(new StreamableHTTPClientTransport(new URL(`${api}/mcp`), { requestInit: { headers } }));
  return client;
}

async function rest(path, key) {
  const resp = await fetch(`${api}/api/v1${path}`, { headers: { Authorization: `Bearer ${key}` } });
  return { status: resp.status, headers: resp.headers, doc: await resp.json() };
}

const text = (res) => res.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

// sameRollingPeriod: a rolling period (1h, 24h, 7d, ... up to now) is cut
// when each request is answered, so a tool call and the REST call made
// after it may fall in different seconds. When the two periods are the
// same preset and their bounds differ by at most two seconds, the tool's
// bounds are set to the REST answer's before the documents are compared;
// any other difference still fails.
function sameRollingPeriod(got, want) {
  const g = got?.meta?.period, w = want?.meta?.period;
  if (!g || !w || g.preset !== w.preset || !w.preset || w.preset === 'custom') return got;
  for (const k of ['from', 'to']) {
    if (Math.abs(Date.parse(g[k]) - Date.parse(w[k])) > 2000) return got;
  }
  return { ...got, meta: { ...got.meta, period: { ...g, from: w.from, to: w.to } } };
}

test('initialize and list the tools with their schemas', async () => {
  const client = await connect(keys.ada);
  assert.equal(client.getServerVersion().name, 'mf');
  assert.ok(client.getServerCapabilities().tools, 'the server offers tools');
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [...contractTools].sort());
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  for (const t of tools) {
    assert.equal(t.inputSchema.type, 'object', t.name);
    assert.ok(t.description, `${t.name} has a description`);
    assert.equal(t.annotations?.readOnlyHint, true, `${t.name} is read-only`);
    for (const [name, p] of Object.entries(t.inputSchema.properties ?? {})) {
      assert.ok(p.description, `${t.name}.${name} has a description`);
    }
  }
  // Periods, filter fields and operators, funnel steps: said in the schema.
  const ov = byName.overview.inputSchema;
  assert.deepEqual(ov.required, ['project_id']);
  assert.deepEqual(ov.properties.period.enum, ['1h', '24h', '7d', '30d', '90d', '12m', 'custom']);
  assert.ok(ov.properties.filters.items.properties.op.enum.includes('starts_with'));
  assert.match(ov.properties.filters.description, /page_path/);
  assert.match(byName.list_people.inputSchema.properties.filters.description, /first_channel/);
  assert.deepEqual(byName.list_events.inputSchema.properties.period.enum, ['1h', '24h', '7d']);
  const steps = byName.funnel.inputSchema.properties.steps;
  assert.equal(steps.type, 'array');
  assert.equal(steps.minItems, 2);
  assert.equal(steps.maxItems, 6);
  for (const t of contractTools.filter((n) => n !== 'list_projects')) {
    assert.ok(byName[t].inputSchema.required.includes('project_id'), `${t} requires project_id`);
  }
  await client.close();
});

test('each tool answers the REST document for the same parameters', async () => {
  const client = await connect(keys.ada);
  for (const c of cases) {
    const res = await client.callTool({ name: c.tool, arguments: c.args });
    const want = await rest(c.rest, keys.ada);
    const what = `${c.tool} ${JSON.stringify(c.args)}`;
    if (c.refused) {
      assert.ok(want.status >= 400, `${what}: REST answered ${want.status}`);
      assert.equal(res.isError, true, `${what}: not an error: ${text(res)}`);
      assert.ok(text(res).includes(`parameter ${c.refused} refused: `), `${what}: ${text(res)}`);
      assert.match(text(res), /accepts/, what);
    } else {
      assert.equal(want.status, 200, `${what}: REST answered ${want.status}`);
      assert.notEqual(res.isError, true, `${what}: ${text(res)}`);
      assert.ok(res.content[0].type === 'text' && res.content[0].text.length > 0, `${what}: no summary`);
    }
    assert.deepEqual(sameRollingPeriod(res.structuredContent, want.doc), want.doc, what);
    if (c.follow) {
      const cursor = want.doc.meta.nextCursor;
      assert.ok(cursor, `${what}: no second page to follow`);
      const next = await client.callTool({ name: c.tool, arguments: { ...c.args, cursor } });
      const wantNext = await rest(`${c.rest}&cursor=${encodeURIComponent(cursor)}`, keys.ada);
      assert.equal(wantNext.status, 200);
      assert.deepEqual(sameRollingPeriod(next.structuredContent, wantNext.doc), wantNext.doc, `${what} page 2`);
    }
  }
  // The overview's summary quotes the key numbers with their change.
  const ov = await client.callTool({ name: 'overview', arguments: { project_id: cases[3].args.project_id, period: '7d' } });
  for (const n of ov.structuredContent.data.attributes.numbers) {
    assert.ok(ov.content[0].text.includes(n.key), `overview summary names ${n.key}: ${ov.content[0].text}`);
  }
  assert.match(ov.content[0].text, /previous/);
  await client.close();
});

test('every answer carries the rate headers of the agent budget', async () => {
  const resp = await fetch(`${api}/mcp`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${keys.olga}`, 'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': '2025-06-18',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_projects', arguments: {} } }),
  });
  assert.equal(resp.status, 200);
  assert.equal(resp.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(resp.headers.get('access-control-allow-origin'), null, 'no CORS, as on REST');
  assert.equal(resp.headers.get('ratelimit-policy'), '"agent";q=120;w=60');
  assert.match(resp.headers.get('ratelimit'), /^"agent";r=119;t=\d+$/);
  const body = await resp.json();
  assert.equal(body.result.structuredContent.data.length, 1, 'Olga sees her one project');
  const get = await fetch(`${api}/mcp`, { headers: { Authorization: `Bearer ${keys.olga}`, Accept: 'text/event-stream' } });
  assert.equal(get.status, 405, 'no server-to-client stream');
  assert.match(get.headers.get('ratelimit'), /^"agent";r=119;t=\d+$/, 'a GET is not a tool call');
});

test('a missing or refused credential gets 401 before any MCP message', async () => {
  for (const key of [undefined, 'mf_pat_nobody00_' + 'x'.repeat(40), keys.revoked]) {
    await assert.rejects(connect(key), (err) => err.code === 401, `credential ${key}`);
  }
  const resp = await fetch(`${api}/mcp`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
    body: 'this is not even JSON',
  });
  assert.equal(resp.status, 401);
  assert.ok(resp.headers.get('www-authenticate'));
  assert.ok(resp.headers.get('ratelimit'));
});

test('a bad parameter is a tool error naming it', async () => {
  const client = await connect(keys.ada);
  const res = await client.callTool({ name: 'list_people', arguments: { project_id: cases[1].args.project_id, sort: 'name' } });
  assert.equal(res.isError, true);
  assert.match(text(res), /^parameter sort refused: .*last_seen/);
  const shape = await client.callTool({ name: 'funnel', arguments: { project_id: cases[1].args.project_id, steps: { a: 1 } } });
  assert.equal(shape.isError, true);
  assert.match(text(shape), /parameter steps refused: .*list/);
  await client.close();
});

test('the REST budget and the agent budget are apart', async () => {
  // Cy spends the REST budget: the agent budget is untouched.
  let status = 0;
  for (let i = 0; i < 121; i++) status = (await rest('/projects', keys.cy)).status;
  assert.equal(status, 429, 'request 121 of a minute on REST');
  const cy = await connect(keys.cy);
  const res = await cy.callTool({ name: 'list_projects', arguments: {} });
  assert.notEqual(res.isError, true, text(res));
  await cy.close();

  // Bea spends the agent budget: REST is untouched.
  const bea = await connect(keys.bea);
  for (let i = 1; i <= 120; i++) {
    const r = await bea.callTool({ name: 'list_projects', arguments: {} }).catch((err) => {
      throw new Error(`tool call ${i} of 120: ${err.message}`);
    });
    assert.notEqual(r.isError, true, `call ${i}: ${text(r)}`);
  }
  await assert.rejects(bea.callTool({ name: 'list_projects', arguments: {} }), (err) => err.code === 429);
  const raw = await fetch(`${api}/mcp`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${keys.bea}`, 'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': '2025-06-18',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'list_projects', arguments: {} } }),
  });
  assert.equal(raw.status, 429);
  assert.ok(Number(raw.headers.get('retry-after')) >= 1);
  assert.equal(raw.headers.get('ratelimit-policy'), '"agent";q=120;w=60');
  assert.match(raw.headers.get('ratelimit'), /^"agent";r=0;t=\d+$/);
  // Listing is not a tool call: it still answers.
  assert.equal((await bea.listTools()).tools.length, contractTools.length);
  await bea.close();
  const after = await rest('/projects', keys.bea);
  assert.equal(after.status, 200);
  assert.equal(after.headers.get('ratelimit-policy'), '"person";q=120;w=60');
});

test('recent access shows the agent calls', async () => {
  const resp = await fetch(`${admin}/admin/v1/users/${process.env.MF_TEST_ADA}/access`);
  assert.equal(resp.status, 200);
  const { access } = await resp.json();
  const agent = access.filter((r) => r.via === 'mcp');
  const tools = new Set(agent.map((r) => r.tool));
  for (const t of ['overview', 'funnel', 'get_person', 'list_events']) assert.ok(tools.has(t), `an access record of ${t}`);
  const ov = agent.find((r) => r.tool === 'overview' && r.status === 200);
  assert.equal(ov.endpoint, 'GET /projects/{project_id}/overview');
  assert.ok(agent.some((r) => r.tool === 'goal_report' && r.status === 404 && r.outcome === 'goal_not_found'));
  assert.ok(agent.some((r) => r.endpoint === 'POST /mcp' && r.outcome === 'key_revoked'));
  assert.ok(access.some((r) => !r.via), 'REST calls are recorded without via');
  const raw = JSON.stringify(access);
  assert.ok(!raw.includes('?') && !raw.includes('period='), 'no query parameter is stored');
  assert.ok(!raw.includes(cases.find((c) => c.tool === 'get_person').args.ref), 'no person ref is stored');
});

test('the stdio bridge lists the same tools and answers a call', async () => {
  const http = await connect(keys.ada);
  const { tools: httpTools } = await http.listTools();
  await http.close();
  const transport = new StdioClientTransport({
    command: process.env.MF_TEST_BIN,
    args: ['mcp', '--api-url', api],
    env: { MF_API_KEY: keys.ada, PATH: process.env.PATH ?? '' },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (b) => { stderr += b; });
  const client = new Client({ name: 'mf-e2e-stdio', version: '1.0.0' });
  await client.connect(transport);
  const { tools } = await client.listTools();
  assert.deepEqual(tools, httpTools, stderr);
  const c = cases.find((x) => x.tool === 'overview' && !x.refused);
  const res = await client.callTool({ name: c.tool, arguments: c.args });
  const want = await rest(c.rest, keys.ada);
  assert.equal(want.status, 200);
  assert.deepEqual(sameRollingPeriod(res.structuredContent, want.doc), want.doc);
  assert.ok(res.content[0].text.length > 0);
  const bad = await client.callTool({ name: 'overview', arguments: { ...c.args, period: '2d' } });
  assert.equal(bad.isError, true);
  assert.match(text(bad), /parameter period refused/);
  await client.close();
});
