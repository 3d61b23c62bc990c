//go:build wasip1

// Command guest is package evaluator built for GOOS=wasip1 as a WebAssembly
// reactor: the runtime is started once by _initialize and the host then calls
// the exported functions below, one call at a time. The guest only moves
// bytes; package evaluator does all parsing and evaluation.
//
// Build (what `go generate ./wasm` runs, see ../internal/gen):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath \
//	    -buildvcs=false -ldflags='-s -w' -o ../dist/evaluator.wasm .
//
// The ABI (exports, memory protocol, result encoding) is documented in
// docs/wasm.md; the Go host is package wasm and the browser host
// wasm/js/evaluator.mjs.
package main

import (
	"runtime"
	"unsafe"

	"github.com/mfhq/mf/evaluator"
)

// maxInput bounds the input buffer. Hosts bound inputs more tightly; this
// only keeps a confused host from asking for the whole address space.
const maxInput = 1 << 28

// Bits of mf_eval's mode.
const (
	modeJSONResult  = 1 // answer the result line rather than the binary result
	modeBinaryFacts = 2 // the facts are in binary form (evaluator.ParseFactsBinary)
)

// yieldEvery is how many mf_eval calls (each may read new facts) may run
// between two yields to the runtime (see parseFacts).
const yieldEvery = 64

// Status bytes that open a binary result (mf_eval).
const (
	statusOK       = 0 // a result follows
	statusNoHandle = 1 // the document handle is not loaded
	statusNoFlag   = 2 // the document has no flag with that key
	statusBadFacts = 3 // the facts could not be read
)

// The reactor's state. Exported functions are never called concurrently (an
// instance serves one caller at a time), so plain variables suffice.
var (
	input  []byte                             // written by the host, see mf_input
	output []byte                             // read by the host after each call
	docs   = map[uint32]*evaluator.Document{} // loaded documents by handle
	handle uint32                             // last handle given out

	// The facts of mf_eval calls, read into memory reused from call to
	// call (see parseFacts), and the calls since the runtime last ran.
	facts           evaluator.Facts
	callsSinceYield int

	// The flag of the last mf_eval call; see lookupFlag.
	lastFlag    *evaluator.Flag
	lastFlagDoc uint32
	lastFlagKey string
)

func main() {}

// mfInput makes the input buffer at least size bytes long and returns its
// address; the host writes the call's input there. The buffer stays at that
// address, with room for every size asked so far, until a call asks for
// more than the buffer holds; hosts may keep writing there meanwhile without
// calling mf_input. It returns 0 when size is over the guest's limit.
//
//go:wasmexport mf_input
func mfInput(size uint32) uint32 {
	if size > maxInput {
		return 0
	}
	if cap(input) < int(size) || cap(input) == 0 {
		input = make([]byte, max(size, 4096))
	}
	input = input[:cap(input)]
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(input))))
}

// mfEvalCase evaluates the case line in input[:n] ({"flag":…,"facts":…}) and
// returns the result line (the mf eval output, without newline) as
// address<<32 | length.
//
//go:wasmexport mf_eval_case
func mfEvalCase(n uint32) uint64 {
	output = evaluator.AppendCase(output[:0], inputBytes(n), false)
	letRuntimeRun()
	return pack(output)
}

// mfExplainCase is mfEvalCase with the explanation: the result line gets an
// "explain" member (the mf eval --explain output).
//
//go:wasmexport mf_explain_case
func mfExplainCase(n uint32) uint64 {
	output = evaluator.AppendCase(output[:0], inputBytes(n), true)
	letRuntimeRun()
	return pack(output)
}

func inputBytes(n uint32) []byte {
	if int(n) > len(input) {
		return nil
	}
	return input[:n]
}

// mfLoad parses the flag document in input[:n] and keeps it in the instance.
// It returns the document's handle, or 0 when the document is unreadable.
//
//go:wasmexport mf_load
func mfLoad(n uint32) uint32 {
	if int(n) > len(input) {
		return 0
	}
	// ParseDocument keeps nothing of its input (it parses a copy), so the
	// input buffer can be reused.
	doc, err := evaluator.ParseDocument(input[:n])
	letRuntimeRun()
	if err != nil {
		return 0
	}
	handle++
	if handle == 0 {
		handle++
	}
	docs[handle] = doc
	return handle
}

// mfFree forgets a loaded document. Unknown handles are ignored.
//
//go:wasmexport mf_free
func mfFree(h uint32) {
	delete(docs, h)
	if h == lastFlagDoc {
		lastFlag = nil
	}
}

// mfEval evaluates the flag named by input[:keyLen] of document h against the
// facts in input[keyLen:keyLen+factsLen] and returns address<<32 | length
// of the answer: a status byte, then when it is statusOK the result, as the
// binary encoding or (mode bit modeJSONResult) as the result line. The
// facts are JSON, or (mode bit modeBinaryFacts) in binary form.
//
//go:wasmexport mf_eval
func mfEval(h, keyLen, factsLen, mode uint32) uint64 {
	output = output[:0]
	if uint64(keyLen)+uint64(factsLen) > uint64(len(input)) {
		output = append(output, statusBadFacts)
		return pack(output)
	}
	doc := docs[h]
	if doc == nil {
		output = append(output, statusNoHandle)
		return pack(output)
	}
	flag, ok := lookupFlag(h, doc, input[:keyLen])
	if !ok {
		output = append(output, statusNoFlag)
		return pack(output)
	}
	fa, ok := parseFacts(input[keyLen:keyLen+factsLen], mode&modeBinaryFacts != 0)
	if !ok {
		output = append(output, statusBadFacts)
		return pack(output)
	}
	r := flag.Evaluate(fa)
	if mode&modeJSONResult != 0 {
		output = evaluator.AppendResult(append(output, statusOK), r)
	} else {
		output = appendBinary(output, r)
	}
	return pack(output)
}

// lookupFlag returns flag key of document h, remembering the last one
// looked up: hosts evaluate one flag many times in a row.
func lookupFlag(h uint32, doc *evaluator.Document, key []byte) (*evaluator.Flag, bool) {
	if lastFlag != nil && h == lastFlagDoc && string(key) == lastFlagKey {
		return lastFlag, true
	}
	// The key is only looked up, never kept: no copy.
	flag, ok := doc.Flag(unsafe.String(unsafe.SliceData(key), len(key)))
	if ok {
		lastFlag, lastFlagDoc, lastFlagKey = flag, h, string(key)
	}
	return flag, ok
}

// parseFacts reads the facts of an mf_eval call into the same
// evaluator.Facts every time, reusing its memory, so that reading new facts
// allocates nothing once that memory has grown to the size of the facts:
// allocating, and the collections it causes, is most of the cost of a parse
// in WebAssembly. When the facts are the bytes of the previous call (hosts
// evaluate several flags for one set of facts), the evaluator keeps what it
// read and does not read them again.
func parseFacts(b []byte, binary bool) (*evaluator.Facts, bool) {
	var err error
	if binary {
		err = evaluator.ParseFactsBinaryInto(&facts, b)
	} else {
		err = evaluator.ParseFactsInto(&facts, b)
	}
	// A parse allocates only while its memory grows, for JSON strings with
	// escapes, and on errors; the runtime is let run after errors and every
	// yieldEvery calls, which bounds the allocation between two yields
	// without paying for a yield on every call.
	callsSinceYield++
	if err != nil || callsSinceYield >= yieldEvery {
		callsSinceYield = 0
		letRuntimeRun()
	}
	return &facts, err == nil
}

// appendBinary appends the binary result encoding of docs/wasm.md:
//
//	0      u8   status (statusOK)
//	1      u8   reason
//	2      u8   error code
//	3      u8   0
//	4:8    i32  rule (-1: absent)
//	8:12   u32  variant length V
//	12:16  u32  value length L (0: absent)
//	16:    V bytes variant, then L bytes value
//
// Integers are little endian.
func appendBinary(dst []byte, r evaluator.Result) []byte {
	rule := uint32(int32(r.Rule))
	v, l := len(r.Variant), len(r.Value)
	dst = append(dst, statusOK, byte(r.Reason), byte(r.ErrorCode), 0,
		byte(rule), byte(rule>>8), byte(rule>>16), byte(rule>>24),
		byte(v), byte(v>>8), byte(v>>16), byte(v>>24),
		byte(l), byte(l>>8), byte(l>>16), byte(l>>24))
	dst = append(dst, r.Variant...)
	return append(dst, r.Value...)
}

// letRuntimeRun lets the runtime's own goroutines run: the garbage
// collector's mark workers and the background sweeper. A reactor's exported
// call never blocks, so without this they would run only when an allocation
// assists them, and a collection that assists alone cannot finish (the
// runtime limits assists by time) leaves the heap growing until the
// instance runs out of memory. Called after the calls that allocate; the
// evaluation of a loaded flag allocates nothing in steady state and calls
// it only now and then (see parseFacts).
func letRuntimeRun() {
	runtime.Gosched()
}

func pack(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))<<32 | uint64(len(b))
}
