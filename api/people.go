package api

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/storage/catalog"
)

// The people list and person profiles (docs/reporting-api.md, "People and
// funnels"). A person is a row of the people table; what the list counts
// within the period (visits, goals, actions, purchases, funnels) comes from
// the visits, conversions and, for the rare cases those cannot decide,
// events tables of the same snapshot.

// People list parameters.
var (
	peopleViews = []string{"everyone", "customers", "known", "high-intent"}
	peopleSorts = []string{"last_seen", "first_seen", "value", "visits"}
)

// Availability of the people list and the funnel (meta.availability).
const (
	availReady           = "ready"
	availConsentlessOnly = "consentless_only"
	availNoSources       = "no_sources"
)

// peopleList is the cursor list name of the people list.
const peopleList = "people"

// peopleQuery is a parsed people-list request.
type peopleQuery struct {
	period   Period
	view     string
	sort     string
	all      bool // window=all
	onlyNew  bool // new=1
	segment  *catalog.Segment
	filters  []Filter
	params   Params
	cursor   string
	after    *peoplePos // nil on the first page
	retStart time.Time  // first moment of the retained history
}

// peoplePos is a position in the people list: the sort key and the ref of
// the last person handed out.
type peoplePos struct {
	key int64
	ref ref
}

func (p peoplePos) bytes() []byte {
	b := make([]byte, 8, 24)
	binary.BigEndian.PutUint64(b, uint64(p.key))
	return append(b, p.ref[:]...)
}

// knownInProject is the PersonFilterOptions.Known of project p: goals are
// actions with a role, actions any action, segments its segments.
func knownInProject(st *catalog.State, project string) func(kind, id string) bool {
	return func(kind, id string) bool {
		switch kind {
		case "goal":
			a, ok := st.Action(id)
			return ok && a.Project == project && a.Role != ""
		case "action":
			a, ok := st.Action(id)
			return ok && a.Project == project
		case "segment":
			s, ok := st.Segment(id)
			return ok && s.Project == project
		}
		return false
	}
}

// peopleAvailability says whether a project can have people: no_sources
// without any source, consentless_only when every source collects without
// consent, else ready. Archived and revoked sources count: their data
// stays.
func peopleAvailability(st *catalog.State, project string) string {
	srcs := st.Sources(project)
	if len(srcs) == 0 {
		return availNoSources
	}
	for _, s := range srcs {
		if s.Mode != catalog.ModeConsentless {
			return availReady
		}
	}
	return availConsentlessOnly
}

// parsePeopleQuery reads and checks every parameter of the people list.
// It needs no tables, so every refusal comes before any data is read.
func (r *Reporting) parsePeopleQuery(q url.Values, st *catalog.State, p *catalog.Project, plan string, now time.Time) (*peopleQuery, *APIError) {
	loc := p.Location()
	retention := catalog.RetentionDays(plan)
	period, aerr := ResolvePeriod(periodRequest(q), ListPeriods, now, loc, retention, nil)
	if aerr != nil {
		return nil, aerr
	}
	pq := &peopleQuery{period: period, view: "everyone", sort: "last_seen"}
	pq.retStart = civil(now, loc).addDays(-(retention - 1)).midnight(loc)
	if v := q.Get("view"); v != "" {
		if !slices.Contains(peopleViews, v) {
			return nil, badParam("view", fmt.Sprintf("view must be one of %s, not %q", strings.Join(peopleViews, ", "), clipValue(v)))
		}
		pq.view = v
	}
	if v := q.Get("sort"); v != "" {
		if !slices.Contains(peopleSorts, v) {
			return nil, badParam("sort", fmt.Sprintf("sort must be one of %s (always descending), not %q", strings.Join(peopleSorts, ", "), clipValue(v)))
		}
		pq.sort = v
	}
	switch v := q.Get("window"); v {
	case "":
	case "all":
		pq.all = true
	default:
		return nil, badParam("window", fmt.Sprintf("window takes only all (everyone in the retained history instead of the period), not %q", clipValue(v)))
	}
	switch v := q.Get("new"); v {
	case "", "0":
	case "1":
		pq.onlyNew = true
	default:
		return nil, badParam("new", fmt.Sprintf("new takes 1 (only people first seen in the period), not %q", clipValue(v)))
	}
	if v := q.Get("segment"); v != "" {
		s, ok := st.Segment(v)
		if !ok || s.Project != p.ID {
			return nil, badParam("segment", fmt.Sprintf("no saved segment %q in this project", clipValue(v)))
		}
		pq.segment = s
	}
	filters, aerr := ParsePersonFilters(q, PersonFilterOptions{Known: knownInProject(st, p.ID)})
	if aerr != nil {
		return nil, aerr
	}
	pq.filters = filters
	fs := make([]string, len(filters))
	for i, f := range filters {
		fs[i] = fmt.Sprintf("%d\x01%s\x01%s\x01%s", f.Index, f.Field, f.Op, f.Value)
	}
	seg := ""
	if pq.segment != nil {
		seg = pq.segment.ID
	}
	pq.params = Bind("project", p.ID, "period", period.Preset, "from", q.Get("from"), "to", q.Get("to"),
		"view", pq.view, "sort", pq.sort, "window", fmt.Sprint(pq.all), "new", fmt.Sprint(pq.onlyNew),
		"segment", seg, "filters", strings.Join(fs, "\x02"))
	if cur := q.Get("cursor"); cur != "" {
		pos, ok := r.cursors.Open(peopleList, pq.params, cur)
		if !ok || len(pos) != 24 {
			return nil, unprocessable("cursor", "this cursor was not handed out by the people list with these parameters (a cursor belongs to one sort, view, period and set of filters); follow links.next or pass meta.nextCursor unchanged")
		}
		pq.cursor = cur
		pq.after = &peoplePos{key: int64(binary.BigEndian.Uint64(pos[:8]))}
		copy(pq.after.ref[:], pos[8:])
	}
	return pq, nil
}

// window is the span the list reads: the period, or with window=all the
// whole retained history up to the end of the period.
func (pq *peopleQuery) window(now time.Time) (from, to time.Time) {
	if pq.all {
		loc := pq.period.Location
		return pq.retStart, civil(now, loc).addDays(1).midnight(loc)
	}
	return pq.period.From, pq.period.To
}

// listPeople answers GET /projects/{project_id}/people.
func (r *Reporting) listPeople(c *fiber.Ctx) error {
	vp, err := r.projectFor(c)
	if err != nil {
		return err
	}
	st := r.deps.Catalog.State()
	now := r.deps.Clock()
	q := queryOf(c)
	pq, aerr := r.parsePeopleQuery(q, st, vp.p, vp.org.Plan, now)
	if aerr != nil {
		return aerr
	}
	avail := peopleAvailability(st, vp.p.ID)
	ctx := c.UserContext()
	var page []peopleHit
	var more bool
	var d *projectData
	if avail == availReady {
		if d, err = r.data(ctx, vp.p); err != nil {
			return err
		}
		from, to := pq.window(now)
		sel, err := selectPeople(ctx, d, st, pq, from, to)
		if err != nil {
			return err
		}
		page, more = sel.page, sel.more
	}
	base := r.baseURL(c) + "/projects/" + vp.p.ID + "/people"
	data := make([]Resource, 0, len(page))
	if len(page) > 0 {
		idx := make([]int32, len(page))
		for i, h := range page {
			idx[i] = h.idx
		}
		details, err := d.details(ctx, idx)
		if err != nil {
			return err
		}
		for _, h := range page {
			data = append(data, personListResource(d, h, details[h.idx], base, vp.p))
		}
	}
	self := base
	if len(q) > 0 {
		self += "?" + q.Encode()
	}
	links := &Links{Self: self}
	var next any
	if more {
		last := page[len(page)-1]
		cur := r.cursors.Seal(peopleList, pq.params, peoplePos{key: last.key, ref: d.People[last.idx].Ref}.bytes())
		nq := url.Values{}
		for k, v := range q {
			nq[k] = v
		}
		nq.Set("cursor", cur)
		n := base + "?" + nq.Encode()
		links.Next = &n
		next = cur
	}
	return sendDocument(c, fiber.StatusOK, Document{
		Data: data,
		Meta: map[string]any{
			"period": pq.period.Meta(), "allTime": pq.all, "view": pq.view, "sort": pq.sort,
			"availability": avail, "perPage": PageSize, "nextCursor": next,
		},
		Links: links,
	})
}

// peopleHit is a person of a page: its index and sort key, and its visits
// in the window.
type peopleHit struct {
	idx    int32
	key    int64
	visits int64
}

// peopleSelection is the result of selectPeople.
type peopleSelection struct {
	page []peopleHit
	more bool
}

// selectPeople finds the page of people after pq.after: the people active
// in [from, to) (an event in it) who pass the view, new, segment and
// filters, sorted by the key descending and the ref ascending.
func selectPeople(ctx context.Context, d *projectData, st *catalog.State, pq *peopleQuery, from, to time.Time) (peopleSelection, error) {
	n := len(d.People)
	nVisits := make([]int32, n)
	err := d.eachVisit(ctx, from, to, func(_ vpos, v *visitRow) {
		if v.Person >= 0 {
			nVisits[v.Person]++
		}
	})
	if err != nil {
		return peopleSelection{}, err
	}
	active, err := d.ActiveIn(ctx, from, to)
	if err != nil {
		return peopleSelection{}, err
	}
	ev := &personEval{ctx: ctx, d: d, st: st, from: from, to: to, retStart: pq.retStart}
	preds, err := ev.predicates(pq)
	if err != nil {
		return peopleSelection{}, err
	}
	top := make([]peopleHit, 0, PageSize+1)
	less := func(a, b peopleHit) bool { // a comes before b
		if a.key != b.key {
			return a.key > b.key
		}
		return a.idx < b.idx
	}
	for i := range d.People {
		if !active.has(int32(i)) {
			continue
		}
		p := &d.People[i]
		ok := true
		for _, pr := range preds {
			if !pr(int32(i), p) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		h := peopleHit{idx: int32(i), visits: int64(nVisits[i])}
		switch pq.sort {
		case "first_seen":
			h.key = p.FirstSeen
		case "value":
			h.key = p.Value
		case "visits":
			h.key = int64(nVisits[i])
		default:
			h.key = p.LastSeen
		}
		if a := pq.after; a != nil {
			if h.key > a.key || (h.key == a.key && compareRef(p.Ref, a.ref) <= 0) {
				continue
			}
		}
		if len(top) == PageSize+1 && !less(h, top[PageSize]) {
			continue
		}
		at, _ := slices.BinarySearchFunc(top, h, func(e, t peopleHit) int {
			if less(e, t) {
				return -1
			}
			return 1
		})
		if len(top) < PageSize+1 {
			top = append(top, peopleHit{})
		}
		copy(top[at+1:], top[at:len(top)-1])
		top[at] = h
	}
	if len(top) > PageSize {
		return peopleSelection{page: top[:PageSize], more: true}, nil
	}
	return peopleSelection{page: top}, nil
}

// personPred is one condition a listed person must meet.
type personPred func(i int32, p *personRow) bool

// personEval builds the conditions of a people-list request, with the sets
// that need the tables of the window computed once per request.
type personEval struct {
	ctx      context.Context
	d        *projectData
	st       *catalog.State
	from, to time.Time
	retStart time.Time

	purchased bitset
}

func (ev *personEval) predicates(pq *peopleQuery) ([]personPred, error) {
	var out []personPred
	switch pq.view {
	case "customers":
		out = append(out, func(_ int32, p *personRow) bool { return p.Orders > 0 })
	case "known":
		out = append(out, func(_ int32, p *personRow) bool { return p.Known })
	case "high-intent":
		out = append(out, func(_ int32, p *personRow) bool { return p.Intent && p.Orders == 0 })
	}
	if pq.onlyNew {
		lo, hi := ev.from.UnixMilli(), ev.to.UnixMilli()
		out = append(out, func(_ int32, p *personRow) bool { return p.FirstSeen >= lo && p.FirstSeen < hi })
	}
	if pq.segment != nil {
		m := ev.d.Segment(pq.segment.Ref)
		out = append(out, func(i int32, _ *personRow) bool { return m.has(i) })
	}
	for _, f := range pq.filters {
		pr, err := ev.filter(f)
		if err != nil {
			return nil, err
		}
		out = append(out, pr)
	}
	return out, nil
}

// personIsOp applies is / is_not to whether the value matched.
func personIsOp(op string, matched bool) bool {
	if op == "is_not" {
		return !matched
	}
	return matched
}

// personTextOp applies the text operators of campaign and landing filters
// (contains ignores case; the others compare exactly).
func personTextOp(op, want, v string) bool {
	switch op {
	case "is":
		return v == want
	case "is_not":
		return v != want
	case "contains":
		return strings.Contains(strings.ToLower(v), strings.ToLower(want))
	case "starts_with":
		return strings.HasPrefix(v, want)
	case "set":
		return v != ""
	case "not_set":
		return v == ""
	}
	return false
}

func (ev *personEval) filter(f Filter) (personPred, error) {
	op, v := f.Op, f.Value
	switch f.Field {
	case "stage":
		return func(_ int32, p *personRow) bool { return personIsOp(op, p.Stage == v) }, nil
	case "first_channel":
		return func(_ int32, p *personRow) bool { return personIsOp(op, p.FirstTouch.Channel == v) }, nil
	case "last_channel":
		return func(_ int32, p *personRow) bool { return personIsOp(op, p.LastTouch.Channel == v) }, nil
	case "first_campaign":
		return func(_ int32, p *personRow) bool { return personTextOp(op, v, p.FirstTouch.Campaign) }, nil
	case "last_campaign":
		return func(_ int32, p *personRow) bool { return personTextOp(op, v, p.LastTouch.Campaign) }, nil
	case "first_landing":
		return func(_ int32, p *personRow) bool { return personTextOp(op, v, p.FirstTouch.Landing) }, nil
	case "last_landing":
		return func(_ int32, p *personRow) bool { return personTextOp(op, v, p.LastTouch.Landing) }, nil
	case "first_ad_platform":
		return func(_ int32, p *personRow) bool { return personIsOp(op, p.FirstTouch.AdPlatform == v) }, nil
	case "last_ad_platform":
		return func(_ int32, p *personRow) bool { return personIsOp(op, p.LastTouch.AdPlatform == v) }, nil
	case "country":
		return func(_ int32, p *personRow) bool { return personIsOp(op, p.Country == v) }, nil
	case "device":
		return func(_ int32, p *personRow) bool { return personIsOp(op, p.Device == v) }, nil
	case "goal", "action":
		did := newBitset(len(ev.d.People))
		err := ev.d.ConversionsOf(ev.ctx, v, ev.from, ev.to, func(cv *conversionRow) {
			if cv.Person >= 0 {
				did.add(cv.Person)
			}
		})
		if err != nil {
			return nil, err
		}
		return func(i int32, _ *personRow) bool { return personIsOp(op, did.has(i)) }, nil
	case "purchase":
		bought, err := ev.purchases()
		if err != nil {
			return nil, err
		}
		return func(i int32, _ *personRow) bool { return (op == "set") == bought.has(i) }, nil
	case "segment":
		s, ok := ev.st.Segment(v)
		if !ok {
			return func(int32, *personRow) bool { return op == "is_not" }, nil
		}
		m := ev.d.Segment(s.Ref)
		return func(i int32, _ *personRow) bool { return personIsOp(op, m.has(i)) }, nil
	case "funnel":
		fv := f.Funnel
		window := int64(fv.Window) * funnelDayMs
		convs, err := ev.d.ConversionRows(ev.ctx, ev.from, ev.to.Add(time.Duration(window)*time.Millisecond))
		if err != nil {
			return nil, err
		}
		spec := newFunnelSpec(fv.Actions, ev.from.UnixMilli(), ev.to.UnixMilli(), window)
		reach := spec.byPerson(len(ev.d.People), convs)
		step, reached := uint8(fv.Step), fv.Reached
		return func(i int32, _ *personRow) bool {
			if reached {
				return reach[i] >= step
			}
			return reach[i] == step
		}, nil
	case "experiment":
		in, err := ev.experiment(f.Experiment)
		if err != nil {
			return nil, err
		}
		return func(i int32, _ *personRow) bool { return in.has(i) }, nil
	}
	return nil, fmt.Errorf("cannot filter people by %q: not a person filter", f.Field)
}

// purchases returns the people who bought in the window (a consented
// purchase in it).
func (ev *personEval) purchases() (bitset, error) {
	if ev.purchased == nil {
		b, err := ev.d.Buyers(ev.ctx, ev.from, ev.to)
		if err != nil {
			return nil, err
		}
		ev.purchased = b
	}
	return ev.purchased, nil
}

// experiment returns the people whose first exposure to the experiment
// (over the retained history) showed the variant, and with :goal or
// :purchase who reached a goal or bought at or after that exposure.
func (ev *personEval) experiment(x *ExperimentValue) (bitset, error) {
	n := len(ev.d.People)
	type first struct {
		t       int64
		id      ref
		variant string
	}
	firsts := map[int32]first{}
	to := ev.to
	err := ev.d.Events(ev.ctx, ev.retStart, to, false, func(e *eventRow) bool {
		if e.Name != "$exposure" || e.Person < 0 || e.Properties == "" {
			return true
		}
		var props struct {
			Experiment any `json:"$experiment"`
			Variant    any `json:"$variant"`
		}
		if json.Unmarshal([]byte(e.Properties), &props) != nil {
			return true
		}
		k, _ := props.Experiment.(string)
		v, _ := props.Variant.(string)
		if k != x.Key || v == "" {
			return true
		}
		if o, ok := firsts[e.Person]; !ok || e.Time < o.t || (e.Time == o.t && bytes.Compare(e.ID[:], o.id[:]) < 0) {
			firsts[e.Person] = first{e.Time, e.ID, v}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	in := newBitset(n)
	if x.Outcome == "" {
		for p, f := range firsts {
			if f.variant == x.Variant {
				in.add(p)
			}
		}
		return in, nil
	}
	goals := map[string]bool{}
	for _, a := range ev.st.Actions(ev.d.Project.ID) {
		if a.Role != "" {
			goals[a.ID] = true
		}
	}
	err = ev.d.Events(ev.ctx, ev.retStart, to, false, func(e *eventRow) bool {
		if e.Person < 0 {
			return true
		}
		f, ok := firsts[e.Person]
		if !ok || f.variant != x.Variant || e.Time < f.t || in.has(e.Person) {
			return true
		}
		hit := false
		if x.Outcome == "purchase" {
			hit = e.Purchase
		} else {
			for id := range strings.SplitSeq(e.Actions, ",") {
				if goals[id] {
					hit = true
					break
				}
			}
		}
		if hit {
			in.add(e.Person)
		}
		return true
	})
	return in, err
}

// personRefString writes a ref as a UUID.
func personRefString(r ref) string {
	var b [36]byte
	hex.Encode(b[0:8], r[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], r[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], r[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], r[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], r[10:16])
	return string(b[:])
}

// parsePersonRef reads a UUID (either case) into a ref.
func parsePersonRef(s string) (ref, bool) {
	var r ref
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return r, false
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if _, err := hex.Decode(r[:], []byte(h)); err != nil {
		return r, false
	}
	return r, true
}

// firstTouchOf is the firstTouch object; null for a person without any
// visit (only a server has seen them: channel none).
func firstTouchOf(p *personRow) any {
	t := p.FirstTouch
	if t.Channel == "" || t.Channel == "none" {
		return nil
	}
	return map[string]string{"channel": t.Channel, "source": t.Source, "campaign": t.Campaign, "landing": t.Landing}
}

func moneyOf(p *personDetail) []Money {
	if p.Revenue == nil {
		return []Money{}
	}
	return p.Revenue
}

// personListResource is a Person in a list.
func personListResource(d *projectData, h peopleHit, pd *personDetail, base string, pr *catalog.Project) Resource {
	p := &d.People[h.idx]
	loc := pr.Location()
	var name any
	if pd.HasName {
		name = pd.Name
	}
	id := personRefString(p.Ref)
	return Resource{
		ID: id, Type: "people", Self: base + "/" + id,
		Attributes: []Attr{
			{"name", name},
			{"known", p.Known},
			{"stage", p.Stage},
			{"firstSeen", Moment(time.UnixMilli(p.FirstSeen), loc)},
			{"lastSeen", Moment(time.UnixMilli(p.LastSeen), loc)},
			{"visits", h.visits},
			{"value", moneyOf(pd)},
			{"firstTouch", firstTouchOf(p)},
			{"country", p.Country},
			{"device", p.Device},
			{"lastPath", pd.LastPath},
		},
	}
}

// getPerson answers GET /projects/{project_id}/people/{ref}: a person's
// profile. A browser ref answers with the person who claimed it (id is
// then the person's ref).
func (r *Reporting) getPerson(c *fiber.Ctx) error {
	vp, err := r.projectFor(c)
	if err != nil {
		return err
	}
	raw := c.Params("ref")
	retention := catalog.RetentionDays(vp.org.Plan)
	notFound := refuse(fiber.StatusNotFound, "person_not_found", "",
		fmt.Sprintf("nobody has the ref %s in this project within the history the plan keeps (%d days), or they were erased",
			strconvQuote(raw), retention))
	pref, ok := parsePersonRef(raw)
	if !ok {
		return notFound
	}
	d, err := r.data(c.UserContext(), vp.p)
	if err != nil {
		return err
	}
	idx, ok := d.Person(pref)
	if !ok {
		return notFound
	}
	loc := vp.p.Location()
	p := &d.People[idx]
	retStart := civil(r.deps.Clock(), loc).addDays(-(retention - 1)).midnight(loc)
	if p.LastSeen < retStart.UnixMilli() {
		return notFound
	}
	pd, err := d.detail(c.UserContext(), idx)
	if err != nil {
		return err
	}
	res := personProfile(p, pd, r.baseURL(c)+"/projects/"+vp.p.ID+"/people", loc)
	if res.Attributes, err = sparse(c, "people", res.Attributes); err != nil {
		return err
	}
	return sendDocument(c, fiber.StatusOK, Document{Data: res})
}

// personProfile is the Person profile resource.
func personProfile(p *personRow, pd *personDetail, base string, loc *time.Location) Resource {
	var traits []map[string]any
	var name any
	if pd.Traits != "" {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(pd.Traits), &m) == nil {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				traits = append(traits, map[string]any{"key": k, "value": m[k]})
			}
			var s string
			if json.Unmarshal(m["name"], &s) == nil && s != "" {
				name = s
			}
		}
	}
	if traits == nil {
		traits = []map[string]any{}
	}
	orNil := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	var email any
	if pd.HasEmail {
		email = pd.Email
	}
	id := personRefString(p.Ref)
	return Resource{
		ID: id, Type: "people", Self: base + "/" + id,
		Attributes: []Attr{
			{"name", name},
			{"email", email},
			{"userId", orNil(pd.UserID)},
			{"known", p.Known},
			{"stage", p.Stage},
			{"firstSeen", Moment(time.UnixMilli(p.FirstSeen), loc)},
			{"lastSeen", Moment(time.UnixMilli(p.LastSeen), loc)},
			{"visits", pd.Visits},
			{"activeDays", pd.ActiveDays},
			{"events", pd.Events},
			{"pageviews", pd.Pageviews},
			{"orders", p.Orders},
			{"revenue", moneyOf(pd)},
			{"firstTouch", firstTouchOf(p)},
			{"client", map[string]string{"country": p.Country, "region": p.Region, "device": p.Device,
				"browser": p.Browser, "os": p.OS, "locale": p.Locale}},
			{"traits", traits},
			{"browsers", pd.Browsers},
			{"sharedBrowser", pd.SharedBrowser},
		},
	}
}
