package wasm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mfhq/mf/evaluator"
)

// The benchmarks evaluate the evaluator's typical flag (two rules, three
// conditions, a split; evaluator/testdata/common_paths.jsonl) natively and
// through the wazero pool, in the same run, and report the ratio.
//
//	go test -run '^$' -bench . -benchmem ./wasm

// nativeNsPerOp times n runs of op and returns nanoseconds per run: the
// native side of a ratio, measured inside the wazero benchmark (the testing
// package cannot run one benchmark inside another).
func nativeNsPerOp(n int, op func(i int)) float64 {
	n = max(n, 10000)
	start := time.Now()
	for i := range n {
		op(i)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n)
}

func typicalCaseParsed(tb testing.TB) (*evaluator.Flag, *evaluator.Facts) {
	flag, facts := typicalCase(tb)
	f, err := evaluator.ParseFlag(flag)
	if err != nil {
		tb.Fatal(err)
	}
	fa, err := evaluator.ParseFacts(facts)
	if err != nil {
		tb.Fatal(err)
	}
	return f, fa
}

// BenchmarkTypicalNative: the compiled flag evaluated for parsed facts.
func BenchmarkTypicalNative(b *testing.B) {
	flag, facts := typicalCaseParsed(b)
	b.ReportAllocs()
	for b.Loop() {
		flag.Evaluate(facts)
	}
}

// BenchmarkTypicalNativeFactsJSON: facts parsed from JSON each time.
func BenchmarkTypicalNativeFactsJSON(b *testing.B) {
	flag, _ := typicalCaseParsed(b)
	_, facts := typicalCase(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(facts)))
	for b.Loop() {
		fa, err := evaluator.ParseFacts(facts)
		if err != nil {
			b.Fatal(err)
		}
		flag.Evaluate(fa)
	}
}

func typicalDocument(b *testing.B) (*Document, []byte) {
	flag, facts := typicalCase(b)
	e := sharedEngine(b)
	doc, err := e.LoadDocument(context.Background(), []byte(`{"v":1,"flags":{"typical":`+string(flag)+`}}`))
	if err != nil {
		b.Fatal(err)
	}
	return doc, facts
}

// BenchmarkTypicalWazero: Document.Evaluate through the pool, the document
// preloaded and the facts the same as the call before (parsed once per
// instance): the server evaluating a request's flags. Reports the ratio to
// BenchmarkTypicalNative measured in the same run.
func BenchmarkTypicalWazero(b *testing.B) {
	ctx := context.Background()
	doc, facts := typicalDocument(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := doc.Evaluate(ctx, "typical", facts); err != nil {
			b.Fatal(err)
		}
	}
	flag, pfacts := typicalCaseParsed(b)
	reportRatio(b, nativeNsPerOp(b.N*10, func(int) { flag.Evaluate(pfacts) }))
}

// BenchmarkTypicalWazeroNewFacts: as BenchmarkTypicalWazero, with facts that
// differ on every call (1,024 ids in turn), so every call parses facts.
func BenchmarkTypicalWazeroNewFacts(b *testing.B) {
	ctx := context.Background()
	doc, _ := typicalDocument(b)
	factsList := make([][]byte, 1024)
	for i := range factsList {
		factsList[i] = fmt.Appendf(nil, `{"id":"visitor-%04d","userId":"user-42","properties":{"plan":"pro","country":"DE","beta":true,"age":31}}`, i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := doc.Evaluate(ctx, "typical", factsList[i%len(factsList)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	flag, _ := typicalCaseParsed(b)
	reportRatio(b, nativeNsPerOp(b.N*10, func(i int) {
		fa, _ := evaluator.ParseFacts(factsList[i%len(factsList)])
		flag.Evaluate(fa)
	}))
}

// BenchmarkTypicalWazeroParallel: BenchmarkTypicalWazero from GOMAXPROCS
// goroutines sharing the pool.
func BenchmarkTypicalWazeroParallel(b *testing.B) {
	ctx := context.Background()
	doc, facts := typicalDocument(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := doc.Evaluate(ctx, "typical", facts); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCaseLine: one mf eval line (parse the flag and the facts,
// evaluate, write the result line), natively and in wazero.
func BenchmarkCaseLine(b *testing.B) {
	flag, facts := typicalCase(b)
	line := []byte(`{"flag":` + string(flag) + `,"facts":` + string(facts) + `}`)
	var native float64
	b.Run("native", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(line)))
		var dst []byte
		for b.Loop() {
			fl, fa, err := evaluator.ParseCase(line)
			if err != nil {
				b.Fatal(err)
			}
			dst = evaluator.AppendResult(dst[:0], fl.Evaluate(fa))
		}
		native = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("wazero", func(b *testing.B) {
		ctx := context.Background()
		e := sharedEngine(b)
		b.ReportAllocs()
		b.SetBytes(int64(len(line)))
		var dst []byte
		var err error
		for b.Loop() {
			if dst, err = e.EvaluateCase(ctx, dst[:0], line); err != nil {
				b.Fatal(err)
			}
		}
		reportRatio(b, native)
	})
}

// reportRatio reports this benchmark's time per operation over native's.
func reportRatio(b *testing.B, nativeNs float64) {
	if nativeNs <= 0 || b.N == 0 {
		return
	}
	own := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(nativeNs, "native-ns/op")
	b.ReportMetric(own/nativeNs, "wazero/native")
}
