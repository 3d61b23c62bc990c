package ingest

import (
	"strings"
	"unicode"
)

// `$search` and `$exposure`: the two events that are dropped alone when
// their properties do not make sense.

// Replacement tokens of `$search` queries. They hold no `@` and no digit, so
// normalising a normalised query changes nothing.
const (
	searchEmailToken  = "[email]"
	searchNumberToken = "[number]"
	searchMaxUnits    = 100 // UTF-16 code units
	searchDigitRun    = 6
)

// normalizeQuery returns the stored form of a `$search` query: lower-cased,
// e-mail addresses replaced by `[email]`, runs of six or more digits by
// `[number]`, white space trimmed, cut to 100 UTF-16 code units without
// splitting a surrogate pair. It reports false when nothing usable is left.
func normalizeQuery(q string) (string, bool) {
	q = strings.ToLower(q)
	q = replaceEmails(q)
	q = replaceDigitRuns(q)
	q = strings.TrimSpace(cutUTF16(strings.TrimSpace(q), searchMaxUnits))
	return q, q != ""
}

// cutUTF16 returns the longest prefix of s of at most max UTF-16 code units
// that does not split a character.
func cutUTF16(s string, max int) string {
	units := 0
	for i, r := range s {
		n := 1
		if r >= 0x10000 {
			n = 2
		}
		if units+n > max {
			return s[:i]
		}
		units += n
	}
	return s
}

func emailLocalChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '%' || c == '+' || c == '-'
}

func emailDomainChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

// emailDomainEnd returns the end of the e-mail domain starting at i: two or
// more non-empty labels of letters, digits and `-` joined by dots, the last
// of at least two characters; or -1 when there is none.
func emailDomainEnd(s string, i int) int {
	end, labels, n := -1, 0, 0
	for j := i; j <= len(s); j++ {
		if j < len(s) && emailDomainChar(s[j]) {
			n++
			continue
		}
		if n == 0 {
			break
		}
		labels++
		if labels >= 2 && n >= 2 {
			end = j
		}
		if j == len(s) || s[j] != '.' {
			break
		}
		n = 0
	}
	return end
}

// replaceEmails replaces each `local@domain` (local part of ASCII letters,
// digits and `._%+-`) by searchEmailToken.
func replaceEmails(s string) string {
	if strings.IndexByte(s, '@') < 0 {
		return s
	}
	var b strings.Builder
	last, i := 0, 0
	for i < len(s) {
		at := strings.IndexByte(s[i:], '@')
		if at < 0 {
			break
		}
		at += i
		l := at
		for l > last && emailLocalChar(s[l-1]) {
			l--
		}
		r := emailDomainEnd(s, at+1)
		if l == at || r < 0 {
			i = at + 1
			continue
		}
		b.WriteString(s[last:l])
		b.WriteString(searchEmailToken)
		last, i = r, r
	}
	b.WriteString(s[last:])
	return b.String()
}

// replaceDigitRuns replaces each run of six or more decimal digits (any
// script) by searchNumberToken.
func replaceDigitRuns(s string) string {
	var b strings.Builder
	last, runStart, run := 0, 0, 0
	flush := func(end int) {
		if run >= searchDigitRun {
			if b.Len() == 0 {
				b.Grow(len(s))
			}
			b.WriteString(s[last:runStart])
			b.WriteString(searchNumberToken)
			last = end
		}
		run = 0
	}
	for i, r := range s {
		if unicode.IsDigit(r) {
			if run == 0 {
				runStart = i
			}
			run++
			continue
		}
		flush(i)
	}
	flush(len(s))
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// validExposure checks an `$exposure`: `$experiment` matching
// ^[a-z][a-z0-9-]{1,63}$, `$variant` matching ^[a-z][a-z0-9-]{0,39}$, and an
// anonymousId or userId kept.
func validExposure(e *batchEvent, hasID bool) bool {
	return hasID && e.flags&evHasExperiment != 0 && e.flags&evHasVariant != 0 &&
		keyPattern(e.experiment, 2, 64) && keyPattern(e.variant, 1, 40)
}

// keyPattern checks ^[a-z][a-z0-9-]{min-1,max-1}$.
func keyPattern(s string, min, max int) bool {
	if len(s) < min || len(s) > max || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
