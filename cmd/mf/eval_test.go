package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// evalCorpusCase is one line of the evaluator's corpus.
type evalCorpusCase struct {
	Name string `json:"name"`
	In   string `json:"in"`
	In64 string `json:"in64"`
	Want string `json:"want"`
}

// evalCorpus returns the corpus cases whose input is one line (a few
// invalid inputs hold a raw line feed, which would make them two lines of
// mf eval input), and stdin holding those inputs, one a line.
func evalCorpus(t *testing.T) ([]evalCorpusCase, []byte) {
	t.Helper()
	f, err := os.Open("../../evaluator/testdata/corpus.jsonl")
	if err != nil {
		t.Fatalf("cannot open the evaluator corpus: %v", err)
	}
	defer f.Close()
	var cases []evalCorpusCase
	var stdin bytes.Buffer
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var c evalCorpusCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("corpus line %d: %v", len(cases)+1, err)
		}
		in := []byte(c.In)
		if c.In64 != "" {
			if in, err = base64.StdEncoding.DecodeString(c.In64); err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
		}
		if bytes.IndexByte(in, '\n') >= 0 {
			continue
		}
		cases = append(cases, c)
		stdin.Write(in)
		stdin.WriteByte('\n')
	}
	if len(cases) < 10000 {
		t.Fatalf("only %d single-line corpus cases, want at least 10,000", len(cases))
	}
	return cases, stdin.Bytes()
}

func runEval(t *testing.T, stdin []byte, args ...string) (int, []string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := evalMain(context.Background(), args, bytes.NewReader(stdin), &stdout, &stderr)
	out := strings.Split(stdout.String(), "\n")
	if out[len(out)-1] != "" {
		t.Errorf("mf eval %v: the output does not end with a line feed", args)
	}
	return code, out[:len(out)-1], stderr.String()
}

// TestEvalCorpus runs the whole corpus through mf eval with each engine:
// every result line must be the expected one, and the explained lines of
// the two engines must be the same.
func TestEvalCorpus(t *testing.T) {
	cases, stdin := evalCorpus(t)
	explained := map[string][]string{}
	for _, engine := range []string{"native", "wasm"} {
		code, out, stderr := runEval(t, stdin, "--engine", engine)
		if code != 0 || len(out) != len(cases) {
			t.Fatalf("--engine %s: exit %d, %d lines for %d cases; stderr: %s", engine, code, len(out), len(cases), stderr)
		}
		failed := 0
		for i, c := range cases {
			if out[i] != c.Want {
				if failed++; failed <= 10 {
					t.Errorf("--engine %s: %s: got %s, want %s", engine, c.Name, out[i], c.Want)
				}
			}
		}
		code, out, stderr = runEval(t, stdin, "--engine", engine, "--explain")
		if code != 0 || len(out) != len(cases) {
			t.Fatalf("--engine %s --explain: exit %d, %d lines for %d cases; stderr: %s", engine, code, len(out), len(cases), stderr)
		}
		explained[engine] = out
	}
	for i, c := range cases {
		native, wasm := explained["native"][i], explained["wasm"][i]
		if native != wasm {
			t.Fatalf("%s: --explain differs:\n native: %s\n wasm:   %s", c.Name, native, wasm)
		}
		var x struct {
			Explain json.RawMessage `json:"explain"`
		}
		if err := json.Unmarshal([]byte(native), &x); err != nil || len(x.Explain) == 0 {
			t.Fatalf("%s: --explain line %s has no explanation (%v)", c.Name, native, err)
		}
		if !strings.HasPrefix(native, strings.TrimSuffix(c.Want, "}")) {
			t.Fatalf("%s: --explain line %s does not extend the result %s", c.Name, native, c.Want)
		}
	}
}

// TestEvalLines: large lines, blank lines, a line that is not a case, a
// last line without a line feed, CRLF; through the real binary.
func TestEvalLines(t *testing.T) {
	flag := `{"s":"3f9a1c0b7e2d","t":"m","u":"b","d":"a","p":{"b":{"x":1}},"r":[{"if":[["p","k","pre",["z"]]],"x":"b"}]}`
	long := strings.Repeat("z", 300_000) // lines far beyond bufio.Scanner's 64 KiB
	stdin := strings.Join([]string{
		`{"flag":` + flag + `,"facts":{"properties":{"k":"` + long + `"}}}`,
		``,
		`not json`,
		`{"flag":` + flag + `}` + "\r",
		`{"flag":` + flag + `,"facts":{"properties":{"k":"y"}}}`,
	}, "\n")
	want := []string{
		`{"variant":"b","reason":"TARGETING_MATCH","rule":0,"value":{"x":1}}`,
		`{"reason":"ERROR","errorCode":"PARSE_ERROR"}`,
		`{"reason":"ERROR","errorCode":"PARSE_ERROR"}`,
		`{"variant":"a","reason":"DEFAULT"}`,
		`{"variant":"a","reason":"DEFAULT"}`,
	}
	for _, engine := range []string{"native", "wasm"} {
		code, stdout, stderr := runMF(t, []byte(stdin), "eval", "--engine", engine)
		got := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		if code != 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("mf eval --engine %s: exit %d\n got:  %q\n want: %q\n stderr: %s", engine, code, got, want, stderr)
		}
	}
}

func TestEvalFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--engine", "js"}, 2, "--engine must be native or wasm"},
		{[]string{"extra"}, 2, "unexpected argument"},
		{[]string{"--nope"}, 2, "flag provided but not defined"},
		{[]string{"-h"}, 0, "usage: mf eval"},
	} {
		var stdout, stderr bytes.Buffer
		code := evalMain(context.Background(), c.args, strings.NewReader(""), &stdout, &stderr)
		// Help goes to stdout, mistakes to stderr.
		if code != c.code || !strings.Contains(stderr.String()+stdout.String(), c.err) {
			t.Errorf("mf eval %v: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, stdout.String(), stderr.String(), c.code, c.err)
		}
	}
	// No input, no output.
	if code, out, _ := runEval(t, nil); code != 0 || len(out) != 0 {
		t.Errorf("empty input: exit %d, output %q", code, out)
	}
}
