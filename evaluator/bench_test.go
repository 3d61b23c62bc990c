package evaluator_test

import (
	"os"
	"testing"

	"github.com/mfhq/mf/evaluator"
)

// BenchmarkEvaluateTypical: native evaluation of the typical flag (two
// rules, three conditions, a split), facts parsed beforehand.
func BenchmarkEvaluateTypical(b *testing.B) {
	c := loadCommon(b)[0]
	flag, facts := mustCase(b, c.In)
	if r := flag.Evaluate(facts); r.Reason != evaluator.ReasonSplit {
		b.Fatalf("the typical flag should end in a split, got %v", r.Reason)
	}
	b.ReportAllocs()
	for b.Loop() {
		flag.Evaluate(facts)
	}
}

// BenchmarkEvaluateCommonPaths evaluates every common-path case in turn.
func BenchmarkEvaluateCommonPaths(b *testing.B) {
	var flags []*evaluator.Flag
	var factsList []*evaluator.Facts
	for _, c := range loadCommon(b) {
		flag, facts := mustCase(b, c.In)
		flags, factsList = append(flags, flag), append(factsList, facts)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		flags[i].Evaluate(factsList[i])
		i++
		if i == len(flags) {
			i = 0
		}
	}
}

// BenchmarkParseFacts reads the typical case's facts.
func BenchmarkParseFacts(b *testing.B) {
	facts := []byte(`{"id":"4f0c1a2e-7d1b-4c55-9a0e-2b7f3c9d8e11","userId":"user-42","properties":{"plan":"pro","country":"DE","beta":true,"age":31}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(facts)))
	for b.Loop() {
		if _, err := evaluator.ParseFacts(facts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseCaseAndEvaluate is one `mf eval` line end to end.
func BenchmarkParseCaseAndEvaluate(b *testing.B) {
	line := []byte(loadCommon(b)[0].In)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		flag, facts, err := evaluator.ParseCase(line)
		if err != nil {
			b.Fatal(err)
		}
		buf = evaluator.AppendResult(buf[:0], flag.Evaluate(facts))
	}
}

// BenchmarkParseDocument100 compiles a server document of 100 flags.
func BenchmarkParseDocument100(b *testing.B) {
	doc, err := os.ReadFile("testdata/document_100.json")
	if err != nil {
		b.Fatalf("cannot read testdata/document_100.json: %v", err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := evaluator.ParseDocument(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBucket(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		evaluator.Bucket("3f9a1c0b7e2d", ".v", "4f0c1a2e-7d1b-4c55-9a0e-2b7f3c9d8e11")
	}
}
