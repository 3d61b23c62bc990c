package ingest

import (
	"unicode"
	"unicode/utf8"
)

// Field rules on single strings: lengths in code points, white space, and
// the shapes of the context fields.

// runesWithin reports whether s has min to max code points.
func runesWithin(s string, min, max int) bool {
	if len(s) < min {
		return false
	}
	if len(s) <= max && min <= 1 {
		return true // a code point takes one to four bytes
	}
	n := utf8.RuneCountInString(s)
	return n >= min && n <= max
}

// hasOuterSpace reports whether s starts or ends with Unicode white space.
func hasOuterSpace(s string) bool {
	if s == "" {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s)
	if unicode.IsSpace(r) {
		return true
	}
	r, _ = utf8.DecodeLastRuneInString(s)
	return unicode.IsSpace(r)
}

// isBlank reports whether s holds only Unicode white space.
func isBlank(s string) bool {
	for _, r := range s {
		if !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// validSDK checks `name/version`: name 1 to 64 characters without `/`,
// version 1 to 32 characters.
func validSDK(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return runesWithin(s[:i], 1, batchMaxSDKNameLen) && runesWithin(s[i+1:], 1, batchMaxSDKVerLen)
		}
	}
	return false
}

// validLocale checks the shape of a BCP 47 tag, 2 to 35 characters:
// subtags of 1 to 8 ASCII letters or digits joined by `-`, the first of 2
// to 8 letters, or `x` / `i` for private-use and grandfathered tags. The
// registry is not consulted.
func validLocale(s string) bool {
	if len(s) < 2 || len(s) > batchMaxLocaleLen {
		return false
	}
	sub := 0 // index of the current subtag
	n := 0   // length of the current subtag
	letters := true
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '-' {
			if n < 1 || n > 8 {
				return false
			}
			if sub == 0 && !letters {
				return false
			}
			if sub == 0 && n == 1 && s[0]|0x20 != 'x' && s[0]|0x20 != 'i' {
				return false
			}
			if sub == 0 && n == 1 && i == len(s) {
				return false
			}
			sub, n, letters = sub+1, 0, true
			continue
		}
		c := s[i] | 0x20
		switch {
		case c >= 'a' && c <= 'z' && s[i] >= 'A':
		case s[i] >= '0' && s[i] <= '9':
			letters = false
		default:
			return false
		}
		n++
	}
	return true
}

// validTimezone checks the shape of an IANA zone name, 1 to 64 characters:
// components joined by `/`, each starting with an ASCII letter and holding
// letters, digits, `_`, `-`, `+` or `.`. Whether the zone exists is not
// checked, so a zone newer than the server's tz database is still taken.
func validTimezone(s string) bool {
	if len(s) < 1 || len(s) > batchMaxTimezoneLen {
		return false
	}
	first := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c|0x20 >= 'a' && c|0x20 <= 'z'
		switch {
		case c == '/':
			if first {
				return false
			}
			first = true
			continue
		case first && !letter:
			return false
		case letter, c >= '0' && c <= '9', c == '_', c == '-', c == '+', c == '.':
		default:
			return false
		}
		first = false
	}
	return !first
}
