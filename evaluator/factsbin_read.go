package evaluator

import (
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// Reading facts in binary form (the format is in factsbin.go).

// ParseFactsBinary reads facts in binary form. The facts are as ParseFacts
// reads them from the same value written as JSON: the same members count,
// and members of the wrong type count as absent. It fails when data breaks
// the format (a truncated value, invalid UTF-8, a number that is not
// finite, nesting deeper than MaxDepth) or its value is neither an object
// nor null.
func ParseFactsBinary(data []byte) (*Facts, error) {
	fa := &Facts{}
	if err := ParseFactsBinaryInto(fa, data); err != nil {
		return nil, err
	}
	return fa, nil
}

// ParseFactsBinaryInto is ParseFactsBinary into dst, reusing dst's memory
// as ParseFactsInto does: once that memory is large enough, it allocates
// nothing. The same rules apply: dst is replaced, and is empty facts on
// error. When data are the bytes dst was last read from (in binary form),
// dst already holds those facts and is left as it is.
//
// The reader does not build a tree of the input. It checks the whole
// input in one pass and keeps only what evaluation reads: the ids, the
// properties (a list property with its elements; the contents of an
// object property, which no operator reads, are checked and skipped) and
// the segment lists. Strings point into dst's copy of data.
func ParseFactsBinaryInto(dst *Facts, data []byte) error {
	m := &dst.mem
	if m.form == formBinary && len(data) == len(m.text) && string(data) == string(m.text) {
		return nil
	}
	m.form = formNone
	r := binReader{s: m.copyText(data)}
	if fastFacts(dst, r.s, firstNonASCII(r.s)) {
		m.form = formBinary
		return nil
	}
	if !r.facts(dst) {
		dst.empty()
		err := r.err
		if err == nil {
			err = ErrFactsBinary
		}
		return &ParseError{What: "facts", Offset: r.i, Detail: r.msg, Err: err}
	}
	m.form = formBinary
	return nil
}

// fastFacts reads the facts most hosts send, with every check that
// binReader makes, in one function with its state in locals and few calls
// (checkID; isNumericString for strings that start like a number): one-byte
// lengths and counts, ASCII strings before hi (the first
// byte with the high bit set), properties whose values are scalars, no
// segments. It returns false, having changed nothing that binReader does
// not set again, for anything else, which binReader then reads.
//
// In WebAssembly every taken branch and call of Go code is dear (a jump
// through a table, spills to the stack in memory); this is why the common
// case is written out here rather than read by the general reader, which
// takes markedly longer there.
func fastFacts(fa *Facts, s string, hi int) bool {
	if len(s) < 4 || s[0] != FactsBinaryVersion || s[1] >= 0x80 || s[2] != binObject || s[3] >= 0x80 {
		return false
	}
	count, members, i, n := int(s[1]), int(s[3]), 4, 0
	m := &fa.mem
	if cap(m.vals) < count+1 {
		m.vals = make([]value, 0, max(count+1, 16))
	}
	props := m.vals[:0]
	var idTag, userIDTag byte = binNull, binNull
	var id, userID string
	hasProps := false
	for range members {
		key, ok := shortASCII(s, i, hi)
		if !ok {
			return false
		}
		i += 1 + len(key)
		if i >= len(s) {
			return false
		}
		tag := s[i]
		i++
		n += 2
		var t string
		switch tag {
		case binString:
			if t, ok = shortASCII(s, i, hi); !ok {
				return false
			}
			i += 1 + len(t)
		case binNumber:
			if len(s)-i < 8 || le64(s[i:])>>52&0x7ff == 0x7ff {
				return false
			}
			i += 8
		case binNull, binFalse, binTrue:
		case binObject:
			if key != "properties" || i >= hi {
				return false
			}
			np := int(s[i]) // below hi: one byte
			i++
			if 2*np+1 > cap(props) {
				return false
			}
			props = props[:2*np+1]
			obj := &props[0]
			obj.setScalar(kindObject, false, 0)
			obj.elems = props[1 : 2*np+1 : 2*np+1]
			for j := 1; j < len(props); j += 2 {
				k, ok := shortASCII(s, i, hi)
				if !ok {
					return false
				}
				i += 1 + len(k)
				if i >= len(s) {
					return false
				}
				props[j].str = k // keys: str alone (see binReader.props)
				tag := s[i]
				i++
				v := &props[j+1]
				if v.elems != nil {
					v.elems = nil
				}
				switch tag {
				case binString:
					t, ok := shortASCII(s, i, hi)
					if !ok {
						return false
					}
					i += 1 + len(t)
					v.kind, v.b, v.num, v.str = kindString, false, 0, t
					if t != "" && (t[0] == '-' || t[0] >= '0' && t[0] <= '9') && isNumericString(t) {
						v.b = true
						v.num, _ = strconv.ParseFloat(t, 64) // as the JSON reader does
					}
				case binNumber:
					if len(s)-i < 8 {
						return false
					}
					bits := le64(s[i:])
					if bits>>52&0x7ff == 0x7ff {
						return false
					}
					i += 8
					v.kind, v.b, v.num = kindNumber, false, math.Float64frombits(bits)
					if v.str != "" {
						v.str = ""
					}
				case binNull, binFalse, binTrue:
					v.kind, v.b, v.num = kindBool, tag == binTrue, 0
					if tag == binNull {
						v.kind = kindNull
					}
					if v.str != "" {
						v.str = ""
					}
				default:
					return false
				}
			}
			n += 2 * np
		default:
			return false
		}
		switch key {
		case "id":
			idTag, id = tag, t
		case "userId":
			userIDTag, userID = tag, t
		case "properties":
			hasProps = tag == binObject
		case "segments":
			return false
		}
	}
	if i != len(s) || n != count {
		return false
	}
	fa.id, fa.idState = binID(idTag, id)
	fa.userID, fa.userIDState = binID(userIDTag, userID)
	fa.props = nil
	if hasProps {
		fa.props = &props[0]
	}
	fa.seg, fa.segIn, fa.segUnavail = segAbsent, nil, nil
	return true
}

// binReader reads any facts in binary form (see ParseFactsBinaryInto): what
// fastFacts does not take. It is written for clarity rather than speed.
type binReader struct {
	s   string
	i   int
	n   int // values and keys read below the outermost value
	msg string
	err error // the sentinel for a failure other than ErrFactsBinary
}

func (r *binReader) bad(msg string) bool {
	r.msg = msg
	return false
}

// facts reads the whole input into fa.
func (r *binReader) facts(fa *Facts) bool {
	s, m := r.s, &fa.mem
	if len(s) == 0 || s[0] != FactsBinaryVersion {
		return r.bad("unknown version")
	}
	r.i = 1
	count, ok := r.length()
	if !ok {
		return false
	}
	if r.i >= len(s) {
		return r.bad("truncated value")
	}
	tag := s[r.i]
	r.i++
	if tag != binObject {
		if !r.skip(tag, 0) || !r.end(count) {
			return false
		}
		if tag != binNull {
			r.err = ErrNotObject
			return r.bad("")
		}
		fa.empty()
		return true
	}
	// The arenas: the properties object and its members' keys and values
	// (one value for the object, then two a member), and the elements of
	// list properties. An honest count bounds both.
	if cap(m.vals) < count+1 {
		m.vals = make([]value, 0, max(count+1, 16))
	}
	if cap(m.elems) < count {
		m.elems = make([]value, 0, max(count, 16))
	}
	props, elems := m.vals[:0], m.elems[:0]
	var idTag, userIDTag byte = binNull, binNull
	var id, userID string
	hasProps := false
	segAt := -1
	members, ok := r.length()
	if !ok {
		return false
	}
	for range members {
		key, ok := r.text()
		if !ok {
			return false
		}
		if r.i >= len(s) {
			return r.bad("truncated value")
		}
		at, tag := r.i, s[r.i]
		r.i++
		r.n += 2
		var t string // the value, when a string
		if tag == binString {
			if t, ok = r.text(); !ok {
				return false
			}
		} else if tag != binObject || key != "properties" {
			if !r.skip(tag, 1) {
				return false
			}
		}
		switch key {
		case "id":
			idTag, id = tag, t
		case "userId":
			userIDTag, userID = tag, t
		case "properties":
			hasProps = tag == binObject
			if hasProps {
				// The last "properties" counts: start the arenas over.
				if props, elems, ok = r.props(props[:0], elems[:0]); !ok {
					return false
				}
			}
		case "segments":
			segAt = at
		}
	}
	if !r.end(count) {
		return false
	}

	fa.id, fa.idState = binID(idTag, id)
	fa.userID, fa.userIDState = binID(userIDTag, userID)
	fa.props = nil
	if hasProps {
		fa.props = &props[0]
	}
	if cap(props) <= maxKeptValues {
		m.vals = props[:0]
	} else {
		m.vals = nil
	}
	if cap(elems) <= maxKeptValues {
		m.elems = elems[:0]
	} else {
		m.elems = nil
	}
	fa.seg, fa.segIn, fa.segUnavail = segAbsent, nil, nil
	if segAt >= 0 {
		r.segments(fa, segAt)
	}
	return true
}

// shortASCII returns the string at s[i:] when it has a one-byte length and
// ends before hi, where the input's first byte with the high bit set is:
// then the length byte and the text are ASCII. This is the common case,
// read without a call; ok is false otherwise (use binReader.text).
func shortASCII(s string, i, hi int) (t string, ok bool) {
	if i < hi {
		if e := i + 1 + int(s[i]); e <= hi {
			return s[i+1 : e], true
		}
	}
	return "", false
}

// firstNonASCII returns the index of the first byte of s with the high
// bit set, or len(s).
func firstNonASCII(s string) int {
	p, n, i := unsafe.Pointer(unsafe.StringData(s)), len(s), 0
	for ; i+8 <= n; i += 8 {
		if *(*uint64)(unsafe.Add(p, i))&0x8080808080808080 != 0 {
			break
		}
	}
	for ; i < n; i++ {
		if s[i] >= utf8.RuneSelf {
			return i
		}
	}
	return n
}

// end checks that the input ends after the outermost value and that it
// held count values and keys.
func (r *binReader) end(count int) bool {
	switch {
	case r.i != len(r.s):
		return r.bad("unexpected data after the value")
	case r.n != count:
		return r.bad("fewer or more values than counted")
	}
	return true
}

// binID is readID for an id member read as tag (binNull when absent) and,
// for a string, its text.
func binID(tag byte, t string) (string, idState) {
	switch tag {
	case binNull:
		return "", idAbsent
	case binString:
		return t, checkID(t)
	}
	return "", idNotString
}

// props reads the members of the properties object (its tag read) into
// props: the object itself at props[0], then key and value of each member,
// list elements going to elems. Neither grows: an honest count makes room.
//
// Keys are written as their str alone: lookups (value.member) read
// nothing else of a key.
func (r *binReader) props(props, elems []value) ([]value, []value, bool) {
	n, ok := r.length()
	if !ok {
		return props, elems, false
	}
	if 2*n+1 > cap(props) {
		return props, elems, r.bad("more values than counted")
	}
	props = props[:2*n+1]
	obj := &props[0]
	obj.setScalar(kindObject, false, 0)
	obj.elems = props[1 : 2*n+1 : 2*n+1]
	for j := 1; j < len(props); j += 2 {
		key, ok := r.text()
		if !ok {
			return props, elems, false
		}
		props[j].str = key
		if r.i >= len(r.s) {
			return props, elems, r.bad("truncated value")
		}
		tag := r.s[r.i]
		r.i++
		v := &props[j+1]
		if tag == binList {
			if elems, ok = r.list(v, elems); !ok {
				return props, elems, false
			}
		} else if !r.scalarOrSkip(v, tag, 2) {
			return props, elems, false
		}
	}
	r.n += 2 * n
	return props, elems, true
}

// list reads a list property (its tag read) into v, its elements appended
// to elems: scalars as values, lists and objects (which no operator looks
// into) as their kind alone, their contents checked and skipped.
func (r *binReader) list(v *value, elems []value) ([]value, bool) {
	n, ok := r.length()
	if !ok {
		return elems, false
	}
	base := len(elems)
	if n > cap(elems)-base {
		return elems, r.bad("more values than counted")
	}
	elems = elems[:base+n]
	for j := base; j < len(elems); j++ {
		if r.i >= len(r.s) {
			return elems, r.bad("truncated value")
		}
		tag := r.s[r.i]
		r.i++
		if !r.scalarOrSkip(&elems[j], tag, 3) {
			return elems, false
		}
	}
	r.n += n
	v.setScalar(kindList, false, 0)
	v.elems = elems[base:len(elems):len(elems)]
	return elems, true
}

// scalarOrSkip reads a value (its tag read) that is inside depth
// containers into v: a scalar as it is, a list or an object as its kind
// alone, its contents checked and skipped.
func (r *binReader) scalarOrSkip(v *value, tag byte, depth int) bool {
	switch tag {
	case binNull:
		v.setScalar(kindNull, false, 0)
	case binFalse:
		v.setScalar(kindBool, false, 0)
	case binTrue:
		v.setScalar(kindBool, true, 0)
	case binNumber:
		f, ok := r.number()
		if !ok {
			return false
		}
		v.setScalar(kindNumber, false, f)
	case binString:
		t, ok := r.text()
		if !ok {
			return false
		}
		v.setString(t)
	case binList, binObject:
		if !r.skip(tag, depth) {
			return false
		}
		k := kindList
		if tag == binObject {
			k = kindObject
		}
		v.setScalar(k, false, 0)
	default:
		r.i--
		return r.bad("unknown tag")
	}
	return true
}

// skip checks a value (its tag read) that is inside depth containers and
// counts its values and keys, keeping nothing.
func (r *binReader) skip(tag byte, depth int) bool {
	switch tag {
	case binNull, binFalse, binTrue:
		return true
	case binNumber:
		_, ok := r.number()
		return ok
	case binString:
		_, ok := r.text()
		return ok
	case binList, binObject:
	default:
		r.i--
		return r.bad("unknown tag")
	}
	if depth++; depth > MaxDepth {
		return r.bad("nesting deeper than 128")
	}
	n, ok := r.length()
	if !ok {
		return false
	}
	for range n {
		if tag == binObject {
			if _, ok := r.text(); !ok {
				return false
			}
			r.n++
		}
		if r.i >= len(r.s) {
			return r.bad("truncated value")
		}
		t := r.s[r.i]
		r.i++
		r.n++
		if !r.skip(t, depth) {
			return false
		}
	}
	return true
}

// segments sets fa's segments from the value at at, which has been
// checked: "pending", "unavailable", or an object whose last "in" and
// "unavailable" members, when lists, give the strings they hold.
func (r *binReader) segments(fa *Facts, at int) {
	s := r.s
	r.i = at + 1
	switch s[at] {
	case binString:
		switch t, _ := r.text(); t {
		case "pending":
			fa.seg = segPending
		case "unavailable":
			fa.seg = segUnavailable
		}
		return
	case binObject:
	default:
		return
	}
	fa.seg = segObject
	inAt, unavailAt := -1, -1
	n, _ := r.length()
	for range n {
		key, _ := r.text()
		switch key {
		case "in":
			inAt = r.i
		case "unavailable":
			unavailAt = r.i
		}
		r.i++
		r.skip(s[r.i-1], 2)
	}
	strs := fa.mem.strs[:0]
	strs = r.strings(strs, inAt)
	fa.segIn = strs[:len(strs):len(strs)]
	k := len(strs)
	strs = r.strings(strs, unavailAt)
	fa.segUnavail = strs[k:len(strs):len(strs)]
	if cap(strs) <= maxKeptValues {
		fa.mem.strs = strs[:0]
	}
}

// strings appends the strings of the checked list at at to out; a value
// that is not a list (or at -1: none) gives none.
func (r *binReader) strings(out []string, at int) []string {
	if at < 0 || r.s[at] != binList {
		return out
	}
	r.i = at + 1
	n, _ := r.length()
	for range n {
		tag := r.s[r.i]
		r.i++
		if tag == binString {
			t, _ := r.text()
			out = append(out, t)
		} else {
			r.skip(tag, 3)
		}
	}
	return out
}

// length reads a length or count (a uvarint), which cannot exceed the
// input's length.
func (r *binReader) length() (int, bool) {
	if r.i < len(r.s) && r.s[r.i] < 0x80 {
		r.i++
		return int(r.s[r.i-1]), true
	}
	var x uint64
	for shift := 0; r.i < len(r.s) && shift < 64; shift += 7 {
		b := r.s[r.i]
		r.i++
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			if x > uint64(len(r.s)) {
				return 0, r.bad("length beyond the input")
			}
			return int(x), true
		}
	}
	return 0, r.bad("truncated length")
}

// text reads a length and that many bytes of valid UTF-8.
func (r *binReader) text() (string, bool) {
	n, ok := r.length()
	if !ok {
		return "", false
	}
	if n > len(r.s)-r.i {
		return "", r.bad("truncated string")
	}
	t := r.s[r.i : r.i+n]
	if !isASCII(t) && !utf8.ValidString(t) {
		return "", r.bad("invalid UTF-8 in string")
	}
	r.i += n
	return t, true
}

// number reads 8 bytes of a finite float64.
func (r *binReader) number() (float64, bool) {
	if len(r.s)-r.i < 8 {
		return 0, r.bad("truncated number")
	}
	bits := le64(r.s[r.i:])
	if bits>>52&0x7ff == 0x7ff {
		return 0, r.bad("number not finite")
	}
	r.i += 8
	return math.Float64frombits(bits), true
}

// setString makes v the string t, with its numeric value when t is a
// numeric string (as the JSON reader reads it).
func (v *value) setString(t string) {
	v.setScalar(kindString, false, 0)
	v.str = t
	if t != "" && (t[0] == '-' || t[0] >= '0' && t[0] <= '9') && isNumericString(t) {
		v.b = true
		v.num, _ = strconv.ParseFloat(t, 64)
	}
}

// setScalar sets v's kind, b and num and empties its string and elements.
// Writing a value field by field, and only the pointers that are not
// already nil, is several times faster in WebAssembly than writing a whole
// value (which writes every pointer through the write barrier).
func (v *value) setScalar(k kind, b bool, num float64) {
	v.kind, v.b, v.num = k, b, num
	if v.str != "" {
		v.str = ""
	}
	if v.elems != nil {
		v.elems = nil
	}
}

// isASCII reports whether t is ASCII, eight bytes at a time.
func isASCII(t string) bool {
	p, n, i := unsafe.Pointer(unsafe.StringData(t)), len(t), 0
	for ; i+8 <= n; i += 8 {
		if *(*uint64)(unsafe.Add(p, i))&0x8080808080808080 != 0 {
			return false
		}
	}
	for ; i < n; i++ {
		if t[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// le64 reads 8 bytes, little endian, from the start of s (len(s) >= 8).
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
