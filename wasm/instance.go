package wasm

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/mfhq/mf/evaluator"
)

// Status bytes that open a binary result of mf_eval (wasm/guest).
const (
	statusOK       = 0
	statusNoHandle = 1
	statusNoFlag   = 2
	statusBadFacts = 3
)

// resultHeader is the size of the fixed part of a binary result.
const resultHeader = 16

// instance is one instantiated evaluator module. It is used by one caller at
// a time (whoever took it from Engine.idle).
type instance struct {
	mod                             api.Module
	mem                             api.Memory
	fInput, fEvalCase, fExplainCase api.Function
	fLoad, fFree, fEval             api.Function
	stack                           [4]uint64 // parameters and results of the call in progress

	inputPtr uint32 // the guest's input buffer, as mf_input last returned it
	inputCap int    // the largest size asked of mf_input: the buffer holds at least this

	docs  map[[32]byte]*loaded // documents loaded here, by Document.id
	tick  uint64               // use counter for least-recently-used eviction
	limit int                  // Config.DocumentsPerInstance

	variants map[string]string // interned result variants
	values   map[string][]byte // interned result values

	stderr *guestOutput // what the guest wrote to stdout and stderr (runtime panics)

	broken    bool // a call failed: the instance's state is undefined
	brokenErr error
}

type loaded struct {
	handle uint32
	used   uint64
}

// instantiate creates and initializes one instance of the compiled module.
func (e *Engine) instantiate(ctx context.Context) (*instance, error) {
	stderr := &guestOutput{max: 2048}
	// No start functions: wazero skips a missing _start silently, and a Go
	// reactor has none; _initialize is called below, and must exist.
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithRandSource(rand.Reader).
		WithStdout(stderr).
		WithStderr(stderr)
	if !e.cfg.fakeClocks {
		// The Go runtime paces its garbage collector by the clock; wazero's
		// default clocks jump 1 ms at every read, which after a few minutes
		// of fake time makes the runtime stop the allocation assists that a
		// reactor depends on (see letRuntimeRun in wasm/guest).
		mc = mc.WithSysNanotime().WithSysWalltime()
	}
	mod, err := e.runtime.InstantiateModule(ctx, e.compiled, mc)
	if err != nil {
		return nil, fmt.Errorf("cannot instantiate the evaluator module: %w", err)
	}
	in := &instance{
		mod:      mod,
		mem:      mod.Memory(),
		docs:     make(map[[32]byte]*loaded),
		limit:    e.cfg.DocumentsPerInstance,
		variants: make(map[string]string),
		values:   make(map[string][]byte),
		stderr:   stderr,
	}
	fns := []struct {
		name string
		fn   *api.Function
	}{
		{"mf_input", &in.fInput},
		{"mf_eval_case", &in.fEvalCase},
		{"mf_explain_case", &in.fExplainCase},
		{"mf_load", &in.fLoad},
		{"mf_free", &in.fFree},
		{"mf_eval", &in.fEval},
	}
	for _, f := range fns {
		if *f.fn = mod.ExportedFunction(f.name); *f.fn == nil {
			_ = mod.Close(ctx)
			return nil, fmt.Errorf("cannot use the evaluator module: it does not export %s", f.name)
		}
	}
	if in.mem == nil {
		_ = mod.Close(ctx)
		return nil, errors.New("cannot use the evaluator module: it exports no memory")
	}
	initialize := mod.ExportedFunction("_initialize")
	if initialize == nil {
		_ = mod.Close(ctx)
		return nil, errors.New("cannot use the evaluator module: it has no _initialize (not a reactor)")
	}
	if _, err := initialize.Call(ctx); err != nil {
		_ = mod.Close(ctx)
		return nil, fmt.Errorf("cannot initialize the evaluator module: %w (guest output: %q)", err, stderr.String())
	}
	return in, nil
}

func (in *instance) close() {
	_ = in.mod.Close(context.Background())
}

// call runs f with the parameters already in in.stack and returns the first
// result. Any failure marks the instance broken: a trap leaves a Go guest in
// an undefined state.
func (in *instance) call(ctx context.Context, name string, f api.Function) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := f.CallWithStack(ctx, in.stack[:]); err != nil {
		in.broken, in.brokenErr = true, err
		if ctxErr := ctx.Err(); ctxErr != nil {
			return 0, fmt.Errorf("%s interrupted: %w", name, ctxErr)
		}
		if reason := in.stderr.firstLine(); reason != "" {
			return 0, fmt.Errorf("%w in %s (guest: %q): %w", ErrTrap, name, reason, err)
		}
		return 0, fmt.Errorf("%w in %s: %w", ErrTrap, name, err)
	}
	return in.stack[0], nil
}

// write copies key and then data into the guest's input buffer and returns
// their total length.
//
// The guest keeps its input buffer at one address until it is asked for
// more than ever before, so the buffer is requested (mf_input) only when an
// input is larger than every earlier one.
func (in *instance) write(ctx context.Context, key string, data []byte) (uint32, error) {
	n := len(key) + len(data)
	ptr := uint64(in.inputPtr)
	if n > in.inputCap || ptr == 0 {
		in.stack[0] = uint64(n)
		var err error
		if ptr, err = in.call(ctx, "mf_input", in.fInput); err != nil {
			return 0, err
		}
		if ptr == 0 {
			in.broken, in.brokenErr = true, errors.New("mf_input refused the size")
			return 0, fmt.Errorf("%w: the guest refused an input of %d bytes", ErrTrap, n)
		}
		in.inputPtr, in.inputCap = uint32(ptr), n
	}
	if !in.mem.WriteString(uint32(ptr), key) || !in.mem.Write(uint32(ptr)+uint32(len(key)), data) {
		in.broken, in.brokenErr = true, errors.New("mf_input returned an address out of memory")
		return 0, fmt.Errorf("%w: input buffer at %d is outside guest memory", ErrTrap, ptr)
	}
	return uint32(n), nil
}

// output returns a view of the guest memory that a packed address<<32|length
// result names. It is valid until the next call into the instance.
func (in *instance) output(packed uint64) ([]byte, error) {
	b, ok := in.mem.Read(uint32(packed>>32), uint32(packed))
	if !ok || len(b) == 0 {
		in.broken, in.brokenErr = true, errors.New("output out of memory")
		return nil, fmt.Errorf("%w: output at %#x is outside guest memory", ErrTrap, packed)
	}
	return b, nil
}

// evalCase evaluates a case line and returns a view of the result line,
// with the explanation when explain is set.
func (in *instance) evalCase(ctx context.Context, line []byte, explain bool) ([]byte, error) {
	n, err := in.write(ctx, "", line)
	if err != nil {
		return nil, err
	}
	name, f := "mf_eval_case", in.fEvalCase
	if explain {
		name, f = "mf_explain_case", in.fExplainCase
	}
	in.stack[0] = uint64(n)
	packed, err := in.call(ctx, name, f)
	if err != nil {
		return nil, err
	}
	return in.output(packed)
}

// document returns the guest handle of d in this instance, loading it (and
// dropping the least recently used document beyond the limit) if needed.
func (in *instance) document(ctx context.Context, d *Document) (uint32, error) {
	in.tick++
	if l := in.docs[d.id]; l != nil {
		l.used = in.tick
		return l.handle, nil
	}
	if len(in.docs) >= in.limit {
		var oldest [32]byte
		var used uint64 = 1<<64 - 1
		for id, l := range in.docs {
			if l.used < used {
				oldest, used = id, l.used
			}
		}
		in.stack[0] = uint64(in.docs[oldest].handle)
		if _, err := in.call(ctx, "mf_free", in.fFree); err != nil {
			return 0, err
		}
		delete(in.docs, oldest)
	}
	n, err := in.write(ctx, "", d.data)
	if err != nil {
		return 0, err
	}
	in.stack[0] = uint64(n)
	h, err := in.call(ctx, "mf_load", in.fLoad)
	if err != nil {
		return 0, err
	}
	if h == 0 {
		return 0, ErrDocument
	}
	in.docs[d.id] = &loaded{handle: uint32(h), used: in.tick}
	return uint32(h), nil
}

// Bits of mf_eval's mode (wasm/guest).
const (
	modeJSONResult  = 1
	modeBinaryFacts = 2
)

// eval evaluates flag key of loaded document h against facts, JSON or
// (binary) in binary form.
func (in *instance) eval(ctx context.Context, h uint32, key string, facts []byte, binary bool) (evaluator.Result, error) {
	n, err := in.write(ctx, key, facts)
	if err != nil {
		return evaluator.Result{}, err
	}
	var mode uint64
	if binary {
		mode = modeBinaryFacts
	}
	in.stack[0], in.stack[1], in.stack[2], in.stack[3] = uint64(h), uint64(len(key)), uint64(n)-uint64(len(key)), mode
	packed, err := in.call(ctx, "mf_eval", in.fEval)
	if err != nil {
		return evaluator.Result{}, err
	}
	out, err := in.output(packed)
	if err != nil {
		return evaluator.Result{}, err
	}
	return in.decode(out)
}

// decode reads a binary result (docs/wasm.md), copying what it keeps out of
// guest memory.
func (in *instance) decode(b []byte) (evaluator.Result, error) {
	switch b[0] {
	case statusOK:
	case statusNoFlag:
		return evaluator.Result{}, ErrFlagNotFound
	case statusBadFacts:
		return evaluator.Result{}, ErrFacts
	default:
		in.broken, in.brokenErr = true, fmt.Errorf("mf_eval answered status %d", b[0])
		return evaluator.Result{}, fmt.Errorf("%w: unexpected result status %d", ErrTrap, b[0])
	}
	if len(b) < resultHeader {
		in.broken, in.brokenErr = true, errors.New("short result")
		return evaluator.Result{}, fmt.Errorf("%w: result of %d bytes is too short", ErrTrap, len(b))
	}
	v := binary.LittleEndian.Uint32(b[8:])
	l := binary.LittleEndian.Uint32(b[12:])
	if uint64(resultHeader)+uint64(v)+uint64(l) != uint64(len(b)) {
		in.broken, in.brokenErr = true, errors.New("result lengths disagree")
		return evaluator.Result{}, fmt.Errorf("%w: result lengths disagree", ErrTrap)
	}
	r := evaluator.Result{
		Reason:    evaluator.Reason(b[1]),
		ErrorCode: evaluator.ErrorCode(b[2]),
		Rule:      int(int32(binary.LittleEndian.Uint32(b[4:]))),
	}
	if v > 0 {
		r.Variant = in.intern(b[resultHeader : resultHeader+v])
	}
	if l > 0 {
		r.Value = in.internValue(b[resultHeader+v:])
	}
	return r, nil
}

// maxInterned bounds each intern table; past it the table starts over.
const maxInterned = 4096

// intern returns b as a string, the same string for the same bytes: flags
// have few variants, so after the first results evaluating allocates
// nothing on the host.
func (in *instance) intern(b []byte) string {
	if s, ok := in.variants[string(b)]; ok {
		return s
	}
	if len(in.variants) >= maxInterned {
		clear(in.variants)
	}
	s := string(b)
	in.variants[s] = s
	return s
}

// internValue is intern for values: a copy of b shared by every result with
// the same value (results' values are read-only, as natively).
func (in *instance) internValue(b []byte) []byte {
	if v, ok := in.values[string(b)]; ok {
		return v
	}
	if len(in.values) >= maxInterned {
		clear(in.values)
	}
	v := append([]byte(nil), b...)
	in.values[string(v)] = v
	return v
}

// guestOutput keeps what the guest writes to stdout and stderr (the Go
// runtime writes there only when it panics or dies): the first and the last
// max bytes, for error messages. The head holds the reason ("fatal error:
// out of memory"), the tail the end of the goroutine dump. Writes come from
// the calling goroutine; String may be called from others, hence the lock.
type guestOutput struct {
	mu      sync.Mutex
	max     int
	head    []byte
	tail    []byte
	dropped bool
}

func (o *guestOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(p)
	if room := o.max - len(o.head); room > 0 {
		k := min(room, len(p))
		o.head = append(o.head, p[:k]...)
		p = p[k:]
	}
	o.tail = append(o.tail, p...)
	if over := len(o.tail) - o.max; over > 0 {
		o.tail = append(o.tail[:0], o.tail[over:]...)
		o.dropped = true
	}
	return n, nil
}

func (o *guestOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	sep := ""
	if o.dropped {
		sep = "\n…\n"
	}
	return string(o.head) + sep + string(o.tail)
}

// firstLine returns the first non-empty line the guest wrote, such as
// "fatal error: out of memory".
func (o *guestOutput) firstLine() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	for line := range strings.Lines(string(o.head)) {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}
