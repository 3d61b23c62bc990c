package catalog

import (
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Canonical JSON as the specification defines it for flag documents: object
// keys sorted byte-wise at every depth, no insignificant whitespace. Numbers
// keep the literal the file gave (a JSON number is not rewritten); strings
// escape only `"`, `\` and control characters, everything else is written as
// UTF-8.

// appendCanonical appends the canonical encoding of a decoded JSON value
// (map[string]any, []any, string, json.Number, bool, nil).
func appendCanonical(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		if x {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case string:
		return appendString(dst, x), nil
	case json.Number:
		if !json.Valid([]byte(x)) {
			return nil, fmt.Errorf("invalid number %q", string(x))
		}
		return append(dst, x...), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendCanonical(dst, e); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			var err error
			if dst, err = appendCanonical(dst, x[k]); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	return nil, fmt.Errorf("cannot encode %T as JSON", v)
}

// canonicalRaw re-encodes JSON text canonically.
func canonicalRaw(raw []byte) ([]byte, error) {
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, err
	}
	return appendCanonical(nil, v)
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string the way compiled flags write
// their strings: only `"`, `\` and control characters escaped, invalid
// UTF-8 replaced by U+FFFD. The flag-document compiler uses it for what it
// writes beside the catalog's compiled flags.
func AppendJSONString(dst []byte, s string) []byte { return appendString(dst, s) }

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c >= 0x20:
				dst = append(dst, c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\ufffd"...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
