package catalog

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Flag rules of the specification ("Flag documents", "Rules and conditions")
// as they apply to the provisioning file.

const maxBasisPoints = 10000

var conditionOps = []string{"is", "not", "has", "nhas", "pre", "gt", "lt", "set", "unset"}

func (p *parser) flag(path, project string, v any) {
	w, ok := object(p.fs, path, v)
	if !ok {
		return
	}
	f := &Flag{Project: project}
	key, keyOK := w.str("key", true)
	if keyOK && !reFlagKey.MatchString(key) {
		p.fs.add(w.at("key"), "must match ^[a-z][a-z0-9-]{1,63}$, not %q", clip(key))
		keyOK = false
	}
	f.Key = key
	f.Name = p.name(w, "name", false)
	if s, ok := w.str("description", false); ok {
		text(p.fs, w.at("description"), s, false, maxDescriptionLen)
		f.Description = s
	}
	if s, ok := w.str("readBy", true); ok {
		oneOf(p.fs, w.at("readBy"), s, ReadByWebsite, ReadByServer, ReadByBoth)
		f.ReadBy = s
	}
	typeOK := false
	if s, ok := w.str("t", true); ok {
		typeOK = oneOf(p.fs, w.at("t"), s, "b", "m", "c")
		f.Type = s
	}
	if s, ok := w.str("u", true); ok {
		oneOf(p.fs, w.at("u"), s, "b", "p")
		f.Unit = s
	}
	variant := func(at, s string) {
		if typeOK {
			if msg := variantFault(f.Type, s); msg != "" {
				p.fs.add(at, "%s", msg)
			}
		}
	}
	if s, ok := w.str("d", true); ok {
		variant(w.at("d"), s)
		f.Default = s
	}
	if s, ok := w.str("s", false); ok {
		if !reSeed.MatchString(s) {
			p.fs.add(w.at("s"), "must be 12 lower-case letters or digits, or left out to have one generated, not %q", clip(s))
		}
		f.Seed = s
	}
	if pv, ok := w.get("p"); ok {
		if pw, ok := object(p.fs, w.at("p"), pv); ok {
			f.Payloads = make(map[string]json.RawMessage, len(pw.m))
			for _, k := range sortedKeys(pw.m) {
				variant(pathField(pw.path, k), k)
				raw, err := appendCanonical(nil, pw.m[k])
				if err != nil {
					p.fs.add(pathField(pw.path, k), "cannot be encoded: %v", err)
					continue
				}
				f.Payloads[k] = raw
			}
		}
	}
	f.Rules = []Rule{}
	if rv, ok := w.get("r"); ok {
		var vf func(string, string)
		if typeOK {
			vf = variant
		}
		f.Rules = parseRules(p.fs, w.at("r"), rv, vf)
	}
	if n, ok := w.integer("off", false); ok {
		if n != 0 && n != 1 {
			p.fs.add(w.at("off"), "must be 0 or 1, not %d", n)
		}
		f.Off = n == 1
	}
	if n, ok := w.integer("need", false); ok {
		if n < 1 {
			p.fs.add(w.at("need"), "must be at least 1, not %d", n)
		}
		need := int(n)
		f.Need = &need
	}
	if s, ok := w.str("e", false); ok {
		oneOf(p.fs, w.at("e"), s, "r", "o")
		f.Experiment = s
	}
	if s, ok := w.str("c", false); ok {
		oneOf(p.fs, w.at("c"), s, "b", "s")
		f.Counted = s
	}
	f.Orig = w.boolean("orig")
	if keyOK && p.claim(refFlag(project, key), path, "key", "flag key") {
		p.f.Flags = append(p.f.Flags, f)
	}
}

// variantFault says why s is not a variant of a flag of type t, or "".
func variantFault(t, s string) string {
	if t == "b" {
		if s != "on" && s != "off" {
			return fmt.Sprintf("must be \"on\" or \"off\" (the variants of an on/off flag), not %q", clip(s))
		}
		return ""
	}
	if !reVariant.MatchString(s) {
		return fmt.Sprintf("must be a variant matching ^[a-z][a-z0-9-]{0,39}$, not %q", clip(s))
	}
	return ""
}

// parseRules reads a flag's `r`. variant, when not nil, checks a variant
// named by a rule.
func parseRules(fs *faults, path string, v any, variant func(path, s string)) []Rule {
	l, ok := v.([]any)
	if !ok {
		fs.add(path, "must be a list, not %s", typeName(v))
		return nil
	}
	rules := make([]Rule, 0, len(l))
	for i, rv := range l {
		at := pathIndex(path, i)
		w, ok := object(fs, at, rv)
		if !ok {
			continue
		}
		var r Rule
		if cv, ok := w.get("if"); ok {
			r.HasIf = true
			cl, ok := cv.([]any)
			if !ok {
				fs.add(w.at("if"), "must be a list of conditions, not %s", typeName(cv))
			}
			r.If = make([]Condition, 0, len(cl))
			for j, c := range cl {
				if cond, ok := parseCondition(fs, pathIndex(w.at("if"), j), c); ok {
					r.If = append(r.If, cond)
				}
			}
		}
		if x, ok := w.str("x", false); ok {
			if variant != nil {
				variant(w.at("x"), x)
			}
			r.X = x
			if w.has("sh") || w.has("w") {
				fs.add(at, "a fixed rule (x) cannot also have sh or w")
				continue
			}
		}
		if n, ok := w.integer("sh", false); ok {
			if n < 0 || n > maxBasisPoints {
				fs.add(w.at("sh"), "must be 0 to 10000 basis points, not %d", n)
			}
			sh := int(n)
			r.Share = &sh
		}
		if wl, ok := w.list("w", false); ok {
			r.HasWeights = true
			sum := 0
			for j, pv := range wl {
				pat := pathIndex(w.at("w"), j)
				pair, ok := pv.([]any)
				if !ok || len(pair) != 2 {
					fs.add(pat, "must be a [variant, weight] pair")
					continue
				}
				name, ok := pair[0].(string)
				if !ok {
					fs.add(pathIndex(pat, 0), "must be a variant (a string), not %s", typeName(pair[0]))
					continue
				}
				if variant != nil {
					variant(pathIndex(pat, 0), name)
				}
				n, ok := asInteger(fs, pathIndex(pat, 1), pair[1])
				if !ok {
					continue
				}
				if n < 0 || n > maxBasisPoints {
					fs.add(pathIndex(pat, 1), "must be a weight of 0 to 10000 basis points, not %d", n)
					continue
				}
				sum += int(n)
				r.Weights = append(r.Weights, Weight{Variant: name, Weight: int(n)})
			}
			if sum > maxBasisPoints {
				fs.add(w.at("w"), "weights must sum to at most 10000 basis points, not %d", sum)
			}
		}
		rules = append(rules, r)
	}
	return rules
}

// parseCondition reads `["p", property, op, value]`, `["s", segment]` or
// `["s", segment, 1]`.
func parseCondition(fs *faults, path string, v any) (Condition, bool) {
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		fs.add(path, `must be a condition: ["p", property, op, value], ["s", segment id] or ["s", segment id, 1]`)
		return Condition{}, false
	}
	kind, _ := l[0].(string)
	switch kind {
	case CondProperty:
		if len(l) != 4 {
			fs.add(path, `a property condition is ["p", property, op, value], with 4 elements, not %d`, len(l))
			return Condition{}, false
		}
		c := Condition{Kind: CondProperty}
		prop, ok := l[1].(string)
		if !ok {
			fs.add(pathIndex(path, 1), "must be a property name (a string), not %s", typeName(l[1]))
			return c, false
		}
		if n := len([]rune(prop)); n == 0 || n > maxPropertyKeyLen {
			fs.add(pathIndex(path, 1), "must be a property name of 1 to %d characters", maxPropertyKeyLen)
			return c, false
		}
		op, ok := l[2].(string)
		if !ok || !slices.Contains(conditionOps, op) {
			fs.add(pathIndex(path, 2), "must be an operator: %s", quoteList(conditionOps))
			return c, false
		}
		c.Property, c.Op = prop, op
		vat := pathIndex(path, 3)
		switch op {
		case "is", "not", "has", "nhas", "pre":
			vl, ok := l[3].([]any)
			if !ok {
				fs.add(vat, "operator %q takes a list of values, not %s", op, typeName(l[3]))
				return c, false
			}
			for k, e := range vl {
				switch e.(type) {
				case string:
				case json.Number, bool:
					if op == "has" || op == "nhas" || op == "pre" {
						fs.add(pathIndex(vat, k), "operator %q compares strings, not %s", op, typeName(e))
						return c, false
					}
				default:
					fs.add(pathIndex(vat, k), "must be a string, number or boolean, not %s", typeName(e))
					return c, false
				}
			}
		case "gt", "lt":
			if _, ok := l[3].(json.Number); !ok {
				fs.add(vat, "operator %q takes a number, not %s", op, typeName(l[3]))
				return c, false
			}
		case "set", "unset":
			if l[3] != nil {
				fs.add(vat, "operator %q takes null, not %s", op, typeName(l[3]))
				return c, false
			}
		}
		raw, err := appendCanonical(nil, l[3])
		if err != nil {
			fs.add(vat, "cannot be encoded: %v", err)
			return c, false
		}
		c.Value = raw
		return c, true
	case CondSegment:
		if len(l) != 2 && len(l) != 3 {
			fs.add(path, `a segment condition is ["s", segment id] or ["s", segment id, 1], not %d elements`, len(l))
			return Condition{}, false
		}
		c := Condition{Kind: CondSegment}
		id, ok := l[1].(string)
		if !ok || !reUUID.MatchString(id) {
			fs.add(pathIndex(path, 1), "must be the id (a UUID) of a segment of the same project")
			return c, false
		}
		c.Segment = id
		if len(l) == 3 {
			if n, ok := l[2].(json.Number); !ok || n != "1" {
				fs.add(pathIndex(path, 2), "must be 1 (not in the segment), or left out")
				return c, false
			}
			c.Not = true
		}
		return c, true
	}
	fs.add(pathIndex(path, 0), `must be "p" (a property condition) or "s" (a segment condition)`)
	return Condition{}, false
}

// The JSON form of rules and conditions, on the log, is that of the
// provisioning file (segment conditions name segments by id).

// MarshalJSON writes the rule as in the provisioning file.
func (r Rule) MarshalJSON() ([]byte, error) {
	return r.appendJSON(nil, nil), nil
}

// UnmarshalJSON reads a rule as in the provisioning file.
func (r *Rule) UnmarshalJSON(data []byte) error {
	v, err := decodeJSON(data)
	if err != nil {
		return err
	}
	fs := &faults{}
	rules := parseRules(fs, "r", []any{v}, nil)
	if err := fs.err(); err != nil {
		return fmt.Errorf("cannot read flag rule: %w", err)
	}
	*r = rules[0]
	return nil
}

// appendJSON appends the rule in canonical form (keys in byte order). ref,
// when not nil, replaces segment ids (compiled documents).
func (r Rule) appendJSON(dst []byte, ref func(segment string) string) []byte {
	dst = append(dst, '{')
	n := 0
	sep := func() {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
	}
	if r.HasIf {
		sep()
		dst = append(dst, `"if":[`...)
		for i, c := range r.If {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = c.appendJSON(dst, ref)
		}
		dst = append(dst, ']')
	}
	if r.Share != nil {
		sep()
		dst = append(dst, `"sh":`...)
		dst = fmt.Appendf(dst, "%d", *r.Share)
	}
	if r.HasWeights {
		sep()
		dst = append(dst, `"w":[`...)
		for i, w := range r.Weights {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '[')
			dst = appendString(dst, w.Variant)
			dst = fmt.Appendf(dst, ",%d]", w.Weight)
		}
		dst = append(dst, ']')
	}
	if r.X != "" {
		sep()
		dst = append(dst, `"x":`...)
		dst = appendString(dst, r.X)
	}
	return append(dst, '}')
}

func (c Condition) appendJSON(dst []byte, ref func(segment string) string) []byte {
	if c.Kind == CondSegment {
		seg := c.Segment
		if ref != nil {
			seg = ref(seg)
		}
		dst = append(dst, `["s",`...)
		dst = appendString(dst, seg)
		if c.Not {
			dst = append(dst, ",1"...)
		}
		return append(dst, ']')
	}
	dst = append(dst, `["p",`...)
	dst = appendString(dst, c.Property)
	dst = append(dst, ',')
	dst = appendString(dst, c.Op)
	dst = append(dst, ',')
	dst = append(dst, c.Value...)
	return append(dst, ']')
}

// MarshalJSON writes the condition as in the provisioning file.
func (c Condition) MarshalJSON() ([]byte, error) { return c.appendJSON(nil, nil), nil }

// UnmarshalJSON reads a condition as in the provisioning file.
func (c *Condition) UnmarshalJSON(data []byte) error {
	v, err := decodeJSON(data)
	if err != nil {
		return err
	}
	fs := &faults{}
	cond, ok := parseCondition(fs, "if[0]", v)
	if err := fs.err(); err != nil || !ok {
		return fmt.Errorf("cannot read flag condition: %w", err)
	}
	*c = cond
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
