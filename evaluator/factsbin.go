package evaluator

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"
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
// error.
func ParseFactsBinaryInto(dst *Facts, data []byte) error {
	s := dst.mem.copyText(data)
	d := binDecoder{s: s}
	if len(s) == 0 || s[0] != FactsBinaryVersion {
		return d.fail(dst, "unknown version")
	}
	d.i = 1
	// Every value and key takes a byte at least: an honest count is never
	// more than the input's length, which bounds the arena.
	n, ok := d.uvarint()
	if !ok {
		return d.fail(dst, d.msg)
	}
	d.vals = dst.mem.arena(n)
	var v value
	ok = d.value(&v, 0)
	dst.mem.keep(d.vals)
	switch {
	case !ok:
		return d.fail(dst, d.msg)
	case d.i != len(s):
		return d.fail(dst, "unexpected data after the value")
	case len(d.vals) != n:
		return d.fail(dst, "fewer values than counted")
	}
	return dst.fillKept(&v)
}

// binDecoder reads the binary form in one pass into values, whose
// children it places in an arena with room for the number of values the
// input announces (so that the arena never moves while it is filled).
type binDecoder struct {
	s    string
	i    int
	vals []value
	msg  string
}

func (d *binDecoder) fail(dst *Facts, msg string) error {
	dst.fill(&value{}, nil) // empty facts
	if d.msg == "" {
		d.msg = msg
	}
	return &ParseError{What: "facts", Offset: d.i, Detail: d.msg, Err: ErrFactsBinary}
}

func (d *binDecoder) bad(msg string) bool {
	d.msg = msg
	return false
}

// uvarint reads a length or count, which cannot exceed the input's length.
func (d *binDecoder) uvarint() (int, bool) {
	var x uint64
	for shift := 0; d.i < len(d.s) && shift < 64; shift += 7 {
		b := d.s[d.i]
		d.i++
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			if x > uint64(len(d.s)) {
				return 0, d.bad("length beyond the input")
			}
			return int(x), true
		}
	}
	return 0, d.bad("truncated length")
}

// text reads a length and that many bytes of valid UTF-8.
func (d *binDecoder) text() (string, bool) {
	var n int
	if d.i < len(d.s) && d.s[d.i] < 0x80 {
		n = int(d.s[d.i])
		d.i++
	} else {
		var ok bool
		if n, ok = d.uvarint(); !ok {
			return "", false
		}
	}
	if n > len(d.s)-d.i {
		return "", d.bad("truncated string")
	}
	t := d.s[d.i : d.i+n]
	if !isASCII(t) && !utf8.ValidString(t) {
		return "", d.bad("invalid UTF-8 in string")
	}
	d.i += n
	return t, true
}

// value reads one value into v, which is at depth containers below the
// outermost value. Calls are slow in WebAssembly, so scalars are read in
// the loop over a container's elements, and only containers recurse.
func (d *binDecoder) value(v *value, depth int) bool {
	if d.i >= len(d.s) {
		return d.bad("truncated value")
	}
	tag := d.s[d.i]
	d.i++
	if tag != binList && tag != binObject {
		return d.scalar(v, tag)
	}
	if depth++; depth > MaxDepth {
		return d.bad("nesting deeper than 128")
	}
	var n int
	if d.i < len(d.s) && d.s[d.i] < 0x80 {
		n = int(d.s[d.i])
		d.i++
	} else {
		var ok bool
		if n, ok = d.uvarint(); !ok {
			return false
		}
	}
	k, size := kindList, n
	if tag == binObject {
		k, size = kindObject, 2*n
	}
	base := len(d.vals)
	if size > cap(d.vals)-base {
		return d.bad("more values than counted")
	}
	d.vals = d.vals[:base+size]
	elems := d.vals[base : base+size : base+size]
	// The loop keeps the position in a local (a Go local is a WebAssembly
	// local; a field is a memory access), storing it for the calls.
	str, i := d.s, d.i
	for j := range elems {
		e := &elems[j]
		tag := byte(binString) // a key
		isKey := k == kindObject && j%2 == 0
		if !isKey {
			if i >= len(str) {
				d.i = i
				return d.bad("truncated value")
			}
			tag = str[i]
			i++
		}
		switch tag {
		case binNull:
			e.setScalar(kindNull, false, 0)
		case binFalse:
			e.setScalar(kindBool, false, 0)
		case binTrue:
			e.setScalar(kindBool, true, 0)
		case binString:
			// The common case inline: a one-byte length and ASCII text.
			var t string
			ascii := false
			if i < len(str) && str[i] < 0x80 && int(str[i]) <= len(str)-i-1 {
				t = str[i+1 : i+1+int(str[i])]
				if ascii = isASCII(t); ascii {
					i += 1 + len(t)
				}
			}
			if !ascii {
				var ok bool
				d.i = i
				if t, ok = d.text(); !ok {
					return false
				}
				i = d.i
			}
			e.setScalar(kindString, false, 0)
			e.str = t
			if !isKey && t != "" && (t[0] == '-' || t[0] >= '0' && t[0] <= '9') && isNumericString(t) {
				e.b = true
				e.num, _ = strconv.ParseFloat(t, 64) // as the JSON reader does
			}
		default:
			d.i = i - 1
			if !d.value(e, depth) {
				return false
			}
			i = d.i
		}
	}
	d.i = i
	v.setScalar(k, false, 0)
	v.elems = elems
	return true
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

// scalar reads a value other than a list or an object, after its tag.
func (d *binDecoder) scalar(v *value, tag byte) bool {
	switch tag {
	case binNull:
		v.setScalar(kindNull, false, 0)
	case binFalse:
		v.setScalar(kindBool, false, 0)
	case binTrue:
		v.setScalar(kindBool, true, 0)
	case binNumber:
		if len(d.s)-d.i < 8 {
			return d.bad("truncated number")
		}
		f := math.Float64frombits(le64(d.s[d.i:]))
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return d.bad("number not finite")
		}
		d.i += 8
		v.setScalar(kindNumber, false, f)
	case binString:
		t, ok := d.text()
		if !ok {
			return false
		}
		v.setScalar(kindString, false, 0)
		v.str = t
		if isNumericString(t) {
			v.b = true
			v.num, _ = strconv.ParseFloat(t, 64) // as the JSON reader does
		}
	default:
		d.i--
		return d.bad("unknown tag")
	}
	return true
}

// FactsBuilder writes facts in binary form (see ParseFactsBinary) without
// JSON: the id, the user id, properties and segments, each set by a call.
// Setting a member again replaces it (a property: the last one counts).
// The zero FactsBuilder is ready for use; Reset empties it for reuse, and
// after the first few uses it allocates nothing. The builder checks
// nothing: strings that are not valid UTF-8 and numbers that are not
// finite make facts the reader refuses.
type FactsBuilder struct {
	id, userID       string
	hasID, hasUserID bool
	props            []byte // the members of "properties", encoded
	nprops           int
	propVals         int    // values and keys inside "properties"
	seg              []byte // the value of "segments", encoded
	segVals          int    // values and keys inside it
	hasSeg           bool
	out              []byte
}

// Reset empties the builder.
func (fb *FactsBuilder) Reset() {
	fb.id, fb.userID, fb.hasID, fb.hasUserID = "", "", false, false
	fb.props, fb.nprops, fb.propVals = fb.props[:0], 0, 0
	fb.seg, fb.segVals, fb.hasSeg = fb.seg[:0], 0, false
}

// ID sets the anonymous id.
func (fb *FactsBuilder) ID(id string) { fb.id, fb.hasID = id, true }

// UserID sets the user id.
func (fb *FactsBuilder) UserID(id string) { fb.userID, fb.hasUserID = id, true }

// String sets the property name to a string.
func (fb *FactsBuilder) String(name, v string) {
	fb.prop(name)
	fb.props = appendBinString(append(fb.props, binString), v)
}

// Number sets the property name to a number.
func (fb *FactsBuilder) Number(name string, v float64) {
	fb.prop(name)
	fb.props = appendLE64(append(fb.props, binNumber), math.Float64bits(v))
}

// Bool sets the property name to a boolean.
func (fb *FactsBuilder) Bool(name string, v bool) {
	fb.prop(name)
	tag := byte(binFalse)
	if v {
		tag = binTrue
	}
	fb.props = append(fb.props, tag)
}

// Strings sets the property name to a list of strings.
func (fb *FactsBuilder) Strings(name string, v ...string) {
	fb.prop(name)
	fb.propVals += len(v)
	fb.props = appendBinStrings(fb.props, v)
}

func (fb *FactsBuilder) prop(name string) {
	fb.nprops++
	fb.propVals += 2
	fb.props = appendBinString(fb.props, name)
}

// Segments sets the segments the unit is in and those that could not be
// computed ({"in": in, "unavailable": unavailable}).
func (fb *FactsBuilder) Segments(in, unavailable []string) {
	fb.hasSeg, fb.segVals = true, 4+len(in)+len(unavailable)
	fb.seg = append(fb.seg[:0], binObject, 2)
	fb.seg = appendBinStrings(appendBinString(fb.seg, "in"), in)
	fb.seg = appendBinStrings(appendBinString(fb.seg, "unavailable"), unavailable)
}

// SegmentsPending sets segments to "pending": a rule with a segment
// condition answers NOT_READY.
func (fb *FactsBuilder) SegmentsPending() {
	fb.hasSeg, fb.segVals = true, 0
	fb.seg = appendBinString(append(fb.seg[:0], binString), "pending")
}

// SegmentsUnavailable sets segments to "unavailable": every segment
// condition is false.
func (fb *FactsBuilder) SegmentsUnavailable() {
	fb.hasSeg, fb.segVals = true, 0
	fb.seg = appendBinString(append(fb.seg[:0], binString), "unavailable")
}

// Bytes returns the facts in binary form. The slice is the builder's and
// is valid until its next call.
func (fb *FactsBuilder) Bytes() []byte {
	n := 0
	for _, has := range [...]bool{fb.hasID, fb.hasUserID, fb.nprops > 0, fb.hasSeg} {
		if has {
			n++
		}
	}
	count := 2 * n
	if fb.nprops > 0 {
		count += fb.propVals
	}
	if fb.hasSeg {
		count += fb.segVals
	}
	out := appendUvarint(append(fb.out[:0], FactsBinaryVersion), uint64(count))
	out = appendUvarint(append(out, binObject), uint64(n))
	if fb.hasID {
		out = appendBinString(append(appendBinString(out, "id"), binString), fb.id)
	}
	if fb.hasUserID {
		out = appendBinString(append(appendBinString(out, "userId"), binString), fb.userID)
	}
	if fb.nprops > 0 {
		out = append(appendBinString(out, "properties"), binObject)
		out = append(appendUvarint(out, uint64(fb.nprops)), fb.props...)
	}
	if fb.hasSeg {
		out = append(appendBinString(out, "segments"), fb.seg...)
	}
	fb.out = out
	return out
}

func appendBinString(dst []byte, s string) []byte {
	return append(appendUvarint(dst, uint64(len(s))), s...)
}

func appendBinStrings(dst []byte, list []string) []byte {
	dst = appendUvarint(append(dst, binList), uint64(len(list)))
	for _, s := range list {
		dst = appendBinString(append(dst, binString), s)
	}
	return dst
}

// AppendFactsBinary appends the binary form of facts given as JSON (the
// text ParseFacts reads; every value is kept, members of any type
// included). It fails as ParseFacts does on text that is not JSON; a
// value that is neither an object nor null is converted, and refused when
// read.
func AppendFactsBinary(dst, factsJSON []byte) ([]byte, error) {
	v, err := parseJSON(string(factsJSON))
	if err != nil {
		err.What = "facts"
		return dst, err
	}
	dst = appendUvarint(append(dst, FactsBinaryVersion), uint64(countBelow(&v)))
	return appendBinValue(dst, &v), nil
}

// countBelow is the number of values and keys inside v.
func countBelow(v *value) int {
	n := len(v.elems)
	for i := range v.elems {
		n += countBelow(&v.elems[i])
	}
	return n
}

func appendBinValue(dst []byte, v *value) []byte {
	switch v.kind {
	case kindNull:
		return append(dst, binNull)
	case kindBool:
		if v.b {
			return append(dst, binTrue)
		}
		return append(dst, binFalse)
	case kindNumber:
		return appendLE64(append(dst, binNumber), math.Float64bits(v.num))
	case kindString:
		return appendBinString(append(dst, binString), v.str)
	case kindList:
		dst = appendUvarint(append(dst, binList), uint64(len(v.elems)))
		for i := range v.elems {
			dst = appendBinValue(dst, &v.elems[i])
		}
		return dst
	}
	dst = appendUvarint(append(dst, binObject), uint64(v.size()))
	for i := 0; i < v.size(); i++ {
		dst = appendBinValue(appendBinString(dst, v.key(i)), v.val(i))
	}
	return dst
}

func appendUvarint(dst []byte, x uint64) []byte {
	for x >= 0x80 {
		dst = append(dst, byte(x)|0x80)
		x >>= 7
	}
	return append(dst, byte(x))
}

func appendLE64(dst []byte, x uint64) []byte {
	return append(dst, byte(x), byte(x>>8), byte(x>>16), byte(x>>24),
		byte(x>>32), byte(x>>40), byte(x>>48), byte(x>>56))
}

// le64 reads 8 bytes, little endian, from the start of s (len(s) >= 8).
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
