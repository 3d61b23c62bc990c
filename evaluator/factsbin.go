package evaluator

import (
	"errors"
)

// This file is the binary form of facts: what a host writes instead of JSON
// when it evaluates in WebAssembly, because reading it there costs a
// fraction of reading JSON (docs/wasm.md, "Binary facts"). It encodes the
// same JSON values, so facts read from it evaluate exactly as the same
// facts read from JSON.
//
//	facts  = version uvarint(count) value
//	                                 version is the byte 1; count is the
//	                                 number of values and keys below the
//	                                 outermost value
//	value  = 0                       null
//	       | 1 | 2                   false, true
//	       | 3 float64               a number: 8 bytes, IEEE 754, little endian; finite
//	       | 4 uvarint(n) n bytes    a string: valid UTF-8
//	       | 5 uvarint(n) n×value    a list
//	       | 6 uvarint(n) n×member   an object
//	member = uvarint(n) n bytes value  the key (valid UTF-8), then its value
//
// uvarint is encoding/binary's unsigned varint (7 bits a byte, low bits
// first, the high bit set on every byte but the last). Lists and objects nest at
// most MaxDepth deep, and nothing may follow the value.

// FactsBinaryVersion is the first byte of facts in binary form.
const FactsBinaryVersion = 1

// Tags of values in the binary form.
const (
	binNull = iota
	binFalse
	binTrue
	binNumber
	binString
	binList
	binObject
)

// ErrFactsBinary is the cause of a ParseError for facts in binary form that
// do not follow the format.
var ErrFactsBinary = errors.New("not facts in binary form")
