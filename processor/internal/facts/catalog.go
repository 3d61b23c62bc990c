package facts

import (
	"bytes"
	"encoding/json"
	"math/big"
	"slices"
	"strings"

	"github.com/mfhq/mf/storage/catalog"
)

// action is a catalog action compiled for matching.
type action struct {
	idx         int16
	id          string
	role        string // "" for an action that is not a goal
	event       string
	path        string // pattern, "" for any page
	props       map[string]any
	revenueProp string
}

// actionSet holds a project's compiled actions, by event name.
type actionSet struct {
	all      []*action
	byEvent  map[string][]*action
	purchase bool // a purchase goal exists
}

func compileActions(acts []*catalog.Action) *actionSet {
	s := &actionSet{byEvent: map[string][]*action{}}
	sorted := slices.Clone(acts)
	slices.SortFunc(sorted, func(a, b *catalog.Action) int { return strings.Compare(a.ID, b.ID) })
	for _, a := range sorted {
		c := &action{idx: int16(len(s.all)), id: a.ID, role: a.Role, event: a.Match.Event, path: a.Match.Path, props: a.Match.Properties}
		if a.RevenueProperty != nil {
			c.revenueProp = *a.RevenueProperty
		}
		if a.Role == catalog.RolePurchase {
			s.purchase = true
		}
		s.all = append(s.all, c)
		s.byEvent[c.event] = append(s.byEvent[c.event], c)
		if len(s.all) == 1<<15-1 {
			break
		}
	}
	return s
}

// match returns the indices of the actions e matches, in action id order.
func (s *actionSet) match(e *Event, props func() map[string]any) []int16 {
	cands := s.byEvent[e.Name]
	if len(cands) == 0 {
		return nil
	}
	var out []int16
	for _, a := range cands {
		if a.path != "" && !globMatch(a.path, e.Path) {
			continue
		}
		if len(a.props) > 0 {
			p := props()
			ok := true
			for k, want := range a.props {
				if !sameValue(p[k], want) {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
		}
		out = append(out, a.idx)
	}
	return out
}

// globMatch reports whether s matches pattern, where '*' stands for any
// run of characters (the only wildcard).
func globMatch(pattern, s string) bool {
	// Iterative matching with backtracking to the last '*'.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// sameValue compares an event property with a match value: strings by
// bytes, numbers numerically, booleans by value.
func sameValue(got, want any) bool {
	switch w := want.(type) {
	case string:
		g, ok := got.(string)
		return ok && g == w
	case bool:
		g, ok := got.(bool)
		return ok && g == w
	case json.Number:
		g, ok := got.(json.Number)
		if !ok {
			return false
		}
		a, ok1 := new(big.Rat).SetString(string(g))
		b, ok2 := new(big.Rat).SetString(string(w))
		return ok1 && ok2 && a.Cmp(b) == 0
	case float64:
		g, ok := got.(json.Number)
		if !ok {
			return false
		}
		f, err := g.Float64()
		return err == nil && f == w
	}
	return false
}

// parseProps reads a properties object with numbers kept as json.Number.
func parseProps(s string) map[string]any {
	if s == "" {
		return nil
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if d.Decode(&m) != nil {
		return nil
	}
	return m
}

// currencyOf returns an ISO 4217-looking code from a property value
// (three ASCII letters, upper-cased), or "".
func currencyOf(v any) string {
	s, ok := v.(string)
	if !ok || len(s) != 3 {
		return ""
	}
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z':
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		default:
			return ""
		}
	}
	return string(b)
}

// segment is a catalog segment compiled for evaluation.
type segment struct {
	id      string
	ref     string
	filters []catalog.SegmentFilter
}

func compileSegments(segs []*catalog.Segment) []*segment {
	out := make([]*segment, 0, len(segs))
	for _, s := range segs {
		out = append(out, &segment{id: s.ID, ref: s.Ref, filters: s.Filters})
	}
	slices.SortFunc(out, func(a, b *segment) int { return strings.Compare(a.id, b.id) })
	return out
}

// catalogFingerprint summarises actions and segments so that the engine
// can tell whether a new catalog state changes anything for it.
func catalogFingerprint(acts []*catalog.Action, segs []*catalog.Segment) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	sa := slices.Clone(acts)
	slices.SortFunc(sa, func(a, b *catalog.Action) int { return strings.Compare(a.ID, b.ID) })
	for _, a := range sa {
		_ = enc.Encode(a)
	}
	ss := slices.Clone(segs)
	slices.SortFunc(ss, func(a, b *catalog.Segment) int { return strings.Compare(a.ID, b.ID) })
	for _, s := range ss {
		_ = enc.Encode(s)
	}
	return b.String()
}
