package main

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

const seed = "3f9a1c0b7e2d" // the specification's bucket vector seed

type gen struct {
	rng   *rand.Rand
	cases []kase
	seen  map[string]int
}

func generate(s uint64) []kase {
	g := &gen{rng: rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15)), seen: map[string]int{}}
	g.operators()
	g.numericStrings()
	g.unicode()
	g.ids()
	g.segments()
	g.shares()
	g.structure()
	g.values()
	g.unknownKeys()
	g.parseErrors()
	g.random(2500)
	return g.cases
}

// line adds a case from its exact input text.
func (g *gen) line(name, text string) {
	if n := g.seen[name]; n > 0 {
		g.seen[name] = n + 1
		name += "#" + strconv.Itoa(n+1)
	} else {
		g.seen[name] = 1
	}
	g.cases = append(g.cases, kase{name: name, line: []byte(text)})
}

// add adds a case {"flag": flag, "facts": facts}; facts may be absent.
func (g *gen) add(name string, flag, facts any) {
	g.line(name, enc(O{{"flag", flag}, {"facts", facts}}))
}

// newFlag returns a flag with the usual top-level fields and the given rules.
func newFlag(rules ...any) M {
	return M{"s": seed, "t": "m", "u": "b", "d": "off", "r": L(rules), "p": M{"on": M{"c": 1}, "a": 1}}
}

func withMembers(m M, kv ...any) M {
	out := M{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// pv is a JSON value with a name for case names.
type pv struct{ name, json string }

var propValues = []pv{
	{"absent", ""}, {"null", "null"},
	{"str-empty", `""`}, {"str-abc", `"abc"`}, {"str-ABC", `"ABC"`}, {"str-xabcx", `"xabcx"`},
	{"str-1", `"1"`}, {"str-1.0", `"1.0"`}, {"str-01", `"01"`}, {"str--0", `"-0"`},
	{"str-1e2", `"1e2"`}, {"str-100", `"100"`}, {"str-space1", `" 1"`}, {"str-true", `"true"`},
	{"str-e-acute", `"é"`}, {"str-astral", `"a😀b"`},
	{"num-0", "0"}, {"num--0", "-0"}, {"num-1", "1"}, {"num-1.0", "1.0"}, {"num-100", "100"},
	{"num-1e2", "1e2"}, {"num-0.5", "0.5"}, {"num--1.5", "-1.5"}, {"num-1e-7", "1e-7"},
	{"bool-true", "true"}, {"bool-false", "false"},
	{"list-empty", "[]"}, {"list-str", `["x","abc"]`}, {"list-num", "[2,1]"}, {"list-numstr", `["1"]`},
	{"list-bool", "[false,true]"}, {"list-null", "[null]"}, {"list-nested", `[[1],["abc"]]`},
	{"list-obj", `[{"a":1}]`}, {"list-mixed", `[null,{},"abc",1]`},
	{"obj-empty", "{}"}, {"obj", `{"a":1}`},
}

var condValues = []pv{
	{"list-abc", `["abc"]`}, {"list-a", `["a"]`}, {"list-empty-str", `[""]`}, {"list-ABC", `["ABC"]`},
	{"list-1", "[1]"}, {"list-str1", `["1"]`}, {"list-100", "[100]"}, {"list-0", "[0]"},
	{"list-true", "[true]"}, {"list-false", "[false]"}, {"list-null", "[null]"}, {"list-empty", "[]"},
	{"list-mixed", `[null,2,"b","abc",true]`}, {"list-nested", `[[1],["abc"]]`}, {"list-obj", `[{"a":1}]`},
	{"list-astral", `["😀","b"]`},
	{"str", `"abc"`}, {"num-1", "1"}, {"num-0.5", "0.5"}, {"num--2", "-2"}, {"num-100", "100"},
	{"num-1e-7", "1e-7"}, {"null", "null"}, {"bool", "true"}, {"obj", `{"a":1}`}, {"numstr", `"1"`},
}

// takesValue reports whether the operator reads a value of this JSON text's
// type (a list, a number, or anything for set and unset).
func takesValue(op, json string) bool {
	switch op {
	case "set", "unset":
		return json == "null" || json == "1" || json == `"abc"`
	case "gt", "lt":
		return json[0] == '-' || (json[0] >= '0' && json[0] <= '9')
	}
	return json[0] == '['
}

var allOps = []string{"is", "not", "has", "nhas", "pre", "gt", "lt", "set", "unset"}

// operators: every operator on every JSON type of property and value.
func (g *gen) operators() {
	// Each operator meets every property with the values of the type it
	// takes, and every value with a few properties it could match.
	fewProps := []pv{propValues[3], propValues[6], propValues[18], propValues[28]} // "abc", "1", 1, ["x","abc"]
	for _, op := range allOps {
		for _, cv := range condValues {
			props := fewProps
			if takesValue(op, cv.json) {
				props = propValues
			}
			for _, p := range props {
				members := O{{"other", 1}}
				if p.json != "" {
					members = append(members, KV{"k", Raw(p.json)})
				}
				f := newFlag(M{"if": L{L{"p", "k", op, Raw(cv.json)}}, "x": "on"})
				g.add("op/"+op+"/value="+cv.name+"/prop="+p.name, f, M{"id": "user-1", "properties": members})
			}
		}
	}
	// Several conditions: all must hold; the first that fails ends the rule.
	f := newFlag(
		M{"if": L{L{"p", "plan", "is", L{"pro", "team"}}, L{"p", "age", "gt", 17}, L{"p", "email", "has", L{"@example.com"}}}, "x": "a"},
		M{"if": L{L{"p", "plan", "not", L{"pro"}}, L{"p", "country", "pre", L{"D", "A"}}}, "x": "b"},
		M{"if": L{}, "x": "on"},
	)
	for i, props := range []M{
		{"plan": "pro", "age": 18, "email": "a@example.com"},
		{"plan": "pro", "age": 17, "email": "a@example.com"},
		{"plan": "team", "age": 30, "email": "a@example.org"},
		{"plan": "free", "country": "DE"},
		{"plan": "free", "country": "FR"},
		{"plan": "pro", "country": "AT"},
		{},
	} {
		g.add("op/several-conditions/"+strconv.Itoa(i), f, M{"id": "u", "properties": props})
	}
	// Own keys only: names of JavaScript object members are ordinary keys.
	for _, k := range []string{"__proto__", "constructor", "toString", "hasOwnProperty", "valueOf", ""} {
		for _, op := range []string{"set", "unset"} {
			f := newFlag(M{"if": L{L{"p", k, op, nil}}, "x": "on"})
			g.add("op/own-keys/"+op+"/absent/"+k, f, M{"properties": M{"x": 1}})
			g.add("op/own-keys/"+op+"/present/"+k, f, M{"properties": M{k: 1}})
		}
	}
	// Repeated property keys: the last one counts.
	f = newFlag(M{"if": L{L{"p", "k", "is", L{"b"}}}, "x": "on"})
	g.line("op/repeated-key/last-wins", `{"flag":`+enc(f)+`,"facts":{"properties":{"k":"a","k":"b"}}}`)
	g.line("op/repeated-key/last-wins-2", `{"flag":`+enc(f)+`,"facts":{"properties":{"k":"b","k":"a"}}}`)
	g.line("op/repeated-key/null-last", `{"flag":`+enc(f)+`,"facts":{"properties":{"k":"b","k":null}}}`)
	// set/unset ignore their value.
	for _, v := range []string{"null", "1", `"x"`, "[]", "{}"} {
		for _, op := range []string{"set", "unset"} {
			f := newFlag(M{"if": L{L{"p", "k", op, Raw(v)}}, "x": "on"})
			g.add("op/"+op+"/any-value/"+v, f, M{"properties": M{"k": 0}})
		}
	}
}

// numericStrings: same() between strings and numbers, both ways.
func (g *gen) numericStrings() {
	strs := []string{"0", "-0", "1", "-1", "1.0", "1.5", "01", "1.", ".5", "+1", "1e2", "1E2", " 1", "1 ",
		"0.1", "0.30000000000000004", "9007199254740993", "123456789012345678901234567890",
		"1" + strings.Repeat("0", 400), "-0.0", "00", "0x10", "١", "１", "", "100", "-1.50", "0.0", "1.10",
		"2.5", "1e400", "Infinity", "NaN", "5e-324", "1.5a", "1a", "-", "-a", "1.5.5"}
	nums := []string{"0", "-0", "1", "-1", "1.5", "0.1", "0.30000000000000004", "9007199254740992",
		"1e2", "100", "1.0", "1e308", "5e-324", "1.23456789012345678901234567890e29", "-1.5", "2.5"}
	for _, s := range strs {
		for _, n := range nums {
			f := newFlag(M{"if": L{L{"p", "k", "is", L{Raw(n)}}}, "x": "on"})
			g.add("same/string-prop/"+s+"/number-value/"+n, f, M{"properties": M{"k": s}})
			f = newFlag(M{"if": L{L{"p", "k", "is", L{s}}}, "x": "on"})
			g.add("same/number-prop/"+n+"/string-value/"+s, f, M{"properties": M{"k": Raw(n)}})
		}
	}
	// Numbers written differently are the same number.
	for _, pair := range [][2]string{{"1", "1.0"}, {"1e2", "100"}, {"0.1", "1e-1"}, {"-0", "0"}, {"1E+2", "100.00"}} {
		f := newFlag(M{"if": L{L{"p", "k", "is", L{Raw(pair[0])}}}, "x": "on"})
		g.add("same/number-forms/"+pair[0]+"="+pair[1], f, M{"properties": M{"k": Raw(pair[1])}})
	}
	// gt and lt take numbers only, never numeric strings or booleans.
	for _, p := range []string{"5", `"5"`, "true", "false", "-0", "0", "1e308", "-1e308", "5e-324"} {
		for _, v := range []string{"0", "-0", "4.999", "5", "5.0001", `"4"`, "true", "null"} {
			for _, op := range []string{"gt", "lt"} {
				f := newFlag(M{"if": L{L{"p", "k", op, Raw(v)}}, "x": "on"})
				g.add("compare/"+op+"/prop="+p+"/value="+v, f, M{"properties": M{"k": Raw(p)}})
			}
		}
	}
}

// unicode: code-unit comparison, escapes, astral characters.
func (g *gen) unicode() {
	pairs := []struct{ name, prop, val string }{
		{"same-literal", `"é"`, `"é"`},
		{"escape-vs-literal", `"\u00e9"`, `"é"`},
		{"nfc-vs-nfd", `"é"`, `"e\u0301"`},
		{"astral-literal", `"😀"`, `"😀"`},
		{"astral-escaped-pair", `"\ud83d\ude00"`, `"😀"`},
		{"astral-uppercase-escape", `"\uD83D\uDE00"`, `"😀"`},
		{"case", `"Abc"`, `"abc"`},
		{"line-separator", `"a b"`, `"a\u2028b"`},
		{"control-escaped", `"a\u0001b"`, `"a\u0001b"`},
		{"nul", `"a\u0000b"`, `"a\u0000"`},
		{"slash-escape", `"a\/b"`, `"a/b"`},
		{"cjk", `"漢字テキスト"`, `"字テ"`},
		{"emoji-zwj", `"👩‍💻 coder"`, `"👩"`},
		{"astral-prefix", `"𝄞music"`, `"𝄞"`},
		{"astral-inner", `"x𝄞y"`, `"𝄞y"`},
		{"bmp-max", `"\uffff"`, `"\uffff"`},
		{"replacement-char", `"\ufffd"`, `"�"`},
	}
	for _, p := range pairs {
		for _, op := range []string{"is", "not", "has", "nhas", "pre"} {
			f := newFlag(M{"if": L{L{"p", "k", op, Raw("[" + p.val + "]")}}, "x": "on"})
			g.line("unicode/"+op+"/"+p.name, `{"flag":`+enc(f)+`,"facts":{"properties":{"k":`+p.prop+`}}}`)
		}
	}
	// Escaped property names and variants.
	g.line("unicode/escaped-property-name", `{"flag":{"d":"off","r":[{"if":[["p","age","gt",1]],"x":"on"}],"s":"`+seed+`","t":"b","u":"b"},"facts":{"properties":{"\u0061ge":2}}}`)
	g.line("unicode/escaped-variant", `{"flag":{"d":"off","p":{"on":1},"r":[{"x":"\u006fn"}],"s":"`+seed+`","t":"b","u":"b"}}`)
	g.line("unicode/unicode-variant", `{"flag":{"d":"off","p":{"grün":"green"},"r":[{"x":"grün"}],"s":"`+seed+`","t":"b","u":"b"}}`)
	g.line("unicode/unicode-seed", `{"flag":{"d":"off","r":[{"w":[["a",5000],["b",5000]]}],"s":"sëëd😀","t":"b","u":"b"},"facts":{"id":"müller"}}`)
}

// ids: usable ids, placeholders, lengths in UTF-16 code units.
func (g *gen) ids() {
	split := func(u string) M {
		f := newFlag(M{"w": L{L{"a", 2500}, L{"b", 2500}, L{"on", 2500}, L{"off", 2500}}})
		f["u"] = u
		return f
	}
	var ids []pv
	for _, p := range []string{"undefined", "null", "none", "nan", "0", "true", "false", "anonymous",
		"guest", "id", "email", "distinct_id", "distinctid", "not_authenticated", "[object object]"} {
		up := strings.ToUpper(p)
		title := strings.ToUpper(p[:1]) + p[1:]
		for _, v := range []string{p, up, title, " " + p, p + " ", "\t" + up + "\n", "\r" + p + "\r", `"` + p + `"`,
			"'" + p + "'", ` "'` + title + `'" `, "x" + p, p + "x", "  " + p + "  x", "\u00a0" + p, p + "\u3000", "\v" + p} {
			ids = append(ids, pv{"placeholder/" + v, jstr(v)})
		}
	}
	for _, v := range []string{"", " ", "\t\n\r", `""`, `''`, `"'"'`, "user-42", " user-42", "user-42 ", "USER-42",
		"NaN1", "0.0", "00", "-0", "nil", "NULL-user", "[object Object]", "[Object Object]", "object object",
		"ＮＵＬＬ", "İd", "ıd", "\u00a0", "\u200b", "\x00", "a\x00", "😀", "é", "e\u0301"} {
		ids = append(ids, pv{"id/" + v, jstr(v)})
	}
	ascii := func(n int) string { return strings.Repeat("a", n) }
	astral := func(n int) string { return strings.Repeat("😀", n) }
	for _, c := range []struct {
		name string
		s    string
	}{
		{"len/ascii-255", ascii(255)}, {"len/ascii-256", ascii(256)}, {"len/ascii-257", ascii(257)},
		{"len/astral-128", astral(128)}, {"len/astral-129", astral(129)},
		{"len/ascii-254+astral", ascii(254) + "😀"}, {"len/ascii-255+astral", ascii(255) + "😀"},
		{"len/bmp3-256", strings.Repeat("€", 256)}, {"len/bmp3-257", strings.Repeat("€", 257)},
		{"len/bmp2-256", strings.Repeat("é", 256)}, {"len/bmp2-257", strings.Repeat("é", 257)},
		{"len/padded-256", " " + ascii(254) + " "}, {"len/padded-257", " " + ascii(255) + " "},
		{"len/placeholder-padded-300", strings.Repeat(" ", 150) + "null" + strings.Repeat(" ", 146)},
	} {
		ids = append(ids, pv{c.name, jstr(c.s)})
	}
	for _, v := range []string{"42", "0", "true", "false", "null", "[]", `["user-42"]`, "{}", `{"id":"user-42"}`, "1.5"} {
		ids = append(ids, pv{"type/" + v, v})
	}
	for _, u := range []string{"b", "p"} {
		for _, id := range ids {
			unitKey, otherKey := "id", "userId"
			if u == "p" {
				unitKey, otherKey = "userId", "id"
			}
			g.line("unit/"+u+"/"+id.name,
				`{"flag":`+enc(split(u))+`,"facts":{"`+unitKey+`":`+id.json+`,"`+otherKey+`":"other-unit"}}`)
		}
		// Only the unit of the flag counts.
		g.add("unit/"+u+"/only-other-id", split(u), M{"id": "only-anon", "userId": absent})
		g.add("unit/"+u+"/only-user-id", split(u), M{"userId": "only-user"})
		g.add("unit/"+u+"/no-facts", split(u), absent)
		g.add("unit/"+u+"/null-facts", split(u), nil)
	}
	// The original id is hashed, never the bare one: many padded ids.
	for i := 0; i < 60; i++ {
		id := "user-" + strconv.Itoa(i)
		for _, v := range []string{id, " " + id, id + "\t", "'" + id + "'", strings.ToUpper(id)} {
			g.add("unit/hash-original/"+v, split("b"), M{"id": v})
		}
	}
}

// segments: every segment form and state.
func (g *gen) segments() {
	segForms := []pv{
		{"absent", ""}, {"null", "null"}, {"pending", `"pending"`}, {"unavailable", `"unavailable"`},
		{"other-string", `"ready"`}, {"PENDING", `"PENDING"`}, {"number", "1"}, {"list", `["s1"]`}, {"true", "true"},
		{"empty-object", "{}"}, {"in-s1", `{"in":["s1"]}`}, {"in-s2", `{"in":["s2"]}`},
		{"in-s1-unavailable-s1", `{"in":["s1"],"unavailable":["s1"]}`},
		{"unavailable-s1", `{"in":[],"unavailable":["s1"]}`}, {"unavailable-s2", `{"in":["s1"],"unavailable":["s2"]}`},
		{"in-not-list", `{"in":"s1"}`}, {"in-null", `{"in":null,"unavailable":null}`},
		{"in-mixed", `{"in":[1,null,"s1",["s2"]]}`}, {"unavailable-not-list", `{"in":["s1"],"unavailable":"s1"}`},
		{"in-s1-extra", `{"in":["s1"],"stale":true,"refreshedAt":1}`},
		{"in-repeated", `{"in":["s2"],"in":["s1"]}`},
	}
	rulesets := []struct {
		name  string
		rules []any
	}{
		{"in", []any{M{"if": L{L{"s", "s1"}}, "x": "on"}}},
		{"not-in", []any{M{"if": L{L{"s", "s1", 1}}, "x": "on"}}},
		{"in-split", []any{M{"if": L{L{"s", "s1"}}, "w": L{L{"a", 5000}, L{"b", 5000}}}}},
		{"after-fixed", []any{M{"x": "a"}, M{"if": L{L{"s", "s1"}}, "x": "on"}}},
		{"after-failing-rule", []any{M{"if": L{L{"p", "k", "set", nil}}, "x": "a"}, M{"if": L{L{"s", "s1"}}, "x": "on"}}},
		{"after-failing-condition", []any{M{"if": L{L{"p", "k", "set", nil}, L{"s", "s1"}}, "x": "on"}}},
		{"before-property", []any{M{"if": L{L{"s", "s1", 1}, L{"p", "plan", "is", L{"pro"}}}, "x": "on"}}},
		{"no-segment", []any{M{"if": L{L{"p", "plan", "is", L{"pro"}}}, "x": "on"}}},
		{"both-forms", []any{M{"if": L{L{"s", "s1"}, L{"s", "s2", 1}}, "x": "on"}}},
		{"share-zero", []any{M{"if": L{L{"s", "s1"}}, "sh": 0}, M{"x": "b"}}},
	}
	for _, rs := range rulesets {
		for _, sf := range segForms {
			facts := `{"id":"user-7","properties":{"plan":"pro"}`
			if sf.json != "" {
				facts += `,"segments":` + sf.json
			}
			facts += "}"
			g.line("segments/"+rs.name+"/"+sf.name, `{"flag":`+enc(newFlag(rs.rules...))+`,"facts":`+facts+`}`)
		}
	}
}

// shares: share 0 / partial / 10,000, weights below 10,000, many units.
func (g *gen) shares() {
	// The specification's vector: bucket(3f9a1c0b7e2d, .r, user-42) = 6137.
	for _, sh := range []int{0, 1, 6136, 6137, 6138, 9999, 10000} {
		g.add("share/spec-vector/sh="+strconv.Itoa(sh), newFlag(M{"sh": sh, "w": L{L{"on", 10000}}}), M{"id": "user-42"})
	}
	weightSets := []struct {
		name string
		w    any
	}{
		{"absent", absent}, {"empty", L{}}, {"full-2", L{L{"a", 5000}, L{"b", 5000}}},
		{"under-3", L{L{"a", 2000}, L{"b", 3000}, L{"on", 1000}}}, {"zero-weights", L{L{"a", 0}, L{"b", 10000}, L{"on", 0}}},
		{"single", L{L{"on", 10000}}}, {"single-small", L{L{"on", 1}}}, {"almost", L{L{"a", 9999}}},
		{"many", L{L{"a", 1000}, L{"b", 1000}, L{"c", 1000}, L{"d", 1000}, L{"e", 1000}, L{"f", 1000}, L{"g", 1000}, L{"h", 1000}, L{"i", 1000}, L{"j", 1000}}},
		{"repeated-variant", L{L{"a", 3000}, L{"a", 3000}, L{"b", 4000}}},
		{"default-variant", L{L{"off", 5000}, L{"on", 5000}}},
	}
	shares := []any{absent, 0, 1, 2500, 5000, 9999, 10000}
	for _, ws := range weightSets {
		for _, sh := range shares {
			shName := "absent"
			if sh != absent {
				shName = strconv.Itoa(sh.(int))
			}
			for i := 0; i < 12; i++ {
				unit := "u-" + strconv.FormatUint(g.rng.Uint64()%1000000, 36)
				f := newFlag(
					M{"if": L{L{"p", "beta", "is", L{true}}}, "x": "on"},
					M{"sh": sh, "w": ws.w},
					M{"x": "never"},
				)
				props := M{}
				if i%4 == 0 {
					props["beta"] = true
				}
				g.add("share/w="+ws.name+"/sh="+shName+"/"+strconv.Itoa(i), f, M{"id": unit, "properties": props})
			}
			// No unit: the default variant at this rule, no fall-through.
			g.add("share/w="+ws.name+"/sh="+shName+"/no-unit", newFlag(M{"sh": sh, "w": ws.w}, M{"x": "never"}), M{})
		}
	}
	// A distribution check over many units with one split.
	for i := 0; i < 400; i++ {
		unit := strconv.Itoa(i)
		g.add("share/distribution/"+unit,
			newFlag(M{"sh": 8000, "w": L{L{"a", 3333}, L{"b", 3333}, L{"on", 3334}}}), M{"id": unit})
	}
	// Exact weights boundary: weight sums of 10000 and 10001.
	g.add("share/weights-sum-10000", newFlag(M{"w": L{L{"a", 9000}, L{"b", 1000}}}), M{"id": "x"})
	g.add("share/weights-sum-10001", newFlag(M{"w": L{L{"a", 9000}, L{"b", 1001}}}), M{"id": "x"})
}

// structure: need, off, x with sh or w, and malformed flags.
func (g *gen) structure() {
	base := newFlag(M{"if": L{L{"p", "k", "set", nil}}, "x": "a"}, M{"w": L{L{"b", 5000}}})
	facts := M{"id": "user-3", "properties": M{"k": 1}}
	for _, need := range []any{absent, nil, 0, 1, Raw("1.0"), Raw("1e0"), 2, 3, Raw("1.5"), Raw("0.5"), -1, "1", true, L{1}, Raw("1e300"), Raw("-0")} {
		for _, off := range []any{absent, nil, 1, Raw("1.0"), 0, 2, true, "1", L{}} {
			f := withMembers(base, "need", need, "off", off)
			g.add("structure/need="+enc(orNull(need))+"/off="+enc(orNull(off)), f, facts)
		}
	}
	// x together with sh or w: UNSUPPORTED before off, in any rule.
	for _, r := range []M{
		{"x": "a", "sh": 5000}, {"x": "a", "w": L{L{"b", 1}}}, {"x": "a", "sh": 0, "w": L{}},
		{"x": "a", "sh": nil}, {"x": "a", "w": nil}, {"x": nil, "sh": 100}, {"x": 5, "sh": 100},
		{"x": "a", "sh": "bad"},
	} {
		for _, off := range []any{absent, 1} {
			for _, pos := range []int{0, 1} {
				rules := []any{M{"x": "first"}}
				if pos == 0 {
					rules = []any{r, M{"x": "second"}}
				} else {
					rules = append(rules, r)
				}
				f := withMembers(newFlag(rules...), "off", off)
				g.add("structure/x-with-split/"+enc(r)+"/off="+enc(orNull(off))+"/pos="+strconv.Itoa(pos), f, facts)
			}
		}
	}
	// Malformed top-level fields.
	top := []struct {
		key  string
		vals []any
	}{
		{"s", []any{absent, nil, 1, "", "x", L{"a"}, strings.Repeat("z", 40)}},
		{"t", []any{absent, nil, "z", 1}},
		{"u", []any{absent, nil, "x", "B", "p", 1, ""}},
		{"d", []any{absent, nil, 1, "", "Off Variant", true}},
		{"r", []any{absent, nil, L{}, M{}, "x", 1}},
		{"p", []any{absent, nil, L{1}, "x", M{}, M{"off": nil}}},
		{"e", []any{"r", "o", 1, nil}},
		{"c", []any{"b", "s", L{}}},
		{"w", []any{1, 0, "x"}},
	}
	for _, t := range top {
		for _, v := range t.vals {
			for _, off := range []any{absent, 1} {
				f := withMembers(newFlag(M{"if": L{}, "x": "a"}), t.key, v, "off", off)
				g.add("structure/top/"+t.key+"="+enc(orNull(v))+"/off="+enc(orNull(off)), f, facts)
			}
		}
	}
	// Malformed rules and conditions.
	rules := []any{
		nil, 1, "x", L{}, M{},
		M{"if": nil}, M{"if": "x"}, M{"if": M{}}, M{"if": L{nil}}, M{"if": L{"p"}}, M{"if": L{L{}}},
		M{"if": L{L{"p", "k", "is"}}}, M{"if": L{L{"p", "k", "is", L{1}, 5}}}, M{"if": L{L{"p", 1, "is", L{1}}}},
		M{"if": L{L{"p", "k", "eq", L{1}}}}, M{"if": L{L{"p", "k", "IS", L{1}}}}, M{"if": L{L{"p", "k", 1, L{1}}}},
		M{"if": L{L{"q", "k", "is", L{1}}}}, M{"if": L{L{1, "k", "is", L{1}}}},
		M{"if": L{L{"s"}}}, M{"if": L{L{"s", 1}}}, M{"if": L{L{"s", "s1", 0}}}, M{"if": L{L{"s", "s1", 2}}},
		M{"if": L{L{"s", "s1", "1"}}}, M{"if": L{L{"s", "s1", true}}}, M{"if": L{L{"s", "s1", Raw("1.0")}}},
		M{"if": L{L{"s", "s1", 1, 1}}}, M{"if": L{L{"s", "s1", nil}}},
		M{"sh": -1}, M{"sh": 10001}, M{"sh": Raw("5000.5")}, M{"sh": "5000"}, M{"sh": Raw("5e3")}, M{"sh": true}, M{"sh": nil},
		M{"w": "x"}, M{"w": M{}}, M{"w": L{"a"}}, M{"w": L{L{"a"}}}, M{"w": L{L{"a", 1, 2}}}, M{"w": L{L{1, 100}}},
		M{"w": L{L{"a", -1}}}, M{"w": L{L{"a", 10001}}}, M{"w": L{L{"a", Raw("0.5")}}}, M{"w": L{L{"a", "100"}}},
		M{"w": L{L{"a", 6000}, L{"b", 4001}}}, M{"w": L{L{"a", Raw("1e4")}}}, M{"w": L{nil}}, M{"w": L{L{nil, 100}}},
		M{"x": 1}, M{"x": L{"a"}}, M{"x": ""}, M{"x": "a", "junk": L{1}},
	}
	for i, r := range rules {
		for _, position := range []string{"only", "after-decider"} {
			rs := []any{r}
			if position == "after-decider" {
				rs = []any{M{"x": "first"}, r}
			}
			g.add("structure/rule/"+strconv.Itoa(i)+"/"+enc(orNull(r))+"/"+position, newFlag(rs...), facts)
		}
	}
}

func orNull(v any) any {
	if v == absent {
		return Raw(`"(absent)"`)
	}
	return v
}

// values: the value of a decision is p[variant] in canonical form.
func (g *gen) values() {
	vals := []string{
		`{"b":1,"a":2}`, `{"z":{"y":[3,{"d":1,"c":2}],"x":null},"a":[]}`, `[1,"two",{"three":3},[4],null,true,false]`,
		`1`, `1.0`, `-0`, `1e2`, `1E+2`, `0.1`, `1e-7`, `1e-6`, `123456789012345678901234`, `1e21`, `1e20`,
		`0.30000000000000004`, `9007199254740993`, `1.7976931348623157e308`, `5e-324`, `-1.5e-10`, `100.50`,
		`"text"`, `"\u00e9\u00E9é"`, `"a\"b\\c\/d"`, `"\b\f\n\r\t\u0001\u001f\u007f"`, `"\u2028\u2029"`,
		`"😀\ud83d\ude00"`, `"<script>&amp;"`, `""`, `true`, `false`, `[]`, `{}`,
		`{"é":1,"e":2,"z":3,"Z":4,"😀":5,"\uffff":6,"":7,"a":{"b":{"c":{"d":{"e":1}}}}}`,
		`{"k":1,"k":2}`, `{"b":{"x":1,"x":{"y":2}},"a":0}`,
		` { "spaced" : [ 1 , 2 ] } `,
	}
	for i, v := range vals {
		for _, d := range []string{"on", "off"} {
			text := `{"flag":{"d":"` + d + `","p":{"on":` + v + `,"off":` + v + `},"r":[{"x":"on"}],"s":"` + seed + `","t":"c","u":"b"}}`
			g.line("values/"+strconv.Itoa(i)+"/"+d+"/"+v, text)
			text = `{"flag":{"d":"` + d + `","off":1,"p":{"on":` + v + `,"off":` + v + `},"r":[],"s":"` + seed + `","t":"c","u":"b"}}`
			g.line("values/disabled/"+strconv.Itoa(i)+"/"+d+"/"+v, text)
		}
	}
	// A value is present only when p has the variant and it is not null.
	for _, p := range []string{`{}`, `{"on":null}`, `{"ON":1}`, `{"on":1,"on":null}`, `{"on":null,"on":1}`, `null`, `[1]`, `"on"`, `{"on ":1}`} {
		g.line("values/presence/"+p, `{"flag":{"d":"off","p":`+p+`,"r":[{"x":"on"}],"s":"`+seed+`","t":"c","u":"b"}}`)
	}
	// Values for every kind of decision.
	f := `{"d":"off","p":{"a":{"v":"a"},"b":{"v":"b"},"off":{"v":"off"},"on":{"v":"on"}},"r":[{"if":[["p","k","is",["x"]]],"x":"on"},{"x":"a"}],"s":"` + seed + `","t":"c","u":"b"}`
	g.line("values/targeting", `{"flag":`+f+`,"facts":{"properties":{"k":"x"}}}`)
	g.line("values/static", `{"flag":`+f+`,"facts":{"properties":{"k":"y"}}}`)
	f = `{"d":"off","p":{"a":{"v":"a"},"b":{"v":"b"},"off":{"v":"off"}},"r":[{"w":[["a",5000],["b",5000]]}],"s":"` + seed + `","t":"c","u":"b"}`
	for i := 0; i < 8; i++ {
		g.line("values/split/"+strconv.Itoa(i), `{"flag":`+f+`,"facts":{"id":"v-`+strconv.Itoa(i)+`"}}`)
	}
	g.line("values/default-no-unit", `{"flag":`+f+`,"facts":{}}`)
}

// unknownKeys: unknown members never change the result.
func (g *gen) unknownKeys() {
	g.line("unknown/case-level", `{"flag":{"d":"off","r":[{"x":"on"}],"s":"`+seed+`","t":"b","u":"b"},"facts":{},"extra":[1,{"a":null}],"name":"x"}`)
	g.line("unknown/flag-level", `{"flag":{"d":"off","future":{"x":1},"n":"name","desc":"d","r":[{"x":"on"}],"s":"`+seed+`","t":"b","u":"b","e":"r","c":"b","w":1}}`)
	g.line("unknown/rule-level", `{"flag":{"d":"off","r":[{"x":"on","y":"z","rollout":5,"if":[],"w2":[]}],"s":"`+seed+`","t":"b","u":"b"}}`)
	g.line("unknown/split-rule-level", `{"flag":{"d":"off","r":[{"w":[["on",10000]],"sh":10000,"x2":"a"}],"s":"`+seed+`","t":"b","u":"b"},"facts":{"id":"k"}}`)
	g.line("unknown/facts-level", `{"flag":{"d":"off","r":[{"if":[["p","k","set",null]],"x":"on"}],"s":"`+seed+`","t":"b","u":"b"},"facts":{"anonymousId":"a","props":{"k":1},"properties":{"k":1},"traits":{}}}`)
	g.line("unknown/segments-level", `{"flag":{"d":"off","r":[{"if":[["s","s1"]],"x":"on"}],"s":"`+seed+`","t":"b","u":"b"},"facts":{"segments":{"in":["s1"],"stale":true,"refreshedAt":null,"x":{}}}}`)
	g.line("unknown/facts-key-case", `{"flag":{"d":"off","r":[{"w":[["on",10000]]}],"s":"`+seed+`","t":"b","u":"p"},"facts":{"userid":"a","UserId":"b","user_id":"c"}}`)
	g.line("unknown/properties-key-case", `{"flag":{"d":"off","r":[{"if":[["p","k","set",null]],"x":"on"}],"s":"`+seed+`","t":"b","u":"b"},"facts":{"properties":{"K":1}}}`)
}

// parseErrors: lines that are not cases.
func (g *gen) parseErrors() {
	ok := `{"d":"off","r":[{"x":"on"}],"s":"` + seed + `","t":"b","u":"b"}`
	lines := []struct{ name, text string }{
		{"empty", ""}, {"space", " "}, {"null", "null"}, {"number", "1"}, {"string", `"flag"`}, {"list", "[]"},
		{"list-of-case", `[{"flag":` + ok + `}]`}, {"empty-object", "{}"}, {"flag-null", `{"flag":null}`},
		{"flag-list", `{"flag":[]}`}, {"flag-string", `{"flag":"x"}`}, {"flag-missing", `{"facts":{}}`},
		{"facts-number", `{"flag":` + ok + `,"facts":1}`}, {"facts-string", `{"flag":` + ok + `,"facts":"x"}`},
		{"facts-list", `{"flag":` + ok + `,"facts":[]}`}, {"facts-true", `{"flag":` + ok + `,"facts":true}`},
		{"Flag-capital", `{"Flag":` + ok + `}`}, {"flag-repeated-last-not-object", `{"flag":` + ok + `,"flag":1}`},
		{"truncated", `{"flag":` + ok}, {"trailing-comma", `{"flag":` + ok + `,}`}, {"trailing-data", `{"flag":` + ok + `}x`},
		{"two-values", `{"flag":` + ok + `} {}`}, {"single-quotes", `{'flag':` + ok + `}`}, {"comment", `{"flag":` + ok + `/*c*/}`},
		{"unquoted-key", `{flag:` + ok + `}`}, {"bom", "\ufeff{\"flag\":" + ok + "}"}, {"nan", `{"flag":` + ok + `,"facts":{"properties":{"k":NaN}}}`},
		{"infinity", `{"flag":` + ok + `,"facts":{"properties":{"k":Infinity}}}`}, {"leading-zero", `{"flag":` + ok + `,"facts":{"properties":{"k":01}}}`},
		{"plus-sign", `{"flag":` + ok + `,"facts":{"properties":{"k":+1}}}`}, {"dot-no-digit", `{"flag":` + ok + `,"facts":{"properties":{"k":1.}}}`},
		{"leading-dot", `{"flag":` + ok + `,"facts":{"properties":{"k":.5}}}`}, {"exp-no-digit", `{"flag":` + ok + `,"facts":{"properties":{"k":1e}}}`},
		{"hex", `{"flag":` + ok + `,"facts":{"properties":{"k":0x10}}}`}, {"minus-only", `{"flag":` + ok + `,"facts":{"properties":{"k":-}}}`},
		{"overflow", `{"flag":` + ok + `,"facts":{"properties":{"k":1e400}}}`}, {"overflow-negative", `{"flag":` + ok + `,"facts":{"properties":{"k":-1e309}}}`},
		{"overflow-in-flag", `{"flag":{"d":"off","p":{"on":1e999},"r":[{"x":"on"}],"s":"` + seed + `","t":"b","u":"b"}}`},
		{"overflow-long-digits", `{"flag":` + ok + `,"facts":{"properties":{"k":` + "1" + strings.Repeat("0", 309) + `}}}`},
		{"underflow-is-fine", `{"flag":` + ok + `,"facts":{"properties":{"k":1e-400}}}`},
		{"max-float-is-fine", `{"flag":` + ok + `,"facts":{"properties":{"k":1.7976931348623157e308}}}`},
		{"lone-high-surrogate", `{"flag":` + ok + `,"facts":{"id":"\ud800"}}`}, {"lone-low-surrogate", `{"flag":` + ok + `,"facts":{"id":"\udc00"}}`},
		{"reversed-pair", `{"flag":` + ok + `,"facts":{"id":"\udc00\ud800"}}`}, {"high-then-text", `{"flag":` + ok + `,"facts":{"id":"\ud83dx"}}`},
		{"high-at-end", `{"flag":` + ok + `,"facts":{"id":"x\ud83d"}}`}, {"two-highs", `{"flag":` + ok + `,"facts":{"id":"\ud83d\ud83d\ude00"}}`},
		{"high-then-escape", `{"flag":` + ok + `,"facts":{"id":"\ud83d\n"}}`}, {"lone-in-key", `{"flag":` + ok + `,"facts":{"properties":{"\udfff":1}}}`},
		{"lone-in-unused-member", `{"flag":` + ok + `,"x":"\ud800"}`}, {"lone-in-flag", `{"flag":{"d":"\ud800","r":[],"s":"x","t":"b","u":"b"}}`},
		{"escaped-backslash-not-surrogate", `{"flag":` + ok + `,"facts":{"id":"\\ud800"}}`},
		{"valid-pair", `{"flag":` + ok + `,"facts":{"id":"\ud83d\ude00"}}`},
		{"control-char-in-string", "{\"flag\":" + ok + ",\"facts\":{\"id\":\"a\tb\"}}"},
		{"newline-in-string", "{\"flag\":" + ok + ",\"facts\":{\"id\":\"a\nb\"}}"},
		{"del-in-string-is-fine", "{\"flag\":" + ok + ",\"facts\":{\"id\":\"a\x7fb\"}}"},
		{"bad-escape", `{"flag":` + ok + `,"facts":{"id":"\x"}}`}, {"short-unicode-escape", `{"flag":` + ok + `,"facts":{"id":"\u12"}}`},
		{"bad-hex-escape", `{"flag":` + ok + `,"facts":{"id":"\u12g4"}}`}, {"unterminated-string", `{"flag":` + ok + `,"facts":{"id":"abc}}`},
		{"true-misspelled", `{"flag":` + ok + `,"facts":{"properties":{"k":tru}}}`}, {"True-capital", `{"flag":` + ok + `,"facts":{"properties":{"k":True}}}`},
		{"whitespace-around", " \t\r\n{\"flag\":" + ok + "} \t\r\n"}, {"form-feed-whitespace", "\f{\"flag\":" + ok + "}"},
		{"nbsp-whitespace", "\u00a0{\"flag\":" + ok + "}"}, {"missing-colon", `{"flag" ` + ok + `}`}, {"missing-comma", `{"flag":` + ok + ` "facts":{}}`},
		{"unterminated-list", `{"flag":{"d":"off","r":[{"x":"on"}`}, {"list-missing-comma", `{"flag":{"d":"off","r":[{"x":"on"} {"x":"a"}],"s":"x","t":"b","u":"b"}}`},
		{"escape-then-control-char", "{\"flag\":" + ok + ",\"facts\":{\"id\":\"a\\n\tb\"}}"},
		{"escape-then-invalid-utf8", "{\"flag\":" + ok + ",\"facts\":{\"id\":\"a\\n\xffb\"}}"},
		{"escape-then-valid-utf8", "{\"flag\":" + ok + ",\"facts\":{\"id\":\"a\\né😀\"}}"},
		{"backslash-at-end", `{"flag":` + ok + `,"facts":{"id":"a\`}, {"unterminated-escaped-string", `{"flag":` + ok + `,"facts":{"id":"a\nb`},
		{"surrogate-then-bad-escape", `{"flag":` + ok + `,"facts":{"id":"\ud83d\uzzzz"}}`},
		{"unicode-escape-at-end", `{"flag":` + ok + `,"facts":{"id":"\u12`}, {"surrogate-at-end", `{"flag":` + ok + `,"facts":{"id":"\ud83d\u`},
		{"surrogate-then-high", `{"flag":` + ok + `,"facts":{"id":"\ud83d\ud83d"}}`},
		{"list-trailing-comma", `{"flag":{"d":"off","r":[{"x":"on"},],"s":"x","t":"b","u":"b"}}`},
	}
	for _, l := range lines {
		g.line("parse/"+l.name, l.text)
	}
	// Invalid UTF-8, inside and outside strings.
	for _, bad := range []struct{ name, b string }{
		{"lone-continuation", "\x80"}, {"truncated-2", "\xc3"}, {"overlong", "\xc0\xaf"}, {"surrogate-utf8", "\xed\xa0\x80"},
		{"too-large", "\xf4\x90\x80\x80"}, {"ff", "\xff"}, {"truncated-4", "\xf0\x9f\x98"},
	} {
		g.line("parse/invalid-utf8/in-string/"+bad.name, `{"flag":`+ok+`,"facts":{"id":"a`+bad.b+`"}}`)
		g.line("parse/invalid-utf8/in-key/"+bad.name, `{"flag":`+ok+`,"facts":{"properties":{"`+bad.b+`":1}}}`)
		g.line("parse/invalid-utf8/outside/"+bad.name, `{"flag":`+ok+`}`+bad.b)
	}
	// Nesting: 128 levels are fine, 129 are not.
	for _, n := range []int{127, 128, 129, 200} {
		// The case object is level 1, facts 2, properties 3, so k's value starts at 4.
		inner := strings.Repeat("[", n-3) + strings.Repeat("]", n-3)
		g.line("parse/depth/"+strconv.Itoa(n)+"/lists",
			`{"flag":{"d":"off","r":[{"if":[["p","k","set",null]],"x":"on"}],"s":"`+seed+`","t":"b","u":"b"},"facts":{"properties":{"k":`+inner+`}}}`)
		obj := strings.Repeat(`{"a":`, n-3) + "1" + strings.Repeat("}", n-3)
		g.line("parse/depth/"+strconv.Itoa(n)+"/objects",
			`{"flag":{"d":"off","r":[{"if":[["p","k","set",null]],"x":"on"}],"s":"`+seed+`","t":"b","u":"b"},"facts":{"properties":{"k":`+obj+`}}}`)
	}
}

// random: flags and facts drawn from small vocabularies, so that
// conditions often hold and rules interact.
func (g *gen) random(n int) {
	r := g.rng
	for i := 0; i < n; i++ {
		f := g.randomFlag()
		props := M{}
		for _, k := range propKeys {
			if r.IntN(3) > 0 {
				props[k] = g.pick("pro", "free", "team", "DE", "US", "a@example.com", "x@test.org", "12", "12.5", "",
					12, 12.5, 0, -3, 100, true, false, nil, L{}, L{"pro", "beta"}, L{12, "DE"}, M{"a": 1}, "😀", "Ünïcode")
			}
		}
		facts := M{"properties": props}
		if r.IntN(5) > 0 {
			facts["id"] = g.pick("anon-1", "anon-2", "anon-"+strconv.Itoa(r.IntN(1000)), "null", " guest ", 42)
		}
		if r.IntN(3) > 0 {
			facts["userId"] = g.pick("user-1", "user-"+strconv.Itoa(r.IntN(1000)), "", "undefined")
		}
		switch r.IntN(6) {
		case 0:
			facts["segments"] = "pending"
		case 1:
			facts["segments"] = "unavailable"
		case 2, 3:
			facts["segments"] = M{"in": L{g.pick("s1", "s2"), g.pick("s2", "s3")}, "unavailable": L{g.pick("s3", "s4")}}
		}
		g.add("random/"+strconv.Itoa(i), f, facts)
	}
}

var (
	propKeys = []string{"plan", "age", "country", "tags", "beta", "email"}
	variants = []string{"a", "b", "c", "on", "off"}
)

func (g *gen) pick(xs ...any) any { return xs[g.rng.IntN(len(xs))] }

func (g *gen) randomCondition() any {
	r := g.rng
	if r.IntN(6) == 0 {
		c := L{"s", g.pick("s1", "s2", "s3")}
		if r.IntN(2) == 0 {
			c = append(c, 1)
		}
		return c
	}
	op := allOps[r.IntN(len(allOps))]
	v := g.pick(L{"pro"}, L{"free", "team"}, L{12}, L{"12"}, L{true}, L{"DE", "US"}, L{"@example.com"}, L{"a", "x"},
		L{}, L{""}, L{nil, 12.5}, 12, 0, -3, 12.5, "pro", nil, L{"😀"}, L{"Ü"})
	if op == "set" || op == "unset" {
		v = nil
	}
	return L{"p", propKeys[r.IntN(len(propKeys))], op, v}
}

// randomFlag draws a flag of one to four rules.
func (g *gen) randomFlag() M {
	r := g.rng
	var rules []any
	for k := r.IntN(4); k >= 0; k-- {
		rule := M{}
		if r.IntN(3) > 0 {
			cs := L{}
			for c := r.IntN(4); c > 0; c-- {
				cs = append(cs, g.randomCondition())
			}
			rule["if"] = cs
		}
		if r.IntN(3) == 0 {
			rule["x"] = variants[r.IntN(len(variants))]
		} else {
			if r.IntN(2) == 0 {
				rule["sh"] = g.pick(0, 100, 5000, 9000, 10000)
			}
			if r.IntN(4) > 0 {
				w := L{}
				left := 10000 - r.IntN(3)*1500
				for v := r.IntN(4); v > 0 && left > 0; v-- {
					wt := r.IntN(left + 1)
					left -= wt
					w = append(w, L{variants[r.IntN(len(variants))], wt})
				}
				rule["w"] = w
			}
		}
		rules = append(rules, rule)
	}
	f := newFlag(rules...)
	f["u"] = g.pick("b", "p")
	f["d"] = variants[r.IntN(len(variants))]
	if r.IntN(20) == 0 {
		f["off"] = 1
	}
	if r.IntN(30) == 0 {
		f["need"] = 2
	}
	return f
}
