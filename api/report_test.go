package api

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"strings"
	"testing"
)

// r1Case is one case of testdata/report/r1_cases.json.
type r1Case struct {
	Name   string                     `json:"name"`
	Path   string                     `json:"path"`
	Status int                        `json:"status"`
	Why    string                     `json:"why"`
	Expect map[string]json.RawMessage `json:"expect"`
}

// checkR1Cases runs the cases of a file against env.
func checkR1Cases(t *testing.T, env *reportEnv, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []r1Case `json:"cases"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("cannot read %s: %v", file, err)
	}
	if len(f.Cases) == 0 {
		t.Fatalf("%s has no cases", file)
	}
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			status, body := env.get(t, c.Path)
			if status != c.Status {
				t.Fatalf("GET %s: status %d, want %d: %s", c.Path, status, c.Status, body)
			}
			var doc any
			d := json.NewDecoder(bytes.NewReader(body))
			d.UseNumber()
			if err := d.Decode(&doc); err != nil {
				t.Fatalf("answer is not JSON: %v", err)
			}
			for path, want := range c.Expect {
				got, ok := lookup(doc, path)
				if string(want) == `"(absent)"` {
					if ok {
						t.Errorf("%s: present (%v), want absent", path, got)
					}
					continue
				}
				if !ok {
					t.Errorf("%s: absent, want %s", path, want)
					continue
				}
				if !r1SameJSON(t, got, want) {
					g, _ := json.Marshal(got)
					t.Errorf("%s = %s, want %s", path, g, want)
				}
			}
			if t.Failed() {
				t.Logf("why: %s\nanswer: %s", c.Why, body)
			}
		})
	}
}

// r1SameJSON compares a decoded value with an expected JSON text, numbers
// within 1e-9.
func r1SameJSON(t *testing.T, got any, want json.RawMessage) bool {
	var w any
	d := json.NewDecoder(bytes.NewReader(want))
	d.UseNumber()
	if err := d.Decode(&w); err != nil {
		t.Fatalf("bad expectation %s: %v", want, err)
	}
	return r1EqualJSON(got, w)
}

func r1EqualJSON(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, _ := x.Float64()
		fy, _ := y.Float64()
		return math.Abs(fx-fy) < 1e-9
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if !r1EqualJSON(v, y[k]) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !r1EqualJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// TestReportR1 answers the overview, goals, goal report and raw event
// cases of testdata/report/r1_cases.json over the tables the real
// processor built from testdata/report/batches.json.
func TestReportR1(t *testing.T) {
	env := newReportFixture(t)
	checkR1Cases(t, env, "testdata/report/r1_cases.json")

	t.Run("events pages", func(t *testing.T) {
		// 7d: 66 events (alice 2, bob 3, carol 2, dave 1, consentless 3,
		// eve 55): a page of 50, then 16, each event once.
		seen := map[string]bool{}
		path := "/api/v1/projects/" + shopID + "/events?period=7d"
		var sizes []int
		for path != "" {
			doc := env.getJSON(t, strings.TrimPrefix(path, "http://example.com"))
			list, _ := lookup(doc, "data")
			items := list.([]any)
			sizes = append(sizes, len(items))
			for _, it := range items {
				id := it.(map[string]any)["id"].(string)
				if seen[id] {
					t.Errorf("event %s listed twice", id)
				}
				seen[id] = true
			}
			next, _ := lookup(doc, "links.next")
			path, _ = next.(string)
			if len(sizes) > 3 {
				t.Fatal("more pages than expected")
			}
		}
		if len(sizes) != 2 || sizes[0] != 50 || sizes[1] != 16 {
			t.Errorf("pages %v, want [50 16]", sizes)
		}
		// The oldest event of the window is alice's pageview of 06-10;
		// her pageview of 06-05 is before it.
		if !seen["51000000-0000-4000-8000-000000000004"] || seen["51000000-0000-4000-8000-000000000002"] {
			t.Error("the 7d window is wrong: alice's 06-10 pageview missing or her 06-05 one present")
		}
	})
	t.Run("cursor bound to its filters", func(t *testing.T) {
		doc := env.getJSON(t, "/api/v1/projects/"+shopID+"/events?period=7d")
		cur, _ := lookup(doc, "meta.nextCursor")
		s, ok := cur.(string)
		if !ok {
			t.Fatal("no next cursor")
		}
		status, body := env.get(t, "/api/v1/projects/"+shopID+"/events?period=7d&filters[0][field]=event_name&filters[0][op]=is&filters[0][value]=scroll&cursor="+s)
		if status != http.StatusUnprocessableEntity {
			t.Errorf("cursor of another filter set: %d %s", status, body)
		}
		status, body = env.get(t, "/api/v1/projects/"+shopID+"/events?period=24h&cursor="+s)
		if status != http.StatusUnprocessableEntity {
			t.Errorf("cursor of another period: %d %s", status, body)
		}
	})
}
