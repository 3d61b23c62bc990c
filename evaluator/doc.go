// Package evaluator implements the flag evaluation rules of the ingest and
// flag specification: usable ids, hashing and buckets, conditions, fixed and
// split rules. It parses flag documents and facts with its own small JSON
// reader into a compiled form and evaluates without allocating.
//
// It imports the standard library only (and little of it: no encoding/json,
// fmt or reflect), because the same package is compiled to WebAssembly for
// browsers and wazero, and every build must answer every input identically.
// docs/evaluator.md fixes what the specification leaves open: how JSON is
// read, which flags are malformed (UNSUPPORTED), the result line, the
// canonical form of values and the corpus format.
//
// The corpus in testdata/corpus.jsonl is written by
// `go run ./evaluator/internal/corpusgen`, whose expected results come from
// an independent reference implementation (internal/corpusgen/oracle).
package evaluator
