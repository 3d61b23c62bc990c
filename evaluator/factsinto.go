package evaluator

import "unsafe"

// This file reads facts into a reused Facts, so that a caller that reads
// new facts for every evaluation (the WebAssembly guest) allocates nothing
// once its buffers have grown to the size of its inputs. Allocating is what
// makes a parse slow inside WebAssembly.

// factsMem is the memory a Facts keeps for ParseFactsInto and
// ParseFactsBinaryInto: a copy of the input, which the facts' strings point
// into, the arena of parsed values, and the segment lists.
type factsMem struct {
	text  []byte
	esc   []byte // the reader's buffer for strings with escapes
	vals  []value
	stack []value
	elems []value // the binary reader's list elements
	strs  []string
	// form is how text was read into the facts, when that succeeded: a
	// parse of the same bytes in the same form changes nothing and is
	// skipped (hosts evaluate several flags for one set of facts).
	form factsForm
}

type factsForm uint8

const (
	formNone factsForm = iota
	formJSON
	formBinary
)

// maxKeptValues bounds the arena a Facts keeps between calls: facts with
// more values than this are read into memory that is dropped afterwards,
// so that one large input does not pin its arena.
const maxKeptValues = 1 << 14

// ParseFactsInto reads facts as ParseFacts does, into dst, reusing the
// memory dst holds from earlier calls: once that memory is as large as the
// input needs, reading allocates nothing (strings with escapes excepted).
// The input is copied; dst does not refer to data afterwards. When data
// are the bytes dst was last read from (as JSON), dst already holds those
// facts and is left as it is.
//
// dst is replaced: facts previously read into it must no longer be in use,
// and dst must not be read concurrently with this call. On error dst is
// empty facts.
func ParseFactsInto(dst *Facts, data []byte) error {
	if dst.mem.form == formJSON && len(data) == len(dst.mem.text) && string(data) == string(dst.mem.text) {
		return nil
	}
	dst.mem.form = formNone
	s := dst.mem.copyText(data)
	n := countValues(s)
	r := reader{s: s, errAt: -1, buf: dst.mem.esc[:0]}
	r.vals = dst.mem.arena(n)
	if cap(dst.mem.stack) < min(n, 32) {
		dst.mem.stack = make([]value, 0, min(n, 32))
	}
	r.stack = dst.mem.stack[:0]
	v, ok := r.text()
	if cap(r.stack) <= maxKeptValues {
		dst.mem.stack = r.stack[:0]
	}
	if cap(r.buf) <= 64*maxKeptValues {
		dst.mem.esc = r.buf[:0]
	}
	dst.mem.keep(r.vals)
	if !ok {
		dst.empty()
		return &ParseError{What: "facts", Offset: r.errAt, Detail: r.errMsg, Err: ErrInvalidJSON}
	}
	if err := dst.fillKept(&v); err != nil {
		return err
	}
	dst.mem.form = formJSON
	return nil
}

// fillKept fills dst from v with the segment lists in dst's memory.
func (fa *Facts) fillKept(v *value) error {
	strs, ok := fa.fill(v, fa.mem.strs[:0])
	if cap(strs) <= maxKeptValues {
		fa.mem.strs = strs[:0]
	}
	if !ok {
		fa.empty()
		return &ParseError{What: "facts", Offset: -1, Err: ErrNotObject}
	}
	return nil
}

// copyText copies data into the kept text buffer and returns it as a
// string that refers to that buffer. The strings of the previous facts
// referred to the same buffer: the caller replaces them.
func (m *factsMem) copyText(data []byte) string {
	if cap(m.text) < len(data) {
		m.text = make([]byte, len(data), max(len(data), 256))
	}
	m.text = m.text[:len(data)]
	copy(m.text, data)
	if len(data) == 0 {
		return ""
	}
	t := m.text
	if len(data) > 64*maxKeptValues {
		m.text = nil // do not keep a large buffer
	}
	return unsafe.String(unsafe.SliceData(t), len(t))
}

// arena returns an empty value slice with room for n values.
func (m *factsMem) arena(n int) []value {
	if cap(m.vals) >= n {
		return m.vals[:0]
	}
	return make([]value, 0, max(n, 16))
}

// keep keeps vals (as returned by arena, since filled) for the next call
// unless it is large.
func (m *factsMem) keep(vals []value) {
	if cap(vals) <= maxKeptValues {
		m.vals = vals[:0:cap(vals)]
	} else {
		m.vals = nil
	}
}

// countValues returns an upper bound of the number of values in the JSON
// text s less one: the size of the arena a parse needs. Every value but
// the outermost follows '[', ',' or ':', and every key precedes ':';
// separators inside strings are skipped. For a valid text the count is
// the number of values (keys included) less one.
func countValues(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[', ',':
			n++
		case ':':
			n += 2
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		}
	}
	return n
}
