package evaluator_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"os"
	"testing"

	"github.com/mfhq/mf/evaluator"
)

// corpusCase is one line of testdata/corpus.jsonl (docs/evaluator.md).
type corpusCase struct {
	Name string `json:"name"`
	In   string `json:"in"`
	In64 string `json:"in64"`
	Want string `json:"want"`
}

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	f, err := os.Open("testdata/corpus.jsonl")
	if err != nil {
		t.Fatalf("cannot open the corpus (regenerate it with go run ./evaluator/internal/corpusgen): %v", err)
	}
	defer f.Close()
	var cases []corpusCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var c corpusCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("corpus line %d: %v", len(cases)+1, err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("cannot read the corpus: %v", err)
	}
	return cases
}

func (c corpusCase) input(t testing.TB) []byte {
	if c.In64 != "" {
		b, err := base64.StdEncoding.DecodeString(c.In64)
		if err != nil {
			t.Fatalf("%s: bad in64: %v", c.Name, err)
		}
		return b
	}
	return []byte(c.In)
}

// evalLine is what `mf eval` does with one line.
func evalLine(line []byte) string {
	flag, facts, err := evaluator.ParseCase(line)
	if err != nil {
		return string(evaluator.AppendResult(nil, evaluator.ParseErrorResult()))
	}
	return string(evaluator.AppendResult(nil, flag.Evaluate(facts)))
}

func TestCorpus(t *testing.T) {
	cases := loadCorpus(t)
	if len(cases) < 10000 {
		t.Fatalf("the corpus has %d cases, want at least 10000", len(cases))
	}
	failed := 0
	for _, c := range cases {
		got := evalLine(c.input(t))
		if got != c.Want {
			failed++
			if failed <= 20 {
				t.Errorf("%s\n in:   %s\n got:  %s\n want: %s", c.Name, c.input(t), got, c.Want)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d corpus cases differ", failed, len(cases))
	}
}

// TestCorpusExplain checks that Explain answers exactly as Evaluate on
// every case and that its JSON form is valid JSON.
func TestCorpusExplain(t *testing.T) {
	for _, c := range loadCorpus(t) {
		flag, facts, err := evaluator.ParseCase(c.input(t))
		if err != nil {
			continue
		}
		res, x := flag.Explain(facts)
		got := string(evaluator.AppendResult(nil, res))
		if got != c.Want {
			t.Errorf("%s: Explain gives %s, want %s", c.Name, got, c.Want)
		}
		if js := x.AppendJSON(nil); !json.Valid(js) {
			t.Errorf("%s: explanation is not valid JSON: %s", c.Name, js)
		}
		if x.String() == "" {
			t.Errorf("%s: empty explanation", c.Name)
		}
	}
}
