package evaluator

import "slices"

// Document is one compiled flag document (browser, server or values view).
// It is immutable and safe for concurrent use.
type Document struct {
	at     int64
	flags  map[string]*Flag
	keys   []string
	values map[string]docValue
	orig   []string
}

type docValue struct {
	variant string
	value   []byte
}

// ParseDocument reads a flag document envelope: {"v":1, "at", "flags",
// "values", "orig"}. It fails when data is not valid JSON, not an object,
// when v is not 1 (ErrDocumentVersion: keep the previous document), or when
// at, flags, values or orig has the wrong type (ErrDocument). Each flag is
// compiled as by ParseFlag: one malformed flag evaluates to UNSUPPORTED and
// leaves the others alone. A values entry that is not [variant] or
// [variant, value] is left out.
func ParseDocument(data []byte) (*Document, error) {
	v, perr := parseJSON(string(data))
	if perr != nil {
		perr.What = "document"
		return nil, perr
	}
	if v.kind != kindObject {
		return nil, &ParseError{What: "document", Offset: -1, Err: ErrNotObject}
	}
	bad := func(detail string) error {
		return &ParseError{What: "document", Offset: -1, Detail: detail, Err: ErrDocument}
	}
	if ver := v.get("v"); ver == nil || ver.kind != kindNumber || ver.num != 1 {
		return nil, &ParseError{What: "document", Offset: -1, Detail: "v is not 1", Err: ErrDocumentVersion}
	}
	d := &Document{}
	if at := v.get("at"); at != nil {
		if !isInteger(at) {
			return nil, bad("at is not an integer")
		}
		d.at = int64(at.num)
	}
	if flags := v.get("flags"); flags != nil {
		if flags.kind != kindObject {
			return nil, bad("flags is not an object")
		}
		d.flags = make(map[string]*Flag, flags.size())
		for i := range flags.size() {
			d.flags[flags.key(i)] = compileFlag(flags.val(i)) // a repeated key: the last wins
		}
		for k := range d.flags {
			d.keys = append(d.keys, k)
		}
		slices.Sort(d.keys)
	}
	if values := v.get("values"); values != nil {
		if values.kind != kindObject {
			return nil, bad("values is not an object")
		}
		d.values = make(map[string]docValue, values.size())
		for i := range values.size() {
			k, e := values.key(i), values.val(i)
			if e.kind != kindList || len(e.elems) < 1 || len(e.elems) > 2 || e.elems[0].kind != kindString {
				delete(d.values, k)
				continue
			}
			dv := docValue{variant: e.elems[0].str}
			if len(e.elems) == 2 && e.elems[1].kind != kindNull {
				dv.value = appendCanonical(nil, &e.elems[1])
			}
			d.values[k] = dv
		}
	}
	if orig := v.get("orig"); orig != nil {
		if orig.kind != kindList {
			return nil, bad("orig is not a list")
		}
		for i := range orig.elems {
			if orig.elems[i].kind != kindString {
				return nil, bad("orig holds a non-string")
			}
			d.orig = append(d.orig, orig.elems[i].str)
		}
	}
	return d, nil
}

// At returns the document's compile time, epoch milliseconds (0 if absent).
func (d *Document) At() int64 { return d.at }

// Flag returns the compiled flag for key.
func (d *Document) Flag(key string) (*Flag, bool) {
	f, ok := d.flags[key]
	return f, ok
}

// Keys returns the keys of the document's flags, sorted; do not modify.
func (d *Document) Keys() []string { return d.keys }

// Value returns the values-view entry for key: the variant and the
// canonical JSON of its value (nil when the entry has none).
func (d *Document) Value(key string) (variant string, value []byte, ok bool) {
	e, ok := d.values[key]
	return e.variant, e.value, ok
}

// Original reports whether key is listed in orig: a page experiment that
// now shows everyone the original (answer variant "a", send no exposure).
func (d *Document) Original(key string) bool {
	return contains(d.orig, key)
}
