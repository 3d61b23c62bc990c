package evaluator

import (
	"math"
)

// Writing facts in binary form (the format is in factsbin.go): FactsBuilder
// and AppendFactsBinary.

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
