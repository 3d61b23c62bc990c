package api

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/storage/catalog"
)

// Goals (GET /projects/{project_id}/goals) and goal reports (GET
// /projects/{project_id}/goals/{goal_id}).

// roleOrder is the order of the Goals screen: purchase, then conversions,
// then intent; within a role by name, then id.
var roleOrder = map[string]int{catalog.RolePurchase: 0, catalog.RoleConversion: 1, catalog.RoleIntent: 2}

// goalsOf returns the project's active goals in the order of the Goals
// screen.
func goalsOf(st *catalog.State, project string) []*catalog.Action {
	var out []*catalog.Action
	for _, a := range st.Actions(project) {
		if _, ok := roleOrder[a.Role]; ok && !a.Archived {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b *catalog.Action) int {
		return cmp.Or(cmp.Compare(roleOrder[a.Role], roleOrder[b.Role]), strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	})
	return out
}

// goalCounts are one goal's numbers over a window, per bucket and in
// total.
type goalCounts struct {
	conversions, people []int
	totalConv           int
	totalPeople         int
	amounts             map[string]int64
}

// goalScan counts the conversions of goal in w per bucket (bounds; nil:
// one bucket).
func (rp *report) goalScan(ctx context.Context, goal string, w Window, bounds []time.Time) (*goalCounts, error) {
	if bounds == nil {
		bounds = []time.Time{w.From, w.To}
	}
	n := len(bounds) - 1
	d := rp.d
	g := &goalCounts{conversions: make([]int, n), people: make([]int, n), amounts: map[string]int64{}}
	total := newBitset(len(d.People))
	var stamp map[int32]int
	if n > 1 {
		stamp = map[int32]int{}
	}
	for b := 0; b < n; b++ {
		err := d.ConversionsOf(ctx, goal, bounds[b], bounds[b+1], func(c *conversionRow) {
			g.conversions[b]++
			g.totalConv++
			if c.HasValue {
				g.amounts[c.Currency] += c.Value
			}
			if c.Person < 0 {
				return
			}
			if total.add(c.Person) {
				g.totalPeople++
			}
			if n == 1 {
				g.people[0] = g.totalPeople
			} else if s, ok := stamp[c.Person]; !ok || s != b+1 {
				stamp[c.Person] = b + 1
				g.people[b]++
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return g, ctx.Err()
}

// rate is people over active people, or conversions over visits per
// visit; nil when the denominator is 0.
func rate(perVisit bool, conversions, people, active, visits int) any {
	if perVisit {
		if visits == 0 {
			return nil
		}
		return float64(conversions) / float64(visits)
	}
	if active == 0 {
		return nil
	}
	return float64(people) / float64(active)
}

func goalMoney(amounts map[string]int64, reporting string) []Money {
	m := make(map[string]float64, len(amounts))
	for c, v := range amounts {
		m[c] = micros(v)
	}
	return MoneyList(m, reporting)
}

// listGoals answers GET /projects/{project_id}/goals: the active goals in
// the order of the Goals screen, no paging; compare refused, filters not
// read.
func (r *Reporting) listGoals(c *fiber.Ctx) error {
	rp, err := r.openReport(c, ListPeriods)
	if err != nil {
		return err
	}
	ctx := c.UserContext()
	a, err := rp.scan(ctx, rp.p.Window, nil, nil)
	if err != nil {
		return err
	}
	active, visits := a.active.count(), a.totalVisits
	perVisit := rp.consentless
	base := r.baseURL(c) + "/projects/" + rp.vp.p.ID + "/goals/"
	data := []Resource{}
	for _, g := range goalsOf(r.deps.Catalog.State(), rp.vp.p.ID) {
		gc, err := rp.goalScan(ctx, g.ID, rp.p.Window, nil)
		if err != nil {
			return err
		}
		var desc, revProp any
		if g.Description != nil {
			desc = *g.Description
		}
		if g.RevenueProperty != nil {
			revProp = *g.RevenueProperty
		}
		data = append(data, Resource{
			ID: g.ID, Type: "goals", Self: base + g.ID,
			Attributes: []Attr{
				{"name", g.Name},
				{"description", desc},
				{"role", g.Role},
				{"revenueProperty", revProp},
				{"conversions", gc.totalConv},
				{"people", gc.totalPeople},
				{"rate", rate(perVisit, gc.totalConv, gc.totalPeople, active, visits)},
				{"revenue", goalMoney(gc.amounts, rp.vp.p.ReportingCurrency)},
			},
		})
	}
	return sendDocument(c, fiber.StatusOK, Document{Data: data, Meta: map[string]any{
		"period": rp.p.Meta(), "active": active, "visits": visits, "perVisit": perVisit, "coverage": a.coverage(),
	}})
}

// getGoalReport answers GET /projects/{project_id}/goals/{goal_id}.
func (r *Reporting) getGoalReport(c *fiber.Ctx) error {
	rp, err := r.openReport(c, ReportPeriods)
	if err != nil {
		return err
	}
	id := c.Params("goal_id")
	st := r.deps.Catalog.State()
	g, ok := st.Action(id)
	if !ok || g.Project != rp.vp.p.ID || g.Role == "" {
		detail := "no goal " + strconvQuote(id) + " in this project"
		if ok && g.Project == rp.vp.p.ID {
			detail = "the action " + strconvQuote(id) + " has no role (purchase, conversion or intent), so it is not a goal"
		}
		return refuse(fiber.StatusNotFound, "goal_not_found", "", detail)
	}
	ctx := c.UserContext()
	p := rp.p
	perVisit := rp.consentless
	bounds := rp.bucketBounds(p.Window)
	a, err := rp.scan(ctx, p.Window, bounds, nil)
	if err != nil {
		return err
	}
	gc, err := rp.goalScan(ctx, g.ID, p.Window, bounds)
	if err != nil {
		return err
	}
	active, visits := a.active.count(), a.totalVisits
	rates := func(a *activity, gc *goalCounts) []any {
		out := make([]any, len(gc.conversions))
		for i := range out {
			out[i] = rate(perVisit, gc.conversions[i], gc.people[i], a.people[i], a.visits[i])
		}
		return out
	}
	var previous any
	var prevBounds []time.Time
	var pa *activity
	var pgc *goalCounts
	if p.Compare && p.Previous != nil {
		prevBounds = rp.bucketBounds(*p.Previous)
		if pa, err = rp.scan(ctx, *p.Previous, prevBounds, nil); err != nil {
			return err
		}
		if pgc, err = rp.goalScan(ctx, g.ID, *p.Previous, prevBounds); err != nil {
			return err
		}
		previous = map[string]any{
			"conversions": pgc.totalConv, "people": pgc.totalPeople,
			"rate": rate(perVisit, pgc.totalConv, pgc.totalPeople, pa.active.count(), pa.totalVisits),
		}
	}
	one := func(key, format string, cur, prev func() []any) map[string]any {
		var pv [][]any
		if prevBounds != nil {
			pv = [][]any{prev()}
		}
		return rp.trend(format, nil, []string{key}, bounds, [][]any{cur()}, prevBounds, pv)
	}
	trend := map[string]any{
		"conversions": one("conversions", "number", func() []any { return intsAny(gc.conversions) }, func() []any { return intsAny(pgc.conversions) }),
		"people":      one("people", "number", func() []any { return intsAny(gc.people) }, func() []any { return intsAny(pgc.people) }),
		"rate":        one("rate", "percent", func() []any { return rates(a, gc) }, func() []any { return rates(pa, pgc) }),
	}
	res := Resource{
		ID: g.ID, Type: "goal-reports", Self: r.baseURL(c) + "/projects/" + rp.vp.p.ID + "/goals/" + g.ID,
		Attributes: []Attr{
			{"name", g.Name},
			{"role", g.Role},
			{"archived", g.Archived},
			{"conversions", gc.totalConv},
			{"people", gc.totalPeople},
			{"active", active},
			{"visits", visits},
			{"perVisit", perVisit},
			{"rate", rate(perVisit, gc.totalConv, gc.totalPeople, active, visits)},
			{"revenue", goalMoney(gc.amounts, rp.vp.p.ReportingCurrency)},
			{"coverage", a.coverage()},
			{"previous", previous},
			{"trend", trend},
		},
	}
	return sendDocument(c, fiber.StatusOK, Document{Data: res, Meta: map[string]any{"period": p.Meta()}})
}
