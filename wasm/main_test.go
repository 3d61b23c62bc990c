package wasm

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/mfhq/mf/evaluator"
)

// The tests share one compilation of the module (the cache) and one engine
// with the default configuration; tests that need another configuration
// build their own engine on the same cache.
var (
	compileCache = wazero.NewCompilationCache()
	sharedOnce   sync.Once
	shared       *Engine
	sharedErr    error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		_ = shared.Close(context.Background())
	}
	_ = compileCache.Close(context.Background())
	os.Exit(code)
}

// testConfig is DefaultConfig on the shared compilation cache, logging to
// the test.
func testConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.CompilationCache = compileCache
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	return cfg
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// sharedEngine returns the engine shared by the tests.
func sharedEngine(t testing.TB) *Engine {
	t.Helper()
	sharedOnce.Do(func() {
		cfg := DefaultConfig()
		cfg.CompilationCache = compileCache
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		shared, sharedErr = New(context.Background(), cfg)
	})
	if sharedErr != nil {
		t.Fatalf("cannot start the shared engine: %v", sharedErr)
	}
	return shared
}

// newEngineT starts an engine with cfg and closes it at the end of the test.
func newEngineT(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("cannot start an engine: %v", err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

// corpusPath is the evaluator's corpus: every build must answer it alike.
const corpusPath = "../evaluator/testdata/corpus.jsonl"

// corpusCase is one line of the corpus (docs/evaluator.md): the input line
// as text, or base64 when it is not valid UTF-8, and the expected result.
type corpusCase struct {
	Name string `json:"name"`
	In   string `json:"in"`
	In64 string `json:"in64"`
	Want string `json:"want"`
}

func (c corpusCase) input() ([]byte, error) {
	if c.In64 != "" {
		return base64.StdEncoding.DecodeString(c.In64)
	}
	return []byte(c.In), nil
}

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	f, err := os.Open(corpusPath)
	if err != nil {
		t.Fatalf("cannot open the evaluator corpus (go run ./evaluator/internal/corpusgen writes it): %v", err)
	}
	defer f.Close()
	var cases []corpusCase
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var c corpusCase
			if err := json.Unmarshal(line, &c); err != nil {
				t.Fatalf("corpus line %d: %v", len(cases)+1, err)
			}
			cases = append(cases, c)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("cannot read the corpus: %v", err)
		}
	}
	if len(cases) < 10000 {
		t.Fatalf("the corpus has %d cases, want at least 10,000", len(cases))
	}
	return cases
}

// nativeCase is what the native evaluator answers for a case line, as mf
// eval writes it (cmd/mf/eval.go): the result line, with "explain" when
// explain is set. The guest must write the same.
func nativeCase(line []byte, explain bool) string {
	flag, facts, err := evaluator.ParseCase(line)
	if err != nil {
		dst := evaluator.AppendResult(nil, evaluator.ParseErrorResult())
		if !explain {
			return string(dst)
		}
		return fmt.Sprintf(`%s,"explain":{"parseError":%s}}`, dst[:len(dst)-1], jsonString(err.Error()))
	}
	if !explain {
		return string(evaluator.AppendResult(nil, flag.Evaluate(facts)))
	}
	r, x := flag.Explain(facts)
	dst := evaluator.AppendResult(nil, r)
	return fmt.Sprintf(`%s,"explain":%s}`, dst[:len(dst)-1], x.AppendJSON(nil))
}

// jsonString is s as a JSON string, without HTML escaping.
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// sameJSON reports whether two JSON texts hold the same value (objects
// compared as sets of members): how a JavaScript result object is compared
// with a Go result line.
func sameJSON(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// caseParts splits a case line into the raw text of its "flag" and "facts"
// members (the last of each, as the evaluator reads them; facts nil when
// absent). ok is false when the line is not a JSON object.
func caseParts(line []byte) (flag, facts []byte, ok bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return nil, nil, false
	}
	return m["flag"], m["facts"], true
}
