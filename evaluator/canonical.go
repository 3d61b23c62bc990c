package evaluator

import (
	"slices"
	"strconv"
)

// Canonical JSON, the form of Result.Value (docs/evaluator.md): what
// JavaScript's JSON.stringify writes for the parsed value, with object keys
// sorted byte-wise by their UTF-8 encoding at every depth, duplicate keys
// resolved to the last one, and no whitespace.

// appendCanonical appends the canonical text of v.
func appendCanonical(dst []byte, v *value) []byte {
	switch v.kind {
	case kindNull:
		return append(dst, "null"...)
	case kindBool:
		if v.b {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case kindNumber:
		return appendNumber(dst, v.num)
	case kindString:
		return AppendJSONString(dst, v.str)
	case kindList:
		dst = append(dst, '[')
		for i := range v.elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonical(dst, &v.elems[i])
		}
		return append(dst, ']')
	default:
		order := canonicalOrder(v)
		dst = append(dst, '{')
		for n, i := range order {
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = AppendJSONString(dst, v.key(i))
			dst = append(dst, ':')
			dst = appendCanonical(dst, v.val(i))
		}
		return append(dst, '}')
	}
}

// canonicalOrder returns the indexes of v's members in canonical order: the
// last member of each key, keys sorted byte-wise.
func canonicalOrder(v *value) []int {
	order := make([]int, 0, v.size())
	for i := range v.size() {
		order = append(order, i)
	}
	// A stable sort keeps repeated keys in input order; keep the last of each run.
	slices.SortStableFunc(order, func(a, b int) int {
		switch ka, kb := v.key(a), v.key(b); {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	out := order[:0]
	for n, i := range order {
		if n+1 < len(order) && v.key(order[n+1]) == v.key(i) {
			continue
		}
		out = append(out, i)
	}
	return out
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string the way JSON.stringify
// writes it: '"' and '\\' escaped, \b \f \n \r \t, other characters below
// U+0020 as \u00xx, everything else as it is (s is valid UTF-8). It is the
// one JSON string writer of the evaluator, of ingest and of `mf eval`.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendNumber appends f as ECMAScript's Number::toString writes it (the
// form of JSON.stringify): shortest round-trip digits, plain notation for
// 1e-6 <= |f| < 1e21, otherwise d.ddde±x; -0 is written 0.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	abs := f
	if abs < 0 {
		abs = -abs
	}
	if abs >= 1e-6 && abs < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
	// Go writes at least two exponent digits (1e-07); ECMAScript writes 1e-7.
	if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-2] == '0' {
		dst[n-2] = dst[n-1]
		dst = dst[:n-1]
	}
	return dst
}
