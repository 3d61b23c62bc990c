package evaluator_test

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"

	"github.com/mfhq/mf/evaluator"
)

// commonCase is one line of testdata/common_paths.jsonl: a case on a
// common evaluation path, the first being the "typical flag" of the
// benchmarks (two rules, three conditions, a split).
type commonCase struct {
	Name string          `json:"name"`
	In   json.RawMessage `json:"in"`
}

func loadCommon(t testing.TB) []commonCase {
	t.Helper()
	f, err := os.Open("testdata/common_paths.jsonl")
	if err != nil {
		t.Fatalf("cannot open testdata/common_paths.jsonl: %v", err)
	}
	defer f.Close()
	var cases []commonCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c commonCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("common_paths.jsonl line %d: %v", len(cases)+1, err)
		}
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		t.Fatal("testdata/common_paths.jsonl is empty")
	}
	return cases
}

func mustCase(t testing.TB, line []byte) (*evaluator.Flag, *evaluator.Facts) {
	t.Helper()
	flag, facts, err := evaluator.ParseCase(line)
	if err != nil {
		t.Fatalf("cannot parse case %s: %v", line, err)
	}
	return flag, facts
}

// TestEvaluateAllocs: evaluating a compiled flag allocates nothing on the
// common paths.
func TestEvaluateAllocs(t *testing.T) {
	for _, c := range loadCommon(t) {
		flag, facts := mustCase(t, c.In)
		var res evaluator.Result
		allocs := testing.AllocsPerRun(200, func() { res = flag.Evaluate(facts) })
		if allocs != 0 {
			t.Errorf("%s: Evaluate allocates %.1f times per run, want 0", c.Name, allocs)
		}
		buf := make([]byte, 0, 256)
		allocs = testing.AllocsPerRun(200, func() { buf = evaluator.AppendResult(buf[:0], res) })
		if allocs != 0 {
			t.Errorf("%s: AppendResult into a large enough buffer allocates %.1f times per run, want 0", c.Name, allocs)
		}
	}
}

// TestEvaluateConcurrent: a Flag and Facts are safe for concurrent use
// (run with -race).
func TestEvaluateConcurrent(t *testing.T) {
	cases := loadCommon(t)
	type pair struct {
		flag  *evaluator.Flag
		facts *evaluator.Facts
		want  string
	}
	var pairs []pair
	for _, c := range cases {
		flag, facts := mustCase(t, c.In)
		pairs = append(pairs, pair{flag, facts, string(evaluator.AppendResult(nil, flag.Evaluate(facts)))})
	}
	done := make(chan string, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for i := 0; i < 500; i++ {
				p := pairs[i%len(pairs)]
				if got := string(evaluator.AppendResult(nil, p.flag.Evaluate(p.facts))); got != p.want {
					done <- got + " != " + p.want
					return
				}
			}
			done <- ""
		}()
	}
	for g := 0; g < 4; g++ {
		if msg := <-done; msg != "" {
			t.Error(msg)
		}
	}
}
