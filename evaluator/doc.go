// Package evaluator implements the flag evaluation rules of the ingest and
// flag specification: usable ids, hashing and buckets, conditions, fixed and
// split rules. It parses flag documents and facts with its own small JSON
// reader into a compiled form and evaluates without allocating.
//
// It imports the standard library only (and little of it), because the same
// package is compiled to WebAssembly for browsers and wazero.
package evaluator
