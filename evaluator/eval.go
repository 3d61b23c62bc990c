package evaluator

import "strings"

// noFacts stands in for nil facts; it is never written.
var noFacts Facts

// Evaluate evaluates the flag for the facts (nil means empty facts),
// following the evaluation steps of the specification. It does not
// allocate; Result.Variant and Result.Value point into memory owned by f.
func (f *Flag) Evaluate(fa *Facts) Result {
	return f.eval(fa, nil)
}

// Explain evaluates like Evaluate and also says how the result came about:
// which rules were tried, which condition failed or held, and the buckets.
func (f *Flag) Explain(fa *Facts) (Result, Explanation) {
	var x Explanation
	res := f.eval(fa, &x)
	return res, x
}

func (f *Flag) eval(fa *Facts, x *Explanation) Result {
	if fa == nil {
		fa = &noFacts
	}
	// 1. need, x together with sh or w, and every other structural fault.
	if f.bad != "" {
		if x != nil {
			x.Unsupported = f.bad
		}
		return Result{Reason: ReasonError, Rule: -1, ErrorCode: ErrorUnsupported}
	}
	// 2. off.
	if f.off {
		if x != nil {
			x.Off = true
		}
		return Result{Variant: f.def, Reason: ReasonDisabled, Rule: -1, Value: f.defVal}
	}
	// 3. the unit.
	unit, state := fa.unit(f.byUser)
	if x != nil {
		x.ByUser, x.UnitState = f.byUser, state.String()
	}
	// 4. rules in order.
	for i := range f.rules {
		r := &f.rules[i]
		var rt *RuleTrace
		if x != nil {
			x.Rules = append(x.Rules, RuleTrace{Rule: i, ShareBucket: -1, VariantBucket: -1})
			rt = &x.Rules[len(x.Rules)-1]
		}
		// a. a segment condition reached with segments pending.
		if r.hasSeg && fa.seg == segPending {
			if rt != nil {
				rt.Outcome = "segments pending"
			}
			return Result{Reason: ReasonError, Rule: -1, ErrorCode: ErrorNotReady}
		}
		// b. every condition must hold.
		matched := true
		for j := range r.conds {
			c := &r.conds[j]
			holds := c.holds(fa)
			if rt != nil {
				rt.Conditions = append(rt.Conditions, ConditionTrace{
					Index: j, Condition: c.text, Holds: holds,
				})
			}
			if !holds {
				matched = false
				break
			}
		}
		if !matched {
			if rt != nil {
				rt.Outcome = "a condition failed: next rule"
			}
			continue
		}
		// c. fixed rule.
		if r.fixed {
			reason := ReasonStatic
			if r.hasIf {
				reason = ReasonTargetingMatch
			}
			if rt != nil {
				rt.Outcome = "fixed rule decided"
			}
			return Result{Variant: r.x, Reason: reason, Rule: i, Value: r.xVal}
		}
		// d. share.
		if state != idUsable {
			if rt != nil {
				rt.Outcome = "no usable unit: default"
			}
			return Result{Variant: f.def, Reason: ReasonDefault, Rule: i, Value: f.defVal}
		}
		sb, vb := bucketPair(f.hashR, f.hashV, unit)
		if rt != nil {
			rt.ShareBucket = int(sb)
		}
		if sb >= r.share {
			if rt != nil {
				rt.Outcome = "outside the share: default"
			}
			return Result{Variant: f.def, Reason: ReasonDefault, Rule: i, Value: f.defVal}
		}
		// e. variants.
		b := int64(vb)
		if rt != nil {
			rt.VariantBucket = int(b)
		}
		for k := range r.arms {
			a := &r.arms[k]
			b -= int64(a.weight)
			if b < 0 {
				if rt != nil {
					rt.Outcome = "split decided"
				}
				return Result{Variant: a.variant, Reason: ReasonSplit, Rule: i, Value: a.val}
			}
		}
		// f. beyond the weights.
		if rt != nil {
			rt.Outcome = "beyond the weights: default"
		}
		return Result{Variant: f.def, Reason: ReasonDefault, Rule: i, Value: f.defVal}
	}
	// 5. no rule decided.
	return Result{Variant: f.def, Reason: ReasonDefault, Rule: -1, Value: f.defVal}
}

func (c *cond) holds(fa *Facts) bool {
	switch c.op {
	case opSegIn, opSegNotIn:
		if fa.seg != segObject || contains(fa.segUnavail, c.key) {
			return false
		}
		return contains(fa.segIn, c.key) == (c.op == opSegIn)
	}
	p := fa.prop(c.key)
	switch c.op {
	case opSet:
		return p != nil
	case opUnset:
		return p == nil
	}
	if p == nil || !c.ok {
		return false
	}
	switch c.op {
	case opIs:
		return isHolds(p, c.lits)
	case opNot:
		return (p.isScalar() || p.kind == kindList) && !isHolds(p, c.lits)
	case opHas, opNhas:
		if p.kind != kindString {
			return false
		}
		found := false
		for _, s := range c.strs {
			if strings.Contains(p.str, s) {
				found = true
				break
			}
		}
		return found == (c.op == opHas)
	case opPre:
		if p.kind != kindString {
			return false
		}
		for _, s := range c.strs {
			if strings.HasPrefix(p.str, s) {
				return true
			}
		}
		return false
	case opGt:
		return p.kind == kindNumber && p.num > c.num
	case opLt:
		return p.kind == kindNumber && p.num < c.num
	}
	return false
}

// isHolds is the is operator: p is a scalar same as a listed value, or a
// list with a scalar element that is.
func isHolds(p *value, lits []value) bool {
	if p.kind == kindList {
		for i := range p.elems {
			if e := &p.elems[i]; e.isScalar() && sameAny(e, lits) {
				return true
			}
		}
		return false
	}
	return p.isScalar() && sameAny(p, lits)
}

func sameAny(a *value, lits []value) bool {
	for i := range lits {
		if same(a, &lits[i]) {
			return true
		}
	}
	return false
}

// same is the specification's same(a, b). Strings compare by code units
// (equal UTF-8 bytes are equal UTF-16 code units for valid text).
func same(a, b *value) bool {
	switch {
	case a.kind == kindString && b.kind == kindString:
		return a.str == b.str
	case a.kind == kindNumber && b.kind == kindNumber:
		return a.num == b.num
	case a.kind == kindBool && b.kind == kindBool:
		return a.b == b.b
	case a.kind == kindString && b.kind == kindNumber:
		return a.b && a.num == b.num
	case a.kind == kindNumber && b.kind == kindString:
		return b.b && b.num == a.num
	}
	return false
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
