package evaluator_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/mfhq/mf/evaluator"
	"github.com/mfhq/mf/evaluator/internal/corpusgen/oracle"
)

// checkLine evaluates one line twice natively, through Explain, and with
// the independent oracle; all must agree byte for byte.
func checkLine(t *testing.T, line []byte) {
	got := evalLine(line)
	if again := evalLine(line); again != got {
		t.Fatalf("not deterministic on %q: %s then %s", line, got, again)
	}
	if flag, facts, err := evaluator.ParseCase(line); err == nil {
		res, x := flag.Explain(facts)
		if s := string(evaluator.AppendResult(nil, res)); s != got {
			t.Fatalf("Explain gives %s, Evaluate %s on %q", s, got, line)
		}
		_ = x.String()
		_ = x.AppendJSON(nil)
	}
	if want := oracle.Eval(line); got != want {
		t.Fatalf("on %q\n evaluator: %s\n oracle:    %s", line, got, want)
	}
}

// FuzzParseCase feeds arbitrary lines: no panic, deterministic, and the
// same answer as the oracle. Seeds: every corpus line whose name starts
// with parse/, unicode/ or values/, every 25th other line, and the files in
// testdata/fuzz/FuzzParseCase.
func FuzzParseCase(f *testing.F) {
	for i, c := range loadCorpus(f) {
		if i%25 == 0 || strings.HasPrefix(c.Name, "parse/") || strings.HasPrefix(c.Name, "unicode/") || strings.HasPrefix(c.Name, "values/") {
			f.Add(c.input(f))
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkLine(t, line)
	})
}

// FuzzCases builds well-formed (and nearly well-formed) cases from the
// fuzzer's bytes, so that mutations explore rules and conditions rather
// than JSON syntax, and compares the evaluator with the oracle.
func FuzzCases(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte("typical flag with some bytes to spend on rules and facts"))
	f.Add([]byte{255, 254, 253, 3, 3, 3, 9, 9, 9, 200, 100, 50, 25, 12, 6, 3, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkLine(t, []byte(buildCase(data)))
	})
}

// bytePicker hands out choices from the fuzzer's bytes (zeros when spent).
type bytePicker struct {
	b []byte
	i int
}

func (p *bytePicker) next() int {
	if p.i >= len(p.b) {
		return 0
	}
	p.i++
	return int(p.b[p.i-1])
}

func (p *bytePicker) pick(xs ...string) string { return xs[p.next()%len(xs)] }

func buildCase(data []byte) string {
	p := &bytePicker{b: data}
	scalars := []string{`"pro"`, `"DE"`, `"12"`, `"12.0"`, `"-0"`, `""`, `"😀"`, `"a😀"`, `"null"`, `12`, `12.0`, `-0`, `0`,
		`1e2`, `100`, `true`, `false`, `null`, `"\u00e9"`, `"é"`, `0.1`, `"0.1"`, `"1e2"`}
	value := func() string {
		switch p.next() % 6 {
		case 0:
			return "[]"
		case 1:
			return "[" + p.pick(scalars...) + "]"
		case 2:
			return "[" + p.pick(scalars...) + "," + p.pick(scalars...) + "]"
		case 3:
			return `{"a":` + p.pick(scalars...) + "}"
		case 4:
			return "[[" + p.pick(scalars...) + "]]"
		}
		return p.pick(scalars...)
	}
	keys := []string{"plan", "age", "k", "tags"}
	cond := func() string {
		switch p.next() % 8 {
		case 0:
			return `["s","` + p.pick("s1", "s2") + `"]`
		case 1:
			return `["s","` + p.pick("s1", "s2") + `",` + p.pick("1", "0", `"1"`) + `]`
		case 2:
			return `["p","` + p.pick(keys...) + `","` + p.pick("set", "unset", "eq") + `",null]`
		}
		return `["p","` + p.pick(keys...) + `","` + p.pick("is", "not", "has", "nhas", "pre", "gt", "lt") + `",` + value() + `]`
	}
	var rules []string
	for n := p.next() % 4; n > 0; n-- {
		var members []string
		if p.next()%3 > 0 {
			var cs []string
			for c := p.next() % 4; c > 0; c-- {
				cs = append(cs, cond())
			}
			members = append(members, `"if":[`+strings.Join(cs, ",")+`]`)
		}
		switch p.next() % 5 {
		case 0, 1:
			members = append(members, `"x":"`+p.pick("a", "b", "on")+`"`)
		case 2:
			members = append(members, `"sh":`+p.pick("0", "1", "5000", "9999", "10000", "10001", "-1", "0.5"))
			fallthrough
		case 3:
			var w []string
			for v := p.next() % 4; v > 0; v-- {
				w = append(w, `["`+p.pick("a", "b", "on", "off")+`",`+strconv.Itoa(p.next()*40)+`]`)
			}
			members = append(members, `"w":[`+strings.Join(w, ",")+`]`)
		}
		if p.next()%16 == 0 {
			members = append(members, `"x":"c"`) // sometimes x with sh or w
		}
		rules = append(rules, "{"+strings.Join(members, ",")+"}")
	}
	flag := `{"s":"` + p.pick("3f9a1c0b7e2d", "seed", "") + `","t":"m","u":"` + p.pick("b", "p", "b", "x") + `","d":"off","p":{"a":` +
		value() + `,"on":{"z":1,"y":[` + p.pick(scalars...) + `]}},"r":[` + strings.Join(rules, ",") + `]`
	switch p.next() % 12 {
	case 0:
		flag += `,"off":1`
	case 1:
		flag += `,"need":2`
	case 2:
		flag += `,"need":1`
	}
	flag += "}"
	var props []string
	for _, k := range keys {
		if p.next()%3 > 0 {
			props = append(props, `"`+k+`":`+value())
		}
	}
	facts := `{"id":` + p.pick(`"anon-1"`, `"anon-2"`, `" guest "`, `42`, `"user-`+strconv.Itoa(p.next())+`"`) +
		`,"userId":` + p.pick(`"user-1"`, `"undefined"`, `null`, `"u`+strconv.Itoa(p.next())+`"`) +
		`,"properties":{` + strings.Join(props, ",") + `}`
	switch p.next() % 5 {
	case 0:
		facts += `,"segments":"pending"`
	case 1:
		facts += `,"segments":"unavailable"`
	case 2:
		facts += `,"segments":{"in":["` + p.pick("s1", "s2") + `"],"unavailable":["` + p.pick("s2", "s3") + `"]}`
	}
	return `{"flag":` + flag + `,"facts":` + facts + "}}"
}
