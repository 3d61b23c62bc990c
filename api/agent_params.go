package api

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Tool parameters: each is one REST query or path parameter under the
// same name (../shared/contracts/agents.md), typed for an agent. A
// parameter is checked here only for its JSON shape; its value is the
// REST handler's to accept or refuse, so that a tool and its endpoint
// cannot disagree. Arguments the tool does not know are ignored, as the
// REST API ignores unknown query parameters.

// Parameter kinds.
const (
	kindString  = "string"
	kindInteger = "integer" // a whole number (or its text)
	kindFlag    = "flag"    // true sends 1, false 0
	kindCompare = "compare" // "previous" (or true)
	kindList    = "list"    // strings: a repeated parameter, or joined
	kindFilters = "filters" // {field, op, value} objects: filters[i][…]
)

// agentParam is one parameter of a tool.
type agentParam struct {
	name     string
	query    string // the REST query parameter; empty for a path parameter
	path     bool   // a {name} segment of the route
	kind     string
	required bool
	enum     []string
	intEnum  []int
	pattern  string
	desc     string
	// join, for a list, sends the items as one parameter joined by it;
	// empty repeats the parameter per item.
	join          string
	min, maxItems int
	// filters: their number and value length, and the fields they take.
	max, maxValue int
	fields        string
}

// paramError is an argument of the wrong shape.
type paramError struct {
	param, detail string
}

// schema is the parameter's JSON Schema.
func (p *agentParam) schema() map[string]any {
	s := map[string]any{"description": p.desc}
	switch p.kind {
	case kindString, kindCompare:
		s["type"] = "string"
		if p.enum != nil {
			s["enum"] = p.enum
		}
		if p.pattern != "" {
			s["pattern"] = p.pattern
		}
	case kindInteger:
		s["type"] = "integer"
		if p.intEnum != nil {
			s["enum"] = p.intEnum
		}
	case kindFlag:
		s["type"] = "boolean"
	case kindList:
		s["type"] = "array"
		s["items"] = map[string]any{"type": "string"}
		if p.min > 0 {
			s["minItems"] = p.min
		}
		if p.maxItems > 0 {
			s["maxItems"] = p.maxItems
		}
	case kindFilters:
		s["type"] = "array"
		s["maxItems"] = p.max
		s["description"] = p.desc + " " + p.fields
		s["items"] = map[string]any{
			"type":     "object",
			"required": []string{"field", "op"},
			"properties": map[string]any{
				"field": map[string]any{"type": "string", "description": "The field filtered on; see the fields and their operators above."},
				"op":    map[string]any{"type": "string", "enum": allOps, "description": "The operator; each field takes only some (see above)."},
				"value": map[string]any{"type": []string{"string", "number"}, "maxLength": p.maxValue,
					"description": fmt.Sprintf("The value compared, at most %d characters; none for set and not_set, a number for gt and lt.", p.maxValue)},
			},
		}
	}
	return s
}

// accepts says what the parameter accepts, for a refusal.
func (p *agentParam) accepts() string {
	s := p.desc
	if p.kind == kindFilters {
		s += " " + p.fields
	}
	if p.enum != nil && !strings.Contains(s, p.enum[0]) {
		s += " One of: " + strings.Join(p.enum, ", ") + "."
	}
	return s
}

// request turns a tool's arguments into the endpoint's path and query, and
// names the project of the path ("" for none).
func (t *agentTool) request(raw json.RawMessage) (uri, project string, perr *paramError) {
	args := map[string]json.RawMessage{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			return "", "", &paramError{"arguments", "the arguments must be a JSON object of parameters by name"}
		}
	}
	path := t.route
	var q []string // name=value pairs in the tool's parameter order
	add := func(name, value string) { q = append(q, url.QueryEscape(name)+"="+url.QueryEscape(value)) }
	for _, p := range t.params {
		v, given := args[p.name]
		if given && string(v) == "null" {
			given = false
		}
		if !given {
			if p.required {
				return "", "", &paramError{p.name, p.name + " is required"}
			}
			continue
		}
		if p.path {
			s, ok := scalarText(v)
			if !ok || s == "" {
				return "", "", &paramError{p.name, p.name + " must be a non-empty string"}
			}
			path = strings.Replace(path, "{"+p.name+"}", url.PathEscape(s), 1)
			if p.name == "project_id" && reProjectID.MatchString(s) {
				project = s
			}
			continue
		}
		if perr := p.encode(v, add); perr != nil {
			return "", "", perr
		}
	}
	// Parameters of other endpoints go through too, for the endpoint to
	// refuse or ignore as its REST form does (compare on the people list
	// is refused; filters on the goal list are not read).
	names := make([]string, 0, len(args))
	for name := range args {
		if t.param(name) == nil && passThrough[name] != nil && string(args[name]) != "null" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if perr := passThrough[name].encode(args[name], add); perr != nil {
			return "", "", perr
		}
	}
	uri = path
	if len(q) > 0 {
		uri += "?" + strings.Join(q, "&")
	}
	return uri, project, nil
}

// encode adds the query parameters of argument v.
func (p *agentParam) encode(v json.RawMessage, add func(name, value string)) *paramError {
	switch p.kind {
	case kindString, kindInteger:
		s, ok := scalarText(v)
		if !ok {
			return &paramError{p.name, p.name + " must be a " + p.schema()["type"].(string) + ", not " + jsonKind(v)}
		}
		add(p.query, s)
	case kindFlag:
		switch s, _ := scalarText(v); s {
		case "true", "1":
			add(p.query, "1")
		case "false", "0":
			add(p.query, "0")
		default:
			return &paramError{p.name, p.name + " must be true or false, not " + clipValue(string(v))}
		}
	case kindCompare:
		switch s, ok := scalarText(v); {
		case s == "true":
			add(p.query, "previous")
		case s == "false":
		case ok:
			add(p.query, s)
		default:
			return &paramError{p.name, p.name + ` must be "previous", not ` + jsonKind(v)}
		}
	case kindList:
		items, ok := stringList(v)
		if !ok {
			return &paramError{p.name, p.name + " must be a list of strings, not " + jsonKind(v)}
		}
		if p.join != "" {
			add(p.query, strings.Join(items, p.join))
			return nil
		}
		for _, it := range items {
			add(p.query, it)
		}
	case kindFilters:
		var list []map[string]json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil {
			return &paramError{p.name, p.name + " must be a list of {field, op, value} objects, not " + jsonKind(v)}
		}
		for i, f := range list {
			for _, part := range []string{"field", "op", "value"} {
				fv, ok := f[part]
				if !ok || string(fv) == "null" {
					continue
				}
				s, ok := scalarText(fv)
				if !ok {
					return &paramError{fmt.Sprintf("filters[%d].%s", i, part),
						fmt.Sprintf("filters[%d].%s must be a string or a number, not %s", i, part, jsonKind(fv))}
				}
				add(fmt.Sprintf("filters[%d][%s]", i, part), s)
			}
		}
	}
	return nil
}

// scalarText is the query text of a JSON string, number or boolean.
func scalarText(v json.RawMessage) (string, bool) {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return "", false
	}
	switch y := x.(type) {
	case string:
		return y, true
	case float64:
		if y == math.Trunc(y) && math.Abs(y) < 1e15 {
			return strconv.FormatInt(int64(y), 10), true
		}
		return strconv.FormatFloat(y, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(y), true
	}
	return "", false
}

// stringList reads a list of strings; a single string is split at commas.
func stringList(v json.RawMessage) ([]string, bool) {
	var list []json.RawMessage
	if json.Unmarshal(v, &list) != nil {
		s, ok := scalarText(v)
		if !ok {
			return nil, false
		}
		return strings.Split(s, ","), true
	}
	out := make([]string, 0, len(list))
	for _, it := range list {
		s, ok := scalarText(it)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// jsonKind names the JSON type of v for a message.
func jsonKind(v json.RawMessage) string {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return "invalid JSON"
	}
	switch x.(type) {
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return "null"
}

// eventFieldDocs says which event filter fields take which operators.
func eventFieldDocs() string {
	return fieldDocs(eventFields, eventValues) +
		" properties.<key> (a custom event property; key of letters, digits, _ $ . -): " + strings.Join(allOps, ", ") + "." +
		" country takes a two-letter code; page_host and referrer_host a host without www."
}

// personFieldDocs says which person filter fields take which operators.
func personFieldDocs() string {
	return fieldDocs(personFields, personValues) +
		" goal, action and segment take an id; funnel takes {window}:{step}:{reached or stopped}:{action id},{action id},…;" +
		" experiment takes {experiment id}:{a or b}, optionally followed by :goal or :purchase; country an upper-case two-letter code."
}

// fieldDocs lists fields grouped by their operators, with their values
// where the set is closed.
func fieldDocs(fields map[string][]string, values map[string][]string) string {
	groups := map[string][]string{}
	for f, ops := range fields {
		k := strings.Join(ops, ", ")
		groups[k] = append(groups[k], f)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("Fields and their operators:")
	for _, k := range keys {
		fs := groups[k]
		slices.Sort(fs)
		for i, f := range fs {
			if vs, ok := values[f]; ok {
				fs[i] = f + " (values " + strings.Join(vs, ", ") + ")"
			}
		}
		fmt.Fprintf(&b, " %s: %s;", strings.Join(fs, ", "), k)
	}
	return strings.TrimSuffix(b.String(), ";") + "."
}
