package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/storage/catalog"
)

// The channels report (GET /projects/{id}/acquisition/channels): visits
// per channel, and the people of the period credited to the channel of
// their first or last touch (docs/reporting-api.md, "Acquisition").

// channelNone is the channel of people without any visit.
const channelNone = "none"

// channelIDs are the listed channels, in order: the nine visit channels,
// then none.
var channelIDs = append(append([]string(nil), Channels...), channelNone)

// channelCounts are the numbers of one channel (or of all).
type channelCounts struct {
	visits, people, newPeople, buyers, customers int
}

func (n channelCounts) conversion() any {
	if n.people == 0 {
		return nil
	}
	return float64(n.customers) / float64(n.people)
}

// acqConsentlessOnly reports whether every source of the project collects
// without consent (a project without sources is not).
func acqConsentlessOnly(st *catalog.State, project string) bool {
	srcs := st.Sources(project)
	for _, s := range srcs {
		if s.Mode != catalog.ModeConsentless {
			return false
		}
	}
	return len(srcs) > 0
}

// channelReport is the computed report.
type channelReport struct {
	byChannel map[string]*channelCounts
	all       channelCounts
	pageviews int64
	consented int64 // pageviews of consented visits
}

// computeChannelsWith counts the visits starting in w that pass filters, and
// the people chosen: without filters everyone active in w, with filters
// the people of the visits kept.
// hasGoal tells whether the project has a purchase goal (adsPurchases).
func computeChannelsWith(ctx context.Context, d *projectData, hasGoal bool, w Window, touch string, filters []Filter) (*channelReport, error) {
	rep := &channelReport{byChannel: map[string]*channelCounts{}}
	for _, ch := range channelIDs {
		rep.byChannel[ch] = &channelCounts{}
	}
	visits, err := d.Visits(ctx, w.From, w.To)
	if err != nil {
		return nil, err
	}
	kept, err := acqKeepVisits(ctx, d, visits, w, filters)
	if err != nil {
		return nil, err
	}
	n := len(d.People)
	chosen := newAcqSet(n)
	for i := range visits {
		if kept != nil && !kept[i] {
			continue
		}
		v := &visits[i]
		ch := v.Channel
		if rep.byChannel[ch] == nil {
			ch = "direct" // a channel this build does not know
		}
		rep.byChannel[ch].visits++
		rep.all.visits++
		rep.pageviews += int64(v.Pageviews)
		if v.Consented {
			rep.consented += int64(v.Pageviews)
		}
		if v.Person >= 0 {
			chosen.set(v.Person)
		}
	}
	lo, hi := w.From.UnixMilli(), w.To.UnixMilli()
	if len(filters) == 0 {
		if err := acqActive(ctx, d, w, chosen); err != nil {
			return nil, err
		}
	}
	purchases, err := adsPurchases(ctx, d, hasGoal, w.From, w.To)
	if err != nil {
		return nil, err
	}
	bought := newAcqSet(n)
	for _, pu := range purchases {
		if pu.person >= 0 && int(pu.person) < n {
			bought.set(pu.person)
		}
	}
	for i := 0; i < n; i++ {
		if !chosen.has(int32(i)) {
			continue
		}
		p := &d.People[i]
		ch := p.FirstTouch.Channel
		if touch == "last" {
			ch = p.LastTouch.Channel
		}
		if ch == "" {
			ch = channelNone
		}
		c := rep.byChannel[ch]
		if c == nil {
			c = rep.byChannel["direct"]
		}
		add := func(c *channelCounts) {
			c.people++
			if p.FirstSeen >= lo && p.FirstSeen < hi {
				c.newPeople++
			}
			if bought.has(int32(i)) {
				c.buyers++
			}
			if p.FirstPurchase > 0 && p.FirstPurchase < hi {
				c.customers++
			}
		}
		add(c)
		add(&rep.all)
	}
	return rep, nil
}

// acqActive adds to set everyone with an event in w: the people of w's
// visits (already in set), of its conversions, those first or last seen
// in it, and, for the rest seen both before and after it, an events scan.
func acqActive(ctx context.Context, d *projectData, w Window, set acqSet) error {
	lo, hi := w.From.UnixMilli(), w.To.UnixMilli()
	convs, err := d.Conversions(ctx, w.From, w.To)
	if err != nil {
		return err
	}
	for i := range convs {
		if p := convs[i].Person; p >= 0 {
			set.set(p)
		}
	}
	unsure := 0
	for i := range d.People {
		p := &d.People[i]
		switch {
		case set.has(int32(i)):
		case (p.FirstSeen >= lo && p.FirstSeen < hi) || (p.LastSeen >= lo && p.LastSeen < hi):
			set.set(int32(i))
		case p.FirstSeen < lo && p.LastSeen >= hi:
			unsure++
		}
	}
	if unsure == 0 {
		return nil
	}
	return d.Events(ctx, w.From, w.To, false, func(e *eventRow) bool {
		if e.Person >= 0 && !set.has(e.Person) {
			set.set(e.Person)
		}
		return true
	})
}

// visit-level filter fields: read from the visit (its touch and client);
// the others are read from each event of the visit.
var acqVisitFields = map[string]bool{
	"channel": true, "utm_source": true, "utm_medium": true, "utm_campaign": true, "utm_term": true,
	"utm_content": true, "referrer_host": true, "country": true, "region": true, "device_type": true,
	"browser": true, "os": true, "locale": true, "collection_mode": true, "click_source": true,
}

// acqKeepVisits applies event filters to the visits of w: a visit is kept
// when its own fields pass the visit-level filters and, with event-level
// filters, one of its events in w passes them. nil keeps every visit.
func acqKeepVisits(ctx context.Context, d *projectData, visits []visitRow, w Window, filters []Filter) ([]bool, error) {
	if len(filters) == 0 {
		return nil, nil
	}
	var visitF, eventF []Filter
	for _, f := range filters {
		if acqVisitFields[f.Field] {
			visitF = append(visitF, f)
		} else {
			eventF = append(eventF, f)
		}
	}
	kept := make([]bool, len(visits))
	index := map[ref]int{}
	for i := range visits {
		ok := true
		for _, f := range visitF {
			if !acqMatch(f, acqVisitValue(&visits[i], f.Field)) {
				ok = false
				break
			}
		}
		kept[i] = ok && len(eventF) == 0
		if ok && len(eventF) > 0 {
			index[visits[i].ID] = i
		}
	}
	if len(eventF) == 0 || len(index) == 0 {
		return kept, nil
	}
	// Events of kept visits may run past w's end.
	end := w.To
	for _, i := range index {
		if t := time.UnixMilli(visits[i].End + 1); t.After(end) {
			end = t
		}
	}
	err := d.Events(ctx, w.From, end, false, func(e *eventRow) bool {
		i, ok := index[e.Visit]
		if !ok || kept[i] {
			return true
		}
		var props map[string]any
		for _, f := range eventF {
			v, isSet := acqEventValue(e, f, &props)
			if !isSet {
				v = ""
			}
			if !acqMatch(f, v) {
				return true
			}
		}
		kept[i] = true
		return true
	})
	return kept, err
}

func acqVisitValue(v *visitRow, field string) string {
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
	case "country":
		return v.Country
	case "region":
		return v.Region
	case "device_type":
		return v.Device
	case "browser":
		return v.Browser
	case "os":
		return v.OS
	case "locale":
		return v.Locale
	case "collection_mode":
		if v.Consented {
			return "full"
		}
		return "consentless"
	case "click_source":
		return v.ClickID
	}
	return ""
}

// acqEventValue reads an event-level field; props caches the decoded
// properties. false: the field is absent.
func acqEventValue(e *eventRow, f Filter, props *map[string]any) (string, bool) {
	switch f.Field {
	case "event_name":
		return e.Name, e.Name != ""
	case "page_path":
		return e.Path, e.Path != ""
	case "page_host":
		h := e.Origin
		if u, err := url.Parse(e.Origin); err == nil && u.Host != "" {
			h = u.Hostname()
		}
		h = strings.TrimPrefix(strings.ToLower(h), "www.")
		return h, h != ""
	case "source_type":
		if e.Server {
			return "first_party_server", true
		}
		return "first_party_web", true
	}
	if f.Property == "" {
		return "", false
	}
	if *props == nil {
		*props = map[string]any{}
		if e.Properties != "" {
			dec := json.NewDecoder(strings.NewReader(e.Properties))
			dec.UseNumber()
			_ = dec.Decode(props)
		}
	}
	v, ok := (*props)[f.Property]
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	default:
		b, _ := json.Marshal(x)
		return string(b), ok
	}
}

// acqMatch applies one filter's operator to a value ("" is not set).
func acqMatch(f Filter, v string) bool {
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
		return acqWildcard(f.Value, v)
	case "set":
		return v != ""
	case "not_set":
		return v == ""
	case "gt", "lt":
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return false
		}
		if f.Op == "gt" {
			return n > f.Number
		}
		return n < f.Number
	}
	return false
}

// acqWildcard matches s against pattern, * matching any run of
// characters and everything else literal.
func acqWildcard(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return s == pattern
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, last) && len(s) >= len(last)
}

// listChannels answers GET /projects/{project_id}/acquisition/channels.
func (r *Reporting) listChannels(c *fiber.Ctx) error {
	vp, err := r.projectFor(c)
	if err != nil {
		return err
	}
	p := vp.p
	touch := "first"
	if v := c.Context().QueryArgs().Peek("touch"); len(v) > 0 {
		touch = string(v)
	}
	if touch != "first" && touch != "last" {
		return badParam("touch", fmt.Sprintf("touch must be first or last, not %q", clipValue(touch)))
	}
	st := r.deps.Catalog.State()
	q, qerr := url.ParseQuery(string(c.Context().QueryArgs().QueryString()))
	if qerr != nil {
		return badParam("", "the query string cannot be read: "+qerr.Error())
	}
	filters, ferr := ParseEventFilters(q, EventFilterOptions{ConsentlessOnly: acqConsentlessOnly(st, p.ID)})
	if ferr != nil {
		return ferr
	}
	ctx := c.UserContext()
	d, err := r.data(ctx, p)
	if err != nil {
		return err
	}
	period, perr := ResolvePeriod(acqPeriodRequest(c), ListPeriods, r.deps.Clock(), p.Location(), RetentionDays(vp.org.Plan), d.firstEventPtr())
	if perr != nil {
		return perr
	}
	rep, err := computeChannelsWith(ctx, d, acqHasPurchaseGoal(st, p.ID), period.Window, touch, filters)
	if err != nil {
		return err
	}
	data := make([]Resource, 0, len(channelIDs))
	for _, ch := range channelIDs {
		n := rep.byChannel[ch]
		data = append(data, Resource{ID: ch, Type: "channels", Attributes: []Attr{
			{"visits", n.visits},
			{"people", n.people},
			{"newPeople", n.newPeople},
			{"buyers", n.buyers},
			{"customers", n.customers},
			{"conversion", n.conversion()},
		}})
	}
	var coverage any
	if rep.pageviews > 0 {
		coverage = float64(rep.consented) / float64(rep.pageviews)
	}
	return sendDocument(c, fiber.StatusOK, Document{Data: data, Meta: map[string]any{
		"period": period.Meta(),
		"touch":  touch,
		"visits": rep.all.visits,
		"people": map[string]any{
			"people": rep.all.people, "newPeople": rep.all.newPeople, "buyers": rep.all.buyers,
			"customers": rep.all.customers, "conversion": rep.all.conversion(),
		},
		"coverage": coverage,
	}})
}
