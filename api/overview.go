package api

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/storage/catalog"
)

// The overview (GET /projects/{project_id}/overview) and what the goal
// reports share with it: the period of a report, who is active, trends.
// The exact meaning of each number is in docs/reporting-api.md
// ("Numbers").

// report is what a report handler reads: the project, its tables, the
// resolved period.
type report struct {
	vp          visibleProject
	d           *projectData
	p           Period
	q           url.Values
	consentless bool
	// retained is the first moment of the retained history.
	retained time.Time
}

// consentlessOnly reports whether a project collects only without
// consent: it has sources and none of them collects in full mode.
func consentlessOnly(st *catalog.State, project string) bool {
	srcs := st.Sources(project)
	if len(srcs) == 0 {
		return false
	}
	for _, s := range srcs {
		if s.Mode != catalog.ModeConsentless {
			return false
		}
	}
	return true
}

// openReport finds the project, loads its tables and resolves the period.
func (r *Reporting) openReport(c *fiber.Ctx, opts PeriodOptions) (*report, error) {
	vp, err := r.projectFor(c)
	if err != nil {
		return nil, err
	}
	return r.openReportWith(c, opts, vp, queryOf(c), r.data)
}

// openReportWith resolves the period of a report on project vp's tables
// as load reads them.
func (r *Reporting) openReportWith(c *fiber.Ctx, opts PeriodOptions, vp visibleProject, q url.Values,
	load func(context.Context, *catalog.Project) (*projectData, error)) (*report, error) {
	d, err := load(c.UserContext(), vp.p)
	if err != nil {
		return nil, err
	}
	now := r.deps.Clock()
	ret := catalog.RetentionDays(vp.org.Plan)
	p, perr := ResolvePeriod(periodRequest(q), opts, now, d.Loc, ret, d.firstEventPtr())
	if perr != nil {
		return nil, perr
	}
	return &report{
		vp: vp, d: d, p: p, q: q,
		consentless: consentlessOnly(r.deps.Catalog.State(), vp.p.ID),
		retained:    civil(now, d.Loc).addDays(-(ret - 1)).midnight(d.Loc),
	}, nil
}

// before returns the window before w of the same length, cut like the
// period, or nil when it starts before the retained history or the first
// event.
func (rp *report) before(w Window) *Window {
	q := rp.p
	q.Window, q.Clamped = w, false
	return q.previous(rp.retained, rp.d.firstEventPtr())
}

// activity is what one scan of a window finds, per bucket and in total.
type activity struct {
	visits      []int   // visits starting in the bucket
	pageviews   []int64 // their pageviews
	people      []int   // distinct active people in the bucket
	pv, consPV  int64   // pageviews and consented pageviews of the window
	totalVisits int
	active      bitset // people active in the window
}

// bucketBounds returns the bucket starts of w and the end, so that bucket
// i is [b[i], b[i+1]).
func (rp *report) bucketBounds(w Window) []time.Time {
	b := rp.p.Buckets(w)
	return append(b, w.To)
}

// scan counts visits, pageviews and active people of window w per bucket
// (bounds from bucketBounds; nil: one bucket). Without filters (chosen
// nil) the people are the active people of the data layer (an event in
// the bucket); with filters, the people of the chosen visits starting in
// the bucket (filters choose people through their visits).
func (rp *report) scan(ctx context.Context, w Window, bounds []time.Time, chosen *visitChoice) (*activity, error) {
	if bounds == nil {
		bounds = []time.Time{w.From, w.To}
	}
	n := len(bounds) - 1
	d := rp.d
	a := &activity{visits: make([]int, n), pageviews: make([]int64, n)}
	if chosen == nil {
		act, err := d.Active(ctx, bounds)
		if err != nil {
			return nil, err
		}
		a.people, a.active = act.counts, act.total
	} else {
		a.people, a.active = make([]int, n), newBitset(len(d.People))
	}
	var stamp []uint32
	if chosen != nil && n > 1 {
		stamp = make([]uint32, len(d.People))
	}
	for b := 0; b < n; b++ {
		if chosen == nil {
			// Every visit, no people to collect: the day partitions'
			// totals.
			visits, pv, consPV, err := d.visitTotals(ctx, bounds[b], bounds[b+1], nil)
			if err != nil {
				return nil, err
			}
			a.visits[b], a.pageviews[b] = visits, pv
			a.pv, a.consPV = a.pv+pv, a.consPV+consPV
			a.totalVisits += visits
			continue
		}
		err := d.eachVisit(ctx, bounds[b], bounds[b+1], func(k vpos, v *visitRow) {
			if !chosen.has(k) {
				return
			}
			a.visits[b]++
			a.pageviews[b] += int64(v.Pageviews)
			a.pv += int64(v.Pageviews)
			if !v.Consented {
				return
			}
			a.consPV += int64(v.Pageviews)
			if chosen == nil || v.Person < 0 {
				return
			}
			if n == 1 {
				if a.active.add(v.Person) {
					a.people[0]++
				}
			} else if a.active.add(v.Person); stamp[v.Person] != uint32(b+1) {
				stamp[v.Person] = uint32(b + 1)
				a.people[b]++
			}
		})
		if err != nil {
			return nil, err
		}
		a.totalVisits += a.visits[b]
	}
	return a, ctx.Err()
}

// coverage is the share of pageviews collected with consent, nil without
// pageviews.
func (a *activity) coverage() any {
	if a.pv == 0 {
		return nil
	}
	return float64(a.consPV) / float64(a.pv)
}

// revenue sums the purchases of w: all of them, or with chosen visits
// those of the active people and of the chosen visits. It returns the
// amounts and the number of purchases per currency, and the buyers.
func (rp *report) revenue(ctx context.Context, w Window, a *activity, chosen *visitChoice) (map[string]int64, map[string]int, int, error) {
	spans, err := rp.d.purchaseSpans(ctx, w.From, w.To) // sums: any order
	if err != nil {
		return nil, nil, 0, err
	}
	amounts, counts := map[string]int64{}, map[string]int{}
	buyers := newBitset(len(rp.d.People))
	nb := 0
	for _, ps := range spans {
		for i := range ps {
			rp.addPurchase(&ps[i], a, chosen, amounts, counts, buyers, &nb)
		}
	}
	return amounts, counts, nb, nil
}

// addPurchase counts purchase b into the revenue of an overview window.
func (rp *report) addPurchase(b *purchaseRow, a *activity, chosen *visitChoice, amounts map[string]int64, counts map[string]int, buyers bitset, nb *int) {
	in := chosen == nil || (b.Person >= 0 && a.active.has(b.Person)) || (b.Visit != (ref{}) && chosen.hasID(b.Visit, b.Time))
	if !in {
		return
	}
	if b.Person >= 0 && a.active.has(b.Person) && buyers.add(b.Person) {
		*nb++
	}
	if b.HasValue {
		amounts[b.Currency] += b.Value
	}
	counts[b.Currency]++
}

// micros turns micro-units into an amount.
func micros(v int64) float64 { return float64(v) / 1e6 }

// mainCurrency is the currency shown as `value` of revenue: the reporting
// currency when it has revenue, else the currency with the most purchases
// (ties: the larger amount, then the code).
func mainCurrency(amounts map[string]int64, counts map[string]int, reporting string) string {
	if _, ok := counts[reporting]; ok {
		return reporting
	}
	best := ""
	for cur := range counts {
		switch {
		case best == "",
			counts[cur] > counts[best],
			counts[cur] == counts[best] && amounts[cur] > amounts[best],
			counts[cur] == counts[best] && amounts[cur] == amounts[best] && cur < best:
			best = cur
		}
	}
	return best
}

// number is one key number.
func number(key string, value, previous any, format string) map[string]any {
	return map[string]any{"key": key, "value": value, "previous": previous, "format": format}
}

// trendPoint is a point of a trend series.
type trendPoint struct {
	T string `json:"t"`
	V any    `json:"v"`
}

type trendSeries struct {
	Key    string       `json:"key"`
	Points []trendPoint `json:"points"`
}

// trend builds a Trend object; values[k][i] is series k at bucket i.
func (rp *report) trend(format string, currency any, keys []string, bounds []time.Time, values [][]any, prevBounds []time.Time, prevValues [][]any) map[string]any {
	mk := func(bounds []time.Time, values [][]any) []trendSeries {
		out := make([]trendSeries, len(keys))
		for k, key := range keys {
			pts := make([]trendPoint, len(bounds)-1)
			for i := range pts {
				pts[i] = trendPoint{T: Bound(bounds[i], rp.d.Loc), V: values[k][i]}
			}
			out[k] = trendSeries{Key: key, Points: pts}
		}
		return out
	}
	cmp := []trendSeries{}
	if prevBounds != nil {
		cmp = mk(prevBounds, prevValues)
	}
	return map[string]any{
		"interval": rp.p.Interval, "timezone": rp.d.Loc.String(), "format": format, "currency": currency,
		"series": mk(bounds, values), "comparison": cmp,
	}
}

func intsAny[T int | int64](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// countingGoals returns the ids of the project's goals that count as
// conversions on a consentless overview: active goals with the role
// purchase or conversion.
func countingGoals(st *catalog.State, project string) map[string]bool {
	out := map[string]bool{}
	for _, a := range st.Actions(project) {
		if !a.Archived && (a.Role == catalog.RolePurchase || a.Role == catalog.RoleConversion) {
			out[a.ID] = true
		}
	}
	return out
}

// goalConversions counts the conversions of w to the goals (by visit
// when chosen).
func (rp *report) goalConversions(ctx context.Context, w Window, goals map[string]bool, chosen *visitChoice) (int, error) {
	n := 0
	for g, ok := range goals {
		if !ok {
			continue
		}
		err := rp.d.ConversionsOf(ctx, g, w.From, w.To, func(cv *conversionRow) {
			if chosen == nil || (cv.Visit != (ref{}) && chosen.hasID(cv.Visit, cv.Time)) {
				n++
			}
		})
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}

// getOverview answers GET /projects/{project_id}/overview.
func (r *Reporting) getOverview(c *fiber.Ctx) error {
	if done, err := r.overviewFromDays(c); done || err != nil {
		return err
	}
	rp, err := r.openReport(c, ReportPeriods)
	if err != nil {
		return err
	}
	ctx := c.UserContext()
	filters, ferr := ParseEventFilters(rp.q, EventFilterOptions{ConsentlessOnly: rp.consentless})
	if ferr != nil {
		return ferr
	}
	p := rp.p
	choose := func(w Window) (*visitChoice, error) {
		return rp.d.chosenVisits(ctx, w, filters)
	}
	chosen, err := choose(p.Window)
	if err != nil {
		return err
	}
	bounds := rp.bucketBounds(p.Window)
	cur, err := rp.scan(ctx, p.Window, bounds, chosen)
	if err != nil {
		return err
	}
	var prev *activity
	var prevChosen *visitChoice
	var prevBounds []time.Time
	if p.Previous != nil {
		if prevChosen, err = choose(*p.Previous); err != nil {
			return err
		}
		if p.Compare {
			prevBounds = rp.bucketBounds(*p.Previous)
		}
		if prev, err = rp.scan(ctx, *p.Previous, prevBounds, prevChosen); err != nil {
			return err
		}
	}

	if rp.consentless {
		goals := countingGoals(r.deps.Catalog.State(), rp.vp.p.ID)
		conv := func(w Window, a *activity, ch *visitChoice) (any, any, error) {
			if len(goals) == 0 {
				return nil, nil, nil
			}
			n, err := rp.goalConversions(ctx, w, goals, ch)
			if err != nil {
				return nil, nil, err
			}
			var rate any
			if a.totalVisits > 0 {
				rate = float64(n) / float64(a.totalVisits)
			}
			return n, rate, nil
		}
		cv, cr, err := conv(p.Window, cur, chosen)
		if err != nil {
			return err
		}
		var pv, ppv, pcv, pcr any
		if prev != nil {
			pv, ppv = prev.totalVisits, sum(prev.pageviews)
			if pcv, pcr, err = conv(*p.Previous, prev, prevChosen); err != nil {
				return err
			}
		}
		numbers := []map[string]any{
			number("visits", cur.totalVisits, pv, "number"),
			number("pageviews", sum(cur.pageviews), ppv, "number"),
			number("conversions", cv, pcv, "number"),
			number("conversionRate", cr, pcr, "percent"),
		}
		var pvals [][]any
		if prevBounds != nil {
			pvals = [][]any{intsAny(prev.visits), intsAny(prev.pageviews)}
		}
		tr := rp.trend("number", nil, []string{"visits", "pageviews"}, bounds,
			[][]any{intsAny(cur.visits), intsAny(cur.pageviews)}, prevBounds, pvals)
		return r.sendOverview(c, rp, len(filters), cur, numbers, tr)
	}
	keyNumbers := func(w Window, a *activity, ch *visitChoice) (fullNumbers, error) {
		f := fullNumbers{people: a.active.count()}
		var err error
		if f.amounts, f.counts, f.buyers, err = rp.revenue(ctx, w, a, ch); err != nil {
			return f, err
		}
		lo, hi := w.From.UnixMilli(), w.To.UnixMilli()
		var newN int
		f.known, newN = rp.d.knownAndNew(a.active, lo, hi)
		if rp.before(w) != nil {
			f.newPeople = newN
		}
		return f, nil
	}
	now, err := keyNumbers(p.Window, cur, chosen)
	if err != nil {
		return err
	}
	var before *fullNumbers
	if prev != nil {
		b, err := keyNumbers(*p.Previous, prev, prevChosen)
		if err != nil {
			return err
		}
		before = &b
	}
	return r.sendFullOverview(c, rp, len(filters), cur, prev, bounds, prevBounds, now, before)
}

// sendOverview sends an overview: its coverage from cur, its numbers and
// trend.
func (r *Reporting) sendOverview(c *fiber.Ctx, rp *report, filters int, cur *activity, numbers []map[string]any, tr map[string]any) error {
	res := Resource{
		ID: rp.vp.p.ID, Type: "overviews",
		Self: r.baseURL(c) + "/projects/" + rp.vp.p.ID + "/overview",
		Attributes: []Attr{
			{"consentless", rp.consentless},
			{"coverage", cur.coverage()},
			{"numbers", numbers},
			{"trend", tr},
		},
	}
	return sendDocument(c, fiber.StatusOK, Document{Data: res, Meta: map[string]any{"period": rp.p.Meta(), "filters": filters}})
}

func sum[T int | int64](xs []T) T {
	var s T
	for _, x := range xs {
		s += x
	}
	return s
}

// fullNumbers are the key numbers of a window of an overview with
// consent.
type fullNumbers struct {
	people, known, buyers int
	newPeople             any
	amounts               map[string]int64
	counts                map[string]int
}

// sendFullOverview sends the overview of a project that collects with
// consent: the key numbers of the window (now) and of the one before
// (before, nil without one), the trend of visits and people per bucket
// of cur (and of prev over prevBounds with compare).
func (r *Reporting) sendFullOverview(c *fiber.Ctx, rp *report, filters int, cur, prev *activity, bounds, prevBounds []time.Time, now fullNumbers, before *fullNumbers) error {
	reporting := rp.vp.p.ReportingCurrency
	prevOf := func(f func(fullNumbers) any) any {
		if before == nil {
			return nil
		}
		return f(*before)
	}
	var revValue, revCur any
	others := []Money{}
	main := mainCurrency(now.amounts, now.counts, reporting)
	if len(now.counts) > 0 {
		revValue, revCur = micros(now.amounts[main]), main
		for c, v := range now.amounts {
			if c != main {
				others = append(others, Money{Currency: c, Amount: micros(v)})
			}
		}
		for c := range now.counts {
			if _, ok := now.amounts[c]; !ok && c != main {
				others = append(others, Money{Currency: c, Amount: 0})
			}
		}
		slices.SortFunc(others, func(a, b Money) int { return strings.Compare(a.Currency, b.Currency) })
	}
	revPrev := prevOf(func(f fullNumbers) any {
		if len(f.counts) == 0 {
			return nil
		}
		c := main
		if c == "" {
			c = mainCurrency(f.amounts, f.counts, reporting)
		}
		return micros(f.amounts[c])
	})
	rev := number("revenue", revValue, revPrev, "currency")
	rev["currency"], rev["others"] = revCur, others
	numbers := []map[string]any{
		number("people", now.people, prevOf(func(f fullNumbers) any { return f.people }), "number"),
		number("newPeople", now.newPeople, prevOf(func(f fullNumbers) any { return f.newPeople }), "number"),
		number("known", now.known, prevOf(func(f fullNumbers) any { return f.known }), "number"),
		number("buyers", now.buyers, prevOf(func(f fullNumbers) any { return f.buyers }), "number"),
		rev,
	}
	var pvals [][]any
	if prevBounds != nil {
		pvals = [][]any{intsAny(prev.visits), intsAny(prev.people)}
	}
	tr := rp.trend("number", nil, []string{"visits", "people"}, bounds,
		[][]any{intsAny(cur.visits), intsAny(cur.people)}, prevBounds, pvals)
	return r.sendOverview(c, rp, filters, cur, numbers, tr)
}
