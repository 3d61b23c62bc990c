package wasm

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/mfhq/mf/evaluator"
)

var (
	// ErrClosed is returned by calls on a closed Engine.
	ErrClosed = errors.New("wasm engine is closed")
	// ErrInputTooLarge is returned for an input over Config.MaxInputBytes.
	ErrInputTooLarge = errors.New("input is larger than the engine accepts")
	// ErrDocument is returned by LoadDocument for a document that
	// evaluator.ParseDocument rejects.
	ErrDocument = errors.New("flag document is unreadable")
	// ErrFlagNotFound is returned by Document.Evaluate for a key the
	// document does not have.
	ErrFlagNotFound = errors.New("flag document has no flag with that key")
	// ErrFacts is returned by Document.Evaluate for facts that
	// evaluator.ParseFacts rejects.
	ErrFacts = errors.New("facts are unreadable")
	// ErrTrap wraps the error of a call that trapped or exited; the instance
	// it ran on has been discarded.
	ErrTrap = errors.New("evaluator instance trapped")
)

// Config configures an Engine. Start from DefaultConfig.
type Config struct {
	// Instances is the most module instances the pool keeps, and so the most
	// calls that run at once; callers beyond it wait. Instances are created
	// on demand. Default: GOMAXPROCS.
	Instances int
	// MemoryLimitPages caps each instance's linear memory, in 64 KiB pages.
	// A call that needs more traps and its instance is replaced. The Go
	// runtime takes about 2 MiB before any input. Default: 1024 (64 MiB).
	MemoryLimitPages uint32
	// MaxInputBytes bounds one input: a case line, a document, or a flag
	// key plus facts. Larger inputs fail with ErrInputTooLarge before they
	// reach an instance. Nesting needs no bound here: the guest's reader
	// stops at evaluator.MaxDepth. Default: 4 MiB (flag documents are
	// capped at 256,000 bytes by the specification).
	MaxInputBytes int
	// DocumentsPerInstance is how many documents one instance keeps loaded;
	// the least recently used is dropped beyond it (and loaded again from
	// the host's copy when next used). Default: 16.
	DocumentsPerInstance int
	// InterruptOnCancel makes a call stop when its context is done while the
	// guest runs. Without it the context is checked before each call only,
	// which suffices for evaluation (bounded input, linear work). wazero
	// implements it with a goroutine per call, which costs several
	// microseconds a call. Default: false.
	InterruptOnCancel bool
	// CompilationCache, when set, is where wazero keeps compiled code, so
	// that several engines (or, with wazero.NewCompilationCacheWithDir,
	// several processes) compile the module once. The caller closes it
	// after the engines. Default: nil, compiled code private to the engine.
	CompilationCache wazero.CompilationCache
	// Logger receives instance replacements with the guest's last output.
	// Default: slog.Default().
	Logger *slog.Logger

	// fakeClocks gives instances wazero's default clocks, which jump 1 ms at
	// every read: a test's way to make hours of runtime time pass in
	// seconds.
	fakeClocks bool
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Instances:            runtime.GOMAXPROCS(0),
		MemoryLimitPages:     1024,
		MaxInputBytes:        4 << 20,
		DocumentsPerInstance: 16,
		Logger:               slog.Default(),
	}
}

// Validate reports the first field that cannot be used, and how to fix it.
func (c Config) Validate() error {
	const page = 64 << 10
	switch {
	case c.Instances < 1:
		return fmt.Errorf("wasm: Instances must be at least 1, got %d", c.Instances)
	case c.MemoryLimitPages < 128 || c.MemoryLimitPages > 65536:
		return fmt.Errorf("wasm: MemoryLimitPages must be 128 (8 MiB, room for the Go runtime) to 65536 (4 GiB), got %d", c.MemoryLimitPages)
	case c.MaxInputBytes < 1024 || uint64(c.MaxInputBytes) > uint64(c.MemoryLimitPages)*page/4:
		return fmt.Errorf("wasm: MaxInputBytes must be 1024 to a quarter of the memory limit (%d bytes), got %d",
			uint64(c.MemoryLimitPages)*page/4, c.MaxInputBytes)
	case c.DocumentsPerInstance < 1:
		return fmt.Errorf("wasm: DocumentsPerInstance must be at least 1, got %d", c.DocumentsPerInstance)
	case c.Logger == nil:
		return errors.New("wasm: Logger must be set (slog.Default() if nothing else)")
	}
	return nil
}

// Engine evaluates flags in a pool of wazero instances of the evaluator
// module (wasm/guest). The module is compiled once; each instance serves one
// call at a time; an instance whose call fails is closed and replaced. An
// Engine is safe for concurrent use.
type Engine struct {
	cfg      Config
	log      *slog.Logger
	runtime  wazero.Runtime
	compiled wazero.CompiledModule

	// tokens holds one token per call that may run: taking one is the right
	// to use an instance.
	tokens chan struct{}
	mu     sync.Mutex
	// idle instances, most recently used last: taking the last keeps the
	// warmest instance (its documents, its facts) busy and lets the others
	// stay cold.
	idle []*instance

	closed    atomic.Bool   // set by Close: no new calls
	done      chan struct{} // closed once the runtime is being closed
	closeOnce sync.Once
}

// New compiles the embedded evaluator module and returns an Engine. One
// instance is created and initialized here, so that a module that does not
// start fails now rather than on the first call.
func New(ctx context.Context, cfg Config) (*Engine, error) {
	return newEngine(ctx, cfg, moduleRaw)
}

func newEngine(ctx context.Context, cfg Config, module []byte) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(cfg.MemoryLimitPages).
		WithCloseOnContextDone(cfg.InterruptOnCancel)
	if cfg.CompilationCache != nil {
		rc = rc.WithCompilationCache(cfg.CompilationCache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("cannot instantiate WASI for the evaluator: %w", err)
	}
	compiled, err := rt.CompileModule(ctx, module)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("cannot compile the evaluator module: %w", err)
	}
	e := &Engine{
		cfg:      cfg,
		log:      cfg.Logger,
		runtime:  rt,
		compiled: compiled,
		tokens:   make(chan struct{}, cfg.Instances),
		done:     make(chan struct{}),
	}
	first, err := e.instantiate(ctx)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	e.idle = append(e.idle, first)
	return e, nil
}

// Close refuses new calls, waits for the calls in flight to finish, and
// closes every instance and the runtime. When ctx ends first, it returns
// ctx's error and leaves the runtime open (the calls in flight still run);
// Close may be called again.
func (e *Engine) Close(ctx context.Context) error {
	e.closed.Store(true)
	// Hold every token: then no call is running, and none can start.
	held := 0
	for held < cap(e.tokens) {
		select {
		case e.tokens <- struct{}{}:
			held++
		case <-e.done:
			return nil // closed meanwhile by another Close
		case <-ctx.Done():
			for range held {
				<-e.tokens
			}
			return fmt.Errorf("cannot close the wasm engine: calls are still running: %w", ctx.Err())
		}
	}
	var err error
	e.closeOnce.Do(func() {
		close(e.done)
		e.mu.Lock()
		e.idle = nil
		e.mu.Unlock()
		if cerr := e.runtime.Close(ctx); cerr != nil {
			err = fmt.Errorf("cannot close the wazero runtime: %w", cerr)
		}
	})
	return err
}

// acquire takes an instance for one call, creating one when none is idle,
// and waits while Config.Instances calls are running.
func (e *Engine) acquire(ctx context.Context) (*instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if e.closed.Load() {
		return nil, ErrClosed
	}
	select {
	case e.tokens <- struct{}{}:
	default:
		select {
		case e.tokens <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-e.done:
			return nil, ErrClosed
		}
	}
	if e.closed.Load() {
		// Close began while this call waited: let it have the token.
		<-e.tokens
		return nil, ErrClosed
	}
	var in *instance
	e.mu.Lock()
	if n := len(e.idle); n > 0 {
		in = e.idle[n-1]
		e.idle[n-1] = nil
		e.idle = e.idle[:n-1]
	}
	e.mu.Unlock()
	if in == nil {
		var err error
		if in, err = e.instantiate(ctx); err != nil {
			<-e.tokens
			return nil, err
		}
	}
	return in, nil
}

// release returns an instance after a call; a broken one is closed, and a
// new one will be created when needed.
func (e *Engine) release(in *instance) {
	if in.broken {
		e.log.Warn("wasm: evaluator instance discarded after a failed call",
			"err", in.brokenErr, "guestOutput", in.stderr.String())
		in.close()
	} else {
		e.mu.Lock()
		e.idle = append(e.idle, in)
		e.mu.Unlock()
	}
	<-e.tokens
}

// EvaluateCase evaluates one case line, {"flag": …, "facts": …}, and appends
// the result line (the output of mf eval, without newline) to dst. A line
// that is not a case gives the PARSE_ERROR result, as natively. Errors are
// the host's: cancellation, ErrInputTooLarge, ErrClosed, a trap.
func (e *Engine) EvaluateCase(ctx context.Context, dst, line []byte) ([]byte, error) {
	return e.evaluateCase(ctx, dst, line, false)
}

// ExplainCase is EvaluateCase with the explanation: the result line gets an
// "explain" member, the evaluator's Explanation as JSON, or {"parseError":
// why} for a line that is not a case (the mf eval --explain output).
func (e *Engine) ExplainCase(ctx context.Context, dst, line []byte) ([]byte, error) {
	return e.evaluateCase(ctx, dst, line, true)
}

func (e *Engine) evaluateCase(ctx context.Context, dst, line []byte, explain bool) ([]byte, error) {
	if len(line) > e.cfg.MaxInputBytes {
		return dst, ErrInputTooLarge
	}
	in, err := e.acquire(ctx)
	if err != nil {
		return dst, err
	}
	defer e.release(in)
	out, err := in.evalCase(ctx, line, explain)
	if err != nil {
		return dst, err
	}
	return append(dst, out...), nil
}

// LoadDocument checks a flag document (browser or server view) and returns
// it as a Document whose flags evaluate by key. An instance parses the
// document when it first evaluates one of its flags and keeps it; later
// evaluations do not send it again. Documents with equal bytes share their
// copies in instances.
func (e *Engine) LoadDocument(ctx context.Context, doc []byte) (*Document, error) {
	if len(doc) > e.cfg.MaxInputBytes {
		return nil, ErrInputTooLarge
	}
	d := &Document{
		engine: e,
		id:     sha256.Sum256(doc),
		data:   append([]byte(nil), doc...),
	}
	// Load it into one instance now, which both checks that it parses and
	// warms that instance.
	in, err := e.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer e.release(in)
	if _, err := in.document(ctx, d); err != nil {
		if errors.Is(err, ErrDocument) {
			// The guest says only no; the native parser says why.
			_, why := evaluator.ParseDocument(doc)
			return nil, fmt.Errorf("%w: %v", ErrDocument, why)
		}
		return nil, err
	}
	return d, nil
}

// Document is a flag document loaded into an Engine. It is immutable and
// safe for concurrent use.
type Document struct {
	engine *Engine
	id     [32]byte // SHA-256 of data: the key of its copies in instances
	data   []byte
}

// Evaluate evaluates the document's flag key against facts given as JSON
// (what evaluator.ParseFacts reads: {"id", "userId", "properties",
// "segments"}; empty means null, empty facts). It returns ErrFlagNotFound for a key
// the document lacks and ErrFacts for unreadable facts, as the native
// Document.Flag and ParseFacts do.
//
// An instance keeps the facts of its last call parsed: evaluating several
// flags for the same facts parses them once. EvaluateAll does so for sure.
// EvaluateFacts takes facts in binary form, which an instance reads in a
// fraction of the time.
//
// The result's Variant and Value may be shared with other results; do not
// modify Value.
func (d *Document) Evaluate(ctx context.Context, key string, facts []byte) (evaluator.Result, error) {
	return d.evaluate(ctx, key, orNull(facts), false)
}

// EvaluateFacts is Evaluate with facts in binary form (docs/wasm.md,
// "Binary facts"), as evaluator.FactsBuilder builds them or
// evaluator.AppendFactsBinary converts them from JSON: the fast way to
// evaluate for new facts. Empty means empty facts. Facts the guest refuses (see
// evaluator.ParseFactsBinary) give ErrFacts.
func (d *Document) EvaluateFacts(ctx context.Context, key string, facts []byte) (evaluator.Result, error) {
	return d.evaluate(ctx, key, orNullBinary(facts), true)
}

func (d *Document) evaluate(ctx context.Context, key string, facts []byte, binary bool) (evaluator.Result, error) {
	e := d.engine
	if len(key)+len(facts) > e.cfg.MaxInputBytes {
		return evaluator.Result{}, ErrInputTooLarge
	}
	in, err := e.acquire(ctx)
	if err != nil {
		return evaluator.Result{}, err
	}
	defer e.release(in)
	h, err := in.document(ctx, d)
	if err != nil {
		return evaluator.Result{}, err
	}
	r, err := in.eval(ctx, h, key, facts, binary)
	return r, explainFactsError(err, facts, binary)
}

// explainFactsError adds to ErrFacts why the facts are unreadable, which
// the native parser says (the guest says only no).
func explainFactsError(err error, facts []byte, binary bool) error {
	if !errors.Is(err, ErrFacts) {
		return err
	}
	var why error
	if binary {
		_, why = evaluator.ParseFactsBinary(facts)
	} else {
		_, why = evaluator.ParseFacts(orNull(facts))
	}
	if why != nil {
		return fmt.Errorf("%w: %v", ErrFacts, why)
	}
	return err
}

// EvaluateAll evaluates the flags keys against the same facts on one
// instance, parsing the facts once, and appends the results to dst in the
// order of keys. A key the document lacks gives ErrFlagNotFound and no
// results.
func (d *Document) EvaluateAll(ctx context.Context, dst []evaluator.Result, keys []string, facts []byte) ([]evaluator.Result, error) {
	return d.evaluateAll(ctx, dst, keys, orNull(facts), false)
}

// EvaluateAllFacts is EvaluateAll with facts in binary form, as
// EvaluateFacts takes them.
func (d *Document) EvaluateAllFacts(ctx context.Context, dst []evaluator.Result, keys []string, facts []byte) ([]evaluator.Result, error) {
	return d.evaluateAll(ctx, dst, keys, orNullBinary(facts), true)
}

func (d *Document) evaluateAll(ctx context.Context, dst []evaluator.Result, keys []string, facts []byte, binary bool) ([]evaluator.Result, error) {
	e := d.engine
	for _, k := range keys {
		if len(k)+len(facts) > e.cfg.MaxInputBytes {
			return dst, ErrInputTooLarge
		}
	}
	in, err := e.acquire(ctx)
	if err != nil {
		return dst, err
	}
	defer e.release(in)
	h, err := in.document(ctx, d)
	if err != nil {
		return dst, err
	}
	n := len(dst)
	for _, k := range keys {
		r, err := in.eval(ctx, h, k, facts, binary)
		if err != nil {
			return dst[:n], fmt.Errorf("cannot evaluate flag %q: %w", k, explainFactsError(err, facts, binary))
		}
		dst = append(dst, r)
	}
	return dst, nil
}

// orNull returns facts, or the JSON null for none.
func orNull(facts []byte) []byte {
	if len(facts) == 0 {
		return nullJSON
	}
	return facts
}

var nullJSON = []byte("null")

// orNullBinary returns facts, or null in binary form for none.
func orNullBinary(facts []byte) []byte {
	if len(facts) == 0 {
		return nullBinary
	}
	return facts
}

var nullBinary = []byte{evaluator.FactsBinaryVersion, 0, 0} // no values below null, null
