package api

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Filters (docs/reporting-api.md, "Filters"): filters[i][field],
// filters[i][op], filters[i][value], read in order of i and all to hold.

// Filter limits.
const (
	MaxEventFilters   = 20
	MaxPersonFilters  = 12
	maxFilterField    = 150
	maxFilterOp       = 20
	maxEventValue     = 1000
	maxPersonValue    = 500
	maxFilterIndexLen = 6
)

// Filter is one parsed filter.
type Filter struct {
	// Index is i of filters[i].
	Index int
	Field string
	// Property is the key of a properties.<key> event filter.
	Property string
	Op       string
	// Value is the normalized value: lower case without www. for hosts,
	// upper case for countries; "" for set and not_set.
	Value string
	// Number is the value of gt and lt.
	Number float64
	// Funnel and Experiment hold the parsed value of those person filters.
	Funnel     *FunnelValue
	Experiment *ExperimentValue
}

// FunnelValue is the value of a funnel person filter.
type FunnelValue struct {
	Window  int
	Step    int // from 1
	Reached bool
	Actions []string
}

// ExperimentValue is the value of an experiment person filter.
type ExperimentValue struct {
	Key     string
	Variant string // a or b
	Outcome string // "", goal or purchase
}

var (
	reFilterParam = regexp.MustCompile(`^filters\[([0-9]+)\]\[([a-z]+)\]$`)
	rePropertyKey = regexp.MustCompile(`^[A-Za-z0-9_$][A-Za-z0-9_.$-]{0,127}$`)
	reCountry     = regexp.MustCompile(`^[A-Za-z]{2}$`)
	reUpperCC     = regexp.MustCompile(`^[A-Z]{2}$`)
	reFilterUUID  = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	reExpKey      = regexp.MustCompile(`^[a-z][a-z0-9-]{1,63}$`)
)

// Channels are the nine visit channels; people also have none.
var Channels = []string{"paid_search", "paid_social", "email", "ai_assistant", "organic_search", "organic_social", "campaign", "referral", "direct"}

var (
	allOps      = []string{"is", "is_not", "contains", "not_contains", "starts_with", "matches", "set", "not_set", "gt", "lt"}
	textOps     = []string{"is", "is_not", "contains", "not_contains", "starts_with", "matches", "set", "not_set"}
	closedOps   = []string{"is", "is_not", "set", "not_set"}
	isIsNot     = []string{"is", "is_not"}
	eventFields = map[string][]string{
		"event_name": textOps, "page_path": textOps, "region": textOps, "utm_source": textOps, "utm_medium": textOps,
		"utm_campaign": textOps, "utm_term": textOps, "utm_content": textOps,
		"page_host": textOps, "referrer_host": textOps,
		"channel": isIsNot, "country": closedOps,
		"click_source": closedOps, "device_type": closedOps, "browser": closedOps, "os": closedOps, "locale": closedOps,
		"source_type": closedOps, "collection_mode": closedOps,
	}
	// eventValues are the closed value sets checked for event filters.
	eventValues = map[string][]string{
		"channel":         Channels,
		"device_type":     {"desktop", "mobile", "tablet"},
		"source_type":     {"first_party_web", "first_party_server"},
		"collection_mode": {"full", "consentless"},
	}
	personFields = map[string][]string{
		"stage": isIsNot, "purchase": {"set", "not_set"}, "goal": isIsNot, "action": isIsNot, "segment": isIsNot,
		"funnel": {"is"}, "experiment": {"is"},
		"first_channel": isIsNot, "last_channel": isIsNot,
		"first_campaign": {"is", "is_not", "contains", "set", "not_set"}, "last_campaign": {"is", "is_not", "contains", "set", "not_set"},
		"first_landing": {"is", "is_not", "starts_with", "contains"}, "last_landing": {"is", "is_not", "starts_with", "contains"},
		"first_ad_platform": isIsNot, "last_ad_platform": isIsNot,
		"country": isIsNot, "device": isIsNot,
	}
	personValues = map[string][]string{
		"stage":             {"customer", "known", "returning", "visitor"},
		"first_channel":     append(slices.Clone(Channels), "none"),
		"last_channel":      append(slices.Clone(Channels), "none"),
		"first_ad_platform": {"ads_platform_a", "ads_platform_b"},
		"last_ad_platform":  {"ads_platform_a", "ads_platform_b"},
		"device":            {"desktop", "mobile", "tablet"},
	}
)

type rawFilter struct {
	index                     int
	field, op, value          string
	hasField, hasOp, hasValue bool
}

// readFilters collects filters[i][…] parameters in order of i.
func readFilters(q url.Values, kind string, maxN, maxValue int) ([]rawFilter, *APIError) {
	byIndex := map[int]*rawFilter{}
	// Names in sorted order, so that of several faulty parameters the same
	// one is reported every time.
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if !strings.HasPrefix(name, "filters[") {
			continue
		}
		vals := q[name]
		m := reFilterParam.FindStringSubmatch(name)
		if m == nil || len(m[1]) > maxFilterIndexLen || (len(m[1]) > 1 && m[1][0] == '0') {
			return nil, badParam(name, fmt.Sprintf("%s is not a filter parameter; use filters[i][field], filters[i][op] and filters[i][value] with i a number", clipValue(name)))
		}
		if len(vals) > 1 {
			return nil, badParam(name, name+" is given more than once")
		}
		i, _ := strconv.Atoi(m[1])
		f := byIndex[i]
		if f == nil {
			f = &rawFilter{index: i}
			byIndex[i] = f
		}
		v := vals[0]
		switch m[2] {
		case "field":
			f.field, f.hasField = v, true
		case "op":
			f.op, f.hasOp = v, true
		case "value":
			f.value, f.hasValue = v, true
		default:
			return nil, badParam(name, fmt.Sprintf("%s is not a filter parameter; a filter has field, op and value", name))
		}
	}
	if len(byIndex) > maxN {
		return nil, badParam("filters", fmt.Sprintf("at most %d %s filters, not %d", maxN, kind, len(byIndex)))
	}
	out := make([]rawFilter, 0, len(byIndex))
	for _, f := range byIndex {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b rawFilter) int { return a.index - b.index })
	for _, f := range out {
		p := fmt.Sprintf("filters[%d]", f.index)
		switch {
		case !f.hasField || f.field == "":
			return nil, badParam(p+"[field]", p+"[field] is missing")
		case !f.hasOp || f.op == "":
			return nil, badParam(p+"[op]", p+"[op] is missing")
		case utf8.RuneCountInString(f.field) > maxFilterField:
			return nil, badParam(p+"[field]", fmt.Sprintf("%s[field] is longer than %d characters", p, maxFilterField))
		case utf8.RuneCountInString(f.op) > maxFilterOp:
			return nil, badParam(p+"[op]", fmt.Sprintf("%s[op] is longer than %d characters", p, maxFilterOp))
		case utf8.RuneCountInString(f.value) > maxValue:
			return nil, badParam(p+"[value]", fmt.Sprintf("%s[value] is longer than %d characters", p, maxValue))
		}
	}
	return out, nil
}

// EventFilterOptions are the facts event filters are checked against.
type EventFilterOptions struct {
	// ConsentlessOnly: the project collects only without consent, so a
	// channel filter is refused.
	ConsentlessOnly bool
}

// ParseEventFilters reads the event filters of a query.
func ParseEventFilters(q url.Values, opts EventFilterOptions) ([]Filter, *APIError) {
	raws, err := readFilters(q, "event", MaxEventFilters, maxEventValue)
	if err != nil {
		return nil, err
	}
	out := make([]Filter, 0, len(raws))
	for _, r := range raws {
		p := fmt.Sprintf("filters[%d]", r.index)
		f := Filter{Index: r.index, Field: r.field, Op: r.op}
		ops, ok := eventFields[r.field]
		if key, isProp := strings.CutPrefix(r.field, "properties."); isProp {
			if !rePropertyKey.MatchString(key) {
				return nil, badParam(p+"[field]", fmt.Sprintf("%s[field]: %q is not a property key; keys are 1 to 128 letters, digits, _, $, . or -, not starting with . or -", p, clipValue(key)))
			}
			f.Property, ops, ok = key, allOps, true
		}
		if !ok {
			return nil, badParam(p+"[field]", fmt.Sprintf("%s[field]: %q is not an event filter field", p, clipValue(r.field)))
		}
		if r.field == "channel" && opts.ConsentlessOnly {
			return nil, badParam(p+"[field]", "this project collects only without consent, so it cannot be filtered by channel")
		}
		if err := checkOp(p, r, ops); err != nil {
			return nil, err
		}
		if err := eventValue(p, r, &f); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func checkOp(p string, r rawFilter, ops []string) *APIError {
	if !slices.Contains(ops, r.op) {
		if !slices.Contains(allOps, r.op) {
			return badParam(p+"[op]", fmt.Sprintf("%s[op]: %q is not an operator; use one of %s", p, clipValue(r.op), strings.Join(ops, ", ")))
		}
		return badParam(p+"[op]", fmt.Sprintf("%s[op]: %s does not take %s; use one of %s", p, r.field, r.op, strings.Join(ops, ", ")))
	}
	return nil
}

// valueShape checks presence: none for set and not_set, required
// otherwise.
func valueShape(p string, r rawFilter) *APIError {
	if r.op == "set" || r.op == "not_set" {
		if r.value != "" {
			return badParam(p+"[value]", fmt.Sprintf("%s[value]: %s takes no value", p, r.op))
		}
		return nil
	}
	if r.value == "" {
		return badParam(p+"[value]", fmt.Sprintf("%s[value] is required with %s", p, r.op))
	}
	return nil
}

func eventValue(p string, r rawFilter, f *Filter) *APIError {
	if err := valueShape(p, r); err != nil || r.value == "" {
		return err
	}
	v := r.value
	switch {
	case r.op == "gt" || r.op == "lt":
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
			return badParam(p+"[value]", fmt.Sprintf("%s[value]: %s needs a number, not %q", p, r.op, clipValue(v)))
		}
		f.Number = n
	case r.field == "page_host" || r.field == "referrer_host":
		if v = strings.TrimPrefix(strings.ToLower(v), "www."); v == "" {
			// "www." alone names no host (and contains "" would match
			// every one).
			return badParam(p+"[value]", fmt.Sprintf("%s[value]: %s needs a host, not %q", p, r.field, clipValue(r.value)))
		}
	case r.field == "country":
		if !reCountry.MatchString(v) {
			return badParam(p+"[value]", fmt.Sprintf("%s[value]: a country is a two-letter code, not %q", p, clipValue(v)))
		}
		v = strings.ToUpper(v)
	}
	if set, ok := eventValues[r.field]; ok && !slices.Contains(set, v) {
		return badParam(p+"[value]", fmt.Sprintf("%s[value]: %s is one of %s, not %q", p, r.field, strings.Join(set, ", "), clipValue(v)))
	}
	f.Value = v
	return nil
}

// PersonFilterOptions are the facts person filters are checked against.
type PersonFilterOptions struct {
	// Known reports whether id names a thing of the project: kind is goal,
	// action or segment. Nil: ids are checked for form only.
	Known func(kind, id string) bool
}

// ParsePersonFilters reads the person filters of the people list.
func ParsePersonFilters(q url.Values, opts PersonFilterOptions) ([]Filter, *APIError) {
	raws, err := readFilters(q, "person", MaxPersonFilters, maxPersonValue)
	if err != nil {
		return nil, err
	}
	out := make([]Filter, 0, len(raws))
	for _, r := range raws {
		p := fmt.Sprintf("filters[%d]", r.index)
		if strings.HasPrefix(r.field, "traits.") {
			return nil, badParam(p+"[field]", fmt.Sprintf("%s[field]: trait filters (%s) are not offered in the people list", p, clipValue(r.field)))
		}
		ops, ok := personFields[r.field]
		if !ok {
			return nil, badParam(p+"[field]", fmt.Sprintf("%s[field]: %q is not a person filter field", p, clipValue(r.field)))
		}
		if err := checkOp(p, r, ops); err != nil {
			return nil, err
		}
		if err := valueShape(p, r); err != nil {
			return nil, err
		}
		f := Filter{Index: r.index, Field: r.field, Op: r.op, Value: r.value}
		if err := personValue(p, r, &f, opts); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func personValue(p string, r rawFilter, f *Filter, opts PersonFilterOptions) *APIError {
	v := r.value
	bad := func(format string, args ...any) *APIError {
		return badParam(p+"[value]", p+"[value]: "+fmt.Sprintf(format, args...))
	}
	if set, ok := personValues[r.field]; ok && !slices.Contains(set, v) {
		return bad("%s is one of %s, not %q", r.field, strings.Join(set, ", "), clipValue(v))
	}
	switch r.field {
	case "goal", "action", "segment":
		if !reFilterUUID.MatchString(v) || (opts.Known != nil && !opts.Known(r.field, v)) {
			return bad("no %s %q in this project", r.field, clipValue(v))
		}
	case "country":
		if !reUpperCC.MatchString(v) {
			return bad("a country is an upper-case two-letter code, not %q", clipValue(v))
		}
	case "funnel":
		fv, msg := parseFunnelValue(v)
		if msg != "" {
			return bad("%s", msg)
		}
		if opts.Known != nil {
			for _, a := range fv.Actions {
				if !opts.Known("action", a) {
					return bad("no action %q in this project", a)
				}
			}
		}
		f.Funnel = fv
	case "experiment":
		ev, msg := parseExperimentValue(v)
		if msg != "" {
			return bad("%s", msg)
		}
		f.Experiment = ev
	}
	return nil
}

// parseFunnelValue reads {window}:{step}:{reached or stopped}:{action id},…
func parseFunnelValue(s string) (*FunnelValue, string) {
	const form = "a funnel filter is {window}:{step}:{reached or stopped}:{action id},{action id},... such as 7:2:reached:<id>,<id>"
	parts := strings.SplitN(s, ":", 4)
	if len(parts) != 4 {
		return nil, form
	}
	fv := &FunnelValue{}
	w, err := strconv.Atoi(parts[0])
	if err != nil || parts[0] != strconv.Itoa(w) || (w != 1 && w != 7 && w != 14 && w != 30) {
		return nil, form + "; the window is 1, 7, 14 or 30 days"
	}
	fv.Window = w
	switch parts[2] {
	case "reached":
		fv.Reached = true
	case "stopped":
	default:
		return nil, form
	}
	fv.Actions = strings.Split(parts[3], ",")
	if len(fv.Actions) < 2 || len(fv.Actions) > 6 {
		return nil, form + "; with 2 to 6 action ids"
	}
	for _, a := range fv.Actions {
		if !reFilterUUID.MatchString(a) {
			return nil, form + "; action ids are UUIDs"
		}
	}
	step, err := strconv.Atoi(parts[1])
	if err != nil || parts[1] != strconv.Itoa(step) || step < 1 || step > len(fv.Actions) {
		return nil, form + "; the step counts from 1 to the number of actions"
	}
	fv.Step = step
	return fv, ""
}

// parseExperimentValue reads {experiment id}:{a or b}[:goal|:purchase];
// the experiment id is its flag's key.
func parseExperimentValue(s string) (*ExperimentValue, string) {
	const form = "an experiment filter is {experiment}:{a or b}, optionally followed by :goal or :purchase"
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 || !reExpKey.MatchString(parts[0]) || (parts[1] != "a" && parts[1] != "b") {
		return nil, form
	}
	ev := &ExperimentValue{Key: parts[0], Variant: parts[1]}
	if len(parts) == 3 {
		if parts[2] != "goal" && parts[2] != "purchase" {
			return nil, form
		}
		ev.Outcome = parts[2]
	}
	return ev, ""
}
