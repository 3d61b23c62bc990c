package wasm

import _ "embed" // the browser module

//go:embed js/evaluator.mjs
var evaluatorJS []byte

// JS returns js/evaluator.mjs, the ES module that loads the evaluator in
// browsers (loadEvaluator). The ingest service serves it beside the
// browser client; callers must not modify the slice.
func JS() []byte { return evaluatorJS }
