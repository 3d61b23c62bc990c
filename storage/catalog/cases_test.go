package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A case of testdata/invalid: a provisioning file (a valid file changed by
// set and delete, an inline file, or raw text) applied after the files of
// state, and the faults it must be refused with, in order.
type invalidCase struct {
	About  string            `json:"about"`
	State  []string          `json:"state"`
	Base   string            `json:"base"`
	File   json.RawMessage   `json:"file"`
	Raw    *string           `json:"raw"`
	Delete []string          `json:"delete"`
	Set    []json.RawMessage `json:"set"`
	// Repeat sets the value of set's pairs to a string of this many "x"
	// characters when the value is the string "$repeat".
	Repeat int `json:"repeat"`
	Faults []struct {
		Path    string `json:"path"`
		Message string `json:"message"`
	} `json:"faults"`
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("cannot read test file: %v", err)
	}
	return data
}

func loadInvalidCases(t *testing.T) map[string]invalidCase {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", "invalid", "*.json"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no cases in testdata/invalid: %v", err)
	}
	cases := map[string]invalidCase{}
	for _, name := range names {
		var c invalidCase
		dec := json.NewDecoder(bytes.NewReader(readTestdata(t, strings.TrimPrefix(name, "testdata/"))))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(c.Faults) == 0 {
			t.Fatalf("%s: a case must name the faults it expects", name)
		}
		cases[strings.TrimSuffix(filepath.Base(name), ".json")] = c
	}
	return cases
}

// build returns the provisioning file of a case.
func (c invalidCase) build(t testing.TB) []byte {
	t.Helper()
	if c.Raw != nil {
		return []byte(*c.Raw)
	}
	var doc any
	var err error
	switch {
	case c.File != nil:
		doc, err = decodeJSON(c.File)
	case c.Base != "":
		doc, err = decodeJSON(readTestdata(t, c.Base))
	default:
		t.Fatalf("case has no raw, file or base")
	}
	if err != nil {
		t.Fatalf("cannot read the case's file: %v", err)
	}
	for _, p := range c.Delete {
		doc = jsonEdit(t, doc, parseJSONPath(t, p), nil, true)
	}
	for _, raw := range c.Set {
		var pair []json.RawMessage
		if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
			t.Fatalf("set entries are [path, value] pairs: %s", raw)
		}
		var path string
		if err := json.Unmarshal(pair[0], &path); err != nil {
			t.Fatalf("set path: %v", err)
		}
		v, err := decodeJSON(pair[1])
		if err != nil {
			t.Fatalf("set value: %v", err)
		}
		if s, ok := v.(string); ok && s == "$repeat" {
			v = strings.Repeat("x", c.Repeat)
		}
		doc = jsonEdit(t, doc, parseJSONPath(t, path), v, false)
	}
	out, err := appendCanonical(nil, doc)
	if err != nil {
		t.Fatalf("cannot encode the case's file: %v", err)
	}
	return out
}

var pathToken = regexp.MustCompile(`^(?:\.?([^.\[\]]+)|\[(\d+)\])`)

// parseJSONPath splits `a.b[0].c` into "a", "b", 0, "c".
func parseJSONPath(t testing.TB, p string) []any {
	t.Helper()
	var out []any
	for p != "" {
		m := pathToken.FindStringSubmatch(p)
		if m == nil {
			t.Fatalf("bad path %q", p)
		}
		if m[2] != "" {
			i, _ := strconv.Atoi(m[2])
			out = append(out, i)
		} else {
			out = append(out, m[1])
		}
		p = p[len(m[0]):]
	}
	return out
}

// jsonEdit sets (or deletes) the value at path; an index equal to a list's
// length appends.
func jsonEdit(t testing.TB, doc any, path []any, v any, del bool) any {
	t.Helper()
	if len(path) == 0 {
		return v
	}
	switch tok := path[0].(type) {
	case string:
		m, ok := doc.(map[string]any)
		if !ok {
			t.Fatalf("path %v: not an object", path)
		}
		if len(path) == 1 && del {
			if _, ok := m[tok]; !ok {
				t.Fatalf("path %v: nothing to delete", path)
			}
			delete(m, tok)
			return m
		}
		m[tok] = jsonEdit(t, m[tok], path[1:], v, del)
		return m
	case int:
		l, ok := doc.([]any)
		if !ok || tok > len(l) {
			t.Fatalf("path %v: not a list or index out of range", path)
		}
		if len(path) == 1 && del {
			return append(l[:tok:tok], l[tok+1:]...)
		}
		if tok == len(l) {
			return append(l, jsonEdit(t, nil, path[1:], v, del))
		}
		l[tok] = jsonEdit(t, l[tok], path[1:], v, del)
		return l
	}
	return doc
}

// planLocal merges a file into st without a log and returns the State it
// leads to.
func planLocal(st *State, data []byte) (*State, *Plan, error) {
	f, err := Parse(data)
	if err != nil {
		return nil, nil, err
	}
	p, err := st.Plan(f)
	if err != nil {
		return nil, nil, err
	}
	return p.State(), p, nil
}

func emptyState() *State { return newState(newModel(), nil) }

// stateOf plans the named testdata files one after the other.
func stateOf(t testing.TB, files ...string) *State {
	t.Helper()
	st := emptyState()
	for _, name := range files {
		next, _, err := planLocal(st, readTestdata(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		st = next
	}
	return st
}

// checkFaults compares a refusal with the faults a case expects.
func checkFaults(t *testing.T, err error, c invalidCase) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("want a *ValidationError wrapping ErrInvalid, got %v", err)
	}
	var got, want []string
	for _, f := range ve.Faults {
		got = append(got, f.String())
	}
	for _, f := range c.Faults {
		want = append(want, fmt.Sprintf("%s: …%s…", f.Path, f.Message))
	}
	if len(ve.Faults) != len(c.Faults) {
		t.Fatalf("got %d faults, want %d\ngot:  %q\nwant: %q", len(ve.Faults), len(c.Faults), got, want)
	}
	msg := err.Error()
	for i, f := range c.Faults {
		if ve.Faults[i].Path != f.Path || !strings.Contains(ve.Faults[i].Message, f.Message) {
			t.Errorf("fault %d is %q, want %q", i, got[i], want[i])
		}
		if i < maxReportedFaults && !strings.Contains(msg, f.Path+": ") {
			t.Errorf("error message does not name path %q: %s", f.Path, msg)
		}
	}
}

func TestInvalidFiles(t *testing.T) {
	for name, c := range loadInvalidCases(t) {
		t.Run(name, func(t *testing.T) {
			st := stateOf(t, c.State...)
			before := st.Version()
			_, _, err := planLocal(st, c.build(t))
			checkFaults(t, err, c)
			if len(c.State) == 0 {
				checkFaults(t, Validate(c.build(t), nil), c)
			}
			if st.Version() != before {
				t.Errorf("state version moved from %d to %d", before, st.Version())
			}
		})
	}
}

func validFiles(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", "valid", "*.json"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no files in testdata/valid: %v", err)
	}
	for i, n := range names {
		names[i] = strings.TrimPrefix(n, "testdata/")
	}
	return names
}

func TestValidFiles(t *testing.T) {
	files := validFiles(t)
	files = append(files, "../../../docs/demo-provision.json")
	for _, name := range files {
		t.Run(filepath.Base(name), func(t *testing.T) {
			data := readTestdata(t, name)
			st, plan, err := planLocal(emptyState(), data)
			if err != nil {
				t.Fatalf("valid file refused: %v", err)
			}
			if plan.Len() == 0 && !bytes.Equal(bytes.TrimSpace(data), []byte("{}")) {
				t.Fatalf("a file with entities planned no changes")
			}
			_, again, err := planLocal(st, data)
			if err != nil {
				t.Fatalf("same file refused the second time: %v", err)
			}
			if again.Len() != 0 {
				t.Fatalf("same file planned %d changes the second time: %q", again.Len(), again.Describe())
			}
		})
	}
}
