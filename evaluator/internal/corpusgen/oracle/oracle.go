// Package oracle is a deliberately plain reference implementation of the
// flag evaluation rules, written from the specification's text and
// docs/evaluator.md without looking at package evaluator's code and without
// importing it. It uses encoding/json, maps and regular expressions, and is
// slow on purpose: clarity first. The corpus generator takes its expected
// results from here, and the evaluator's fuzz test compares against it.
package oracle

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ParseError is the result line of a line that is not a case.
const ParseError = `{"reason":"ERROR","errorCode":"PARSE_ERROR"}`

// Eval returns the expected result line (without a line feed) for one
// `mf eval` input line.
func Eval(line []byte) string {
	root, ok := readJSON(line)
	if !ok {
		return ParseError
	}
	c, ok := root.(map[string]any)
	if !ok {
		return ParseError
	}
	flag, ok := c["flag"].(map[string]any)
	if !ok {
		return ParseError
	}
	facts := map[string]any{}
	if f, present := c["facts"]; present && f != nil {
		m, ok := f.(map[string]any)
		if !ok {
			return ParseError
		}
		facts = m
	}
	return Evaluate(flag, facts).Line()
}

// Result is one evaluation outcome.
type Result struct {
	Variant   string
	Reason    string
	Rule      int // -1: absent
	Value     string
	HasValue  bool
	ErrorCode string
}

// Line writes the result as the contract's output line.
func (r Result) Line() string {
	if r.Reason == "ERROR" {
		return `{"reason":"ERROR","errorCode":"` + r.ErrorCode + `"}`
	}
	s := `{"variant":` + quote(r.Variant) + `,"reason":"` + r.Reason + `"`
	if r.Rule >= 0 {
		s += `,"rule":` + strconv.Itoa(r.Rule)
	}
	if r.HasValue {
		s += `,"value":` + r.Value
	}
	return s + "}"
}

// readJSON decodes one JSON text the way the contract reads lines: strict
// RFC 8259, valid UTF-8, no lone surrogates, numbers inside float64 range,
// at most 128 levels of nesting. Numbers come back as json.Number.
func readJSON(line []byte) (any, bool) {
	if !utf8.Valid(line) || !json.Valid(line) || hasLoneSurrogate(line) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if depth(v) > 128 || !numbersInRange(v) {
		return nil, false
	}
	return v, true
}

// hasLoneSurrogate scans the string literals of a valid JSON text for \u
// escapes of surrogates that do not form a high-low pair.
func hasLoneSurrogate(text []byte) bool {
	inString := false
	pendingHigh := false // the previous escape was a high surrogate
	for i := 0; i < len(text); i++ {
		c := text[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		if c == '"' {
			if pendingHigh {
				return true
			}
			inString = false
			continue
		}
		if c != '\\' {
			if pendingHigh {
				return true
			}
			continue
		}
		i++
		if text[i] != 'u' {
			if pendingHigh {
				return true
			}
			continue
		}
		n, _ := strconv.ParseUint(string(text[i+1:i+5]), 16, 32)
		i += 4
		switch {
		case n >= 0xD800 && n <= 0xDBFF:
			if pendingHigh {
				return true
			}
			pendingHigh = true
		case n >= 0xDC00 && n <= 0xDFFF:
			if !pendingHigh {
				return true
			}
			pendingHigh = false
		default:
			if pendingHigh {
				return true
			}
		}
	}
	return false
}

func depth(v any) int {
	best := 0
	switch t := v.(type) {
	case map[string]any:
		for _, e := range t {
			best = max(best, depth(e))
		}
		return best + 1
	case []any:
		for _, e := range t {
			best = max(best, depth(e))
		}
		return best + 1
	}
	return 0
}

func numbersInRange(v any) bool {
	switch t := v.(type) {
	case json.Number:
		f, _ := strconv.ParseFloat(string(t), 64)
		return !math.IsInf(f, 0)
	case map[string]any:
		for _, e := range t {
			if !numbersInRange(e) {
				return false
			}
		}
	case []any:
		for _, e := range t {
			if !numbersInRange(e) {
				return false
			}
		}
	}
	return true
}

func num(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	return f, err == nil
}

func isInt(v any) bool {
	f, ok := num(v)
	return ok && f == math.Trunc(f) && math.Abs(f) < 1e18
}

// present returns a member, with null counting as absent.
func present(m map[string]any, key string) (any, bool) {
	v, ok := m[key]
	return v, ok && v != nil
}

var ops = map[string]bool{"is": true, "not": true, "has": true, "nhas": true, "pre": true, "gt": true, "lt": true, "set": true, "unset": true}

// wellFormed applies the checks of docs/evaluator.md, "Malformed flags".
func wellFormed(flag map[string]any) bool {
	rules, ok := flag["r"].([]any)
	if !ok {
		return false
	}
	if _, ok := flag["s"].(string); !ok {
		return false
	}
	if u, _ := flag["u"].(string); u != "b" && u != "p" {
		return false
	}
	if _, ok := flag["d"].(string); !ok {
		return false
	}
	if off, ok := present(flag, "off"); ok {
		if f, isNum := num(off); !isNum || f != 1 {
			return false
		}
	}
	for _, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			return false
		}
		if cs, ok := present(rule, "if"); ok {
			list, ok := cs.([]any)
			if !ok {
				return false
			}
			for _, c := range list {
				if !conditionWellFormed(c) {
					return false
				}
			}
		}
		if x, ok := present(rule, "x"); ok {
			if _, ok := x.(string); !ok {
				return false
			}
			continue
		}
		if sh, ok := present(rule, "sh"); ok {
			f, _ := num(sh)
			if !isInt(sh) || f < 0 || f > 10000 {
				return false
			}
		}
		if w, ok := present(rule, "w"); ok {
			list, ok := w.([]any)
			if !ok {
				return false
			}
			sum := 0.0
			for _, e := range list {
				pair, ok := e.([]any)
				if !ok || len(pair) != 2 {
					return false
				}
				if _, ok := pair[0].(string); !ok {
					return false
				}
				f, _ := num(pair[1])
				if !isInt(pair[1]) || f < 0 || f > 10000 {
					return false
				}
				sum += f
			}
			if sum > 10000 {
				return false
			}
		}
	}
	return true
}

func conditionWellFormed(c any) bool {
	list, ok := c.([]any)
	if !ok || len(list) == 0 {
		return false
	}
	switch list[0] {
	case "p":
		if len(list) != 4 {
			return false
		}
		_, propOK := list[1].(string)
		op, opOK := list[2].(string)
		return propOK && opOK && ops[op]
	case "s":
		if len(list) != 2 && len(list) != 3 {
			return false
		}
		if _, ok := list[1].(string); !ok {
			return false
		}
		if len(list) == 3 {
			f, ok := num(list[2])
			return ok && f == 1
		}
		return true
	}
	return false
}

// Evaluate follows "Evaluation (client side, shared by all
// implementations)" step by step.
func Evaluate(flag, facts map[string]any) Result {
	unsupported := Result{Reason: "ERROR", ErrorCode: "UNSUPPORTED", Rule: -1}
	// Step 1: need above the level, x together with sh or w, malformed.
	if need, ok := present(flag, "need"); ok {
		if !isInt(need) {
			return unsupported
		}
		if f, _ := num(need); f > 1 {
			return unsupported
		}
	}
	if rules, ok := flag["r"].([]any); ok {
		for _, r := range rules {
			if rule, ok := r.(map[string]any); ok {
				_, hasX := present(rule, "x")
				_, hasSh := present(rule, "sh")
				_, hasW := present(rule, "w")
				if hasX && (hasSh || hasW) {
					return unsupported
				}
			}
		}
	}
	if !wellFormed(flag) {
		return unsupported
	}
	d := flag["d"].(string)
	decide := func(variant, reason string, rule int) Result {
		res := Result{Variant: variant, Reason: reason, Rule: rule}
		if p, ok := flag["p"].(map[string]any); ok {
			if v, ok := present(p, variant); ok {
				res.Value, res.HasValue = canonical(v), true
			}
		}
		return res
	}
	// Step 2: off.
	if _, ok := present(flag, "off"); ok {
		return decide(d, "DISABLED", -1)
	}
	// Step 3: the unit.
	var unit any
	if flag["u"] == "p" {
		unit = facts["userId"]
	} else {
		unit = facts["id"]
	}
	unitStr, hasUnit := usable(unit)
	seed := flag["s"].(string)
	// Step 4: rules in order.
	for i, r := range flag["r"].([]any) {
		rule := r.(map[string]any)
		conds, hasIf := present(rule, "if")
		var list []any
		if hasIf {
			list = conds.([]any)
		}
		// 4a.
		for _, c := range list {
			if c.([]any)[0] == "s" && facts["segments"] == "pending" {
				return Result{Reason: "ERROR", ErrorCode: "NOT_READY", Rule: -1}
			}
		}
		// 4b.
		all := true
		for _, c := range list {
			if !holds(c.([]any), facts) {
				all = false
			}
		}
		if !all {
			continue
		}
		// 4c.
		if x, ok := present(rule, "x"); ok {
			if hasIf {
				return decide(x.(string), "TARGETING_MATCH", i)
			}
			return decide(x.(string), "STATIC", i)
		}
		// 4d.
		share := 10000
		if sh, ok := present(rule, "sh"); ok {
			f, _ := num(sh)
			share = int(f)
		}
		if !hasUnit || bucket(seed, ".r", unitStr) >= share {
			return decide(d, "DEFAULT", i)
		}
		// 4e.
		b := bucket(seed, ".v", unitStr)
		if w, ok := present(rule, "w"); ok {
			for _, e := range w.([]any) {
				pair := e.([]any)
				weight, _ := num(pair[1])
				b -= int(weight)
				if b < 0 {
					return decide(pair[0].(string), "SPLIT", i)
				}
			}
		}
		// 4f.
		return decide(d, "DEFAULT", i)
	}
	// Step 5.
	return decide(d, "DEFAULT", -1)
}

var placeholders = map[string]bool{
	"undefined": true, "null": true, "none": true, "nan": true, "0": true,
	"true": true, "false": true, "anonymous": true, "guest": true, "id": true,
	"email": true, "distinct_id": true, "distinctid": true,
	"not_authenticated": true, "[object object]": true,
}

// usable implements "Usable ids".
func usable(id any) (string, bool) {
	s, ok := id.(string)
	if !ok {
		return "", false
	}
	if len(utf16.Encode([]rune(s))) > 256 {
		return "", false
	}
	lower := strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
	bare := strings.Trim(lower, " \t\n\r\"'")
	if bare == "" || placeholders[bare] {
		return "", false
	}
	return s, true
}

func bucket(seed, salt, unit string) int {
	h := fnv.New32a()
	h.Write([]byte(seed + salt + unit))
	inner := h.Sum32()
	h2 := fnv.New32a()
	h2.Write([]byte(strconv.FormatUint(uint64(inner), 10)))
	return int(h2.Sum32() % 10000)
}

// Fnv1a32 and Bucket are exported for the spec vectors.
func Fnv1a32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// Bucket is bucket(seed, salt, unit).
func Bucket(seed, salt, unit string) int { return bucket(seed, salt, unit) }

func holds(c []any, facts map[string]any) bool {
	if c[0] == "s" {
		segs, ok := facts["segments"].(map[string]any)
		if !ok {
			return false
		}
		ref := c[1].(string)
		if listHas(segs["unavailable"], ref) {
			return false
		}
		in := listHas(segs["in"], ref)
		if len(c) == 3 {
			return !in
		}
		return in
	}
	key, op, val := c[1].(string), c[2].(string), c[3]
	var prop any
	missing := true
	if props, ok := facts["properties"].(map[string]any); ok {
		if v, ok := props[key]; ok && v != nil {
			prop, missing = v, false
		}
	}
	if op == "unset" {
		return missing
	}
	if missing {
		return false
	}
	if op == "set" {
		return true
	}
	if _, isObject := prop.(map[string]any); isObject {
		return false
	}
	switch op {
	case "is", "not":
		listed, ok := val.([]any)
		if !ok {
			return false
		}
		is := isOp(prop, listed)
		if op == "is" {
			return is
		}
		return !is
	case "has", "nhas", "pre":
		listed, ok := val.([]any)
		if !ok {
			return false
		}
		s, ok := prop.(string)
		if !ok {
			return false
		}
		any := false
		for _, l := range listed {
			ls, ok := l.(string)
			if !ok {
				continue
			}
			if op == "pre" && unitsHavePrefix(s, ls) || op != "pre" && unitsContain(s, ls) {
				any = true
			}
		}
		if op == "nhas" {
			return !any
		}
		return any
	case "gt", "lt":
		limit, ok := num(val)
		if !ok {
			return false
		}
		p, ok := num(prop)
		if !ok {
			return false
		}
		if op == "gt" {
			return p > limit
		}
		return p < limit
	}
	return false
}

func listHas(list any, ref string) bool {
	l, ok := list.([]any)
	if !ok {
		return false
	}
	for _, e := range l {
		if e == ref {
			return true
		}
	}
	return false
}

func isScalar(v any) bool {
	switch v.(type) {
	case string, json.Number, bool:
		return true
	}
	return false
}

func isOp(prop any, listed []any) bool {
	candidates := []any{prop}
	if l, ok := prop.([]any); ok {
		candidates = l
	}
	for _, c := range candidates {
		if !isScalar(c) {
			continue
		}
		for _, l := range listed {
			if same(c, l) {
				return true
			}
		}
	}
	return false
}

var numericString = regexp.MustCompile(`^-?(0|[1-9][0-9]*)([.][0-9]+)?$`)

func same(a, b any) bool {
	switch x := a.(type) {
	case string:
		switch y := b.(type) {
		case string:
			return unitsEqual(x, y)
		case json.Number:
			return stringSameNumber(x, y)
		}
	case json.Number:
		switch y := b.(type) {
		case json.Number:
			fx, _ := num(x)
			fy, _ := num(y)
			return fx == fy
		case string:
			return stringSameNumber(y, x)
		}
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return false
}

func stringSameNumber(s string, n json.Number) bool {
	if !numericString.MatchString(s) {
		return false
	}
	fs, _ := strconv.ParseFloat(s, 64)
	fn, _ := num(n)
	return fs == fn
}

// Strings compare as UTF-16 code units, as the specification says.
func units(s string) []uint16 { return utf16.Encode([]rune(s)) }

func unitsEqual(a, b string) bool {
	ua, ub := units(a), units(b)
	if len(ua) != len(ub) {
		return false
	}
	for i := range ua {
		if ua[i] != ub[i] {
			return false
		}
	}
	return true
}

func unitsHavePrefix(s, prefix string) bool {
	us, up := units(s), units(prefix)
	if len(up) > len(us) {
		return false
	}
	for i := range up {
		if us[i] != up[i] {
			return false
		}
	}
	return true
}

func unitsContain(s, sub string) bool {
	us, usub := units(s), units(sub)
	for start := 0; start+len(usub) <= len(us); start++ {
		match := true
		for i := range usub {
			if us[start+i] != usub[i] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// canonical writes v as docs/evaluator.md defines: JSON.stringify's form
// with object keys sorted by their UTF-8 bytes.
func canonical(v any) string {
	switch t := v.(type) {
	case bool:
		if t {
			return "true"
		}
		return "false"
	case json.Number:
		f, _ := num(t)
		return esNumber(f)
	case string:
		return quote(t)
	case []any:
		parts := make([]string, len(t))
		for i, e := range t {
			parts[i] = canonical(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = quote(k) + ":" + canonical(t[k])
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	return "null" // nil: the only other type encoding/json decodes to
}

// quote is JSON.stringify's QuoteJSONString for well-formed text.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteString(strconv.FormatInt(int64(r)>>4, 16))
				b.WriteString(strconv.FormatInt(int64(r)&15, 16))
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// esNumber is ECMAScript's Number::toString(x) for finite x (radix 10).
func esNumber(x float64) string {
	if x == 0 {
		return "0"
	}
	if x < 0 {
		return "-" + esNumber(-x)
	}
	// The shortest digits s (k of them) and n with x = s × 10^(n−k).
	e := strconv.FormatFloat(x, 'e', -1, 64) // d.ddddde±xx
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	k := len(digits)
	e10, _ := strconv.Atoi(exp)
	n := e10 + 1
	switch {
	case k <= n && n <= 21:
		return digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return "0." + strings.Repeat("0", -n) + digits
	}
	sign := "+"
	if n-1 < 0 {
		sign = "-"
	}
	expo := strconv.Itoa(int(math.Abs(float64(n - 1))))
	if k == 1 {
		return digits + "e" + sign + expo
	}
	return digits[:1] + "." + digits[1:] + "e" + sign + expo
}
