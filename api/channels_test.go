package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// acqBatchFile is the form of report/channels-events.json: batches sent in
// order through the real ingest handler; event times are RFC 3339.
type acqBatchFile struct {
	Batches []struct {
		Key    string            `json:"key"`
		Mode   string            `json:"mode"`
		Events []json.RawMessage `json:"events"`
	} `json:"batches"`
}

// acqSendBatches sends every batch of file and waits until the processor
// committed them.
func acqSendBatches(t *testing.T, env *reportEnv, file string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var bf acqBatchFile
	if err := json.Unmarshal(raw, &bf); err != nil {
		t.Fatalf("cannot read %s: %v", file, err)
	}
	for i, b := range bf.Batches {
		events := make([]map[string]any, 0, len(b.Events))
		for _, ev := range b.Events {
			var m map[string]any
			if err := json.Unmarshal(ev, &m); err != nil {
				t.Fatal(err)
			}
			if s, ok := m["time"].(string); ok {
				tm, err := time.Parse(time.RFC3339, s)
				if err != nil {
					t.Fatalf("%s: batch %d: %v", file, i, err)
				}
				m["time"] = tm.UnixMilli()
			}
			events = append(events, m)
		}
		body, err := json.Marshal(map[string]any{"v": 1, "batch": fmt.Sprintf("c1000000-0000-4000-8000-%012d", i+1),
			"mode": b.Mode, "events": events})
		if err != nil {
			t.Fatal(err)
		}
		env.send(t, b.Key, string(body))
	}
	env.wait(t)
}

// acqGolden is the form of report/channels-golden.json.
type acqGolden struct {
	Steps []struct {
		Get     string         `json:"get"`
		Status  int            `json:"status"`
		Expect  map[string]any `json:"expect"`
		Import  string         `json:"import"`
		Project string         `json:"project"`
	} `json:"steps"`
}

// TestAcquisitionGolden runs the channels, search and ads endpoints over
// the golden events and imports, with expected answers worked out by hand
// (testdata/report/channels-golden.json), refusals included.
func TestAcquisitionGolden(t *testing.T) {
	env := newReportEnv(t, "testdata/report/channels-provision.json")
	acqSendBatches(t, env, "testdata/report/channels-events.json")
	imports, err := NewImports(DefaultImportConfig(), env.bucket, env.cat, env.now)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/report/channels-golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g acqGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("cannot read the golden file: %v", err)
	}
	for i, st := range g.Steps {
		if st.Import != "" {
			f, err := os.Open(filepath.Join("testdata/imports", st.Import))
			if err != nil {
				t.Fatal(err)
			}
			imp, err := ParseImport(f)
			f.Close()
			if err != nil {
				t.Fatalf("step %d: %s: %v", i, st.Import, err)
			}
			res, err := imports.Apply(context.Background(), st.Project, imp)
			if err != nil || !res.Changed {
				t.Fatalf("step %d: import %s: %+v %v", i, st.Import, res, err)
			}
			continue
		}
		status, body := env.get(t, st.Get)
		if status != st.Status {
			t.Errorf("step %d: GET %s: status %d, want %d: %s", i, st.Get, status, st.Status, body)
			continue
		}
		var doc any
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("step %d: not JSON: %s", i, body)
		}
		for path, want := range st.Expect {
			got, ok := lookup(doc, path)
			if !ok {
				t.Errorf("step %d: GET %s: no %s in %s", i, st.Get, path, body)
				continue
			}
			if msg := acqDiff(got, want); msg != "" {
				t.Errorf("step %d: GET %s: %s: %s\ngot  %s\nwant %s", i, st.Get, path, msg, acqJSON(got), acqJSON(want))
			}
		}
	}
}

func acqJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// acqDiff compares decoded JSON values, numbers within 1e-9; "" when equal.
func acqDiff(got, want any) string {
	switch w := want.(type) {
	case float64:
		g, ok := got.(float64)
		if !ok || math.Abs(g-w) > 1e-9 {
			return "number differs"
		}
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return "not an object"
		}
		if len(g) != len(w) {
			return fmt.Sprintf("%d members, want %d", len(g), len(w))
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return "no member " + k
			}
			if msg := acqDiff(gv, wv); msg != "" {
				return k + ": " + msg
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return "list differs in length"
		}
		for i := range w {
			if msg := acqDiff(g[i], w[i]); msg != "" {
				return fmt.Sprintf("[%d]: %s", i, msg)
			}
		}
	default:
		if acqJSON(got) != acqJSON(want) {
			return "differs"
		}
	}
	return ""
}

// TestAcqWildcard checks the matches operator's pattern rule.
func TestAcqWildcard(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"/blog/*", "/blog/a", true}, {"/blog/*", "/blog/", true}, {"/blog/*", "/blo", false},
		{"*.pdf", "/a/b.pdf", true}, {"*.pdf", "/a/b.pdfx", false}, {"/a*b*c", "/axxbyyc", true},
		{"/a*b*c", "/acb", false}, {"exact", "exact", true}, {"exact", "exactly", false},
		{"a*a", "a", false}, {"a*a", "aa", true}, {"*", "", true},
	} {
		if got := wildcard(tc.pattern, tc.s); got != tc.want {
			t.Errorf("wildcard(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}
