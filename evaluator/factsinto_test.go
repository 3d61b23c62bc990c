package evaluator_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/mfhq/mf/evaluator"
)

// corpusFacts returns the corpus's cases that are cases, with the facts
// member's text ("null" when absent).
func corpusFacts(t *testing.T) (flags []*evaluator.Flag, facts [][]byte, names []string) {
	t.Helper()
	for _, c := range loadCorpus(t) {
		line := c.input(t)
		flag, _, err := evaluator.ParseCase(line)
		if err != nil {
			continue
		}
		var m struct {
			Facts json.RawMessage `json:"facts"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: a case that encoding/json cannot read: %v", c.Name, err)
		}
		if m.Facts == nil {
			m.Facts = json.RawMessage("null")
		}
		flags, facts, names = append(flags, flag), append(facts, m.Facts), append(names, c.Name)
	}
	if len(flags) < 1000 {
		t.Fatalf("only %d corpus cases with facts", len(flags))
	}
	return flags, facts, names
}

func resultLine(r evaluator.Result) string { return string(evaluator.AppendResult(nil, r)) }

// TestFactsIntoCorpus: for every corpus case, facts read by ParseFactsInto
// and by ParseFactsBinaryInto (from AppendFactsBinary), each into one Facts
// reused across all cases, evaluate as the facts ParseFacts reads.
func TestFactsIntoCorpus(t *testing.T) {
	flags, facts, names := corpusFacts(t)
	var intoJSON, intoBin evaluator.Facts
	var bin []byte
	for i, flag := range flags {
		want, err := evaluator.ParseFacts(facts[i])
		if err != nil {
			t.Fatalf("%s: ParseFacts(%s): %v", names[i], facts[i], err)
		}
		wantLine := resultLine(flag.Evaluate(want))
		if err := evaluator.ParseFactsInto(&intoJSON, facts[i]); err != nil {
			t.Fatalf("%s: ParseFactsInto(%s): %v", names[i], facts[i], err)
		}
		if got := resultLine(flag.Evaluate(&intoJSON)); got != wantLine {
			t.Errorf("%s: ParseFactsInto gives %s, ParseFacts %s", names[i], got, wantLine)
		}
		if bin, err = evaluator.AppendFactsBinary(bin[:0], facts[i]); err != nil {
			t.Fatalf("%s: AppendFactsBinary(%s): %v", names[i], facts[i], err)
		}
		if err := evaluator.ParseFactsBinaryInto(&intoBin, bin); err != nil {
			t.Fatalf("%s: ParseFactsBinaryInto(binary of %s): %v", names[i], facts[i], err)
		}
		if got := resultLine(flag.Evaluate(&intoBin)); got != wantLine {
			t.Errorf("%s: binary facts give %s, JSON %s", names[i], got, wantLine)
		}
		// The explanation (unit state, conditions) agrees too.
		_, wx := flag.Explain(want)
		_, gx := flag.Explain(&intoBin)
		if w, g := string(wx.AppendJSON(nil)), string(gx.AppendJSON(nil)); w != g {
			t.Errorf("%s: binary facts explain %s, JSON %s", names[i], g, w)
		}
	}
}

// TestFactsIntoErrors: unreadable facts fail as ParseFacts fails and leave
// empty facts behind.
func TestFactsIntoErrors(t *testing.T) {
	flag, _ := mustCase(t, loadCommon(t)[0].In)
	empty := resultLine(flag.Evaluate(nil))
	good := []byte(`{"id":"4f0c1a2e-7d1b-4c55-9a0e-2b7f3c9d8e11","userId":"user-42","properties":{"plan":"pro","country":"DE","beta":true,"age":31}}`)
	for _, bad := range []string{`{"id":`, `[1]`, `"x"`, "{\"id\":\"\xff\"}", ``} {
		var fa evaluator.Facts
		if err := evaluator.ParseFactsInto(&fa, good); err != nil {
			t.Fatal(err)
		}
		_, want := evaluator.ParseFacts([]byte(bad))
		err := evaluator.ParseFactsInto(&fa, []byte(bad))
		if err == nil || want == nil || err.Error() != want.Error() {
			t.Errorf("ParseFactsInto(%q) gives %v, ParseFacts %v", bad, err, want)
		}
		if got := resultLine(flag.Evaluate(&fa)); got != empty {
			t.Errorf("after ParseFactsInto(%q) failed, the facts evaluate to %s, want empty facts (%s)", bad, got, empty)
		}
	}
}

// TestFactsBinaryVectors: testdata/facts_binary.jsonl, each input read by
// ParseFactsBinary; a readable one equals the JSON given, which
// AppendFactsBinary writes as exactly those bytes.
func TestFactsBinaryVectors(t *testing.T) {
	f, err := os.Open("testdata/facts_binary.jsonl")
	if err != nil {
		t.Fatalf("cannot open testdata/facts_binary.jsonl: %v", err)
	}
	defer f.Close()
	flag, _ := mustCase(t, loadCommon(t)[0].In)
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var v struct {
			Name, Hex, JSON string
			Err             bool
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("facts_binary.jsonl line %d: %v", n+1, err)
		}
		n++
		b, err := hex.DecodeString(v.Hex)
		if err != nil {
			t.Fatalf("%s: bad hex: %v", v.Name, err)
		}
		fa, err := evaluator.ParseFactsBinary(b)
		if v.Err {
			if err == nil {
				t.Errorf("%s: ParseFactsBinary(%x) succeeds, want an error", v.Name, b)
			}
			var pe *evaluator.ParseError
			if err != nil && !errors.As(err, &pe) {
				t.Errorf("%s: error %v is not a *ParseError", v.Name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: ParseFactsBinary(%x): %v", v.Name, b, err)
			continue
		}
		enc, err := evaluator.AppendFactsBinary(nil, []byte(v.JSON))
		if err != nil || !bytes.Equal(enc, b) {
			t.Errorf("%s: AppendFactsBinary(%s) = %x, %v; want %x", v.Name, v.JSON, enc, err, b)
		}
		want, err := evaluator.ParseFacts([]byte(v.JSON))
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if g, w := resultLine(flag.Evaluate(fa)), resultLine(flag.Evaluate(want)); g != w {
			t.Errorf("%s: evaluates to %s, the JSON to %s", v.Name, g, w)
		}
	}
	if n < 10 {
		t.Fatalf("only %d vectors", n)
	}
}

// TestFactsBinaryDepth: nesting as deep as the JSON reader allows reads;
// one deeper fails, as in JSON.
func TestFactsBinaryDepth(t *testing.T) {
	for _, depth := range []int{evaluator.MaxDepth, evaluator.MaxDepth + 1} {
		// {"properties": {"a": [[[...]]]}}: the lists below two objects.
		js := `{"properties":{"a":` + strings.Repeat("[", depth-2) + strings.Repeat("]", depth-2) + `}}`
		_, jerr := evaluator.ParseFacts([]byte(js))
		// The values below the outermost: two keys, two objects' values,
		// and one element in each list but the innermost.
		bin := binary.AppendUvarint([]byte{evaluator.FactsBinaryVersion}, uint64(4+depth-3))
		bin = append(bin, 6, 1, 10)
		bin = append(bin, "properties"...)
		bin = append(bin, 6, 1, 1, 'a')
		for i := 0; i < depth-2; i++ {
			n := byte(1)
			if i == depth-3 {
				n = 0
			}
			bin = append(bin, 5, n)
		}
		_, berr := evaluator.ParseFactsBinary(bin)
		if jerr == nil {
			if enc, err := evaluator.AppendFactsBinary(nil, []byte(js)); err != nil || !bytes.Equal(enc, bin) {
				t.Errorf("depth %d: AppendFactsBinary gives %x, %v; want %x", depth, enc, err, bin)
			}
		}
		if (jerr == nil) != (berr == nil) {
			t.Errorf("depth %d: JSON gives %v, binary %v", depth, jerr, berr)
		}
		if depth > evaluator.MaxDepth && berr == nil {
			t.Errorf("depth %d: binary facts read", depth)
		}
	}
}

// TestFactsBuilder: the builder writes what AppendFactsBinary writes for
// the same facts in JSON, member for member.
func TestFactsBuilder(t *testing.T) {
	var fb evaluator.FactsBuilder
	check := func(js string) {
		t.Helper()
		want, err := evaluator.AppendFactsBinary(nil, []byte(js))
		if err != nil {
			t.Fatal(err)
		}
		if got := fb.Bytes(); !bytes.Equal(got, want) {
			t.Errorf("builder gives %x, want %x (%s)", got, want, js)
		}
		fb.Reset()
	}
	check(`{}`)
	fb.ID("v-1")
	fb.UserID("user-42")
	fb.String("plan", "pro")
	fb.Number("age", 31.5)
	fb.Bool("beta", true)
	fb.Bool("gamma", false)
	fb.Strings("tags", "a", "b")
	fb.Segments([]string{"s1"}, nil)
	check(`{"id":"v-1","userId":"user-42","properties":{"plan":"pro","age":31.5,"beta":true,"gamma":false,"tags":["a","b"]},"segments":{"in":["s1"],"unavailable":[]}}`)
	fb.SegmentsPending()
	check(`{"segments":"pending"}`)
	fb.UserID("u")
	fb.SegmentsUnavailable()
	check(`{"userId":"u","segments":"unavailable"}`)
}

// TestFactsIntoAllocs: reading new facts into a used Facts allocates
// nothing, from JSON or binary, and building binary facts allocates
// nothing once the builder has grown.
func TestFactsIntoAllocs(t *testing.T) {
	js := [][]byte{
		[]byte(`{"id":"visitor-0001","userId":"user-42","properties":{"plan":"pro","country":"DE","beta":true,"age":31,"tags":["a","b"]},"segments":{"in":["s1","s2"],"unavailable":["s3"]}}`),
		[]byte(`{"id":"visitor-0002","properties":{"plan":"free","age":"31"},"segments":"pending"}`),
	}
	var bins [][]byte
	for _, j := range js {
		b, err := evaluator.AppendFactsBinary(nil, j)
		if err != nil {
			t.Fatal(err)
		}
		bins = append(bins, b)
	}
	var fa evaluator.Facts
	i := 0
	if n := testing.AllocsPerRun(200, func() {
		if err := evaluator.ParseFactsInto(&fa, js[i%2]); err != nil {
			t.Fatal(err)
		}
		i++
	}); n != 0 {
		t.Errorf("ParseFactsInto allocates %.1f times per run, want 0", n)
	}
	if n := testing.AllocsPerRun(200, func() {
		if err := evaluator.ParseFactsBinaryInto(&fa, bins[i%2]); err != nil {
			t.Fatal(err)
		}
		i++
	}); n != 0 {
		t.Errorf("ParseFactsBinaryInto allocates %.1f times per run, want 0", n)
	}
	var fb evaluator.FactsBuilder
	in := []string{"s1", "s2"}
	if n := testing.AllocsPerRun(200, func() {
		fb.Reset()
		fb.ID("visitor-0001")
		fb.UserID("user-42")
		fb.String("plan", "pro")
		fb.Number("age", 31)
		fb.Bool("beta", true)
		fb.Segments(in, nil)
		fb.Bytes()
	}); n != 0 {
		t.Errorf("FactsBuilder allocates %.1f times per run, want 0", n)
	}
}

// BenchmarkParseFactsInto reads the typical case's facts into a reused
// Facts, from JSON and from the binary form, two sets of facts in turn (the
// same bytes twice in a row are not read again).
func BenchmarkParseFactsInto(b *testing.B) {
	var js, bin [2][]byte
	for i := range js {
		js[i] = fmt.Appendf(nil, `{"id":"4f0c1a2e-7d1b-4c55-9a0e-2b7f3c9d8e1%d","userId":"user-42","properties":{"plan":"pro","country":"DE","beta":true,"age":31}}`, i)
		var err error
		if bin[i], err = evaluator.AppendFactsBinary(nil, js[i]); err != nil {
			b.Fatal(err)
		}
	}
	var fa evaluator.Facts
	for _, c := range []struct {
		name  string
		in    [2][]byte
		parse func(*evaluator.Facts, []byte) error
	}{
		{"json", js, evaluator.ParseFactsInto},
		{"binary", bin, evaluator.ParseFactsBinaryInto},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.in[0])))
			i := 0
			for b.Loop() {
				if err := c.parse(&fa, c.in[i&1]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
