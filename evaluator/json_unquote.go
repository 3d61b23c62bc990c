package evaluator

import "unicode/utf8"

// StringFault is what makes a JSON string literal invalid
// (UnquoteJSONString, UnicodeEscape); each reader words it its own way.
type StringFault uint8

// The faults of a JSON string literal.
const (
	StringOK            StringFault = iota
	StringUnterminated              // no closing quote
	StringBadEscape                 // a backslash before a character JSON does not escape
	StringBadUnicode                // \u not followed by four hex digits
	StringLoneSurrogate             // a \u escape of half a UTF-16 surrogate pair
	StringControl                   // a control character (below U+0020) not escaped
	StringBadUTF8                   // bytes that are not UTF-8
)

// UnquoteJSONString appends to dst the value of the JSON string literal
// whose contents start at s[i] (after its opening quote), strictly as
// RFC 8259 has it: the escapes it defines, surrogate pairs joined, no
// control character, UTF-8 only. It returns dst and the position after
// the closing quote; or, for an invalid literal, the fault and where it
// is (the backslash of an escape, the byte at fault, or where the input
// ends). The evaluator's reader and ingest's batch scanner both read
// strings with it.
func UnquoteJSONString(dst []byte, s string, i int) ([]byte, int, StringFault) {
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			return dst, i + 1, StringOK
		case c == '\\':
			if i+1 >= len(s) {
				return dst, i, StringUnterminated
			}
			switch e := s[i+1]; e {
			case '"', '\\', '/':
				dst = append(dst, e)
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r, n, f := UnicodeEscape(s, i)
				if f != StringOK {
					return dst, i, f
				}
				dst = utf8.AppendRune(dst, r)
				i += n
				continue
			default:
				return dst, i, StringBadEscape
			}
			i += 2
		case c < 0x20:
			return dst, i, StringControl
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				return dst, i, StringBadUTF8
			}
			dst = append(dst, s[i:i+n]...)
			i += n
		}
	}
	return dst, len(s), StringUnterminated
}

// UnicodeEscape reads the escape \uXXXX at s[i] (its backslash), with the
// low surrogate that must follow a high one, and returns the rune and the
// bytes it took (6 or 12), or the fault.
func UnicodeEscape(s string, i int) (rune, int, StringFault) {
	r, ok := hex4(s, i+2)
	if !ok {
		return 0, 0, StringBadUnicode
	}
	switch {
	case r >= 0xDC00 && r < 0xE000:
		return 0, 0, StringLoneSurrogate
	case r >= 0xD800 && r < 0xDC00:
		if i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
			if lo, ok := hex4(s, i+8); ok && lo >= 0xDC00 && lo < 0xE000 {
				return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12, StringOK
			}
		}
		return 0, 0, StringLoneSurrogate
	}
	return r, 6, StringOK
}
