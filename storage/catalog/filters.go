package catalog

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Person filters of saved segments: the people-list filter language of the
// reporting API ("Person filters"), as objects {field, op, value}.

// filterValue says what value a person filter's field takes.
type filterValue uint8

const (
	valueNone       filterValue = iota // no value (set, not_set)
	valueEnum                          // one of filterSpec.values
	valueText                          // any text up to 500 characters
	valueGoal                          // a goal id of the project
	valueAction                        // an action id of the project
	valueSegment                       // another segment id of the project
	valueFunnel                        // {window}:{step}:{reached|stopped}:{ids}
	valueExperiment                    // {flag key}:{a|b}[:goal|:purchase]
	valueCountry                       // upper-case two-letter code
)

type filterSpec struct {
	ops    []string
	value  filterValue
	values []string
}

var (
	channelValues = []string{"paid_search", "paid_social", "email", "ai_assistant", "organic_search", "organic_social", "campaign", "referral", "direct", "none"}
	isIsNot       = []string{"is", "is_not"}
)

// filterSpecs is the table of the reporting API's person filters.
var filterSpecs = map[string]filterSpec{
	"stage":             {isIsNot, valueEnum, []string{"customer", "known", "returning", "visitor"}},
	"purchase":          {[]string{"set", "not_set"}, valueNone, nil},
	"goal":              {isIsNot, valueGoal, nil},
	"action":            {isIsNot, valueAction, nil},
	"segment":           {isIsNot, valueSegment, nil},
	"funnel":            {[]string{"is"}, valueFunnel, nil},
	"experiment":        {[]string{"is"}, valueExperiment, nil},
	"first_channel":     {isIsNot, valueEnum, channelValues},
	"last_channel":      {isIsNot, valueEnum, channelValues},
	"first_campaign":    {[]string{"is", "is_not", "contains", "set", "not_set"}, valueText, nil},
	"last_campaign":     {[]string{"is", "is_not", "contains", "set", "not_set"}, valueText, nil},
	"first_landing":     {[]string{"is", "is_not", "starts_with", "contains"}, valueText, nil},
	"last_landing":      {[]string{"is", "is_not", "starts_with", "contains"}, valueText, nil},
	"first_ad_platform": {isIsNot, valueEnum, []string{"ads_platform_a", "ads_platform_b"}},
	"last_ad_platform":  {isIsNot, valueEnum, []string{"ads_platform_a", "ads_platform_b"}},
	"country":           {isIsNot, valueCountry, nil},
	"device":            {isIsNot, valueEnum, []string{"desktop", "mobile", "tablet"}},
}

func filterFields() []string {
	fields := make([]string, 0, len(filterSpecs))
	for f := range filterSpecs {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	return fields
}

func (p *parser) segmentFilter(path string, v any) (SegmentFilter, bool) {
	w, ok := object(p.fs, path, v)
	if !ok {
		return SegmentFilter{}, false
	}
	var f SegmentFilter
	field, okField := w.str("field", true)
	op, okOp := w.str("op", true)
	if !okField || !okOp {
		return f, false
	}
	f.Field, f.Op = field, op
	spec, known := filterSpecs[field]
	if !known {
		if strings.HasPrefix(field, "traits.") {
			p.fs.add(w.at("field"), "traits filters are refused in person filters")
		} else {
			p.fs.add(w.at("field"), "must be a person filter field (%s), not %q", strings.Join(filterFields(), ", "), clip(field))
		}
		return f, false
	}
	if !slices.Contains(spec.ops, op) {
		p.fs.add(w.at("op"), "field %q takes the operators %s, not %q", field, quoteList(spec.ops), clip(op))
		return f, false
	}
	at := w.at("value")
	if op == "set" || op == "not_set" || spec.value == valueNone {
		if w.has("value") {
			p.fs.add(at, "operator %q takes no value", op)
			return f, false
		}
		return f, true
	}
	value, ok := w.str("value", true)
	if !ok {
		return f, false
	}
	f.Value = value
	if n := utf8.RuneCountInString(value); n > maxFilterValueLen {
		p.fs.add(at, "must be at most %d characters, not %d", maxFilterValueLen, n)
		return f, false
	}
	switch spec.value {
	case valueEnum:
		if !oneOf(p.fs, at, value, spec.values...) {
			return f, false
		}
	case valueText:
		if value == "" {
			p.fs.add(at, "must not be empty")
			return f, false
		}
	case valueGoal, valueAction, valueSegment:
		if !reUUID.MatchString(value) {
			p.fs.add(at, "must be %s id (a UUID), not %q", map[filterValue]string{valueGoal: "a goal", valueAction: "an action", valueSegment: "a segment"}[spec.value], clip(value))
			return f, false
		}
	case valueCountry:
		if !reCountry.MatchString(value) {
			p.fs.add(at, "must be an upper-case two-letter country code, not %q", clip(value))
			return f, false
		}
	case valueFunnel:
		if _, err := parseFunnelFilter(value); err != "" {
			p.fs.add(at, "%s", err)
			return f, false
		}
	case valueExperiment:
		if _, err := parseExperimentFilter(value); err != "" {
			p.fs.add(at, "%s", err)
			return f, false
		}
	}
	return f, true
}

// funnelFilter is the value of a `funnel` person filter.
type funnelFilter struct {
	window  int
	step    int
	reached bool
	actions []string
}

// parseFunnelFilter reads `{window}:{step}:{reached or stopped}:{action
// id},{action id},...`; step counts from 1.
func parseFunnelFilter(s string) (funnelFilter, string) {
	const form = "must be {window}:{step}:{reached or stopped}:{action id},{action id},... such as 7:2:reached:<id>,<id>"
	parts := strings.SplitN(s, ":", 4)
	if len(parts) != 4 {
		return funnelFilter{}, form
	}
	var ff funnelFilter
	w, err := strconv.Atoi(parts[0])
	if err != nil || (w != 1 && w != 7 && w != 14 && w != 30) {
		return ff, form + "; the window is 1, 7, 14 or 30 days"
	}
	ff.window = w
	switch parts[2] {
	case "reached":
		ff.reached = true
	case "stopped":
	default:
		return ff, form
	}
	ff.actions = strings.Split(parts[3], ",")
	if len(ff.actions) < minFunnelSteps || len(ff.actions) > maxFunnelSteps {
		return ff, form + "; with 2 to 6 action ids"
	}
	for _, a := range ff.actions {
		if !reUUID.MatchString(a) {
			return ff, form + "; action ids are UUIDs"
		}
	}
	step, err := strconv.Atoi(parts[1])
	if err != nil || step < 1 || step > len(ff.actions) || parts[1] != strconv.Itoa(step) {
		return ff, form + "; the step counts from 1 to the number of actions"
	}
	ff.step = step
	return ff, ""
}

// experimentFilter is the value of an `experiment` person filter.
type experimentFilter struct {
	key     string
	variant string
	outcome string
}

// parseExperimentFilter reads `{experiment id}:{a or b}` with an optional
// `:goal` or `:purchase`; the experiment id is the flag's key.
func parseExperimentFilter(s string) (experimentFilter, string) {
	const form = "must be {experiment}:{a or b}, optionally followed by :goal or :purchase, where the experiment is a flag key"
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 || !reFlagKey.MatchString(parts[0]) || (parts[1] != "a" && parts[1] != "b") {
		return experimentFilter{}, form
	}
	ef := experimentFilter{key: parts[0], variant: parts[1]}
	if len(parts) == 3 {
		if parts[2] != "goal" && parts[2] != "purchase" {
			return ef, form
		}
		ef.outcome = parts[2]
	}
	return ef, ""
}
