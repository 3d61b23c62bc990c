package facts

import (
	"slices"
	"strconv"
	"strings"

	"github.com/mfhq/mf/storage/catalog"
)

// Saved segments: lists of person filters of the people list
// (reporting-api.md, "Person filters"), all of which must hold. For a
// segment there is no period: goal, action, purchase and funnel filters
// read the person's whole retained history.

// segEval evaluates segments for one person, with memoised results for
// filters that name other segments.
type segEval struct {
	e     *Engine
	f     *personFacts
	memo  map[string]bool
	stack map[string]bool
}

// membership returns the refs of the segments the person is in, sorted.
func (e *Engine) membership(f *personFacts) []string {
	if len(e.segs) == 0 {
		return nil
	}
	ev := &segEval{e: e, f: f, memo: map[string]bool{}, stack: map[string]bool{}}
	var out []string
	for _, s := range e.segs {
		if ev.in(s) {
			out = append(out, s.ref)
		}
	}
	slices.Sort(out)
	return out
}

func (ev *segEval) in(s *segment) bool {
	if v, ok := ev.memo[s.id]; ok {
		return v
	}
	if ev.stack[s.id] {
		// A segment that names itself through others: not in it.
		return false
	}
	ev.stack[s.id] = true
	ok := true
	for _, flt := range s.filters {
		if !ev.holds(flt) {
			ok = false
			break
		}
	}
	delete(ev.stack, s.id)
	ev.memo[s.id] = ok
	return ok
}

func (ev *segEval) segmentByID(id string) *segment {
	for _, s := range ev.e.segs {
		if s.id == id {
			return s
		}
	}
	return nil
}

func (ev *segEval) holds(flt catalog.SegmentFilter) bool {
	r := ev.f.row
	switch flt.Field {
	case "stage":
		return isOp(flt, r.Stage == flt.Value)
	case "purchase":
		return (flt.Op == "set") == (r.Orders > 0)
	case "goal":
		a := ev.e.actByID[flt.Value]
		reached := a != nil && a.role != "" && len(ev.f.acts[flt.Value]) > 0
		return isOp(flt, reached)
	case "action":
		return isOp(flt, len(ev.f.acts[flt.Value]) > 0)
	case "segment":
		s := ev.segmentByID(flt.Value)
		return isOp(flt, s != nil && ev.in(s))
	case "funnel":
		return ev.funnel(flt.Value)
	case "experiment":
		return ev.experiment(flt.Value)
	case "first_channel":
		return isOp(flt, r.FirstTouch.Channel == flt.Value)
	case "last_channel":
		return isOp(flt, r.LastTouch.Channel == flt.Value)
	case "first_campaign":
		return textOp(flt, r.FirstTouch.Campaign)
	case "last_campaign":
		return textOp(flt, r.LastTouch.Campaign)
	case "first_landing":
		return textOp(flt, r.FirstTouch.Landing)
	case "last_landing":
		return textOp(flt, r.LastTouch.Landing)
	case "first_ad_platform":
		return isOp(flt, r.FirstTouch.AdPlatform == flt.Value)
	case "last_ad_platform":
		return isOp(flt, r.LastTouch.AdPlatform == flt.Value)
	case "country":
		return isOp(flt, r.Country == flt.Value)
	case "device":
		return isOp(flt, r.Device == flt.Value)
	}
	// An unknown field (a newer catalog): the filter does not hold.
	return false
}

// isOp applies is / is_not to whether the value matched.
func isOp(flt catalog.SegmentFilter, matched bool) bool {
	if flt.Op == "is_not" {
		return !matched
	}
	return flt.Op == "is" && matched
}

// textOp applies the text operators of campaign and landing filters.
func textOp(flt catalog.SegmentFilter, v string) bool {
	switch flt.Op {
	case "is":
		return v == flt.Value
	case "is_not":
		return v != flt.Value
	case "contains":
		return strings.Contains(strings.ToLower(v), strings.ToLower(flt.Value))
	case "starts_with":
		return strings.HasPrefix(v, flt.Value)
	case "set":
		return v != ""
	case "not_set":
		return v == ""
	}
	return false
}

// funnel evaluates `{window}:{step}:{reached|stopped}:{ids}`: the person
// did the actions in order (not necessarily adjacent), each strictly
// after the previous one and all within window days of the first; reached means at
// least step steps, stopped exactly step steps.
func (ev *segEval) funnel(v string) bool {
	parts := strings.SplitN(v, ":", 4)
	if len(parts) != 4 {
		return false
	}
	window, err1 := strconv.Atoi(parts[0])
	step, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	steps := strings.Split(parts[3], ",")
	got := furthest(ev.f.acts, steps, int64(window)*86_400_000)
	switch parts[2] {
	case "reached":
		return got >= step
	case "stopped":
		return got == step
	}
	return false
}

// furthest returns how many steps of a funnel a person got through, from
// the start that gets furthest.
func furthest(acts map[string][]int64, steps []string, window int64) int {
	best := 0
	starts := acts[steps[0]]
	for _, t0 := range starts {
		n, t := 1, t0
		for _, s := range steps[1:] {
			ts := acts[s]
			// The next step must come after the previous one.
			i, _ := slices.BinarySearch(ts, t+1)
			if i >= len(ts) || ts[i]-t0 > window {
				break
			}
			t = ts[i]
			n++
		}
		best = max(best, n)
		if best == len(steps) {
			break
		}
	}
	return best
}

// experiment evaluates `{experiment}:{a|b}[:goal|:purchase]`: the
// person's first exposure to the experiment showed that variant, and, with
// :goal or :purchase, they reached a goal or bought after it.
func (ev *segEval) experiment(v string) bool {
	parts := strings.Split(v, ":")
	if len(parts) < 2 {
		return false
	}
	x, ok := ev.f.exposures[parts[0]]
	if !ok || x.variant != parts[1] {
		return false
	}
	if len(parts) == 2 {
		return true
	}
	after := func(ts []int64) bool {
		i, _ := slices.BinarySearch(ts, x.at.t)
		return i < len(ts)
	}
	switch parts[2] {
	case "goal":
		return after(ev.f.goals)
	case "purchase":
		return after(ev.f.purchases)
	}
	return false
}
