// Reads the processor's tables of one project with DuckDB: given on stdin a
// JSON object {"files": {table: [parquet file paths]}, "keys": {table:
// [key columns]}}, prints for each table its columns with DuckDB's types,
// its row count and a few sums that the Go side computes independently.
// A keyed table is read as docs/rollups.md ("Keyed tables") says: per key
// the row with the highest rev, unless it is deleted. Used by
// cmd/mf/process_e2e_test.go:
//
//   node tables.mjs < input.json
import { DuckDBInstance } from '@duckdb/node-api';
import { readFileSync } from 'node:fs';

const { files, keys } = JSON.parse(readFileSync(0, 'utf8'));
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
  let src = 'read_parquet([' + list.map((f) => "'" + f.replaceAll("'", "''") + "'").join(',') + '], union_by_name = true)';
  if (keys[table]) {
    src = `(SELECT * FROM ${src} QUALIFY row_number() OVER (PARTITION BY ${keys[table].join(', ')}
      ORDER BY coalesce(rev, 0) DESC) = 1 AND NOT coalesce(deleted, false))`;
  }
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
