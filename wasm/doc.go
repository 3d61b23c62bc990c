// Package wasm hosts the WebAssembly build of package evaluator: the guest
// (wasm/guest, built for GOOS=wasip1 as a reactor), a wazero host with a pool
// of instances exposing the same API as the native package, and the browser
// ES module in wasm/js.
//
// It imports evaluator and wazero only; the guest imports evaluator and
// the standard library only.
package wasm
