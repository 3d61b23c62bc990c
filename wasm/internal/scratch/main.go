//go:build wasip1

package main

import (
	"runtime"
	"runtime/debug"
	"unsafe"

	"github.com/mfhq/mf/evaluator"
)

var input = make([]byte, 1<<16)
var sink evaluator.Result
var doc *evaluator.Document

func main() {}

//go:wasmexport in
func in() uint32 { return uint32(uintptr(unsafe.Pointer(&input[0]))) }

//go:wasmexport load
func load(n uint32) uint32 {
	d, err := evaluator.ParseDocument(input[:n])
	if err != nil {
		return 0
	}
	doc = d
	return 1
}

//go:wasmexport loop_parse
func loopParse(n, iters uint32) {
	for range iters {
		fa, _ := evaluator.ParseFacts(input[:n])
		_ = fa
	}
}

//go:wasmexport loop_eval
func loopEval(n, iters uint32) {
	f, _ := doc.Flag("checkout")
	fa, _ := evaluator.ParseFacts(input[:n])
	for range iters {
		sink = f.Evaluate(fa)
	}
}

//go:wasmexport loop_alloc
func loopAlloc(iters uint32) {
	for range iters {
		b := make([]byte, 64)
		sink.Value = b
	}
}

//go:wasmexport loop_nothing
func loopNothing(iters uint32) uint32 {
	s := uint32(0)
	for i := range iters {
		s += i * 7
	}
	return s
}

//go:wasmexport numgc
func numgc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return uint64(ms.NumGC)<<32 | uint64(ms.HeapAlloc>>10)
}

//go:wasmexport gc
func gc() { runtime.GC() }

//go:wasmexport loop_parse_yield
func loopParseYield(n, iters uint32) {
	for range iters {
		fa, _ := evaluator.ParseFacts(input[:n])
		_ = fa
		runtime.Gosched()
	}
}

//go:wasmexport yield
func yield() { runtime.Gosched() }

//go:wasmexport setgc
func setgc(p int32) { debug.SetGCPercent(int(p)) }
