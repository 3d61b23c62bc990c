package evaluator

import (
	"strconv"
	"unicode/utf8"
)

// This file is the package's JSON reader: strict RFC 8259, small enough for
// the WebAssembly build (no encoding/json, no reflection). It reads a whole
// text into a tree of values whose strings point into one copy of the input.

type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindList
	kindObject
)

// value is one parsed JSON value. An object's elems alternate keys (as
// string values) and member values, in input order, repeated keys kept
// (lookups take the last, as JSON.parse does).
type value struct {
	kind kind
	// b is the boolean's value; for strings, whether the string is a
	// numeric string (^-?(0|[1-9][0-9]*)([.][0-9]+)?$).
	b bool
	// num is the number's value, or the numeric string's value.
	num   float64
	str   string // decoded string; a number's token as written
	elems []value
}

// size is the number of members of an object.
func (v *value) size() int { return len(v.elems) / 2 }

// key and val are the name and value of an object's i-th member.
func (v *value) key(i int) string { return v.elems[2*i].str }
func (v *value) val(i int) *value { return &v.elems[2*i+1] }

func (v *value) isScalar() bool {
	return v.kind == kindString || v.kind == kindNumber || v.kind == kindBool
}

// member returns the object member named key (the last one when the key
// repeats), or nil when v is not an object or has no such member.
func (v *value) member(key string) *value {
	if v == nil || v.kind != kindObject {
		return nil
	}
	for i := len(v.elems) - 2; i >= 0; i -= 2 {
		if v.elems[i].str == key {
			return &v.elems[i+1]
		}
	}
	return nil
}

// get is member with null read as absent.
func (v *value) get(key string) *value {
	m := v.member(key)
	if m == nil || m.kind == kindNull {
		return nil
	}
	return m
}

// reader parses one JSON text. Children of the containers being read are
// collected on a stack and moved to an arena once a container is complete.
type reader struct {
	s     string
	i     int
	depth int
	stack []value
	// Completed containers take their children from this arena, sized from
	// a count of the input's separators, so that a parse allocates a fixed
	// number of times rather than once a container.
	vals   []value
	buf    []byte
	errAt  int
	errMsg string
}

// parseJSON reads s as one JSON text.
func parseJSON(s string) (value, *ParseError) {
	r := reader{s: s, errAt: -1}
	n := countValues(s)
	r.vals = make([]value, 0, n)
	r.stack = make([]value, 0, min(n, 32))
	v, ok := r.text()
	if !ok {
		return value{}, &ParseError{Offset: r.errAt, Detail: r.errMsg, Err: ErrInvalidJSON}
	}
	return v, nil
}

// text reads the one JSON value s holds, with white space around it.
func (r *reader) text() (value, bool) {
	r.ws()
	v, ok := r.value()
	if ok {
		r.ws()
		if r.i != len(r.s) {
			ok = r.fail("unexpected data after the JSON value")
		}
	}
	return v, ok
}

func (r *reader) fail(msg string) bool {
	if r.errAt < 0 {
		r.errAt, r.errMsg = r.i, msg
	}
	return false
}

func (r *reader) ws() {
	for r.i < len(r.s) {
		switch r.s[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

func (r *reader) value() (value, bool) {
	if r.i >= len(r.s) {
		return value{}, r.fail("unexpected end of input")
	}
	switch c := r.s[r.i]; c {
	case '{':
		return r.object()
	case '[':
		return r.list()
	case '"':
		s, ok := r.str()
		if !ok {
			return value{}, false
		}
		v := value{kind: kindString, str: s}
		if isNumericString(s) {
			v.b = true
			v.num, _ = strconv.ParseFloat(s, 64) // overflow gives ±Inf, equal to no JSON number
		}
		return v, true
	case 't':
		return value{kind: kindBool, b: true}, r.literal("true")
	case 'f':
		return value{kind: kindBool}, r.literal("false")
	case 'n':
		return value{kind: kindNull}, r.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return r.number()
		}
		return value{}, r.fail("unexpected character")
	}
}

func (r *reader) literal(word string) bool {
	if len(r.s)-r.i < len(word) || r.s[r.i:r.i+len(word)] != word {
		return r.fail("invalid literal")
	}
	r.i += len(word)
	return true
}

func (r *reader) enter() bool {
	r.depth++
	if r.depth > MaxDepth {
		return r.fail("nesting deeper than 128")
	}
	return true
}

func (r *reader) list() (value, bool) {
	if !r.enter() {
		return value{}, false
	}
	r.i++ // [
	base := len(r.stack)
	r.ws()
	if r.i < len(r.s) && r.s[r.i] == ']' {
		r.i++
		r.depth--
		return value{kind: kindList, elems: []value{}}, true
	}
	for {
		r.ws()
		v, ok := r.value()
		if !ok {
			return value{}, false
		}
		r.stack = append(r.stack, v)
		r.ws()
		if r.i >= len(r.s) {
			return value{}, r.fail("unterminated list")
		}
		c := r.s[r.i]
		r.i++
		if c == ']' {
			break
		}
		if c != ',' {
			r.i--
			return value{}, r.fail("expected ',' or ']' in list")
		}
	}
	elems := r.takeValues(base)
	r.depth--
	return value{kind: kindList, elems: elems}, true
}

func (r *reader) object() (value, bool) {
	if !r.enter() {
		return value{}, false
	}
	r.i++ // {
	base := len(r.stack)
	r.ws()
	if r.i < len(r.s) && r.s[r.i] == '}' {
		r.i++
		r.depth--
		return value{kind: kindObject, elems: []value{}}, true
	}
	for {
		r.ws()
		if r.i >= len(r.s) || r.s[r.i] != '"' {
			return value{}, r.fail("expected a string key in object")
		}
		k, ok := r.str()
		if !ok {
			return value{}, false
		}
		r.ws()
		if r.i >= len(r.s) || r.s[r.i] != ':' {
			return value{}, r.fail("expected ':' after object key")
		}
		r.i++
		r.ws()
		v, ok := r.value()
		if !ok {
			return value{}, false
		}
		r.stack = append(r.stack, value{kind: kindString, str: k}, v)
		r.ws()
		if r.i >= len(r.s) {
			return value{}, r.fail("unterminated object")
		}
		c := r.s[r.i]
		r.i++
		if c == '}' {
			break
		}
		if c != ',' {
			r.i--
			return value{}, r.fail("expected ',' or '}' in object")
		}
	}
	elems := r.takeValues(base)
	r.depth--
	return value{kind: kindObject, elems: elems}, true
}

// takeValues moves the children above base from the stack to the arena.
func (r *reader) takeValues(base int) []value {
	n := len(r.vals)
	r.vals = append(r.vals, r.stack[base:]...)
	clear(r.stack[base:])
	r.stack = r.stack[:base]
	return r.vals[n:len(r.vals):len(r.vals)]
}

func (r *reader) number() (value, bool) {
	s, start, i := r.s, r.i, r.i
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		digits()
	default:
		r.i = i
		return value{}, r.fail("invalid number")
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			r.i = i
			return value{}, r.fail("invalid number: no digit after '.'")
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			r.i = i
			return value{}, r.fail("invalid number: no digit in exponent")
		}
	}
	tok := s[start:i]
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil {
		return value{}, r.fail("number out of float64 range")
	}
	r.i = i
	return value{kind: kindNumber, num: f, str: tok}, true
}

// str reads a string starting at the opening quote. Strings without escapes
// are slices of the input; others are decoded into a new string.
func (r *reader) str() (string, bool) {
	s := r.s
	start := r.i + 1
	i := start
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			r.i = i + 1
			return s[start:i], true
		case c == '\\':
			return r.strEscaped(start, i)
		case c < 0x20:
			r.i = i
			return "", r.fail("control character in string")
		case c < utf8.RuneSelf:
			i++
		default:
			ru, size := utf8.DecodeRuneInString(s[i:])
			if ru == utf8.RuneError && size == 1 {
				r.i = i
				return "", r.fail("invalid UTF-8 in string")
			}
			i += size
		}
	}
	r.i = i
	return "", r.fail("unterminated string")
}

func (r *reader) strEscaped(start, i int) (string, bool) {
	buf, end, fault := UnquoteJSONString(append(r.buf[:0], r.s[start:i]...), r.s, i)
	r.buf = buf
	r.i = end
	switch fault {
	case StringOK:
		return string(buf), true
	case StringUnterminated:
		return "", r.fail("unterminated string")
	case StringBadUnicode:
		r.i = end + 2
		return "", r.fail("invalid \\u escape")
	case StringLoneSurrogate:
		return "", r.fail("lone surrogate in \\u escape")
	case StringBadEscape:
		return "", r.fail("invalid escape in string")
	case StringControl:
		return "", r.fail("control character in string")
	default:
		return "", r.fail("invalid UTF-8 in string")
	}
}

func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var v rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// isNumericString reports whether s matches ^-?(0|[1-9][0-9]*)([.][0-9]+)?$.
func isNumericString(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	if i >= len(s) {
		return false
	}
	if s[i] == '0' {
		i++
	} else if s[i] >= '1' && s[i] <= '9' {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	} else {
		return false
	}
	if i == len(s) {
		return true
	}
	if s[i] != '.' {
		return false
	}
	i++
	if i == len(s) {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
