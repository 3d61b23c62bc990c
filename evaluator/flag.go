package evaluator

import "strconv"

// Flag is one compiled flag. A Flag is immutable and safe for concurrent
// use. A flag that is valid JSON but structurally wrong compiles to a Flag
// whose every evaluation fails with UNSUPPORTED (docs/evaluator.md lists
// the checks).
type Flag struct {
	bad    string // why evaluation fails with UNSUPPORTED; "" when it does not
	off    bool
	seed   string
	hashR  uint32 // FNV-1a state after seed+".r"
	hashV  uint32 // FNV-1a state after seed+".v"
	byUser bool   // u is "p": the unit is the user id
	def    string
	defVal []byte
	rules  []rule
}

type rule struct {
	conds  []cond
	hasIf  bool // "if" present (an empty list counts)
	hasSeg bool // "if" holds a segment condition
	fixed  bool // "x" present
	x      string
	xVal   []byte
	share  uint32
	arms   []arm
}

type arm struct {
	variant string
	weight  uint32
	val     []byte
}

type op uint8

const (
	opIs op = iota
	opNot
	opHas
	opNhas
	opPre
	opGt
	opLt
	opSet
	opUnset
	opSegIn
	opSegNotIn
)

var opNames = [...]string{"is", "not", "has", "nhas", "pre", "gt", "lt", "set", "unset"}

type cond struct {
	op   op
	key  string  // property name, or segment ref
	ok   bool    // the value has the type the operator needs (list or number)
	lits []value // is, not: the listed scalars (other values as null: never same)
	strs []string
	num  float64
	text string // canonical JSON of the condition, for Explain
}

// ParseFlag compiles one flag object in the form of a compiled document.
// It fails only when data is not valid JSON or not an object; a flag that
// is wrong in structure compiles, and evaluates to UNSUPPORTED.
func ParseFlag(data []byte) (*Flag, error) {
	v, err := parseJSON(string(data))
	if err != nil {
		err.What = "flag"
		return nil, err
	}
	if v.kind != kindObject {
		return nil, &ParseError{What: "flag", Offset: -1, Err: ErrNotObject}
	}
	return compileFlag(&v), nil
}

// compileFlag compiles a flag; v may be any value.
func compileFlag(v *value) *Flag {
	f := &Flag{}
	if v.kind != kindObject {
		f.bad = "the flag is not an object"
		return f
	}
	if msg := f.compile(v); msg != "" {
		*f = Flag{bad: msg}
	}
	return f
}

func (f *Flag) compile(v *value) string {
	if n := v.get("need"); n != nil {
		if !isInteger(n) {
			return "need is not an integer"
		}
		if n.num > Level {
			return "need " + n.str + " is above the evaluator level 1"
		}
	}
	rules := v.get("r")
	if rules == nil || rules.kind != kindList {
		return "r is not a list"
	}
	// Rules with x together with sh or w make the flag UNSUPPORTED even
	// when another field is wrong too; check them first for the message.
	for i := range rules.elems {
		r := &rules.elems[i]
		if r.kind == kindObject && r.get("x") != nil && (r.get("sh") != nil || r.get("w") != nil) {
			return "rule " + strconv.Itoa(i) + " has x together with sh or w"
		}
	}
	s := v.get("s")
	if s == nil || s.kind != kindString {
		return "s is not a string"
	}
	f.seed = s.str
	f.hashR, f.hashV = fnvAdd(fnvAdd(fnvOffset, s.str), ".r"), fnvAdd(fnvAdd(fnvOffset, s.str), ".v")
	u := v.get("u")
	if u == nil || u.kind != kindString || (u.str != "b" && u.str != "p") {
		return `u is not "b" or "p"`
	}
	f.byUser = u.str == "p"
	d := v.get("d")
	if d == nil || d.kind != kindString {
		return "d is not a string"
	}
	f.def = d.str
	if off := v.get("off"); off != nil {
		if off.kind != kindNumber || off.num != 1 {
			return "off is not 1"
		}
		f.off = true
	}
	p := v.get("p")
	if p != nil && p.kind != kindObject {
		p = nil // p never changes the decision: a p that is not an object gives no values
	}
	f.defVal = valueOf(p, f.def)
	f.rules = make([]rule, len(rules.elems))
	for i := range rules.elems {
		if msg := f.rules[i].compile(&rules.elems[i], p); msg != "" {
			return "rule " + strconv.Itoa(i) + ": " + msg
		}
	}
	return ""
}

func (r *rule) compile(v *value, p *value) string {
	if v.kind != kindObject {
		return "not an object"
	}
	if conds := v.get("if"); conds != nil {
		if conds.kind != kindList {
			return "if is not a list"
		}
		r.hasIf = true
		r.conds = make([]cond, len(conds.elems))
		for i := range conds.elems {
			c := &r.conds[i]
			if msg := c.compile(&conds.elems[i]); msg != "" {
				return "condition " + strconv.Itoa(i) + ": " + msg
			}
			if c.op == opSegIn || c.op == opSegNotIn {
				r.hasSeg = true
			}
		}
	}
	if x := v.get("x"); x != nil {
		if x.kind != kindString {
			return "x is not a string"
		}
		r.fixed, r.x, r.xVal = true, x.str, valueOf(p, x.str)
		return ""
	}
	r.share = 10000
	if sh := v.get("sh"); sh != nil {
		if !isInteger(sh) || sh.num < 0 || sh.num > 10000 {
			return "sh is not an integer from 0 to 10000"
		}
		r.share = uint32(sh.num)
	}
	if w := v.get("w"); w != nil {
		if w.kind != kindList {
			return "w is not a list"
		}
		r.arms = make([]arm, len(w.elems))
		total := 0.0
		for i := range w.elems {
			pair := &w.elems[i]
			if pair.kind != kindList || len(pair.elems) != 2 || pair.elems[0].kind != kindString {
				return "w entry " + strconv.Itoa(i) + " is not a [variant, weight] pair"
			}
			wt := &pair.elems[1]
			if !isInteger(wt) || wt.num < 0 || wt.num > 10000 {
				return "w entry " + strconv.Itoa(i) + " has a weight that is not an integer from 0 to 10000"
			}
			total += wt.num
			variant := pair.elems[0].str
			r.arms[i] = arm{variant: variant, weight: uint32(wt.num), val: valueOf(p, variant)}
		}
		if total > 10000 {
			return "the weights of w sum to more than 10000"
		}
	}
	return ""
}

func (c *cond) compile(v *value) string {
	c.text = string(appendCanonical(nil, v))
	if v.kind != kindList || len(v.elems) == 0 || v.elems[0].kind != kindString {
		return "not a list starting with \"p\" or \"s\""
	}
	e := v.elems
	switch e[0].str {
	case "s":
		if len(e) < 2 || len(e) > 3 || e[1].kind != kindString {
			return `not ["s", ref] or ["s", ref, 1]`
		}
		c.op, c.key = opSegIn, e[1].str
		if len(e) == 3 {
			if e[2].kind != kindNumber || e[2].num != 1 {
				return `not ["s", ref] or ["s", ref, 1]`
			}
			c.op = opSegNotIn
		}
		return ""
	case "p":
		if len(e) != 4 || e[1].kind != kindString || e[2].kind != kindString {
			return `not ["p", property, op, value]`
		}
		c.key = e[1].str
		found := false
		for i, name := range opNames {
			if e[2].str == name {
				c.op, found = op(i), true
				break
			}
		}
		if !found {
			return "unknown operator " + string(AppendJSONString(nil, e[2].str))
		}
		val := &e[3]
		switch c.op {
		case opIs, opNot:
			// Copied so that the flag does not keep the parse tree alive.
			c.ok = val.kind == kindList
			c.lits = make([]value, len(val.elems))
			for i := range val.elems {
				if val.elems[i].isScalar() {
					c.lits[i] = val.elems[i]
				}
			}
		case opHas, opNhas, opPre:
			c.ok = val.kind == kindList
			for i := range val.elems {
				if val.elems[i].kind == kindString {
					c.strs = append(c.strs, val.elems[i].str)
				}
			}
		case opGt, opLt:
			c.ok = val.kind == kindNumber
			c.num = val.num
		}
		return ""
	}
	return "not a list starting with \"p\" or \"s\""
}

// valueOf returns the canonical text of p[variant], or nil when p has no
// such member or it is null.
func valueOf(p *value, variant string) []byte {
	m := p.get(variant)
	if m == nil {
		return nil
	}
	return appendCanonical(nil, m)
}

func isInteger(v *value) bool {
	return v.kind == kindNumber && v.num > -1e18 && v.num < 1e18 && v.num == float64(int64(v.num))
}
