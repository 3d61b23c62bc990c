package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
)

// erasureCase is testdata/erasure/events.json.
type erasureCase struct {
	Needles  []string
	Browsers []string
	Events   []struct {
		Who   string
		Ago   string
		Event map[string]any
	}
}

// TestErasure erases a person with several browsers, a shared browser and
// purchases through the real binary (once with DELETE and the erasure's
// record, once more with mf erase after a replay), and checks that:
// the reporting API answers their ref with 404 and its numbers equal those
// of a run that never saw their events; no Parquet file in the store holds
// any of their values; the export before the erasure held exactly their
// events, oldest first; mf replay keeps them gone.
func TestErasure(t *testing.T) {
	raw, err := os.ReadFile("testdata/erasure/events.json")
	if err != nil {
		t.Fatal(err)
	}
	var c erasureCase
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("testdata/erasure/events.json: %v", err)
	}
	const token = "erasure-test-admin-token-0123456789abcdef"
	start := time.Now()
	batches := func(skip string) [][]byte { return erasureBatches(t, c, start, skip) }
	run := func(skip string) (*mfProc, []string) {
		p := startMF(t, t.TempDir(), "serve", "--provision", demoFile, "--admin-token", token)
		auth := []string{"Authorization", "Bearer " + token}
		bs := batches(skip)
		for _, b := range bs {
			code, _, body := do(t, "POST", p.ingest+"/v1/batch/"+demoWebsiteKey, b,
				"Origin", "https://shop.example", "User-Agent", browserUA, "Content-Type", "application/json")
			if code != 202 {
				t.Fatalf("batch: %d %s", code, body)
			}
		}
		waitCommitted(t, p, auth, float64(len(bs)))
		return p, auth
	}

	a, auth := run("")
	alice := personByName(t, a, "Alice Example")
	// The export holds exactly her events, oldest first.
	code, h, body := do(t, "GET", a.admin+"/admin/v1/projects/"+demoProject+"/people/"+alice+"/export", nil, auth...)
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/x-ndjson") {
		t.Fatalf("export: %d %s %s", code, h.Get("Content-Type"), body)
	}
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	var profile map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &profile); err != nil || profile["ref"] != alice || profile["type"] != "person" {
		t.Fatalf("export's first line is not alice's profile: %s", lines[0])
	}
	var wantIDs []string
	for i, e := range c.Events {
		if e.Who == "alice" {
			wantIDs = append(wantIDs, fmt.Sprintf("e7a5e000-0000-4000-8000-%012d", i))
		}
	}
	var gotIDs []string
	last := ""
	// Her refs for the DuckDB scan: her person's, her event ids, and the
	// browsers only she used (the shared one stays, as bob's).
	duckRefs := []string{alice}
	for _, l := range lines[1:] {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev["type"] != "event" {
			t.Fatalf("export line is not an event: %s", l)
		}
		duckRefs = append(duckRefs, ev["id"].(string))
		var i int
		if _, err := fmt.Sscanf(ev["id"].(string), "e7a5e000-0000-4000-8000-%012d", &i); err == nil && i < len(c.Events) {
			src := c.Events[i].Event
			if a, _ := src["anonymousId"].(string); a != "" && a != "s" && src["userId"] == nil {
				if u, ok := ev["unit"].(string); ok {
					duckRefs = append(duckRefs, u)
				}
			}
		}
		if tm := ev["time"].(string); tm < last {
			t.Fatalf("export not oldest first: %s after %s", tm, last)
		} else {
			last = tm
		}
		gotIDs = append(gotIDs, ev["id"].(string))
	}
	slices.Sort(gotIDs)
	if !slices.Equal(gotIDs, wantIDs) {
		t.Fatalf("export's events: %v, want alice's %v", gotIDs, wantIDs)
	}
	if code, _, _ := do(t, "DELETE", a.admin+"/admin/v1/projects/"+demoProject+"/people/0195f3b4-0000-7000-8000-000000000999", nil, auth...); code != 404 {
		t.Fatalf("erasing a ref nobody has: %d, want 404", code)
	}

	// Erase her.
	code, _, body = do(t, "DELETE", a.admin+"/admin/v1/projects/"+demoProject+"/people/"+alice, nil, auth...)
	if code != 202 {
		t.Fatalf("erase: %d %s", code, body)
	}
	var rec struct{ ID, State string }
	if err := json.Unmarshal(body, &rec); err != nil || rec.ID == "" || rec.State != "pending" {
		t.Fatalf("erase answered %s, want an id and state pending", body)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, _, body := do(t, "GET", a.admin+"/admin/v1/projects/"+demoProject+"/erasures/"+rec.ID, nil, auth...)
		var st struct {
			ID, Person, State string
			RequestedAt       *time.Time
			DoneAt            *time.Time
		}
		if code != 200 || json.Unmarshal(body, &st) != nil || st.ID != rec.ID || st.Person != alice || st.RequestedAt == nil {
			t.Fatalf("erasure record: %d %s", code, body)
		}
		if st.State == "done" && st.DoneAt != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("erasure still %s after 60s: %s", st.State, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	checkErased(t, a, alice, c.Needles)
	duckScan(t, a.data, duckRefs, c.Needles)
	// Her events of three days ago were on days gone cold (docs/processor.md,
	// "Memory"): the erasure read them back.
	if n := sample(t, scrape(t, a, auth...), "mf_processor_days_read_back_total"); n < 1 {
		t.Fatalf("mf_processor_days_read_back_total is %v after erasing a person with cold days, want at least 1", n)
	}

	// A run that never saw her events answers the same.
	b, _ := run("alice")
	compareReports(t, a, b)

	// mf replay (from the archive) keeps her gone.
	if code, out, errOut := runMF(t, nil, "replay", "--project", demoProject, "--admin-url", a.admin, "--admin-token", token); code != 0 {
		t.Fatalf("mf replay: exit %d\n%s\n%s", code, out, errOut)
	}
	checkErased(t, a, alice, c.Needles)
	duckScan(t, a.data, duckRefs, c.Needles)
	compareReports(t, a, b)

	// mf erase on bob: done when it returns.
	bob := personByName(t, a, "bob")
	code, out, errOut := runMF(t, nil, "erase", "--project", demoProject, "--person", bob, "--admin-url", a.admin, "--admin-token", token)
	if code != 0 || !strings.Contains(out, "done") {
		t.Fatalf("mf erase: exit %d\n%s\n%s", code, out, errOut)
	}
	checkErased(t, a, bob, []string{"bob", "ord-bob-1"})
}

// erasureBatches are the batch bodies of the case's events, those of who
// skip left out, timed back from start.
func erasureBatches(t *testing.T, c erasureCase, start time.Time, skip string) [][]byte {
	t.Helper()
	var out [][]byte
	for i, e := range c.Events {
		if e.Who == skip {
			continue
		}
		ago, err := time.ParseDuration(e.Ago)
		if err != nil {
			t.Fatalf("event %d: ago %q: %v", i, e.Ago, err)
		}
		ev := map[string]any{}
		for k, v := range e.Event {
			ev[k] = v
		}
		ev["time"] = start.Add(-ago).UnixMilli()
		ev["id"] = fmt.Sprintf("e7a5e000-0000-4000-8000-%012d", i)
		j, _ := json.Marshal(ev)
		out = append(out, batchBody(fmt.Sprintf("e7a5ba70-0000-4000-8000-%012d", i), "full", string(j)))
	}
	return out
}

// waitCommitted waits until the processor has committed events events and
// has nothing left to commit.
func waitCommitted(t *testing.T, p *mfProc, auth []string, events float64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		fams := scrape(t, p, auth...)
		got := sample(t, fams, "mf_processor_events_total")
		if got == events && sample(t, fams, "mf_processor_lag_messages") == 0 {
			return
		}
		if got > events || time.Now().After(deadline) {
			t.Fatalf("mf_processor_events_total is %v, want %v", got, events)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// personByName finds the ref of the person named name in the people list.
func personByName(t *testing.T, p *mfProc, name string) string {
	t.Helper()
	code, _, b := do(t, "GET", p.api+"/api/v1/projects/"+demoProject+"/people?period=7d", nil, "Authorization", "Bearer "+demoPAT)
	if code != 200 {
		t.Fatalf("people: %d %s", code, b)
	}
	var doc struct {
		Data []struct {
			ID         string
			Attributes struct{ Name *string }
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, d := range doc.Data {
		if d.Attributes.Name != nil && *d.Attributes.Name == name {
			return d.ID
		}
	}
	t.Fatalf("no person named %q in %s", name, b)
	return ""
}

// checkErased checks that the reporting API answers ref with 404 and that
// no Parquet file under the process's data directory holds any needle (a
// string value containing it) or the ref.
func checkErased(t *testing.T, p *mfProc, ref string, needles []string) {
	t.Helper()
	code, _, body := do(t, "GET", p.api+"/api/v1/projects/"+demoProject+"/people/"+ref, nil, "Authorization", "Bearer "+demoPAT)
	if code != 404 {
		t.Fatalf("the erased person's profile: %d %s, want 404", code, body)
	}
	refBytes := uuidBytes(t, ref)
	files := 0
	err := filepath.WalkDir(p.data, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted since it was listed (a collection beside the check)
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".parquet") {
			return err
		}
		files++
		for _, v := range parquetValues(t, path) {
			if bytes.Equal(v, refBytes[:]) {
				t.Errorf("%s holds the erased ref %s", path, ref)
			}
			for _, n := range needles {
				if bytes.Contains(v, []byte(n)) {
					t.Errorf("%s holds %q (in %q)", path, n, v)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("no Parquet file under %s: the check would pass on nothing", p.data)
	}
}

// parquetValues returns every string and binary value of a Parquet file.
func parquetValues(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := file.OpenParquetFile(path, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // deleted since it was listed
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	r, err := pqarrow.NewFileReader(f, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tbl, err := r.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer tbl.Release()
	var out [][]byte
	for i := range int(tbl.NumCols()) {
		for _, chunk := range tbl.Column(i).Data().Chunks() {
			out = appendValues(out, chunk)
		}
	}
	return out
}

func appendValues(out [][]byte, a arrow.Array) [][]byte {
	for j := range a.Len() {
		if a.IsNull(j) {
			continue
		}
		switch a := a.(type) {
		case *array.String:
			out = append(out, []byte(a.Value(j)))
		case *array.Binary:
			out = append(out, a.Value(j))
		case *array.FixedSizeBinary:
			out = append(out, a.Value(j))
		case *array.Dictionary:
			return appendValues(out, a.Dictionary())
		}
	}
	return out
}

func uuidBytes(t *testing.T, s string) (u [16]byte) {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 {
		t.Fatalf("ref %q is not a UUID: %v", s, err)
	}
	return [16]byte(b)
}

// duckScan has DuckDB (npm @duckdb/node-api,
// rollups/testdata/duckdb/scan.mjs) read every Parquet file under data
// (live, superseded or orphaned alike) and fails on any row that holds a
// needle or one of refs (UUID strings), in any column.
func duckScan(t *testing.T, data string, refs, needles []string) {
	t.Helper()
	var files []string
	err := filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted since it was listed
		}
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".parquet") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	hexRefs := make([]string, len(refs))
	for i, r := range refs {
		u := uuidBytes(t, r)
		hexRefs[i] = hex.EncodeToString(u[:])
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed; the DuckDB check needs Node.js 18 or later with npm (Debian: apt-get install nodejs npm)", tool)
		}
	}
	const dir = "../../rollups/testdata/duckdb"
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@duckdb", "node-api")); err != nil {
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install in %s failed: %v\n%s", dir, err, out)
		}
	}
	in, _ := json.Marshal(map[string]any{"files": files, "needles": needles, "refs": hexRefs})
	cmd := exec.Command("node", "scan.mjs")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node scan.mjs failed: %v\n%s", err, stderr.String())
	}
	var ans struct {
		Files, Rows, Gone int
		Hits              []struct {
			File, Column, Value string
			Rows                int
		}
	}
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatalf("cannot decode DuckDB's answer %q: %v", out, err)
	}
	if ans.Files+ans.Gone != len(files) || ans.Files == 0 || ans.Rows == 0 {
		t.Fatalf("DuckDB read %d of %d Parquet files, %d rows: the scan would pass on nothing", ans.Files, len(files), ans.Rows)
	}
	for _, h := range ans.Hits {
		t.Errorf("DuckDB finds %q in %s, column %s (%d rows)", h.Value, h.File, h.Column, h.Rows)
	}
	t.Logf("DuckDB scanned %d Parquet files, %d rows, for %d refs and %d needles", ans.Files, ans.Rows, len(refs), len(needles))
}

// compareReports checks that two processes answer the same people list and
// overview over the last 7 days.
func compareReports(t *testing.T, a, b *mfProc) {
	t.Helper()
	for _, q := range []string{"/people?period=7d", "/overview?period=7d"} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			ga, gb := reportData(t, a, q), reportData(t, b, q)
			if ga == gb {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s differs from a run that never saw the erased events:\n%s\nwant\n%s", q, ga, gb)
			}
			time.Sleep(time.Second) // the reporting API allows 120 requests a minute
		}
	}
}

// reportData returns the data of a reporting answer without its links.
func reportData(t *testing.T, p *mfProc, q string) string {
	t.Helper()
	code, _, b := do(t, "GET", p.api+"/api/v1/projects/"+demoProject+q, nil, "Authorization", "Bearer "+demoPAT)
	if code != 200 {
		t.Fatalf("%s: %d %s", q, code, b)
	}
	var doc struct{ Data json.RawMessage }
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(doc.Data), p.api, "API")
}
