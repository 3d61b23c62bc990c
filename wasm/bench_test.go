package wasm

import (
	"context"
	"errors"
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
	cpu := startCPU()
	for b.Loop() {
		if _, err := doc.Evaluate(ctx, "typical", facts); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
	flag, pfacts := typicalCaseParsed(b)
	reportRatio(b, nativeNsPerOp(b.N*10, func(int) { flag.Evaluate(pfacts) }))
}

// BenchmarkTypicalWazeroNewFacts: as BenchmarkTypicalWazero, with new facts
// in binary form (Document.EvaluateFacts) on every call (1,024 ids in
// turn), so every call sends and reads new facts: the server evaluating a
// flag for each request, the issue's "document preloaded and facts passed
// compactly". Reports the ratio to native evaluation reading the same
// binary facts into a reused evaluator.Facts, measured in the same run.
func BenchmarkTypicalWazeroNewFacts(b *testing.B) {
	ctx := context.Background()
	doc, _ := typicalDocument(b)
	factsList := make([][]byte, 1024)
	var fb evaluator.FactsBuilder
	for i := range factsList {
		fb.Reset()
		fb.ID(fmt.Sprintf("visitor-%04d", i))
		fb.UserID("user-42")
		fb.String("plan", "pro")
		fb.String("country", "DE")
		fb.Bool("beta", true)
		fb.Number("age", 31)
		factsList[i] = append([]byte(nil), fb.Bytes()...)
	}
	b.ReportAllocs()
	i := 0
	cpu := startCPU()
	for b.Loop() {
		if _, err := doc.EvaluateFacts(ctx, "typical", factsList[i%len(factsList)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	cpu.report(b)
	flag, _ := typicalCaseParsed(b)
	var fa evaluator.Facts
	reportRatio(b, nativeNsPerOp(b.N*10, func(i int) {
		_ = evaluator.ParseFactsBinaryInto(&fa, factsList[i%len(factsList)])
		flag.Evaluate(&fa)
	}))
}

// BenchmarkTypicalWazeroNewFactsJSON: BenchmarkTypicalWazeroNewFacts with
// the same facts as JSON (Document.Evaluate).
func BenchmarkTypicalWazeroNewFactsJSON(b *testing.B) {
	ctx := context.Background()
	doc, _ := typicalDocument(b)
	factsList := make([][]byte, 1024)
	for i := range factsList {
		factsList[i] = fmt.Appendf(nil, `{"id":"visitor-%04d","userId":"user-42","properties":{"plan":"pro","country":"DE","beta":true,"age":31}}`, i)
	}
	b.ReportAllocs()
	i := 0
	cpu := startCPU()
	for b.Loop() {
		if _, err := doc.Evaluate(ctx, "typical", factsList[i%len(factsList)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	cpu.report(b)
	flag, _ := typicalCaseParsed(b)
	var fa evaluator.Facts
	reportRatio(b, nativeNsPerOp(b.N*10, func(i int) {
		_ = evaluator.ParseFactsInto(&fa, factsList[i%len(factsList)])
		flag.Evaluate(&fa)
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

// cpuClock is the process's CPU time when a benchmark's loop started. On a
// machine shared with other work a benchmark's wall time includes the time
// it waited for a CPU; its CPU time does not, and varies much less.
type cpuClock time.Duration

func startCPU() cpuClock { return cpuClock(processCPU()) }

// report reports the process's CPU time per operation since c
// ("cpu-ns/op"); the benchmark's goroutine is the only busy one.
func (c cpuClock) report(b *testing.B) {
	if c == 0 || b.N == 0 {
		return
	}
	b.ReportMetric(float64(processCPU()-time.Duration(c))/float64(b.N), "cpu-ns/op")
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

// freshFacts returns n distinct facts for the typical flag (ids, plans and
// ages vary), as JSON and in binary form.
func freshFacts(b *testing.B, n int) (js, bin [][]byte) {
	plans := []string{"pro", "free", "team"}
	for i := range n {
		j := fmt.Appendf(nil, `{"id":"visitor-%04d","userId":"user-%d","properties":{"plan":%q,"country":"DE","beta":%t,"age":%d}}`,
			i, i%7, plans[i%3], i%2 == 0, 18+i%50)
		bb, err := evaluator.AppendFactsBinary(nil, j)
		if err != nil {
			b.Fatal(err)
		}
		js, bin = append(js, j), append(bin, bb)
	}
	return js, bin
}

// BenchmarkWazeroFreshFacts: Document.EvaluateFacts through the pool, the
// document preloaded and the facts in binary form, different on every call
// (64 fact sets in turn), so that every call reads new facts: the server
// evaluating a flag for each request. "json" is Document.Evaluate with the
// same facts as JSON. Each reports the ratio to native evaluation reading
// the same facts the same way (into a reused evaluator.Facts), measured in
// the same run.
func BenchmarkWazeroFreshFacts(b *testing.B) {
	ctx := context.Background()
	doc, _ := typicalDocument(b)
	flag, _ := typicalCaseParsed(b)
	js, bin := freshFacts(b, 64)
	for _, c := range []struct {
		name   string
		facts  [][]byte
		eval   func(context.Context, string, []byte) (evaluator.Result, error)
		native func(*evaluator.Facts, []byte) error
	}{
		{"binary", bin, doc.EvaluateFacts, evaluator.ParseFactsBinaryInto},
		{"json", js, doc.Evaluate, evaluator.ParseFactsInto},
	} {
		b.Run(c.name, func(b *testing.B) {
			var fa evaluator.Facts
			for i, f := range c.facts { // the results agree with native
				if err := c.native(&fa, f); err != nil {
					b.Fatal(err)
				}
				r, err := c.eval(ctx, "typical", f)
				if err != nil {
					b.Fatal(err)
				}
				if got, want := evaluator.AppendResult(nil, r), evaluator.AppendResult(nil, flag.Evaluate(&fa)); string(got) != string(want) {
					b.Fatalf("facts %d: wazero gives %s, native %s", i, got, want)
				}
			}
			b.ReportAllocs()
			i := 0
			cpu := startCPU()
			for b.Loop() {
				if _, err := c.eval(ctx, "typical", c.facts[i%len(c.facts)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			cpu.report(b)
			reportRatio(b, nativeNsPerOp(b.N*10, func(i int) {
				_ = c.native(&fa, c.facts[i%len(c.facts)])
				flag.Evaluate(&fa)
			}))
		})
	}
}

// TestCorpusBinaryFacts is TestCorpusAsDocuments with the facts in binary
// form (evaluator.AppendFactsBinary of the case's facts) through
// EvaluateFacts: results must equal the corpus. It lives beside the
// benchmark of that path. It also checks EvaluateAllFacts and that facts
// the guest refuses give ErrFacts.
func TestCorpusBinaryFacts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := sharedEngine(t)
	failed, n := 0, 0
	var bin []byte
	for _, c := range loadCorpus(t) {
		line, _ := c.input()
		if _, _, err := evaluator.ParseCase(line); err != nil {
			continue
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
		if bin, err = evaluator.AppendFactsBinary(bin[:0], orNull(facts)); err != nil {
			t.Fatalf("%s: AppendFactsBinary(%s): %v", c.Name, facts, err)
		}
		r, err := doc.EvaluateFacts(ctx, "f", bin)
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

	doc, js := typicalDocumentT(t)
	bin, err := evaluator.AppendFactsBinary(nil, js)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := doc.EvaluateAllFacts(ctx, nil, []string{"typical", "typical"}, bin)
	want, err2 := doc.Evaluate(ctx, "typical", js)
	if err != nil || err2 != nil || len(rs) != 2 || string(evaluator.AppendResult(nil, rs[1])) != string(evaluator.AppendResult(nil, want)) {
		t.Errorf("EvaluateAllFacts gives %v, %v; Evaluate %v, %v", rs, err, want, err2)
	}
	for _, bad := range [][]byte{{9}, append(bin[:len(bin):len(bin)], 0), {evaluator.FactsBinaryVersion, 0, 4, 1, 0xff}} {
		if _, err := doc.EvaluateFacts(ctx, "typical", bad); !errors.Is(err, ErrFacts) {
			t.Errorf("EvaluateFacts(%x) gives %v, want ErrFacts", bad, err)
		}
	}
	if r, err := doc.EvaluateFacts(ctx, "typical", nil); err != nil || r.Reason != evaluator.ReasonDefault {
		t.Errorf("EvaluateFacts with no facts gives %+v, %v; want the default (empty facts)", r, err)
	}
}

func typicalDocumentT(t *testing.T) (*Document, []byte) {
	flag, facts := typicalCase(t)
	doc, err := sharedEngine(t).LoadDocument(context.Background(), []byte(`{"v":1,"flags":{"typical":`+string(flag)+`}}`))
	if err != nil {
		t.Fatal(err)
	}
	return doc, facts
}
