// Answers the report bench's four questions with DuckDB over the
// processor's Parquet files, timing each (warm-up calls, then N timed
// ones, in this process) and printing, as one JSON object, the times in
// milliseconds and the last answer of each. Run by the bench tool
// (internal/bench/report, docs/bench-report.md):
//
//   node bench.mjs INPUT.json
//
// INPUT.json: {"files": {"people": [paths], "visits": [...], "conversions":
// [...], "identities": [...]}, "keys": {"people": ["ref"], ...}, "lo": ms,
// "hi": ms, "funnel": {"steps": [action ids], "windowMs": ms}, "warmup": 3,
// "n": 50, "only": [names]}. Keyed tables are read merged: per key the row
// with the highest rev, unless it is deleted (docs/rollups.md).
//
// The SQL follows the tables of docs/processor.md: the person of a unit is
// coalesce(identities.person, unit); visits.person and conversions.owner
// are null when they equal the unit.
import { readFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';

const inputPath = process.argv[2];
if (!inputPath) {
  console.error('usage: node bench.mjs INPUT.json');
  process.exit(2);
}
const input = JSON.parse(readFileSync(inputPath, 'utf8'));
const q = (s) => "'" + String(s).replaceAll("'", "''") + "'";
const list = (paths) => '[' + paths.map(q).join(', ') + ']';

const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
async function rows(sql) {
  const reader = await conn.runAndReadAll(sql);
  return reader.getRowObjectsJson();
}

for (const [table, paths] of Object.entries(input.files)) {
  if (paths.length === 0) {
    throw new Error(`no files for table ${table}`);
  }
  const key = (input.keys || {})[table];
  const src = `read_parquet(${list(paths)}, union_by_name = true)`;
  await rows(key
    ? `CREATE VIEW ${table} AS SELECT * FROM ${src} QUALIFY row_number() OVER (PARTITION BY ${key.join(', ')}
         ORDER BY coalesce(rev, 0) DESC) = 1 AND NOT coalesce(deleted, false)`
    : `CREATE VIEW ${table} AS SELECT * FROM ${src}`);
}

const ts = (ms) => `to_timestamp(${Number(ms)} / 1000.0)`;
const LO = ts(input.lo);
const HI = ts(input.hi);
const W = `to_milliseconds(${Number(input.funnel.windowMs)})`;

// The person a conversion counts for, and the purchases of the window.
const convPerson = 'coalesce(i.person, coalesce(c.owner, c.unit))';
const convJoin = 'conversions c LEFT JOIN identities i ON i.unit = coalesce(c.owner, c.unit)';
const buys = `SELECT ${convPerson} AS p, c.value, coalesce(c.currency, '') AS currency
  FROM ${convJoin} WHERE c.role = 'purchase' AND c."time" >= ${LO} AND c."time" < ${HI}`;
// People active in the window: an event in it. Their last event is at or
// after lo; with a window ending in the future (the bench's presets) that
// is also enough.
const active = `SELECT ref, known, first_seen, first_purchase, ft_channel FROM people
  WHERE last_seen >= ${LO} AND first_seen < ${HI}`;

function funnelSQL(steps) {
  const parts = [`c AS (SELECT ${convPerson} AS p, c.action AS a, c."time" AS t FROM ${convJoin}
    WHERE c.consented AND c.action IN (${steps.map(q).join(', ')})
      AND c."time" >= ${LO} AND c."time" < ${HI} + ${W})`,
    `s1 AS (SELECT DISTINCT p, t AS t1, t AS tk FROM c WHERE a = ${q(steps[0])} AND t < ${HI})`];
  for (let k = 2; k <= steps.length; k++) {
    parts.push(`s${k} AS (SELECT s.p, s.t1, min(c.t) AS tk FROM s${k - 1} s JOIN c
      ON c.p = s.p AND c.a = ${q(steps[k - 1])} AND c.t > s.tk AND c.t <= s.t1 + ${W}
      GROUP BY s.p, s.t1)`);
  }
  const cols = steps.map((_, i) => `CAST((SELECT count(DISTINCT p) FROM s${i + 1}) AS VARCHAR) AS step${i + 1}`);
  return `WITH ${parts.join(',\n')} SELECT ${cols.join(', ')}`;
}

const queries = {
  overview: `WITH act AS (${active}), buy AS (${buys})
    SELECT
      CAST((SELECT count(*) FROM act) AS VARCHAR) AS people,
      CAST((SELECT count(*) FROM act WHERE first_seen >= ${LO}) AS VARCHAR) AS "newPeople",
      CAST((SELECT count(*) FROM act WHERE known) AS VARCHAR) AS known,
      CAST((SELECT count(DISTINCT p) FROM buy) AS VARCHAR) AS buyers,
      (SELECT CAST(to_json(list({'currency': currency, 'micro': CAST(s AS VARCHAR)} ORDER BY currency)) AS VARCHAR)
         FROM (SELECT currency, sum(value) AS s FROM buy GROUP BY currency)) AS revenue`,
  funnel: funnelSQL(input.funnel.steps),
  channels: `WITH v AS (
      SELECT coalesce(channel, 'none') AS ch, count(*) AS n FROM visits
      WHERE start >= ${LO} AND start < ${HI} GROUP BY 1),
    act AS (${active}),
    buyer AS (SELECT DISTINCT p FROM (${buys})),
    pc AS (
      SELECT coalesce(a.ft_channel, 'none') AS ch, count(*) AS people,
        count(*) FILTER (WHERE a.first_seen >= ${LO}) AS new_people,
        count(b.p) AS buyers,
        count(*) FILTER (WHERE a.first_purchase < ${HI}) AS customers
      FROM act a LEFT JOIN buyer b ON b.p = a.ref GROUP BY 1)
    SELECT coalesce(v.ch, pc.ch) AS channel, CAST(coalesce(v.n, 0) AS VARCHAR) AS visits,
      CAST(coalesce(pc.people, 0) AS VARCHAR) AS people, CAST(coalesce(pc.new_people, 0) AS VARCHAR) AS "newPeople",
      CAST(coalesce(pc.buyers, 0) AS VARCHAR) AS buyers, CAST(coalesce(pc.customers, 0) AS VARCHAR) AS customers
    FROM v FULL OUTER JOIN pc ON v.ch = pc.ch ORDER BY 1`,
  people: `WITH page AS (
      SELECT ref, last_seen FROM people WHERE last_seen >= ${LO} AND first_seen < ${HI}
      ORDER BY last_seen DESC, ref ASC LIMIT 50),
    v AS (
      SELECT coalesce(i.person, coalesce(v.person, v.unit)) AS p FROM visits v
      LEFT JOIN identities i ON i.unit = coalesce(v.person, v.unit)
      WHERE v.start >= ${LO} AND v.start < ${HI})
    SELECT lower(hex(page.ref)) AS ref, CAST(epoch_ms(page.last_seen) AS VARCHAR) AS "lastSeen",
      CAST(count(v.p) AS VARCHAR) AS visits
    FROM page LEFT JOIN v ON v.p = page.ref
    GROUP BY page.ref, page.last_seen ORDER BY page.last_seen DESC, page.ref ASC`,
};

const out = { duckdb: (await rows('SELECT version() AS v'))[0].v, threads: (await rows("SELECT current_setting('threads') AS t"))[0].t, results: {} };
const only = input.only && input.only.length ? input.only : Object.keys(queries);
for (const name of only) {
  const sql = queries[name];
  if (!sql) {
    throw new Error(`unknown question ${name}`);
  }
  const ms = [];
  let last;
  for (let i = 0; i < input.warmup + input.n; i++) {
    const t0 = performance.now();
    last = await rows(sql);
    const t = performance.now() - t0;
    if (i >= input.warmup) {
      ms.push(t);
    }
  }
  out.results[name] = { ms, rows: last };
}
conn.closeSync();
instance.closeSync();
process.stdout.write(JSON.stringify(out) + '\n');
