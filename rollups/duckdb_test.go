package rollups

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mfhq/mf/storage"
)

// duckDir holds the Node script that reads our Parquet files with DuckDB
// (npm @duckdb/node-api, pinned by package-lock.json).
const duckDir = "testdata/duckdb"

// duckDB runs testdata/duckdb/read.mjs on a Parquet file and decodes its
// answer. It installs the npm packages (npm install, which keeps to the lock
// file; npm 11's ci refuses this lock over other platforms' optional
// bindings) when they are missing, and
// fails with how to install Node when node or npm is.
func duckDB(t *testing.T, parquetPath string) duckAnswer {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed; the DuckDB check needs Node.js 18 or later with npm (Debian: apt-get install nodejs npm)", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(duckDir, "node_modules", "@duckdb", "node-api")); err != nil {
		cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund")
		cmd.Dir = duckDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install in %s failed: %v\n%s", duckDir, err, out)
		}
	}
	abs, err := filepath.Abs(parquetPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", "read.mjs", abs)
	cmd.Dir = duckDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node read.mjs failed: %v\n%s", err, stderr.String())
	}
	var ans duckAnswer
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatalf("cannot decode the DuckDB answer %q: %v", out, err)
	}
	return ans
}

type duckAnswer struct {
	Schema []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"schema"`
	Rows       []map[string]*json.RawMessage `json:"rows"`
	Aggregates map[string]*string            `json:"aggregates"`
	ByCountry  []struct {
		Country string `json:"country"`
		N       string `json:"n"`
	} `json:"byCountry"`
}

// TestDuckDBReadsOurFiles writes testdata/pageviews.jsonl as one data file
// and has DuckDB read it back: the same rows, column types and aggregates.
func TestDuckDBReadsOurFiles(t *testing.T) {
	ctx := t.Context()
	b := openBucket(t, storage.Config{Dir: t.TempDir()})
	s := newStore(t, b, func(c *Config) { c.RowGroupRows = 1024 })
	rows := readPageviews(t)
	// Enough rows for several row groups: the test rows, then generated
	// ones.
	rows = append(rows, genPageviews(9, mustUTCDay(t, "2026-03-29"), 3000)...)
	f := writeRows(t, s, testProject, "2026-03-29", rows)
	if f.RowGroups < 3 {
		t.Fatalf("%d row groups; want several", f.RowGroups)
	}
	data, _, err := storage.ReadAll(ctx, b, s.layout.file(testProject, f.Ref()))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pageviews.parquet")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ans := duckDB(t, path)

	wantTypes := map[string]string{
		"time": "TIMESTAMP WITH TIME ZONE", "event_id": "BLOB", "visit_id": "BLOB", "person": "BLOB",
		"path": "VARCHAR", "referrer": "VARCHAR", "country": "VARCHAR", "device": "VARCHAR",
		"browser": "VARCHAR", "channel": "VARCHAR", "duration_ms": "INTEGER", "revenue_cents": "BIGINT",
		"consented": "BOOLEAN",
	}
	if len(ans.Schema) != len(wantTypes) {
		t.Fatalf("DuckDB sees columns %v", ans.Schema)
	}
	for i, c := range ans.Schema {
		if c.Name != pageviewSchema.Field(i).Name || wantTypes[c.Name] != c.Type {
			t.Errorf("DuckDB column %d: %s %s; want %s %s", i, c.Name, c.Type, pageviewSchema.Field(i).Name, wantTypes[pageviewSchema.Field(i).Name])
		}
	}

	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, pageview.less)
	if len(ans.Rows) != len(sorted) {
		t.Fatalf("DuckDB reads %d rows, want %d", len(ans.Rows), len(sorted))
	}
	for i, p := range sorted {
		want := map[string]any{
			"time": strconv.FormatInt(p.Time, 10), "event_id": p.EventID, "visit_id": p.VisitID, "person": p.Person,
			"path": p.Path, "referrer": p.Referrer, "country": p.Country, "device": p.Device, "browser": p.Browser,
			"channel": p.Channel, "duration_ms": optString(p.DurationMS), "revenue_cents": optString(p.RevenueCents),
			"consented": p.Consented,
		}
		for col, w := range want {
			wj, _ := json.Marshal(w)
			var gj []byte = []byte("null")
			if v := ans.Rows[i][col]; v != nil {
				gj = *v
			}
			if !bytes.Equal(gj, wj) {
				t.Fatalf("row %d column %s: DuckDB reads %s, want %s", i, col, gj, wj)
			}
		}
	}

	visits, people := map[string]bool{}, map[string]bool{}
	var revenue, consented int64
	countries := map[string]int{}
	for _, p := range rows {
		if p.VisitID != nil {
			visits[*p.VisitID] = true
		}
		if p.Person != nil {
			people[*p.Person] = true
		}
		if p.RevenueCents != nil {
			revenue += *p.RevenueCents
		}
		if p.Consented {
			consented++
		}
		countries[p.Country]++
	}
	wantAgg := map[string]string{
		"rows": strconv.Itoa(len(rows)), "visits": strconv.Itoa(len(visits)), "people": strconv.Itoa(len(people)),
		"revenue_cents": strconv.FormatInt(revenue, 10), "consented": strconv.FormatInt(consented, 10),
		"first": strconv.FormatInt(sorted[0].Time, 10), "last": strconv.FormatInt(sorted[len(sorted)-1].Time, 10),
	}
	for k, w := range wantAgg {
		if g := ans.Aggregates[k]; g == nil || *g != w {
			t.Errorf("DuckDB aggregate %s = %v, want %s", k, g, w)
		}
	}
	if len(ans.ByCountry) != len(countries) {
		t.Fatalf("DuckDB groups %d countries, want %d", len(ans.ByCountry), len(countries))
	}
	for _, c := range ans.ByCountry {
		if strconv.Itoa(countries[c.Country]) != c.N {
			t.Errorf("DuckDB counts %s rows of country %q, want %d", c.N, c.Country, countries[c.Country])
		}
	}
}

func optString[T int32 | int64](v *T) *string {
	if v == nil {
		return nil
	}
	s := strconv.FormatInt(int64(*v), 10)
	return &s
}
