package wasm

import (
	"context"
	"errors"
	"testing"

	"github.com/mfhq/mf/evaluator"
)

// FuzzNativeVsWasm evaluates random flags and facts (seeded from the
// evaluator's corpus) natively and in wazero, through every export of the
// guest: case lines, explained case lines, and documents evaluated by key.
// Answers and errors must be the same, and no call may trap.
//
//	go test -fuzz=FuzzNativeVsWasm ./wasm
//
// Findings are kept in testdata/fuzz/FuzzNativeVsWasm.
func FuzzNativeVsWasm(f *testing.F) {
	for i, c := range loadCorpus(f) {
		if i%10 != 0 {
			continue
		}
		line, _ := c.input()
		if flag, facts, ok := caseParts(line); ok && flag != nil {
			f.Add(flag, facts)
		} else {
			f.Add(line, []byte(nil))
		}
	}
	f.Fuzz(func(t *testing.T, flag, facts []byte) {
		ctx := context.Background()
		e := sharedEngine(t)
		if len(flag)+len(facts) > 1<<16 {
			return
		}
		factsText := facts
		if len(factsText) == 0 {
			factsText = []byte("null")
		}
		line := []byte(`{"flag":` + string(flag) + `,"facts":` + string(factsText) + `}`)
		for _, explain := range []bool{false, true} {
			eval := e.EvaluateCase
			if explain {
				eval = e.ExplainCase
			}
			got, err := eval(ctx, nil, line)
			if err != nil {
				t.Fatalf("case %q (explain %v): %v", line, explain, err)
			}
			if want := nativeCase(line, explain); string(got) != want {
				t.Fatalf("case %q (explain %v):\n wazero: %s\n native: %s", line, explain, got, want)
			}
		}

		docText := []byte(`{"v":1,"flags":{"f":` + string(flag) + `}}`)
		native, nativeErr := evaluator.ParseDocument(docText)
		doc, err := e.LoadDocument(ctx, docText)
		if (nativeErr != nil) != (err != nil) || err != nil && !errors.Is(err, ErrDocument) {
			t.Fatalf("document %q: wazero %v, native %v", docText, err, nativeErr)
		}
		if err != nil {
			return
		}
		r, err := doc.Evaluate(ctx, "f", facts)
		nf, ok := native.Flag("f")
		nfacts, factsErr := evaluator.ParseFacts(factsText)
		switch {
		case !ok:
			if !errors.Is(err, ErrFlagNotFound) {
				t.Fatalf("document %q has no flag f natively; wazero: %v", docText, err)
			}
		case factsErr != nil:
			if !errors.Is(err, ErrFacts) {
				t.Fatalf("facts %q are unreadable natively (%v); wazero: %v", factsText, factsErr, err)
			}
		case err != nil:
			t.Fatalf("document %q, facts %q: %v", docText, factsText, err)
		default:
			got := evaluator.AppendResult(nil, r)
			if want := evaluator.AppendResult(nil, nf.Evaluate(nfacts)); string(got) != string(want) {
				t.Fatalf("document %q, facts %q:\n wazero: %s\n native: %s", docText, factsText, got, want)
			}
		}
	})
}
