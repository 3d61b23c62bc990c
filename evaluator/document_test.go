package evaluator_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/mfhq/mf/evaluator"
)

var sentinels = map[string]error{
	"ErrInvalidJSON":     evaluator.ErrInvalidJSON,
	"ErrNotObject":       evaluator.ErrNotObject,
	"ErrNotCase":         evaluator.ErrNotCase,
	"ErrDocumentVersion": evaluator.ErrDocumentVersion,
	"ErrDocument":        evaluator.ErrDocument,
}

// TestParseDocument runs testdata/documents.jsonl: envelopes, their errors,
// flag lookup, the values view and orig.
func TestParseDocument(t *testing.T) {
	f, err := os.Open("testdata/documents.jsonl")
	if err != nil {
		t.Fatalf("cannot open testdata/documents.jsonl: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		var c struct {
			Name          string              `json:"name"`
			Doc           json.RawMessage     `json:"doc"`
			Raw           string              `json:"raw"`
			Err           string              `json:"err"`
			At            int64               `json:"at"`
			Keys          []string            `json:"keys"`
			Values        map[string][]string `json:"values"`
			MissingValues []string            `json:"missingValues"`
			Orig          []string            `json:"orig"`
			NotOrig       []string            `json:"notOrig"`
			Unsupported   []string            `json:"unsupported"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("documents.jsonl line %d: %v", n, err)
		}
		input := []byte(c.Doc)
		if c.Raw != "" {
			input = []byte(c.Raw)
		}
		doc, err := evaluator.ParseDocument(input)
		if c.Err != "" {
			if !errors.Is(err, sentinels[c.Err]) {
				t.Errorf("%s: error %v, want %s", c.Name, err, c.Err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if doc.At() != c.At {
			t.Errorf("%s: At() = %d, want %d", c.Name, doc.At(), c.At)
		}
		if !slices.Equal(doc.Keys(), c.Keys) && !(len(doc.Keys()) == 0 && len(c.Keys) == 0) {
			t.Errorf("%s: Keys() = %q, want %q", c.Name, doc.Keys(), c.Keys)
		}
		for _, k := range c.Keys {
			if _, ok := doc.Flag(k); !ok {
				t.Errorf("%s: Flag(%q) missing", c.Name, k)
			}
		}
		if _, ok := doc.Flag("no-such-flag"); ok {
			t.Errorf("%s: Flag(no-such-flag) found", c.Name)
		}
		for _, k := range c.Unsupported {
			fl, _ := doc.Flag(k)
			if r := fl.Evaluate(nil); r.Reason != evaluator.ReasonError || r.ErrorCode != evaluator.ErrorUnsupported {
				t.Errorf("%s: flag %q gives %+v, want UNSUPPORTED", c.Name, k, r)
			}
		}
		for k, want := range c.Values {
			variant, value, ok := doc.Value(k)
			if !ok || variant != want[0] || string(value) != want[1] {
				t.Errorf("%s: Value(%q) = %q, %q, %v; want %q", c.Name, k, variant, value, ok, want)
			}
		}
		for _, k := range c.MissingValues {
			if _, _, ok := doc.Value(k); ok {
				t.Errorf("%s: Value(%q) present, want absent", c.Name, k)
			}
		}
		for _, k := range c.Orig {
			if !doc.Original(k) {
				t.Errorf("%s: Original(%q) = false", c.Name, k)
			}
		}
		for _, k := range c.NotOrig {
			if doc.Original(k) {
				t.Errorf("%s: Original(%q) = true", c.Name, k)
			}
		}
	}
	if n == 0 {
		t.Fatal("testdata/documents.jsonl is empty")
	}
}

// TestDocumentMatchesParseFlag: a flag read from a document evaluates as
// the same flag read alone, for all 100 flags of document_100.json.
func TestDocumentMatchesParseFlag(t *testing.T) {
	raw, err := os.ReadFile("testdata/document_100.json")
	if err != nil {
		t.Fatalf("cannot read testdata/document_100.json: %v", err)
	}
	doc, err := evaluator.ParseDocument(raw)
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		Flags map[string]json.RawMessage `json:"flags"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	if len(doc.Keys()) != 100 || len(env.Flags) != 100 {
		t.Fatalf("want 100 flags, document has %d", len(doc.Keys()))
	}
	factsList := []string{`{}`, `{"id":"anon-1","properties":{"plan":"pro","age":12}}`, `{"userId":"user-9","segments":{"in":["s1"]}}`, `{"id":"x","segments":"pending"}`}
	for key, text := range env.Flags {
		alone, err := evaluator.ParseFlag(text)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		inDoc, _ := doc.Flag(key)
		for _, fs := range factsList {
			facts, err := evaluator.ParseFacts([]byte(fs))
			if err != nil {
				t.Fatal(err)
			}
			a := string(evaluator.AppendResult(nil, alone.Evaluate(facts)))
			b := string(evaluator.AppendResult(nil, inDoc.Evaluate(facts)))
			if a != b {
				t.Errorf("%s with %s: alone %s, in the document %s", key, fs, a, b)
			}
		}
	}
}

// TestParseErrors: the parsers fail with the documented sentinel errors.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name  string
		parse func([]byte) error
		in    string
		want  error
	}{
		{"flag not JSON", parseFlag, `{"d":`, evaluator.ErrInvalidJSON},
		{"flag a list", parseFlag, `[]`, evaluator.ErrNotObject},
		{"flag null", parseFlag, `null`, evaluator.ErrNotObject},
		{"flag malformed is not an error", parseFlag, `{"r":5}`, nil},
		{"facts not JSON", parseFacts, `{"id":"\ud800"}`, evaluator.ErrInvalidJSON},
		{"facts a string", parseFacts, `"pending"`, evaluator.ErrNotObject},
		{"facts null", parseFacts, `null`, nil},
		{"facts wrong member types", parseFacts, `{"id":[],"properties":5,"segments":7}`, nil},
		{"case without flag", parseCase, `{"facts":{}}`, evaluator.ErrNotCase},
		{"case with facts 1", parseCase, `{"flag":{},"facts":1}`, evaluator.ErrNotCase},
		{"case a list", parseCase, `[]`, evaluator.ErrNotObject},
		{"case invalid UTF-8", parseCase, "{\"flag\":{},\"x\":\"\xff\"}", evaluator.ErrInvalidJSON},
	}
	for _, c := range cases {
		err := c.parse([]byte(c.in))
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
		}
		var pe *evaluator.ParseError
		if err != nil && (!errors.As(err, &pe) || pe.Error() == "") {
			t.Errorf("%s: error %v is not a *ParseError", c.name, err)
		}
	}
}

func parseFlag(b []byte) error  { _, err := evaluator.ParseFlag(b); return err }
func parseFacts(b []byte) error { _, err := evaluator.ParseFacts(b); return err }
func parseCase(b []byte) error  { _, _, err := evaluator.ParseCase(b); return err }
