package evaluator

import "strconv"

// Explanation says how Explain reached its result, for `mf eval --explain`.
// It holds no id, only whether the unit was usable.
type Explanation struct {
	// Unsupported is why the flag fails with UNSUPPORTED (step 1), or "".
	Unsupported string
	// Off is true when the flag is off (step 2).
	Off bool
	// ByUser is true when the unit is the user id, false for the anonymous id.
	ByUser bool
	// UnitState is "usable", or why there is no unit: "absent", "not a
	// string", "longer than 256 UTF-16 code units", "blank or a placeholder".
	UnitState string
	// Rules are the rules reached, in order; the last one decided unless
	// every rule was passed over.
	Rules []RuleTrace
}

// RuleTrace is what happened at one rule.
type RuleTrace struct {
	Rule int
	// Conditions are the conditions tested, in order, up to the first
	// that failed.
	Conditions []ConditionTrace
	// ShareBucket and VariantBucket are bucket(seed, ".r", unit) and
	// bucket(seed, ".v", unit) when computed, else -1.
	ShareBucket, VariantBucket int
	// Outcome says what the rule did, e.g. "a condition failed: next rule".
	Outcome string
}

// ConditionTrace is one condition tested.
type ConditionTrace struct {
	Index     int
	Condition string // canonical JSON of the condition as written
	Holds     bool
}

// String returns the explanation as text, one step a line.
func (x Explanation) String() string {
	var b []byte
	switch {
	case x.Unsupported != "":
		b = append(b, "unsupported: "...)
		b = append(b, x.Unsupported...)
		b = append(b, '\n')
		return string(b)
	case x.Off:
		return "off: the default variant, DISABLED\n"
	}
	if x.ByUser {
		b = append(b, "unit: userId, "...)
	} else {
		b = append(b, "unit: id, "...)
	}
	b = append(b, x.UnitState...)
	b = append(b, '\n')
	for _, r := range x.Rules {
		b = append(b, "rule "...)
		b = strconv.AppendInt(b, int64(r.Rule), 10)
		b = append(b, ":\n"...)
		for _, c := range r.Conditions {
			b = append(b, "  condition "...)
			b = strconv.AppendInt(b, int64(c.Index), 10)
			b = append(b, ' ')
			b = append(b, c.Condition...)
			if c.Holds {
				b = append(b, " holds\n"...)
			} else {
				b = append(b, " fails\n"...)
			}
		}
		if r.ShareBucket >= 0 {
			b = append(b, "  share bucket "...)
			b = strconv.AppendInt(b, int64(r.ShareBucket), 10)
			b = append(b, '\n')
		}
		if r.VariantBucket >= 0 {
			b = append(b, "  variant bucket "...)
			b = strconv.AppendInt(b, int64(r.VariantBucket), 10)
			b = append(b, '\n')
		}
		b = append(b, "  "...)
		b = append(b, r.Outcome...)
		b = append(b, '\n')
	}
	if n := len(x.Rules); n == 0 || x.Rules[n-1].Outcome == "a condition failed: next rule" {
		b = append(b, "no rule decided: the default variant, DEFAULT\n"...)
	}
	return string(b)
}

// AppendJSON appends the explanation as one JSON object:
// {"unsupported":..., "off":true, "unit":"id"|"userId", "unitState":...,
// "rules":[{"rule":0,"conditions":[{"index":0,"condition":[...],"holds":true}],
// "shareBucket":6137,"variantBucket":12,"outcome":"..."}]}; members without
// a value are left out.
func (x Explanation) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	if x.Unsupported != "" {
		dst = append(dst, `"unsupported":`...)
		dst = AppendJSONString(dst, x.Unsupported)
		return append(dst, '}')
	}
	if x.Off {
		return append(dst, `"off":true}`...)
	}
	if x.ByUser {
		dst = append(dst, `"unit":"userId","unitState":`...)
	} else {
		dst = append(dst, `"unit":"id","unitState":`...)
	}
	dst = AppendJSONString(dst, x.UnitState)
	dst = append(dst, `,"rules":[`...)
	for i, r := range x.Rules {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"rule":`...)
		dst = strconv.AppendInt(dst, int64(r.Rule), 10)
		dst = append(dst, `,"conditions":[`...)
		for j, c := range r.Conditions {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"index":`...)
			dst = strconv.AppendInt(dst, int64(c.Index), 10)
			dst = append(dst, `,"condition":`...)
			dst = append(dst, c.Condition...)
			dst = append(dst, `,"holds":`...)
			dst = strconv.AppendBool(dst, c.Holds)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
		if r.ShareBucket >= 0 {
			dst = append(dst, `,"shareBucket":`...)
			dst = strconv.AppendInt(dst, int64(r.ShareBucket), 10)
		}
		if r.VariantBucket >= 0 {
			dst = append(dst, `,"variantBucket":`...)
			dst = strconv.AppendInt(dst, int64(r.VariantBucket), 10)
		}
		dst = append(dst, `,"outcome":`...)
		dst = AppendJSONString(dst, r.Outcome)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}
