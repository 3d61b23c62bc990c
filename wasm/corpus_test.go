package wasm

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/mfhq/mf/evaluator"
)

// TestCorpus runs every case of the evaluator's corpus through the wazero
// engine: the result line must equal the expected one (which the native
// evaluator also gives), and the explained line must equal the native one.
func TestCorpus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := sharedEngine(t)
	failed := 0
	fail := func(format string, args ...any) {
		failed++
		if failed <= 20 {
			t.Errorf(format, args...)
		}
	}
	var got []byte
	for _, c := range loadCorpus(t) {
		line, err := c.input()
		if err != nil {
			t.Fatalf("%s: bad in64: %v", c.Name, err)
		}
		if native := nativeCase(line, false); native != c.Want {
			fail("%s: the native evaluator gives %s, the corpus wants %s", c.Name, native, c.Want)
		}
		got, err = e.EvaluateCase(ctx, got[:0], line)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if string(got) != c.Want {
			fail("%s\n in:     %s\n wazero: %s\n want:   %s", c.Name, line, got, c.Want)
		}
		got, err = e.ExplainCase(ctx, got[:0], line)
		if err != nil {
			t.Fatalf("%s: explain: %v", c.Name, err)
		}
		if want := nativeCase(line, true); string(got) != want {
			fail("%s: explain\n in:     %s\n wazero: %s\n native: %s", c.Name, line, got, want)
		}
	}
	if failed > 0 {
		t.Errorf("%d differences", failed)
	}
}

// TestCorpusAsDocuments evaluates every corpus case whose line is a case
// through the document path: the flag alone in a document, loaded into the
// engine, evaluated by key with the facts. Results must equal the corpus.
func TestCorpusAsDocuments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := sharedEngine(t)
	failed, n := 0, 0
	for _, c := range loadCorpus(t) {
		line, _ := c.input()
		if _, _, err := evaluator.ParseCase(line); err != nil {
			continue // PARSE_ERROR lines have no document form
		}
		flag, facts, ok := caseParts(line)
		if !ok {
			t.Fatalf("%s: the evaluator reads the line but encoding/json does not", c.Name)
		}
		n++
		doc, err := e.LoadDocument(ctx, []byte(`{"v":1,"flags":{"f":`+string(flag)+`}}`))
		if err != nil {
			t.Fatalf("%s: cannot load the flag as a document: %v", c.Name, err)
		}
		r, err := doc.Evaluate(ctx, "f", facts)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if got := string(evaluator.AppendResult(nil, r)); got != c.Want {
			failed++
			if failed <= 20 {
				t.Errorf("%s\n in:     %s\n wazero: %s\n want:   %s", c.Name, line, got, c.Want)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d differ", failed, n)
	}
	if n < 10000 {
		t.Errorf("only %d corpus cases have a document form, want at least 10,000", n)
	}
}

// TestDocument100 loads the evaluator's 100-flag document and evaluates each
// flag against the facts of the corpus's first cases, natively and in
// wazero, one key at a time and all keys at once.
func TestDocument100(t *testing.T) {
	ctx := context.Background()
	e := sharedEngine(t)
	data, err := os.ReadFile("../evaluator/testdata/document_100.json")
	if err != nil {
		t.Fatalf("cannot read the 100-flag document: %v", err)
	}
	native, err := evaluator.ParseDocument(data)
	if err != nil {
		t.Fatalf("the native evaluator cannot parse the 100-flag document: %v", err)
	}
	doc, err := e.LoadDocument(ctx, data)
	if err != nil {
		t.Fatalf("cannot load the 100-flag document: %v", err)
	}
	keys := native.Keys()
	if len(keys) != 100 {
		t.Fatalf("the document has %d flags, want 100", len(keys))
	}
	var factsList [][]byte
	for _, c := range loadCorpus(t)[:2000] {
		line, _ := c.input()
		if _, facts, ok := caseParts(line); ok {
			if _, err := evaluator.ParseFacts(orNull(facts)); err == nil {
				factsList = append(factsList, facts)
			}
		}
	}
	if len(factsList) < 1000 {
		t.Fatalf("only %d readable facts in the corpus's first cases", len(factsList))
	}
	for i, facts := range factsList {
		nf, _ := evaluator.ParseFacts(orNull(facts))
		var all []evaluator.Result
		if i%2 == 1 {
			all, err = doc.EvaluateAll(ctx, nil, keys, facts)
			if err != nil {
				t.Fatalf("EvaluateAll with facts %s: %v", facts, err)
			}
		}
		for j, k := range keys {
			f, _ := native.Flag(k)
			want := string(evaluator.AppendResult(nil, f.Evaluate(nf)))
			var r evaluator.Result
			if all != nil {
				r = all[j]
			} else if r, err = doc.Evaluate(ctx, k, facts); err != nil {
				t.Fatalf("flag %s, facts %s: %v", k, facts, err)
			}
			if got := string(evaluator.AppendResult(nil, r)); got != want {
				t.Fatalf("flag %s, facts %s:\n wazero: %s\n native: %s", k, facts, got, want)
			}
		}
	}
	if _, err := doc.Evaluate(ctx, "no-such-flag", nil); !errors.Is(err, ErrFlagNotFound) {
		t.Errorf("an unknown key gives %v, want ErrFlagNotFound", err)
	}
}
