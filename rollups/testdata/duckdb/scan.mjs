// Looks for a person's values in Parquet files with DuckDB: given on stdin
// a JSON object {"files": [parquet file paths], "needles": [strings],
// "refs": [32 lowercase hex digits]}, it reads every file and counts the
// rows where any text column contains a needle, the row as text contains
// one (nested values too), or any binary or UUID column equals a ref.
// Prints {"files": n, "rows": rows read, "hits": [{"file", "column",
// "value", "rows"}], "gone": files deleted before they were read}. Used by cmd/mf/erasure_e2e_test.go (docs/privacy.md,
// "Checking it yourself with DuckDB"):
//
//   node scan.mjs < input.json
import { DuckDBInstance } from '@duckdb/node-api';
import { existsSync, readFileSync } from 'node:fs';

const input = JSON.parse(readFileSync(0, 'utf8'));
const files = input.files ?? [];
const needles = input.needles ?? [];
const refs = input.refs ?? [];
const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();

async function rows(sql) {
  const reader = await conn.runAndReadAll(sql);
  return reader.getRowObjectsJson();
}
const lit = (s) => "'" + String(s).replaceAll("'", "''") + "'";
const ident = (s) => '"' + String(s).replaceAll('"', '""') + '"';

const out = { files: 0, rows: 0, hits: [] };
for (const file of files) {
  try {
    await scan(file);
  } catch (err) {
    // A file deleted since it was listed (a collection running beside
    // the scan) is not a finding; any other failure is.
    if (existsSync(file)) {
      throw err;
    }
    out.gone = (out.gone ?? 0) + 1;
  }
}

async function scan(file) {
  const src = `read_parquet(${lit(file)})`;
  const cols = await rows(`SELECT column_name AS name, column_type AS type FROM (DESCRIBE SELECT * FROM ${src})`);
  const total = Number((await rows(`SELECT CAST(count(*) AS VARCHAR) AS n FROM ${src}`))[0].n);
  const checks = [];
  for (const n of needles) {
    checks.push({ column: '*', value: n, pred: `contains(CAST(t AS VARCHAR), ${lit(n)})` });
    for (const c of cols.filter((c) => c.type === 'VARCHAR')) {
      checks.push({ column: c.name, value: n, pred: `contains(${ident(c.name)}, ${lit(n)})` });
    }
  }
  for (const r of refs) {
    for (const c of cols) {
      if (c.type === 'BLOB') {
        checks.push({ column: c.name, value: r, pred: `lower(hex(${ident(c.name)})) = ${lit(r)}` });
      } else if (c.type === 'UUID') {
        checks.push({ column: c.name, value: r, pred: `replace(CAST(${ident(c.name)} AS VARCHAR), '-', '') = ${lit(r)}` });
      }
    }
  }
  const count = async (pred) => Number((await rows(`SELECT CAST(count(*) AS VARCHAR) AS n FROM ${src} t WHERE ${pred}`))[0].n);
  // One pass over the file for all checks; the checks one by one only to
  // name what was found.
  if (checks.length > 0 && (await count(checks.map((c) => `(${c.pred})`).join(' OR '))) > 0) {
    for (const ch of checks) {
      const hits = await count(ch.pred);
      if (hits > 0) {
        out.hits.push({ file, column: ch.column, value: ch.value, rows: hits });
      }
    }
  }
  out.files++;
  out.rows += total;
}
conn.closeSync();
instance.closeSync();
process.stdout.write(JSON.stringify(out) + '\n');
