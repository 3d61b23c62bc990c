package evaluator

// Facts are what a flag is evaluated against: the anonymous id, the user
// id, properties and segment membership. Facts are immutable and safe for
// concurrent use; the zero Facts (or nil) are empty facts. The exception is
// a Facts that ParseFactsInto or ParseFactsBinaryInto fills: it changes on
// each such call (see there).
type Facts struct {
	id, userID           string
	idState, userIDState idState
	props                *value // an object, or nil
	seg                  segState
	segIn, segUnavail    []string

	mem factsMem // memory reused by the ...Into parsers
}

type segState uint8

const (
	segAbsent segState = iota
	segPending
	segUnavailable
	segObject
)

// ParseFacts reads a facts object: {"id", "userId", "properties",
// "segments"}. null reads as empty facts. Members of the wrong type count
// as absent: an id that is not a string is no id, properties that are not
// an object are no properties, segments other than an object, "pending" or
// "unavailable" are absent. Unknown members are ignored.
func ParseFacts(data []byte) (*Facts, error) {
	v, err := parseJSON(string(data))
	if err != nil {
		err.What = "facts"
		return nil, err
	}
	fa, ok := compileFacts(&v)
	if !ok {
		return nil, &ParseError{What: "facts", Offset: -1, Err: ErrNotObject}
	}
	return fa, nil
}

// compileFacts reads facts from v; it fails when v is neither an object
// nor null.
func compileFacts(v *value) (*Facts, bool) {
	fa := &Facts{}
	if _, ok := fa.fill(v, nil); !ok {
		return nil, false
	}
	return fa, true
}

// fill sets fa from v, leaving fa.mem alone. The segment lists are
// appended to strs, which fill returns. It fails when v is neither an
// object nor null.
func (fa *Facts) fill(v *value, strs []string) ([]string, bool) {
	fa.empty()
	if v.kind == kindNull {
		return strs, true
	}
	if v.kind != kindObject {
		return strs, false
	}
	// The members, the last one of each name (as member finds them), in
	// one pass.
	var id, userID, props, seg *value
	for i := len(v.elems) - 2; i >= 0; i -= 2 {
		m := &v.elems[i+1]
		switch v.elems[i].str {
		case "id":
			if id == nil {
				id = m
			}
		case "userId":
			if userID == nil {
				userID = m
			}
		case "properties":
			if props == nil {
				props = m
			}
		case "segments":
			if seg == nil {
				seg = m
			}
		}
	}
	return fa.setMembers(id, userID, props, seg, strs), true
}

// empty makes fa empty facts, leaving fa.mem alone.
func (fa *Facts) empty() {
	fa.id, fa.userID = "", ""
	fa.idState, fa.userIDState = idAbsent, idAbsent
	fa.props, fa.seg, fa.segIn, fa.segUnavail = nil, segAbsent, nil, nil
}

// setMembers sets fa from the values of the members id, userId,
// properties and segments (nil: absent), which fill has emptied. props is
// kept; the segment lists are appended to strs, which it returns.
func (fa *Facts) setMembers(id, userID, props, seg *value, strs []string) []string {
	fa.id, fa.idState = readID(id)
	fa.userID, fa.userIDState = readID(userID)
	if props != nil && props.kind == kindObject {
		fa.props = props
	}
	if s := seg; s != nil && s.kind != kindNull {
		switch {
		case s.kind == kindString && s.str == "pending":
			fa.seg = segPending
		case s.kind == kindString && s.str == "unavailable":
			fa.seg = segUnavailable
		case s.kind == kindObject:
			fa.seg = segObject
			n := len(strs)
			strs = appendStrings(strs, s.get("in"))
			fa.segIn = strs[n:len(strs):len(strs)]
			n = len(strs)
			strs = appendStrings(strs, s.get("unavailable"))
			fa.segUnavail = strs[n:len(strs):len(strs)]
		}
	}
	return strs
}

func readID(v *value) (string, idState) {
	switch {
	case v == nil || v.kind == kindNull:
		return "", idAbsent
	case v.kind != kindString:
		return "", idNotString
	}
	return v.str, checkID(v.str)
}

// appendStrings appends the strings of a list, ignoring other elements; a
// value that is not a list gives none.
func appendStrings(out []string, v *value) []string {
	if v == nil || v.kind != kindList {
		return out
	}
	for i := range v.elems {
		if v.elems[i].kind == kindString {
			out = append(out, v.elems[i].str)
		}
	}
	return out
}

// unit returns the usable unit for a flag whose unit is the user id (byUser)
// or the anonymous id.
func (fa *Facts) unit(byUser bool) (string, idState) {
	if byUser {
		return fa.userID, fa.userIDState
	}
	return fa.id, fa.idState
}

// prop returns the property named key, or nil when it is missing (absent
// or null).
func (fa *Facts) prop(key string) *value {
	return fa.props.get(key)
}

// ParseCase reads one `mf eval` input line, {"flag": {...}, "facts":
// {...}}. Facts may be absent or null (empty facts). An error means the
// line is not a case and answers PARSE_ERROR.
func ParseCase(line []byte) (*Flag, *Facts, error) {
	v, err := parseJSON(string(line))
	if err != nil {
		err.What = "case"
		return nil, nil, err
	}
	if v.kind != kindObject {
		return nil, nil, &ParseError{What: "case", Offset: -1, Err: ErrNotObject}
	}
	fv := v.member("flag")
	if fv == nil || fv.kind != kindObject {
		return nil, nil, &ParseError{What: "case", Offset: -1, Detail: `"flag" is not an object`, Err: ErrNotCase}
	}
	fa := &Facts{}
	if factsV := v.member("facts"); factsV != nil {
		var ok bool
		if fa, ok = compileFacts(factsV); !ok {
			return nil, nil, &ParseError{What: "case", Offset: -1, Detail: `"facts" is neither an object nor null`, Err: ErrNotCase}
		}
	}
	return compileFlag(fv), fa, nil
}

// AppendCase appends the result line of one `mf eval` case line; with
// explain, the line carries "explain": the evaluator's explanation, or
// {"parseError": why} for a line that is not a case. `mf eval` writes it
// natively and wasm/guest inside the WebAssembly module: one function, so
// that both engines write the same lines.
func AppendCase(dst, line []byte, explain bool) []byte {
	flag, facts, err := ParseCase(line)
	if err != nil {
		dst = AppendResult(dst, ParseErrorResult())
		if !explain {
			return dst
		}
		dst = append(dst[:len(dst)-1], `,"explain":{"parseError":`...)
		dst = AppendJSONString(dst, err.Error())
		return append(dst, "}}"...)
	}
	if !explain {
		return AppendResult(dst, flag.Evaluate(facts))
	}
	r, x := flag.Explain(facts)
	dst = AppendResult(dst, r)
	dst = append(dst[:len(dst)-1], `,"explain":`...)
	dst = x.AppendJSON(dst)
	return append(dst, '}')
}
