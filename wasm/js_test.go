package wasm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mfhq/mf/evaluator"
)

// jsResult is what wasm/js/corpus.mjs reports for one corpus case.
type jsResult struct {
	Name      string  `json:"name"`
	Raw       string  `json:"raw"`
	Obj       *string `json:"obj"`
	Sent      *string `json:"sent"`
	Doc       *string `json:"doc"`
	SentDoc   *string `json:"sentDoc"`
	SentFacts *string `json:"sentFacts"`
	Recovery  string  `json:"recovery"` // the last line only: checkRecovery's answer
}

// checkJSResults compares the browser module's answers with the Go
// evaluator's, case by case: raw inputs must give the corpus's results;
// evaluate(flag, facts) and the document path must give what the native
// evaluator gives for the JSON they sent.
func checkJSResults(t *testing.T, runtime string, cases []corpusCase, results []jsResult) {
	t.Helper()
	if len(results) != len(cases) {
		t.Fatalf("%s answered %d cases, the corpus has %d", runtime, len(results), len(cases))
	}
	parseError := string(evaluator.AppendResult(nil, evaluator.ParseErrorResult()))
	failed, objs, docs := 0, 0, 0
	fail := func(format string, args ...any) {
		failed++
		if failed <= 20 {
			t.Errorf(format, args...)
		}
	}
	for i, c := range cases {
		r := results[i]
		if r.Name != c.Name {
			t.Fatalf("%s: result %d is for case %q, want %q", runtime, i, r.Name, c.Name)
		}
		if !sameJSON(r.Raw, c.Want) {
			fail("%s: %s: evaluateCase gives %s, want %s", runtime, c.Name, r.Raw, c.Want)
		}
		if r.Obj != nil {
			objs++
			want := parseError
			if r.Sent != nil {
				want = nativeCase([]byte(*r.Sent), false)
			}
			if !sameJSON(*r.Obj, want) {
				fail("%s: %s: evaluate(flag, facts) gives %s, natively %s (sent %v)", runtime, c.Name, *r.Obj, want, r.Sent)
			}
		}
		if r.Doc != nil {
			docs++
			want := nativeDocument(*r.SentDoc, r.SentFacts)
			got := *r.Doc
			if strings.HasPrefix(got, "DOCUMENT_ERROR") {
				got = "DOCUMENT_ERROR"
			}
			if got != want && !sameJSON(got, want) {
				fail("%s: %s: loadDocument(...).evaluate gives %s, natively %s", runtime, c.Name, *r.Doc, want)
			}
		}
	}
	t.Logf("%s: %d cases from raw bytes, %d through evaluate(flag, facts), %d through loadDocument", runtime, len(cases), objs, docs)
	if failed > 0 {
		t.Errorf("%s: %d differences", runtime, failed)
	}
	if objs < len(cases)*9/10 || docs < len(cases)*8/10 {
		t.Errorf("%s: too few cases took the object paths (%d evaluate, %d document of %d)", runtime, objs, docs, len(cases))
	}
}

// nativeDocument is what the native evaluator answers for the document path
// of corpus.mjs: flag "f" of the document, for the facts.
func nativeDocument(doc string, facts *string) string {
	d, err := evaluator.ParseDocument([]byte(doc))
	if err != nil {
		return "DOCUMENT_ERROR"
	}
	f, ok := d.Flag("f")
	if !ok {
		return "NO_FLAG"
	}
	if facts == nil {
		return string(evaluator.AppendResult(nil, evaluator.ParseErrorResult()))
	}
	fa, err := evaluator.ParseFacts([]byte(*facts))
	if err != nil {
		return string(evaluator.AppendResult(nil, evaluator.ParseErrorResult()))
	}
	return string(evaluator.AppendResult(nil, f.Evaluate(fa)))
}

func decodeJSResults(t *testing.T, out []byte) []jsResult {
	t.Helper()
	var results []jsResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var r jsResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("cannot read result line %d: %v", len(results)+1, err)
		}
		results = append(results, r)
	}
	return results
}

// TestNodeCorpus runs the corpus through wasm/js/evaluator.mjs in Node.
func TestNodeCorpus(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node (20 or later) is needed for the browser-module tests: apt-get install nodejs (or see https://nodejs.org)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "js/run-corpus.mjs", "dist/evaluator.wasm", corpusPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node js/run-corpus.mjs failed: %v\n%s", err, stderr.Bytes())
	}
	results := decodeJSResults(t, out)
	if len(results) == 0 {
		t.Fatal("node printed nothing")
	}
	last := results[len(results)-1]
	if last.Recovery != "ok" {
		t.Errorf("node: the evaluator does not recover from a trap: %q", last.Recovery)
	}
	checkJSResults(t, "node", loadCorpus(t), results[:len(results)-1])
}
