package api

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The one event-filter matcher of every endpoint (overview, events,
// channels). In the reports (overview, channels) filters choose people
// through their visits: the fields that say how a visit arrived (channel,
// utm_*, referrer_host, click_source) are read from the event's visit (its
// touch), empty for an event without a visit; every other field is read
// from the event itself. The raw events list (newEventListMatcher) lists
// events, not visits: there a field the event carries itself is read from
// the event, as the list shows it (its referrer host, the UTM tags and
// click id of its own page address), and only channel is the visit's, as
// the specification says.

// visitFilterFields are the event-filter fields read from the visit.
var visitFilterFields = map[string]bool{
	"channel": true, "utm_source": true, "utm_medium": true, "utm_campaign": true, "utm_term": true,
	"utm_content": true, "referrer_host": true, "click_source": true,
}

// eventMatcher holds event filters (all must hold), split into those read
// from the visit and those read from the event.
type eventMatcher struct {
	visit, event []Filter
}

func newEventMatcher(fs []Filter) *eventMatcher {
	m := &eventMatcher{}
	for _, f := range fs {
		if visitFilterFields[f.Field] {
			m.visit = append(m.visit, f)
		} else {
			m.event = append(m.event, f)
		}
	}
	return m
}

// newEventListMatcher is the matcher of the raw events list: only channel
// is read from the visit.
func newEventListMatcher(fs []Filter) *eventMatcher {
	m := &eventMatcher{}
	for _, f := range fs {
		if f.Field == "channel" {
			m.visit = append(m.visit, f)
		} else {
			m.event = append(m.event, f)
		}
	}
	return m
}

// empty reports whether there is no filter.
func (m *eventMatcher) empty() bool { return len(m.visit)+len(m.event) == 0 }

// matchVisit reports whether the visit (nil: an event without one) holds
// the visit-level filters.
func (m *eventMatcher) matchVisit(v *visitRow) bool {
	for i := range m.visit {
		f := &m.visit[i]
		if !testOp(f, visitValue(v, f.Field), nil, false) {
			return false
		}
	}
	return true
}

// match reports whether the event, with its visit (nil when it has none),
// holds every filter.
func (m *eventMatcher) match(e *eventRow, v *visitRow) bool {
	return m.matchVisit(v) && m.matchEvent(e)
}

// visitValue is a visit-level field of v ("" for nil).
func visitValue(v *visitRow, field string) string {
	if v == nil {
		return ""
	}
	switch field {
	case "channel":
		return v.Channel
	case "utm_source":
		if v.Medium == "" && v.Campaign == "" && v.Term == "" && v.Content == "" && v.Source == v.ReferrerHost {
			return "" // the source is the referring host, not a tag
		}
		return v.Source
	case "utm_medium":
		return v.Medium
	case "utm_campaign":
		return v.Campaign
	case "utm_term":
		return v.Term
	case "utm_content":
		return v.Content
	case "referrer_host":
		return strings.TrimPrefix(strings.ToLower(v.ReferrerHost), "www.")
	case "click_source":
		return v.ClickID
	}
	return ""
}

// matchEvent reports whether e holds the event-level filters.
func (m *eventMatcher) matchEvent(e *eventRow) bool {
	var props map[string]any
	for i := range m.event {
		f := &m.event[i]
		var v string
		var raw any
		isProp := false
		switch f.Field {
		case "event_name":
			v = e.Name
		case "page_path":
			v = e.Path
		case "page_host":
			v = hostOf(e.Origin)
		case "referrer_host":
			v = hostOf(e.Referrer)
		case "utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content":
			v = queryParam(e.Query, f.Field)
		case "click_source":
			v = clickSource(e.Query)
		case "region":
			v = e.Region
		case "country":
			v = e.Country
		case "device_type":
			v = e.Device
		case "browser":
			v = e.Browser
		case "os":
			v = e.OS
		case "locale":
			v = e.Locale
		case "source_type":
			v = "first_party_web"
			if e.Server {
				v = "first_party_server"
			}
		case "collection_mode":
			v = "consentless"
			if e.Consented {
				v = "full"
			}
		default:
			isProp = true
			if props == nil {
				props = map[string]any{}
				if e.Properties != "" {
					d := json.NewDecoder(strings.NewReader(e.Properties))
					d.UseNumber()
					_ = d.Decode(&props)
				}
			}
			var ok bool
			raw, ok = props[f.Property]
			if ok {
				switch x := raw.(type) {
				case string:
					v = x
				case json.Number:
					v = x.String()
				case bool:
					v = strconv.FormatBool(x)
				case nil:
				default:
					b, _ := json.Marshal(x)
					v = string(b)
				}
			}
		}
		if !testOp(f, v, raw, isProp) {
			return false
		}
	}
	return true
}

// testOp applies one operator to a field's value (raw is a property's
// decoded JSON value, for gt and lt).
func testOp(f *Filter, v string, raw any, isProp bool) bool {
	switch f.Op {
	case "is":
		return v == f.Value
	case "is_not":
		return v != f.Value
	case "contains":
		return strings.Contains(strings.ToLower(v), strings.ToLower(f.Value))
	case "not_contains":
		return !strings.Contains(strings.ToLower(v), strings.ToLower(f.Value))
	case "starts_with":
		return strings.HasPrefix(v, f.Value)
	case "matches":
		return wildcard(f.Value, v)
	case "set":
		return v != ""
	case "not_set":
		return v == ""
	case "gt", "lt":
		var n float64
		if isProp {
			num, ok := raw.(json.Number)
			if !ok {
				return false
			}
			x, err := num.Float64()
			if err != nil {
				return false
			}
			n = x
		} else {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return false
			}
			n = x
		}
		if f.Op == "gt" {
			return n > f.Number
		}
		return n < f.Number
	}
	return false
}

// wildcard matches s against pattern, where * stands for any run of
// characters and everything else is literal.
func wildcard(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return s == pattern
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

// hostOf is the host of scheme://host[:port]/path, lower case, without
// www. and port.
func hostOf(u string) string {
	if u == "" {
		return ""
	}
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	if i := strings.IndexAny(u, "/?#"); i >= 0 {
		u = u[:i]
	}
	if i := strings.LastIndexByte(u, ':'); i >= 0 && !strings.HasSuffix(u, "]") {
		u = u[:i]
	}
	return strings.TrimPrefix(strings.ToLower(u), "www.")
}

// queryParam is the first value of parameter name in a stored page query
// (docs/records.md, "Stored URLs"), decoded and trimmed; "" when absent.
func queryParam(query, name string) string {
	for part := range strings.SplitSeq(query, "&") {
		k, v, _ := strings.Cut(part, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if k != name {
			continue
		}
		if dv, err := url.QueryUnescape(v); err == nil {
			v = dv
		}
		return strings.TrimSpace(v)
	}
	return ""
}

// clickIDParams are the click id parameters in the order the processor
// gives them precedence when it decides a visit's touch (docs/processor.md).
var clickIDParams = []string{"gclid", "gbraid", "wbraid", "msclkid", "fbclid", "ttclid", "li_fat_id"}

// clickSource is the click id parameter a stored page query carries (the
// first by precedence), as a visit's click_source names it; "" when none.
func clickSource(query string) string {
	if query == "" {
		return ""
	}
	for _, name := range clickIDParams {
		for part := range strings.SplitSeq(query, "&") {
			k, _, _ := strings.Cut(part, "=")
			if k == name {
				return name
			}
		}
	}
	return ""
}

// visitChoice is the visits of a window that event filters chose, by
// position; a nil choice chooses every visit.
type visitChoice struct {
	f    *visitFinder // the window's visits
	keep [][]bool     // per partition of the window, per row
}

// has reports whether the visit at p is chosen.
func (c *visitChoice) has(p vpos) bool {
	if c == nil {
		return true
	}
	i := p.ord() - c.f.a
	return i >= 0 && i < len(c.keep) && c.keep[i][p.row()]
}

// hasID reports whether the visit with this id, holding time t, is
// chosen (false for the zero id when filtering).
func (c *visitChoice) hasID(id ref, t int64) bool {
	if c == nil {
		return true
	}
	p, ok := c.f.find(id, t)
	return ok && c.has(p)
}

// chosenVisits returns the visits starting in w that the filters choose:
// the visit holds the visit-level filters and, when there are event-level
// ones, one of its events (whenever in the visit) holds them. nil without
// filters.
func (d *projectData) chosenVisits(ctx context.Context, w Window, fs []Filter) (*visitChoice, error) {
	if len(fs) == 0 {
		return nil, nil
	}
	m := newEventMatcher(fs)
	f, err := d.visitFinder(ctx, w.From, w.To)
	if err != nil {
		return nil, err
	}
	c := &visitChoice{f: f, keep: make([][]bool, len(f.chunks))}
	for i, ch := range f.chunks {
		c.keep[i] = make([]bool, len(ch.rows))
	}
	if len(m.event) == 0 {
		err := d.eachVisit(ctx, w.From, w.To, func(p vpos, v *visitRow) {
			c.keep[p.ord()-f.a][p.row()] = m.matchVisit(v)
		})
		return c, err
	}
	// Candidates hold the visit-level filters; one of their events must
	// hold the others. Events of a visit may run past the window's end.
	cand := make([][]bool, len(f.chunks))
	for i, ch := range f.chunks {
		cand[i] = make([]bool, len(ch.rows))
	}
	end, n := w.To.UnixMilli(), 0
	err = d.eachVisit(ctx, w.From, w.To, func(p vpos, v *visitRow) {
		if m.matchVisit(v) {
			cand[p.ord()-f.a][p.row()] = true
			end = max(end, v.End+1)
			n++
		}
	})
	if err != nil || n == 0 {
		return c, err
	}
	err = d.Events(ctx, w.From, time.UnixMilli(end), false, func(e *eventRow) bool {
		if e.Visit == (ref{}) {
			return true
		}
		p, ok := f.find(e.Visit, e.Time)
		if !ok {
			return true
		}
		i, k := p.ord()-f.a, p.row()
		if !cand[i][k] || c.keep[i][k] {
			return true
		}
		if m.matchEvent(e) {
			c.keep[i][k] = true
		}
		return true
	})
	return c, err
}
