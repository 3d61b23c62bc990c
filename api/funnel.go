package api

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/storage/catalog"
)

// The funnel report (docs/reporting-api.md, "People and funnels"): the
// steps in order, not necessarily adjacent, each strictly after the
// previous one, the last within the window of the first; someone counts in
// the period their first step fell in. The conversions of the period (and
// of the window after it) are grouped by person (or visit) and each group
// runs through a small state machine.

// funnelDayMs is a day in milliseconds (funnel windows are real days).
const funnelDayMs = int64(24 * time.Hour / time.Millisecond)

// Funnel limits.
const (
	funnelMinSteps = 2
	funnelMaxSteps = 6
)

// funnelWindows are the windows a funnel takes, in days.
var funnelWindows = []int{1, 7, 14, 30}

// funnelQuery is a parsed funnel request.
type funnelQuery struct {
	id     string  // the saved funnel's id, or the step ids joined by commas
	name   *string // the saved funnel's name; nil for ad hoc steps
	steps  []*catalog.Action
	window int
	basis  string
	period Period
}

// parseFunnelQuery reads and checks every parameter of the funnel report.
func parseFunnelQuery(q url.Values, st *catalog.State, p *catalog.Project, plan string, now time.Time) (*funnelQuery, *APIError) {
	fq := &funnelQuery{window: 7, basis: "person"}
	ofProject := func(id string) (*catalog.Action, bool) {
		a, ok := st.Action(id)
		return a, ok && a.Project == p.ID
	}
	if id := q.Get("funnel"); id != "" {
		f, ok := st.Funnel(id)
		if !ok || f.Project != p.ID {
			return nil, unprocessable("funnel", fmt.Sprintf("no saved funnel %q in this project", clipValue(id)))
		}
		for _, param := range []string{"steps[]", "window", "basis"} {
			if _, given := q[param]; given {
				return nil, unprocessable(param, fmt.Sprintf("the saved funnel sets its own steps, window and basis; leave out %s or leave out funnel", param))
			}
		}
		fq.id, fq.name, fq.window, fq.basis = f.ID, &f.Name, f.Window, f.Basis
		if fq.window == 0 {
			fq.window = 7
		}
		if fq.basis == "" {
			fq.basis = "person"
		}
		for _, s := range f.Steps {
			a, ok := ofProject(s)
			if !ok {
				return nil, unprocessable("funnel", fmt.Sprintf("the saved funnel %q names an action that is not in this project", f.ID))
			}
			fq.steps = append(fq.steps, a)
		}
	} else {
		ids := q["steps[]"]
		switch {
		case len(ids) == 0:
			return nil, unprocessable("steps[]", "pass funnel (a saved funnel's id) or steps[] (2 to 6 action or goal ids in order, steps[] repeated once per step)")
		case len(ids) < funnelMinSteps || len(ids) > funnelMaxSteps:
			return nil, unprocessable("steps[]", fmt.Sprintf("a funnel has 2 to 6 steps, not %d; repeat steps[] once per step", len(ids)))
		}
		for i, id := range ids {
			a, ok := ofProject(id)
			if !ok {
				return nil, unprocessable("steps[]", fmt.Sprintf("step %d: %q is not an action or goal of this project", i+1, clipValue(id)))
			}
			fq.steps = append(fq.steps, a)
		}
		fq.id = strings.Join(ids, ",")
		if v, given := q["window"]; given {
			w, err := strconv.Atoi(v[0])
			if err != nil || v[0] != strconv.Itoa(w) || !slices.Contains(funnelWindows, w) {
				return nil, unprocessable("window", fmt.Sprintf("window is 1, 7, 14 or 30 days, not %q", clipValue(v[0])))
			}
			fq.window = w
		}
		if v, given := q["basis"]; given {
			if v[0] != "person" && v[0] != "visit" {
				return nil, unprocessable("basis", fmt.Sprintf("basis is person or visit, not %q", clipValue(v[0])))
			}
			fq.basis = v[0]
		}
	}
	period, aerr := ResolvePeriod(periodRequest(q), ListPeriods, now, p.Location(), catalog.RetentionDays(plan), nil)
	if aerr != nil {
		return nil, aerr
	}
	fq.period = period
	return fq, nil
}

// getFunnel answers GET /projects/{project_id}/funnel.
func (r *Reporting) getFunnel(c *fiber.Ctx) error {
	vp, err := r.projectFor(c)
	if err != nil {
		return err
	}
	st := r.deps.Catalog.State()
	q := queryOf(c)
	fq, aerr := parseFunnelQuery(q, st, vp.p, vp.org.Plan, r.deps.Clock())
	if aerr != nil {
		return aerr
	}
	avail := peopleAvailability(st, vp.p.ID)
	counts := make([]int64, len(fq.steps))
	if avail == availReady {
		d, err := r.data(c.UserContext(), vp.p)
		if err != nil {
			return err
		}
		window := int64(fq.window) * funnelDayMs
		convs, err := d.ConversionRows(c.UserContext(), fq.period.From, fq.period.To.Add(time.Duration(window)*time.Millisecond))
		if err != nil {
			return err
		}
		ids := make([]string, len(fq.steps))
		for i, a := range fq.steps {
			ids[i] = a.ID
		}
		spec := newFunnelSpec(ids, fq.period.From.UnixMilli(), fq.period.To.UnixMilli(), window)
		if fq.basis == "visit" {
			counts = spec.countVisits(convs)
		} else {
			counts = spec.countPeople(len(d.People), convs)
		}
	}
	steps := make([]map[string]any, len(fq.steps))
	for i, a := range fq.steps {
		conv, drop := funnelRates(counts, i)
		steps[i] = map[string]any{"action": a.ID, "name": a.Name, "archived": a.Archived,
			"count": counts[i], "conversion": conv, "dropoff": drop}
	}
	var name any
	if fq.name != nil {
		name = *fq.name
	}
	self := r.baseURL(c) + "/projects/" + vp.p.ID + "/funnel"
	if len(q) > 0 {
		self += "?" + q.Encode()
	}
	return sendDocument(c, fiber.StatusOK, Document{
		Data: Resource{
			ID: fq.id, Type: "funnel-reports", Self: self,
			Attributes: []Attr{
				{"name", name},
				{"window", fq.window},
				{"basis", fq.basis},
				{"steps", steps},
			},
		},
		Meta: map[string]any{"availability": avail, "period": fq.period.Meta()},
	})
}

// funnelRates returns step i's conversion (share of the first step; 1 on
// the first step, 0 when nobody started) and dropoff (share of the
// previous step who did not get this far; nil on the first step, 0 when
// nobody reached the previous step).
func funnelRates(counts []int64, i int) (float64, any) {
	conv := 0.0
	if counts[0] > 0 {
		conv = float64(counts[i]) / float64(counts[0])
	}
	if i == 0 {
		return conv, nil
	}
	drop := 0.0
	if prev := counts[i-1]; prev > 0 {
		drop = float64(prev-counts[i]) / float64(prev)
	}
	return conv, drop
}

// funnelSpec is a funnel to run: the step actions and the period of the
// first step [from, to) and the window (all Unix ms).
type funnelSpec struct {
	steps    []uint8  // the distinct-action index of each step
	ids      []string // the distinct actions
	from, to int64    // the first step falls in [from, to)
	window   int64    // the last step at most window after the first
}

// funnelItem is one conversion of a step action: its time and action.
type funnelItem struct {
	t   int64
	act uint8
}

func newFunnelSpec(ids []string, from, to, window int64) funnelSpec {
	s := funnelSpec{from: from, to: to, window: window}
	for _, id := range ids {
		a, ok := s.act(id)
		if !ok {
			a = uint8(len(s.ids))
			s.ids = append(s.ids, id)
		}
		s.steps = append(s.steps, a)
	}
	return s
}

// act returns the distinct-action index of action id (a scan of at most
// six ids is faster than a map).
func (s funnelSpec) act(id string) (uint8, bool) {
	for i, x := range s.ids {
		if x == id {
			return uint8(i), true
		}
	}
	return 0, false
}

// reach runs the state machine over one person's (or visit's) step
// conversions, sorted by time: for every first step in the period, it
// takes each next step at its earliest conversion strictly after the
// previous step, within the window of the first; it returns the most
// steps any start reached (0: no first step in the period).
func (s funnelSpec) reach(items []funnelItem) int {
	best, n := 0, len(s.steps)
	for i, it := range items {
		if it.act != s.steps[0] || it.t < s.from || it.t >= s.to {
			continue
		}
		k, cur, end := 1, it.t, it.t+s.window
		exhausted := true
		for _, nx := range items[i+1:] {
			if k == n {
				break
			}
			if nx.t > end {
				exhausted = false
				break
			}
			if nx.act == s.steps[k] && nx.t > cur {
				k, cur = k+1, nx.t
			}
		}
		best = max(best, k)
		// A later start takes every step at or after where this one took
		// it; when this one ran out of conversions (not of window), no
		// later start gets further.
		if best == n || (exhausted && k < n) {
			break
		}
	}
	return best
}

// byPerson returns, per person index, how many steps they reached
// (consented conversions of people only). convs are sorted by time.
func (s funnelSpec) byPerson(nPeople int, convs convRows) []uint8 {
	// One pass over the (wide) rows keeps the step conversions of people
	// with a first step in the period, compactly; a counting sort by
	// person then groups them, each person's in time order.
	type sel struct {
		t   int64
		p   int32
		act uint8
	}
	started := newBitset(nPeople)
	kept := make([]sel, 0, convs.Len())
	for _, rows := range convs {
		for i := range rows {
			cv := &rows[i]
			if cv.Person < 0 || !cv.Consented {
				continue
			}
			a, ok := s.act(cv.Action)
			if !ok {
				continue
			}
			if a == s.steps[0] && cv.Time >= s.from && cv.Time < s.to {
				started.add(cv.Person)
			}
			kept = append(kept, sel{t: cv.Time, p: cv.Person, act: a})
		}
	}
	// end[p] counts, then (prefix sums) ends the group of person p-1;
	// scattering moves it to the end of p's group.
	end := make([]int32, nPeople+1)
	n := 0
	for _, k := range kept {
		if started.has(k.p) {
			end[k.p+1]++
			n++
		}
	}
	for i := 1; i <= nPeople; i++ {
		end[i] += end[i-1]
	}
	items := make([]funnelItem, n)
	for _, k := range kept {
		if started.has(k.p) {
			items[end[k.p]] = funnelItem{t: k.t, act: k.act}
			end[k.p]++
		}
	}
	out := make([]uint8, nPeople)
	lo := int32(0)
	for p := 0; p < nPeople; p++ {
		if hi := end[p]; hi > lo {
			out[p] = uint8(s.reach(items[lo:hi]))
			lo = hi
		}
	}
	return out
}

// countPeople counts the people who reached each step.
func (s funnelSpec) countPeople(nPeople int, convs convRows) []int64 {
	counts := make([]int64, len(s.steps))
	for _, k := range s.byPerson(nPeople, convs) {
		for j := 0; j < int(k); j++ {
			counts[j]++
		}
	}
	return counts
}

// countVisits counts the visits that reached each step (consented
// conversions with a visit only).
func (s funnelSpec) countVisits(convs convRows) []int64 {
	index := map[ref]int32{}
	var groups [][]funnelItem
	for _, rows := range convs {
		for i := range rows {
			cv := &rows[i]
			a, ok := s.act(cv.Action)
			if !ok || !cv.Consented || cv.Visit == (ref{}) {
				continue
			}
			g, ok := index[cv.Visit]
			if !ok {
				g = int32(len(groups))
				index[cv.Visit] = g
				groups = append(groups, nil)
			}
			groups[g] = append(groups[g], funnelItem{t: cv.Time, act: a})
		}
	}
	counts := make([]int64, len(s.steps))
	for _, g := range groups {
		for j := 0; j < s.reach(g); j++ {
			counts[j]++
		}
	}
	return counts
}
