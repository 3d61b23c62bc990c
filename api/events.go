package api

import (
	"encoding/binary"
	"encoding/hex"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// The raw event list (GET /projects/{project_id}/events): 1h, 24h or 7d
// ending now, newest first, 50 per page.

// eventKinds maps reserved event names to their kind; every other name is
// custom.
var eventKinds = map[string]string{"$pageview": "pageview", "$autocapture": "click", "$identify": "identify", "$search": "search"}

// uuidString writes a ref as a UUID.
func uuidString(r ref) string {
	var b [36]byte
	hex.Encode(b[0:8], r[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], r[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], r[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], r[8:10])
	b[23] = '-'
	hex.Encode(b[24:], r[10:])
	return string(b[:])
}

// pageHost is the host of scheme://host[:port], lower case, port cut.
func pageHost(origin string) string {
	if origin == "" {
		return ""
	}
	if i := strings.Index(origin, "://"); i >= 0 {
		origin = origin[i+3:]
	}
	if i := strings.IndexAny(origin, "/?#"); i >= 0 {
		origin = origin[:i]
	}
	if i := strings.LastIndexByte(origin, ':'); i >= 0 && !strings.HasSuffix(origin, "]") {
		origin = origin[:i]
	}
	return strings.ToLower(origin)
}

// eventResource is the Event resource of a row.
func (d *projectData) eventResource(e *eventRow, people map[int32]*personDetail) Resource {
	kind, ok := eventKinds[e.Name]
	if !ok {
		kind = "custom"
	}
	sourceType := "first_party_web"
	if e.Server {
		sourceType = "first_party_server"
	}
	var visit, revenue, person any
	if e.Consented && e.Visit != (ref{}) {
		visit = uuidString(e.Visit)
	}
	if e.HasValue {
		revenue = map[string]any{"amount": micros(e.Value), "currency": e.ValueCurrency}
	}
	if e.Consented && e.Person >= 0 {
		p, pd := &d.People[e.Person], people[e.Person]
		var name any
		if pd != nil && pd.HasName {
			name = pd.Name
		}
		person = map[string]any{"ref": uuidString(p.Ref), "name": name, "known": p.Known}
	}
	return Resource{
		ID: uuidString(e.ID), Type: "events",
		Attributes: []Attr{
			{"name", e.Name},
			{"kind", kind},
			{"occurredAt", Moment(time.UnixMilli(e.Time), d.Loc)},
			{"path", e.Path},
			{"host", pageHost(e.Origin)},
			{"title", e.Title},
			{"referrer", hostOf(e.Referrer)},
			{"country", e.Country},
			{"device", e.Device},
			{"browser", e.Browser},
			{"sourceType", sourceType},
			{"consented", e.Consented},
			{"visit", visit},
			{"revenue", revenue},
			{"person", person},
		},
	}
}

// listEvents answers GET /projects/{project_id}/events. The cursor holds
// the (time, id) of the last event handed out; the next page lists the
// events before it in the window as it is at that request.
// visitLookback is how long before a period the visits of its events are
// looked for (docs/reporting-data.md): a visit that started earlier and
// still has events in the period is not found by the event list's visit
// filters.
const visitLookback = 48 * time.Hour

func (r *Reporting) listEvents(c *fiber.Ctx) error {
	rp, err := r.openReport(c, EventPeriods)
	if err != nil {
		return err
	}
	filters, ferr := ParseEventFilters(rp.q, EventFilterOptions{ConsentlessOnly: rp.consentless})
	if ferr != nil {
		return ferr
	}
	const list = "events"
	pairs := []string{"project", rp.vp.p.ID, "period", rp.p.Preset}
	for _, f := range filters {
		i := strconv.Itoa(f.Index)
		pairs = append(pairs, "f"+i+".field", f.Field, "f"+i+".op", f.Op, "f"+i+".value", f.Value)
	}
	params := Bind(pairs...)
	var after *eventRow // the last event handed out
	cur := rp.q.Get("cursor")
	if cur != "" {
		pos, ok := r.cursors.Open(list, params, cur)
		if !ok || len(pos) != 24 {
			return unprocessable("cursor", "this cursor was not handed out by this event list with these parameters; follow links.next or pass meta.nextCursor unchanged")
		}
		after = &eventRow{Time: int64(binary.BigEndian.Uint64(pos[:8]))}
		copy(after.ID[:], pos[8:])
	}
	m := newEventListMatcher(filters)
	var visits *visitFinder // the visits the events may belong to
	if !m.empty() {
		if visits, err = rp.d.visitFinder(c.UserContext(), rp.p.From.Add(-visitLookback), rp.p.To); err != nil {
			return err
		}
	}
	rows := make([]eventRow, 0, PageSize)
	var last eventRow
	more := false
	err = rp.d.Events(c.UserContext(), rp.p.From, rp.p.To, true, func(e *eventRow) bool {
		if after != nil && (e.Time > after.Time || (e.Time == after.Time && compareRef(e.ID, after.ID) >= 0)) {
			return true
		}
		if !m.empty() {
			var v *visitRow
			if k, ok := visits.find(e.Visit, e.Time); ok {
				v = visits.row(k)
			}
			if !m.match(e, v) {
				return true
			}
		}
		if len(rows) == PageSize {
			more = true
			return false
		}
		rows = append(rows, *e)
		last = *e
		return true
	})
	if err != nil {
		return err
	}
	var who []int32 // the people the page shows
	for i := range rows {
		if e := &rows[i]; e.Consented && e.Person >= 0 {
			who = append(who, e.Person)
		}
	}
	people, err := rp.d.details(c.UserContext(), who)
	if err != nil {
		return err
	}
	page := make([]Resource, 0, len(rows))
	for i := range rows {
		page = append(page, rp.d.eventResource(&rows[i], people))
	}
	base := r.baseURL(c) + "/projects/" + rp.vp.p.ID + "/events"
	self := base
	if qs := string(c.Request().URI().QueryString()); qs != "" {
		self += "?" + qs
	}
	links := &Links{Self: self}
	var next any
	if more {
		pos := make([]byte, 24)
		binary.BigEndian.PutUint64(pos[:8], uint64(last.Time))
		copy(pos[8:], last.ID[:])
		nc := r.cursors.Seal(list, params, pos)
		q := url.Values{}
		for k, v := range rp.q {
			if k != "cursor" {
				q[k] = v
			}
		}
		q.Set("cursor", nc)
		n := base + "?" + q.Encode()
		links.Next = &n
		next = nc
	}
	return sendDocument(c, fiber.StatusOK, Document{
		Data:  page,
		Meta:  map[string]any{"period": rp.p.Meta(), "perPage": PageSize, "nextCursor": next},
		Links: links,
	})
}
