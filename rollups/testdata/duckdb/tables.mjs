// Reads the processor's tables of one project with DuckDB: given on stdin a
// JSON object {table: [parquet file paths]}, prints for each table its
// columns with DuckDB's types, its row count and a few sums that the Go
// side computes independently. Used by cmd/mf/process_e2e_test.go:
//
//   node tables.mjs < files.json
import { DuckDBInstance } from '@duckdb/node-api';
import { readFileSync } from 'node:fs';

const files = JSON.parse(readFileSync(0, 'utf8'));
const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();

async function rows(sql) {
  const reader = await conn.runAndReadAll(sql);
  return reader.getRowObjectsJson();
}

const sums = {
  events: `CAST(count(*) FILTER (WHERE name = '$pageview') AS VARCHAR) AS pageviews,
           CAST(count(DISTINCT id) AS VARCHAR) AS distinct_ids,
           CAST(count(DISTINCT coalesce(visit, session_id)) FILTER (WHERE channel IS NOT NULL) AS VARCHAR) AS visits`,
  visits: `CAST(sum(pageviews) AS VARCHAR) AS pageviews, CAST(sum(events) AS VARCHAR) AS events`,
  people: `CAST(sum(orders) AS VARCHAR) AS orders, CAST(sum(value) AS VARCHAR) AS value,
           CAST(count(*) FILTER (WHERE known) AS VARCHAR) AS known`,
};

const out = {};
for (const [table, list] of Object.entries(files)) {
  const src = 'read_parquet([' + list.map((f) => "'" + f.replaceAll("'", "''") + "'").join(',') + '], union_by_name = true)';
  const t = {
    columns: await rows(`SELECT column_name AS name, column_type AS type FROM (DESCRIBE SELECT * FROM ${src})`),
    count: (await rows(`SELECT CAST(count(*) AS VARCHAR) AS n FROM ${src}`))[0].n,
  };
  if (sums[table]) {
    t.sums = (await rows(`SELECT ${sums[table]} FROM ${src}`))[0];
  }
  out[table] = t;
}
conn.closeSync();
instance.closeSync();
process.stdout.write(JSON.stringify(out) + '\n');
