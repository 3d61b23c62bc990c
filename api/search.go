package api

import (
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/storage/catalog"
)

// The search summary (GET /projects/{id}/acquisition/search): the imported
// search-console numbers of one engine over the period, with the previous
// window's (docs/reporting-api.md, "Acquisition").

// metricPair is a search metric: the period's value and the previous
// window's (null when outside history).
type metricPair struct {
	Value    any `json:"value"`
	Previous any `json:"previous"`
}

// searchTotals are the sums of one window.
type searchTotals struct {
	clicks, impressions int64
	positionSum         float64 // engine_a: Σ position over impressions
	weeks               int     // engine_b: weeks whose last day is in the window
	weekPositions       float64 // engine_b: Σ of their positions
}

// dayIn reports whether the day d (YYYY-MM-DD, a day of the project's
// calendar) starts inside w.
func dayIn(d string, w Window, loc *time.Location) bool {
	day, ok := parseDate(d)
	if !ok {
		return false
	}
	t := day.midnight(loc)
	return !t.Before(w.From) && t.Before(w.To)
}

// sumSearch adds up the rows of set whose day (for weeks: last day) starts
// inside w.
func sumSearch(set *importSet, w Window, loc *time.Location) searchTotals {
	var t searchTotals
	for _, r := range set.Search {
		if dayIn(r.Day, w, loc) {
			t.clicks += r.Clicks
			t.impressions += r.Impressions
			t.positionSum += r.PositionSum
		}
	}
	for _, r := range set.Weeks {
		if dayIn(r.Week, w, loc) {
			t.weeks++
			t.weekPositions += r.Position
		}
	}
	return t
}

// metrics are the four numbers of a window: ctr is 0 without impressions;
// position is engine_a's impression-weighted average, engine_b's mean of
// its weeks, 0 without impressions or weeks.
func (t searchTotals) metrics(engine string) (clicks, impressions int64, ctr, position float64) {
	if t.impressions > 0 {
		ctr = float64(t.clicks) / float64(t.impressions)
	}
	switch {
	case engine == EngineB && t.weeks > 0:
		position = t.weekPositions / float64(t.weeks)
	case engine == EngineA && t.impressions > 0:
		position = t.positionSum / float64(t.impressions)
	}
	return t.clicks, t.impressions, ctr, position
}

// importSpan returns the first and last day of the rows of set (weeks
// count by their last day), false without rows.
func importSpan(set *importSet) (first, last string, ok bool) {
	see := func(d string) {
		if !ok || d < first {
			first = d
		}
		if !ok || d > last {
			last = d
		}
		ok = true
	}
	for _, r := range set.Search {
		see(r.Day)
	}
	for _, r := range set.Weeks {
		see(r.Week)
	}
	return first, last, ok
}

// getSearch answers GET /projects/{project_id}/acquisition/search.
func (r *Reporting) getSearch(c *fiber.Ctx) error {
	vp, err := r.projectFor(c)
	if err != nil {
		return err
	}
	p := vp.p
	loc := p.Location()
	q := queryOf(c)
	engine := EngineA
	if v := q.Get("engine"); v != "" {
		engine = v
	}
	source, ok := searchSourceOf[engine]
	if !ok {
		return unprocessable("engine", fmt.Sprintf("engine must be engine_a or engine_b, not %q", clipValue(engine)))
	}
	si, err := loadImport(c.UserContext(), r.deps.Bucket, p.ID, source)
	if err != nil {
		return err
	}
	st := r.deps.Catalog.State()
	prov, ready := providerState(st, p, source, si)

	// History for the previous window is what was imported: the previous
	// window is left out when it starts before the engine's first day.
	var first *time.Time
	var through any
	if si.imported() {
		if f, l, ok := importSpan(si.set); ok {
			d, _ := parseDate(f)
			t := d.midnight(loc)
			first = &t
			through = l
		}
	}
	period, perr := ResolvePeriod(periodRequest(q), ReportPeriods, r.deps.Clock(), loc, catalog.RetentionDays(vp.org.Plan), first)
	if perr != nil {
		return perr
	}
	var clicks, impressions, ctr, position any
	if ready {
		cur := sumSearch(si.set, period.Window, loc)
		cc, ci, cr, cp := cur.metrics(engine)
		var pc, pi, pr, pp any
		if period.Previous != nil {
			prev := sumSearch(si.set, *period.Previous, loc)
			a, b, c, d := prev.metrics(engine)
			pc, pi, pr, pp = a, b, c, d
		}
		clicks, impressions = metricPair{cc, pc}, metricPair{ci, pi}
		ctr, position = metricPair{cr, pr}, metricPair{cp, pp}
	} else {
		through = nil
	}
	res := Resource{
		ID: p.ID, Type: "search-summaries",
		Self: r.baseURL(c) + "/projects/" + p.ID + "/acquisition/search?engine=" + engine,
		Attributes: []Attr{
			{"engine", engine},
			{"provider", prov},
			{"through", through},
			{"clicks", clicks},
			{"impressions", impressions},
			{"ctr", ctr},
			{"position", position},
		},
	}
	return sendDocument(c, fiber.StatusOK, Document{Data: res, Meta: map[string]any{"period": period.Meta()}})
}
