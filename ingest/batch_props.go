package ingest

// Properties are read and compacted in the same pass: the compact text
// (no insignificant whitespace; strings re-escaped with only what JSON
// requires, so slashes and non-ASCII characters are written as themselves;
// numbers as sent) is copied to Batch.props in runs of the source text,
// broken only by white space and strings holding escapes (the text a
// JSON.stringify sends is one run). Its length is the size the 32,768-byte
// rule measures, and it is what is stored.

// propLimits tracks the limits of one event's properties.
type propLimits struct {
	leaves  int
	problem string // first broken limit, "" while none
}

func (p *propLimits) broke(msg string) {
	if p.problem == "" {
		p.problem = msg
	}
}

func (p *propLimits) leaf() {
	p.leaves++
	if p.leaves > batchMaxPropLeaves {
		p.broke(msgPropLeaves)
	}
}

// batchKeySetAt is the member count from which a property object checks
// duplicate keys with a map instead of a scan.
const batchKeySetAt = 16

// properties reads the properties object at pos (which holds `{`).
func (d *batchDecoder) properties(ev int, e *batchEvent) {
	start := len(d.out)
	d.compacting, d.outFrom = true, d.pos
	var lim propLimits
	d.propObject(1, &lim, e, true)
	if d.failed() {
		return
	}
	d.flush()
	d.compacting = false
	if lim.problem == "" && len(d.out)-start > batchMaxPropBytes {
		lim.problem = msgPropBytes
	}
	if lim.problem != "" {
		d.invalid(ev, "properties", lim.problem)
		d.out = d.out[:start]
		return
	}
	e.propStart, e.propEnd = int32(start), int32(len(d.out))
	e.flags |= evHasProps
}

// propObject reads the object at pos; level is its nesting (properties
// itself is 1), top-level members of e are noted when e is not nil, and
// values are counted unless the object sits in a list. It returns the
// number of members.
func (d *batchDecoder) propObject(level int, lim *propLimits, e *batchEvent, count bool) int {
	if !d.objectStart() {
		return 0
	}
	base := len(d.keys)
	var set map[string]struct{}
	n := 0
	for more := true; more && !d.failed(); more = d.next('}') {
		d.ws()
		if d.peek() != '"' {
			d.fail("expected a member name")
			break
		}
		kstart := d.pos
		k, escaped := d.str()
		if d.failed() {
			break
		}
		if escaped {
			d.rewrite(kstart, k)
		}
		// Duplicate keys: a scan while the object is small, a map after.
		if set == nil && n >= batchKeySetAt {
			set = make(map[string]struct{}, 2*n)
			for _, seen := range d.keys[base:] {
				set[seen] = struct{}{}
			}
		}
		if set != nil {
			if _, dup := set[k]; dup {
				lim.broke(msgPropDuplicate)
			}
			set[k] = struct{}{}
		} else {
			for _, seen := range d.keys[base:] {
				if seen == k {
					lim.broke(msgPropDuplicate)
					break
				}
			}
			d.keys = append(d.keys, k)
		}
		if !runesWithin(k, 0, batchMaxPropKeyLen) {
			lim.broke(msgPropKeyLen)
		}
		if level == 1 && n >= batchMaxPropKeys {
			lim.broke(msgPropKeys)
		}
		if !d.expect(':', "expected ':' after a member name") {
			break
		}
		d.ws()
		var top *batchEvent
		if level == 1 {
			top = e
		}
		d.propValue(level, lim, top, k, count)
		n++
	}
	d.keys = d.keys[:base]
	return n
}

// propValue reads the value at pos, the value of key in an object of the
// given level (or an element of a list in it); e is not nil for the
// top-level members of an event's properties.
func (d *batchDecoder) propValue(level int, lim *propLimits, e *batchEvent, key string, count bool) {
	switch c := d.peek(); {
	case c == '{':
		if level+1 > batchMaxPropDepth {
			lim.broke(msgPropDepth)
		}
		if d.propObject(level+1, lim, nil, count) == 0 && count {
			lim.leaf() // an empty object counts as one value
		}
	case c == '[':
		for more := d.arrayStart(); more && !d.failed(); more = d.next(']') {
			d.ws()
			d.propValue(level, lim, nil, "", false)
		}
		if count {
			lim.leaf() // a list counts as one value however long
		}
	case c == '"':
		start := d.pos
		v, escaped := d.str()
		if d.failed() {
			return
		}
		if count {
			lim.leaf()
		}
		if e != nil && key == "query" {
			// The query's place in the compact text, for Normalize.
			from, to := d.rewrite(start, v)
			e.query, e.flags = v, e.flags|evHasQuery
			e.queryStart, e.queryEnd = int32(from), int32(to)
			return
		}
		if escaped {
			d.rewrite(start, v)
		}
		if e != nil {
			switch key {
			case "currency":
				e.currency, e.flags = v, e.flags|evHasCurrency
			case "$experiment":
				e.experiment, e.flags = v, e.flags|evHasExperiment
			case "$variant":
				e.variant, e.flags = v, e.flags|evHasVariant
			}
		}
	case c == '-' || c >= '0' && c <= '9':
		tok, _ := d.number()
		if count {
			lim.leaf()
		}
		if e != nil && key == "revenue" && tok != "" {
			e.revenue, e.flags = tok, e.flags|evHasRevenue
		}
	case c == 't' || c == 'f' || c == 'n':
		d.literal()
		if count {
			lim.leaf()
		}
	case c == 0 && d.pos >= len(d.src):
		d.fail("unexpected end of the body")
	default:
		d.fail("unexpected character")
	}
}
