package wasm

import (
	"context"
	"errors"
	"testing"

	"github.com/mfhq/mf/evaluator"
)

// FuzzNativeVsWasm evaluates random flags and facts (seeded from the
// evaluator's corpus) natively and in wazero, through every export of the
// guest: case lines, explained case lines, and documents evaluated by key
// with facts as JSON and in binary form (the facts converted from JSON, and
// the fuzzed bytes read as binary facts). Answers and errors must be the
// same, and no call may trap.
//
//	go test -fuzz=FuzzNativeVsWasm ./wasm
//
// Findings are kept in testdata/fuzz/FuzzNativeVsWasm.
func FuzzNativeVsWasm(f *testing.F) {
	for i, c := range loadCorpus(f) {
		if i%10 != 0 && i%10 != 5 {
			continue
		}
		line, _ := c.input()
		flag, facts, ok := caseParts(line)
		switch {
		case !ok || flag == nil:
			f.Add(line, []byte(nil))
		case i%10 == 5:
			// Facts in binary form, so that the fuzzer starts from
			// readable binary facts too.
			if bin, err := evaluator.AppendFactsBinary(nil, orNull(facts)); err == nil {
				f.Add(flag, bin)
			}
		default:
			f.Add(flag, facts)
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
		if !ok {
			return
		}

		// The same facts in binary form: natively and in wazero they read
		// as the JSON does (native JSON vs wasm binary, native binary vs
		// native JSON).
		if factsErr == nil {
			bin, err := evaluator.AppendFactsBinary(nil, factsText)
			if err != nil {
				t.Fatalf("facts %q read as JSON but cannot be converted: %v", factsText, err)
			}
			want := string(evaluator.AppendResult(nil, nf.Evaluate(nfacts)))
			nbin, err := evaluator.ParseFactsBinary(bin)
			if err != nil {
				t.Fatalf("facts %q in binary form (%x) are refused natively: %v", factsText, bin, err)
			}
			if got := string(evaluator.AppendResult(nil, nf.Evaluate(nbin))); got != want {
				t.Fatalf("document %q, facts %q: native binary %s, native JSON %s", docText, factsText, got, want)
			}
			r, err := doc.EvaluateFacts(ctx, "f", bin)
			if err != nil {
				t.Fatalf("document %q, facts %q in binary form: %v", docText, factsText, err)
			}
			if got := string(evaluator.AppendResult(nil, r)); got != want {
				t.Fatalf("document %q, facts %q:\n wazero binary: %s\n native JSON:   %s", docText, factsText, got, want)
			}
		}

		// The fuzzed facts bytes themselves as binary facts: refused by
		// both or read the same by both.
		nbin, binErr := evaluator.ParseFactsBinary(facts)
		r, err = doc.EvaluateFacts(ctx, "f", facts)
		switch {
		case len(facts) == 0:
			// Empty binary facts are empty facts on the host (as JSON).
		case binErr != nil:
			if !errors.Is(err, ErrFacts) {
				t.Fatalf("binary facts %x are unreadable natively (%v); wazero: %v", facts, binErr, err)
			}
		case err != nil:
			t.Fatalf("document %q, binary facts %x: %v", docText, facts, err)
		default:
			got := evaluator.AppendResult(nil, r)
			if want := evaluator.AppendResult(nil, nf.Evaluate(nbin)); string(got) != string(want) {
				t.Fatalf("document %q, binary facts %x:\n wazero: %s\n native: %s", docText, facts, got, want)
			}
		}
	})
}
