package catalog

import (
	"fmt"
	"strconv"
)

// Compiled flag definitions: each flag as it appears in a compiled flag
// document (specification, "Flag documents"), without evaluation. The flag
// document compiler builds envelopes and the values view from these.

// View is a flag document view that holds definitions.
type View uint8

const (
	// ViewBrowser holds the flags the website reads (readBy website or
	// both); it is served to full website sources.
	ViewBrowser View = iota + 1
	// ViewServer holds the flags servers read (readBy server or both), with
	// `w: 1` on those the website reads too.
	ViewServer
)

// Size caps of flag documents, in bytes.
const (
	MaxBrowserDocument = 64000
	MaxValuesDocument  = 64000
	MaxServerDocument  = 256000
)

// maxAtDigits is the width of `at` assumed when sizes are checked: epoch
// milliseconds have 13 digits until the year 2286.
const maxAt = 9999999999999

// CompiledFlag is one flag of a view.
type CompiledFlag struct {
	Key string
	// JSON is the canonical encoding of the flag: keys sorted byte-wise,
	// no whitespace, no name or description, segment ids replaced by refs.
	JSON []byte
	// Flag is the catalog's flag it was compiled from.
	Flag *Flag
}

// ProjectFlags are a project's flags compiled for both definition views.
type ProjectFlags struct {
	// Browser lists the flags the website reads, by key.
	Browser []CompiledFlag
	// Server lists the flags servers read, by key.
	Server []CompiledFlag
	// Orig lists, by key, the website flags marked orig: page experiments
	// that show everyone the original (envelope field `orig` of the browser
	// and values views).
	Orig []string
}

// Flags returns the compiled flags of a view.
func (pf *ProjectFlags) Flags(v View) []CompiledFlag {
	if v == ViewServer {
		return pf.Server
	}
	return pf.Browser
}

// AppendDocument appends the canonical document of a definitions view:
// `{"at":…,"flags":{…},"orig":[…],"v":1}` (orig only in the browser view and
// only when not empty). at is the compile time in epoch milliseconds.
func (pf *ProjectFlags) AppendDocument(dst []byte, v View, at int64) []byte {
	dst = append(dst, `{"at":`...)
	dst = strconv.AppendInt(dst, at, 10)
	dst = append(dst, `,"flags":{`...)
	for i, cf := range pf.Flags(v) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, cf.Key)
		dst = append(dst, ':')
		dst = append(dst, cf.JSON...)
	}
	dst = append(dst, '}')
	if v == ViewBrowser && len(pf.Orig) > 0 {
		dst = appendOrig(dst, pf.Orig)
	}
	return append(dst, `,"v":1}`...)
}

func appendOrig(dst []byte, orig []string) []byte {
	dst = append(dst, `,"orig":[`...)
	for i, k := range orig {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
	}
	return append(dst, ']')
}

// ValuesDocumentBound is an upper bound of the size of the project's values
// document: `{"at":…,"orig":[…],"v":1,"values":{…}}` where each website
// flag answers its longest possible `[variant, value]`.
func (pf *ProjectFlags) ValuesDocumentBound() int {
	n := len(`{"at":`) + len(strconv.FormatInt(maxAt, 10)) + len(`,"v":1,"values":{}}`)
	if len(pf.Orig) > 0 {
		n += len(appendOrig(nil, pf.Orig))
	}
	for i, cf := range pf.Browser {
		if i > 0 {
			n++
		}
		n += len(appendString(nil, cf.Key)) + 1 + valuesEntryBound(cf.Flag)
	}
	return n
}

// valuesEntryBound is the longest `["variant"]` or `["variant",value]` the
// flag can answer with no facts.
func valuesEntryBound(f *Flag) int {
	longest := 0
	consider := func(v string) {
		n := 2 + len(appendString(nil, v))
		if p, ok := f.Payloads[v]; ok {
			n += 1 + len(p)
		}
		longest = max(longest, n)
	}
	consider(f.Default)
	for _, r := range f.Rules {
		if r.X != "" {
			consider(r.X)
		}
		for _, w := range r.Weights {
			consider(w.Variant)
		}
	}
	return longest
}

// compileProject compiles a project's flags (sorted by key).
func compileProject(flags []*Flag, segments map[string]*Segment) *ProjectFlags {
	ref := func(id string) string {
		if seg := segments[id]; seg != nil {
			return seg.Ref
		}
		return ""
	}
	pf := &ProjectFlags{}
	for _, f := range flags {
		if f.ReadByWebsite() {
			pf.Browser = append(pf.Browser, CompiledFlag{Key: f.Key, JSON: compileFlag(f, false, ref), Flag: f})
			if f.Orig {
				pf.Orig = append(pf.Orig, f.Key)
			}
		}
		if f.ReadByServer() {
			pf.Server = append(pf.Server, CompiledFlag{Key: f.Key, JSON: compileFlag(f, f.ReadBy == ReadByBoth, ref), Flag: f})
		}
	}
	return pf
}

// compileFlag writes the canonical JSON of one flag. Keys in byte order:
// c d e need off p r s t u w.
func compileFlag(f *Flag, website bool, ref func(string) string) []byte {
	dst := make([]byte, 0, 128)
	dst = append(dst, '{')
	if f.Counted != "" {
		dst = append(dst, `"c":`...)
		dst = appendString(dst, f.Counted)
		dst = append(dst, ',')
	}
	dst = append(dst, `"d":`...)
	dst = appendString(dst, f.Default)
	if f.Experiment != "" {
		dst = append(dst, `,"e":`...)
		dst = appendString(dst, f.Experiment)
	}
	if f.Need != nil {
		dst = fmt.Appendf(dst, `,"need":%d`, *f.Need)
	}
	if f.Off {
		dst = append(dst, `,"off":1`...)
	}
	if len(f.Payloads) > 0 {
		dst = append(dst, `,"p":{`...)
		for i, k := range sortedKeys(f.Payloads) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = append(dst, f.Payloads[k]...)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `,"r":[`...)
	if !f.Off {
		for i, r := range f.Rules {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = r.appendJSON(dst, ref)
		}
	}
	dst = append(dst, `],"s":`...)
	dst = appendString(dst, f.Seed)
	dst = append(dst, `,"t":`...)
	dst = appendString(dst, f.Type)
	dst = append(dst, `,"u":`...)
	dst = appendString(dst, f.Unit)
	if website {
		dst = append(dst, `,"w":1`...)
	}
	return append(dst, '}')
}
