package ingest

import (
	"encoding/binary"
	"unicode/utf8"

	"github.com/mfhq/mf/evaluator"
)

// jsonScanner reads JSON text in one pass over a string. It checks the whole
// grammar of RFC 8259, UTF-8 validity, and refuses lone UTF-16 surrogates in
// \u escapes. The first syntax error is kept in syntax and stops the scan:
// pos jumps to the end, so every later read fails at once and loops end.
type jsonScanner struct {
	src    string
	data   []byte // the same bytes as src, for 8-byte loads; read only
	pos    int
	depth  int
	syntax string // first syntax error; "" while the text is well formed
	errPos int    // byte offset of the first syntax error
	buf    []byte // scratch for strings with escapes

	// While compacting, the text read is copied to out in runs: the bytes
	// from outFrom up to pos are pending; white space and escaped strings
	// end a run (see ws and rewrite).
	compacting bool
	outFrom    int
	out        []byte
}

// batchMaxNesting bounds the nesting of objects and lists anywhere in a batch
// body; deeper text is refused as invalid_json, as a parser limit.
const batchMaxNesting = 128

func (s *jsonScanner) fail(msg string) {
	if s.syntax == "" {
		s.syntax = msg
		s.errPos = s.pos
	}
	s.pos = len(s.src)
}

func (s *jsonScanner) failed() bool { return s.syntax != "" }

// ws skips insignificant whitespace (leaving it out of a compact copy).
func (s *jsonScanner) ws() {
	start := s.pos
	for s.pos < len(s.src) {
		switch s.src[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
			continue
		}
		break
	}
	if s.compacting && s.pos != start {
		s.out = append(s.out, s.src[s.outFrom:start]...)
		s.outFrom = s.pos
	}
}

// rewrite replaces, in the compact copy, the text from start to pos (a
// string just read) by v written as a JSON string with only the escapes
// JSON requires. It returns where v starts and ends in out.
func (s *jsonScanner) rewrite(start int, v string) (int, int) {
	s.out = append(s.out, s.src[s.outFrom:start]...)
	from := len(s.out)
	s.out = evaluator.AppendJSONString(s.out, v)
	s.outFrom = s.pos
	return from, len(s.out)
}

// flush copies the pending text up to pos into out.
func (s *jsonScanner) flush() {
	s.out = append(s.out, s.src[s.outFrom:s.pos]...)
	s.outFrom = s.pos
}

// peek returns the byte at pos, or 0 at the end.
func (s *jsonScanner) peek() byte {
	if s.pos < len(s.src) {
		return s.src[s.pos]
	}
	return 0
}

// expect consumes c after whitespace, or fails.
func (s *jsonScanner) expect(c byte, msg string) bool {
	s.ws()
	if s.pos < len(s.src) && s.src[s.pos] == c {
		s.pos++
		return true
	}
	s.fail(msg)
	return false
}

// enter counts one more level of nesting; it fails past batchMaxNesting.
func (s *jsonScanner) enter() bool {
	s.depth++
	if s.depth > batchMaxNesting {
		s.fail("nested deeper than 128 levels")
		return false
	}
	return true
}

func (s *jsonScanner) leave() { s.depth-- }

// objectStart consumes `{` (at pos) and reports whether the object has a
// first member; an empty object is consumed whole.
func (s *jsonScanner) objectStart() bool {
	s.pos++
	if !s.enter() {
		return false
	}
	s.ws()
	if s.peek() == '}' {
		s.pos++
		s.leave()
		return false
	}
	return true
}

// key reads a member name and its colon; pos is then at the value.
func (s *jsonScanner) key() (string, bool) {
	s.ws()
	if s.peek() != '"' {
		s.fail("expected a member name")
		return "", false
	}
	k, _ := s.str()
	if !s.expect(':', "expected ':' after a member name") {
		return "", false
	}
	s.ws()
	return k, true
}

// next consumes the `,` or `}` after a member; it reports whether another
// member follows.
func (s *jsonScanner) next(end byte) bool {
	s.ws()
	switch s.peek() {
	case ',':
		s.pos++
		return true
	case end:
		s.pos++
		s.leave()
		return false
	}
	if end == '}' {
		s.fail("expected ',' or '}' after an object member")
	} else {
		s.fail("expected ',' or ']' after a list element")
	}
	return false
}

// arrayStart consumes `[` and reports whether the list has a first element.
func (s *jsonScanner) arrayStart() bool {
	s.pos++
	if !s.enter() {
		return false
	}
	s.ws()
	if s.peek() == ']' {
		s.pos++
		s.leave()
		return false
	}
	return true
}

// str reads a string at pos (which holds `"`) and returns its value. When
// the string has no escapes the value is a substring of the source and
// escaped is false.
func (s *jsonScanner) str() (v string, escaped bool) {
	start := s.pos + 1
	i := start
	src := s.src
	for {
		for i+8 <= len(src) && plain8(s.data, i) {
			i += 8
		}
		if i >= len(src) {
			break
		}
		c := src[i]
		switch {
		case c == '"':
			s.pos = i + 1
			return src[start:i], false
		case c == '\\':
			return s.strEscaped(start, i), true
		case c < 0x20:
			s.pos = i
			s.fail("control character in a string")
			return "", false
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRuneInString(src[i:])
			if r == utf8.RuneError && n == 1 {
				s.pos = i
				s.fail("invalid UTF-8")
				return "", false
			}
			i += n
		}
	}
	s.pos = len(src)
	s.fail("unterminated string")
	return "", false
}

// plain8 reports whether the 8 bytes at i are all printable ASCII other
// than `"` and `\`, the bytes a string scan can pass without a look
// (a SWAR test: each clause sets the high bit of a byte that may match).
func plain8(data []byte, i int) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	x := binary.LittleEndian.Uint64(data[i:])
	quote := x ^ (ones * '"')
	slash := x ^ (ones * '\\')
	control := (x - ones*0x20) &^ x // a byte below 0x20
	isQuote := (quote - ones) &^ quote
	isSlash := (slash - ones) &^ slash
	return (control|isQuote|isSlash|x)&highs == 0
}

// strEscaped finishes a string whose first escape is at i.
func (s *jsonScanner) strEscaped(start, i int) string {
	b, end, fault := evaluator.UnquoteJSONString(append(s.buf[:0], s.src[start:i]...), s.src, i)
	s.buf = b
	s.pos = end
	if fault != evaluator.StringOK {
		s.stringFault(fault)
		return ""
	}
	return string(b)
}

// stringFault fails the scan for a fault of a string at s.pos.
func (s *jsonScanner) stringFault(f evaluator.StringFault) {
	switch f {
	case evaluator.StringUnterminated:
		s.fail("unterminated string")
	case evaluator.StringBadUnicode:
		s.fail("invalid \\u escape")
	case evaluator.StringLoneSurrogate:
		s.fail("lone UTF-16 surrogate")
	case evaluator.StringBadEscape:
		s.fail("invalid escape in a string")
	case evaluator.StringControl:
		s.fail("control character in a string")
	default:
		s.fail("invalid UTF-8")
	}
}

// number reads a number at pos and returns its text and whether it is a
// JSON integer (no fraction, no exponent).
func (s *jsonScanner) number() (tok string, isInt bool) {
	src := s.src
	start := s.pos
	i := start
	if i < len(src) && src[i] == '-' {
		i++
	}
	switch {
	case i < len(src) && src[i] == '0':
		i++
	case i < len(src) && src[i] >= '1' && src[i] <= '9':
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
	default:
		s.pos = i
		s.fail("invalid number")
		return "", false
	}
	isInt = true
	if i < len(src) && src[i] == '.' {
		isInt = false
		i++
		d := i
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
		if i == d {
			s.pos = i
			s.fail("invalid number")
			return "", false
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		isInt = false
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		d := i
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
		if i == d {
			s.pos = i
			s.fail("invalid number")
			return "", false
		}
	}
	s.pos = i
	return src[start:i], isInt
}

// literal reads true, false or null at pos.
func (s *jsonScanner) literal() string {
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(s.src)-s.pos >= len(lit) && s.src[s.pos:s.pos+len(lit)] == lit {
			s.pos += len(lit)
			return lit
		}
	}
	s.fail("invalid literal")
	return ""
}

// null consumes a null at pos if there is one.
func (s *jsonScanner) null() bool {
	if len(s.src)-s.pos >= 4 && s.src[s.pos:s.pos+4] == "null" {
		s.pos += 4
		return true
	}
	return false
}

// skip reads any value at pos, checking it, and keeps nothing.
func (s *jsonScanner) skip() {
	switch c := s.peek(); {
	case c == '"':
		s.skipString()
	case c == '{':
		for more := s.objectStart(); more && !s.failed(); more = s.next('}') {
			s.ws()
			if s.peek() != '"' {
				s.fail("expected a member name")
				return
			}
			s.skipString()
			if !s.expect(':', "expected ':' after a member name") {
				return
			}
			s.ws()
			s.skip()
		}
	case c == '[':
		for more := s.arrayStart(); more && !s.failed(); more = s.next(']') {
			s.ws()
			s.skip()
		}
	case c == '-' || c >= '0' && c <= '9':
		s.number()
	case c == 't' || c == 'f' || c == 'n':
		s.literal()
	case c == 0 && s.pos >= len(s.src):
		s.fail("unexpected end of the body")
	default:
		s.fail("unexpected character")
	}
}

// skipString checks a string at pos without building its value.
func (s *jsonScanner) skipString() {
	src := s.src
	i := s.pos + 1
	for i < len(src) {
		for i+8 <= len(src) && plain8(s.data, i) {
			i += 8
		}
		if i >= len(src) {
			break
		}
		c := src[i]
		switch {
		case c == '"':
			s.pos = i + 1
			return
		case c == '\\':
			if i+1 >= len(src) {
				i = len(src)
				continue
			}
			switch src[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				_, n, fault := evaluator.UnicodeEscape(src, i)
				if fault != evaluator.StringOK {
					s.pos = i
					s.stringFault(fault)
					return
				}
				i += n
			default:
				s.pos = i
				s.fail("invalid escape in a string")
				return
			}
		case c < 0x20:
			s.pos = i
			s.fail("control character in a string")
			return
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRuneInString(src[i:])
			if r == utf8.RuneError && n == 1 {
				s.pos = i
				s.fail("invalid UTF-8")
				return
			}
			i += n
		}
	}
	s.pos = len(src)
	s.fail("unterminated string")
}
