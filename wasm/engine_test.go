package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mfhq/mf/evaluator"
)

// typicalCase is the evaluator's "typical flag" case (two rules, three
// conditions, a split), the first line of its common paths.
func typicalCase(t testing.TB) (flag, facts []byte) {
	t.Helper()
	b, err := os.ReadFile("../evaluator/testdata/common_paths.jsonl")
	if err != nil {
		t.Fatalf("cannot read the evaluator's common paths: %v", err)
	}
	first, _, _ := bytes.Cut(b, []byte("\n"))
	var c struct {
		In struct {
			Flag, Facts json.RawMessage
		}
	}
	if err := json.Unmarshal(first, &c); err != nil {
		t.Fatalf("cannot read the typical case: %v", err)
	}
	return c.In.Flag, c.In.Facts
}

// TestConcurrentCallers has more goroutines than instances evaluate corpus
// cases, case lines and documents mixed; every answer must be right.
func TestConcurrentCallers(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.Instances = 3
	e := newEngineT(t, cfg)
	cases := loadCorpus(t)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got []byte
			for i := g; i < len(cases); i += 8 * 20 {
				line, _ := cases[i].input()
				var err error
				if got, err = e.EvaluateCase(ctx, got[:0], line); err != nil || string(got) != cases[i].Want {
					errs <- cases[i].Name + ": got " + string(got) + ", want " + cases[i].Want
					return
				}
				flag, facts, ok := caseParts(line)
				if _, _, err := evaluator.ParseCase(line); err != nil || !ok {
					continue
				}
				d, err := e.LoadDocument(ctx, []byte(`{"v":1,"flags":{"f":`+string(flag)+`}}`))
				if err != nil {
					errs <- cases[i].Name + ": " + err.Error()
					return
				}
				r, err := d.Evaluate(ctx, "f", facts)
				if got := string(evaluator.AppendResult(nil, r)); err != nil || got != cases[i].Want {
					errs <- cases[i].Name + ": document path gives " + got + ", want " + cases[i].Want
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
}

// TestTrapReplacesInstance makes a call run out of the instance's memory:
// the call fails with ErrTrap, the instance is discarded (and logged), and
// the next call runs on a fresh instance.
func TestTrapReplacesInstance(t *testing.T) {
	ctx := context.Background()
	var log syncBuffer
	cfg := testConfig(t)
	cfg.Instances = 1
	cfg.MemoryLimitPages = 128 // 8 MiB
	cfg.MaxInputBytes = 2 << 20
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	e := newEngineT(t, cfg)
	flag, facts := typicalCase(t)
	line := []byte(`{"flag":` + string(flag) + `,"facts":` + string(facts) + `}`)
	want := nativeCase(line, false)

	// A list of 900,000 numbers parses into far more than 8 MiB of values.
	huge := []byte(`{"flag":` + string(flag) + `,"facts":{"properties":{"k":[0` + strings.Repeat(",0", 900_000) + `]}}}`)
	_, err := e.EvaluateCase(ctx, nil, huge)
	if !errors.Is(err, ErrTrap) {
		t.Fatalf("a call out of memory gives %v, want ErrTrap", err)
	}
	if !strings.Contains(log.String(), "discarded") || !strings.Contains(log.String(), "out of memory") {
		t.Errorf("the discarded instance and the guest's out-of-memory message were not logged; log: %s", log.String())
	}
	for range 3 {
		got, err := e.EvaluateCase(ctx, nil, line)
		if err != nil || string(got) != want {
			t.Fatalf("after the trap: got %s, %v; want %s", got, err, want)
		}
	}
	// The same for a document whose evaluation traps: the document is
	// loaded again into the new instance.
	doc, err := e.LoadDocument(ctx, []byte(`{"v":1,"flags":{"f":`+string(flag)+`}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := doc.Evaluate(ctx, "f", huge[bytes.Index(huge, []byte(`"facts":`))+8:len(huge)-1]); !errors.Is(err, ErrTrap) {
		t.Fatalf("an evaluation out of memory gives %v, want ErrTrap", err)
	}
	r, err := doc.Evaluate(ctx, "f", facts)
	if got := string(evaluator.AppendResult(nil, r)); err != nil || got != want {
		t.Fatalf("after the trap: got %s, %v; want %s", got, err, want)
	}
}

// TestContext: a done context fails a call before it starts, and a caller
// waiting for a busy pool gives up when its context ends.
func TestContext(t *testing.T) {
	cfg := testConfig(t)
	cfg.Instances = 1
	e := newEngineT(t, cfg)
	flag, facts := typicalCase(t)
	line := []byte(`{"flag":` + string(flag) + `,"facts":` + string(facts) + `}`)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.EvaluateCase(cancelled, nil, line); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled context gives %v, want context.Canceled", err)
	}

	// Hold the only instance; a second caller must wait, then give up.
	held, err := e.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waiting, stop := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer stop()
	if _, err := e.EvaluateCase(waiting, nil, line); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting for a busy pool gives %v, want context.DeadlineExceeded", err)
	}
	e.release(held)
	if got, err := e.EvaluateCase(context.Background(), nil, line); err != nil || string(got) != nativeCase(line, false) {
		t.Errorf("after the wait: got %s, %v", got, err)
	}

	// With InterruptOnCancel, calls run as usual and a done context still
	// stops them.
	cfg.InterruptOnCancel = true
	ie := newEngineT(t, cfg)
	if got, err := ie.EvaluateCase(context.Background(), nil, line); err != nil || string(got) != nativeCase(line, false) {
		t.Errorf("InterruptOnCancel: got %s, %v", got, err)
	}
	if _, err := ie.EvaluateCase(cancelled, nil, line); !errors.Is(err, context.Canceled) {
		t.Errorf("InterruptOnCancel, cancelled context: got %v, want context.Canceled", err)
	}
}

// TestErrors: limits, unreadable documents and facts, unknown keys, a
// closed engine: each gives its error, as the native calls do.
func TestErrors(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.MaxInputBytes = 4096
	e := newEngineT(t, cfg)
	flag, facts := typicalCase(t)
	doc := []byte(`{"v":1,"flags":{"f":` + string(flag) + `}}`)
	big := bytes.Repeat([]byte(" "), 4097)

	if _, err := e.EvaluateCase(ctx, nil, big); !errors.Is(err, ErrInputTooLarge) {
		t.Errorf("a large line gives %v, want ErrInputTooLarge", err)
	}
	if _, err := e.LoadDocument(ctx, big); !errors.Is(err, ErrInputTooLarge) {
		t.Errorf("a large document gives %v, want ErrInputTooLarge", err)
	}
	for _, bad := range []string{`{`, `{"v":2,"flags":{}}`, `[]`, `{"v":1,"flags":[]}`} {
		_, nativeErr := evaluator.ParseDocument([]byte(bad))
		if _, err := e.LoadDocument(ctx, []byte(bad)); !errors.Is(err, ErrDocument) || nativeErr == nil {
			t.Errorf("document %s gives %v (natively %v), want ErrDocument", bad, err, nativeErr)
		}
	}
	d, err := e.LoadDocument(ctx, doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Evaluate(ctx, "f", big); !errors.Is(err, ErrInputTooLarge) {
		t.Errorf("large facts give %v, want ErrInputTooLarge", err)
	}
	if _, err := d.Evaluate(ctx, "g", facts); !errors.Is(err, ErrFlagNotFound) {
		t.Errorf("an unknown key gives %v, want ErrFlagNotFound", err)
	}
	for _, bad := range []string{`{`, `5`, `"x"`, `[]`, `{"id":"a"} x`} {
		_, nativeErr := evaluator.ParseFacts([]byte(bad))
		if _, err := d.Evaluate(ctx, "f", []byte(bad)); !errors.Is(err, ErrFacts) || nativeErr == nil {
			t.Errorf("facts %s give %v (natively %v), want ErrFacts", bad, err, nativeErr)
		}
	}
	// Empty facts are null, empty facts.
	r, err := d.Evaluate(ctx, "f", nil)
	nf, _ := evaluator.ParseDocument(doc)
	f, _ := nf.Flag("f")
	if got, want := evaluator.AppendResult(nil, r), evaluator.AppendResult(nil, f.Evaluate(nil)); err != nil || !bytes.Equal(got, want) {
		t.Errorf("no facts: got %s, %v; want %s", got, err, want)
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.EvaluateCase(ctx, nil, doc); !errors.Is(err, ErrClosed) {
		t.Errorf("a closed engine gives %v, want ErrClosed", err)
	}
	if _, err := d.Evaluate(ctx, "f", facts); !errors.Is(err, ErrClosed) {
		t.Errorf("a document of a closed engine gives %v, want ErrClosed", err)
	}
}

// TestDocumentEviction keeps two documents per instance and uses three in
// turn: each evaluation must still answer from its own document.
func TestDocumentEviction(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.Instances = 1
	cfg.DocumentsPerInstance = 2
	e := newEngineT(t, cfg)
	var docs []*Document
	for _, d := range []string{"a", "b", "c"} {
		doc, err := e.LoadDocument(ctx, []byte(`{"v":1,"flags":{"f":{"s":"3f9a1c0b7e2d","t":"m","u":"b","d":"`+d+`","r":[]}}}`))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc)
	}
	for round := range 4 {
		for i, d := range docs {
			r, err := d.Evaluate(ctx, "f", nil)
			if want := string(rune('a' + i)); err != nil || r.Variant != want || r.Reason != evaluator.ReasonDefault {
				t.Fatalf("round %d, document %d: got %+v, %v; want variant %s", round, i, r, err, want)
			}
		}
	}
}

// TestNotAReactor builds the guest as a WASI command instead of a reactor:
// it has no _initialize, and the engine must refuse it rather than call
// exports of a module whose runtime never started.
func TestNotAReactor(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "command.wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./guest")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cannot build the guest as a command: %v\n%s", err, b)
	}
	module, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	_, err = newEngine(context.Background(), testConfig(t), module)
	if err == nil || !strings.Contains(err.Error(), "_initialize") {
		t.Fatalf("a module without _initialize gives %v, want an error naming _initialize", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for name, change := range map[string]func(*Config){
		"Instances":            func(c *Config) { c.Instances = 0 },
		"MemoryLimitPages":     func(c *Config) { c.MemoryLimitPages = 10 },
		"MaxInputBytes":        func(c *Config) { c.MaxInputBytes = 1 << 30 },
		"DocumentsPerInstance": func(c *Config) { c.DocumentsPerInstance = 0 },
		"Logger":               func(c *Config) { c.Logger = nil },
	} {
		c := DefaultConfig()
		change(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("a bad %s gives %v, want an error naming it", name, err)
		}
	}
}

// syncBuffer collects log output written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMemoryStaysBounded evaluates case lines on one instance whose clocks
// run fast (1 ms a read, so the Go runtime sees hours pass): the guest's
// heap must stay bounded. A reactor never yields to the runtime's
// background goroutines unless the guest does (letRuntimeRun); without
// that, the collector stops finishing its cycles once the runtime believes
// enough time has passed, and the instance runs out of memory (after some
// 44,000 calls here).
func TestMemoryStaysBounded(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.Instances = 1
	cfg.MemoryLimitPages = 256 // 16 MiB
	cfg.fakeClocks = true
	e := newEngineT(t, cfg)
	flag, _ := typicalCase(t)
	var line, out []byte
	const calls = 60000
	for i := range calls {
		line = fmt.Appendf(line[:0], `{"flag":%s,"facts":{"id":"visitor-%d","properties":{"plan":"pro","beta":true}}}`, flag, i)
		var err error
		if out, err = e.EvaluateCase(ctx, out[:0], line); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	in, err := e.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	size := in.mem.Size()
	e.release(in)
	t.Logf("guest memory after %d calls: %d MiB", calls, size>>20)
	if size > 12<<20 {
		t.Errorf("guest memory grew to %d MiB", size>>20)
	}
}

// TestCloseWaitsForCalls: Close refuses new calls at once, waits for the
// calls in flight, and gives up (leaving the engine usable by those calls)
// when its context ends first.
func TestCloseWaitsForCalls(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.Instances = 2
	e := newEngineT(t, cfg)
	flag, facts := typicalCase(t)
	line := []byte(`{"flag":` + string(flag) + `,"facts":` + string(facts) + `}`)

	held, err := e.acquire(ctx) // a call in flight
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := e.Close(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a call in flight and a short context gives %v, want context.DeadlineExceeded", err)
	}
	if _, err := e.EvaluateCase(ctx, nil, line); !errors.Is(err, ErrClosed) {
		t.Errorf("a new call after Close began gives %v, want ErrClosed", err)
	}
	// The call in flight still runs.
	if out, err := held.evalCase(ctx, line, false); err != nil || string(out) != nativeCase(line, false) {
		t.Errorf("the call in flight gives %s, %v", out, err)
	}
	closed := make(chan error, 1)
	go func() { closed <- e.Close(ctx) }()
	e.release(held)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close after the last call: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not return within a minute of the last call ending")
	}
	if _, err := e.EvaluateCase(ctx, nil, line); !errors.Is(err, ErrClosed) {
		t.Errorf("a call after Close gives %v, want ErrClosed", err)
	}
}
