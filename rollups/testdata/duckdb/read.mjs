// Reads a Parquet file of the rollups test table (pageviews) with DuckDB
// and prints, as one JSON object, every row (ordered by time, event_id)
// and a few aggregates, all as strings or numbers that JSON carries
// exactly. Used by rollups/duckdb_test.go:
//
//   node read.mjs FILE.parquet
import { DuckDBInstance } from '@duckdb/node-api';

const file = process.argv[2];
if (!file) {
  console.error('usage: node read.mjs FILE.parquet');
  process.exit(2);
}

const quoted = "'" + file.replaceAll("'", "''") + "'";
const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();

async function rows(sql) {
  const reader = await conn.runAndReadAll(sql);
  return reader.getRowObjectsJson();
}

const src = `read_parquet(${quoted})`;
const out = {
  schema: await rows(`SELECT column_name AS name, column_type AS type FROM (DESCRIBE SELECT * FROM ${src})`),
  rows: await rows(`
    SELECT
      CAST(epoch_ms("time") AS VARCHAR) AS time,
      lower(hex(event_id)) AS event_id,
      lower(hex(visit_id)) AS visit_id,
      lower(hex(person)) AS person,
      path, referrer, country, device, browser, channel,
      CAST(duration_ms AS VARCHAR) AS duration_ms,
      CAST(revenue_cents AS VARCHAR) AS revenue_cents,
      consented
    FROM ${src}
    ORDER BY "time", event_id`),
  aggregates: (await rows(`
    SELECT
      CAST(count(*) AS VARCHAR) AS rows,
      CAST(count(DISTINCT visit_id) AS VARCHAR) AS visits,
      CAST(count(DISTINCT person) AS VARCHAR) AS people,
      CAST(sum(revenue_cents) AS VARCHAR) AS revenue_cents,
      CAST(count(*) FILTER (WHERE consented) AS VARCHAR) AS consented,
      CAST(min(epoch_ms("time")) AS VARCHAR) AS first,
      CAST(max(epoch_ms("time")) AS VARCHAR) AS last
    FROM ${src}`))[0],
  byCountry: await rows(`
    SELECT country, CAST(count(*) AS VARCHAR) AS n
    FROM ${src} GROUP BY country ORDER BY country`),
};
conn.closeSync();
instance.closeSync();
process.stdout.write(JSON.stringify(out) + '\n');
