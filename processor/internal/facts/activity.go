package facts

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
)

// Who was active on each day, as sets of person numbers.
//
// Every person (a user, or a browser nobody claims) has a number, dense
// and never changed (node.num: given when the node is made, kept in its
// state row). For each day the engine keeps four sets of numbers
// (dayActivity): the persons with an event on the day, those of them
// with a user id, those whose first event is on the day, and those with
// a purchase on it. The reporting API answers "how many people in the
// period" with the size of a union of days, exactly, without reading a
// person (docs/rollups.md, "Activity"). A day's four rows are output
// (Changes.Activity) when one of its sets changed.
//
// The sets follow the persons' computes: a person computed (the dirty
// persons of each compute) adds its number to the days of its parts
// (partDays). A person's days only grow as events come, except when a
// part leaves it (a claim that moved), an event is taken out of a day
// (a replaced duplicate) or the person ends (claimed, erased): then its
// number is looked up in every day and taken out where it no longer
// belongs. A person remembers a sum over the days it was added to
// (node.actSum) and its first day (node.actFirst), so that a compute
// that changed neither touches no set. A restored person learns its sum
// and first day when its parts are opened (Engine.open), before anything
// changes them.

// Activity kinds: the rows of a day.
const (
	ActivityPeople = "people" // persons with an event on the day
	ActivityKnown  = "known"  // of them, users (known persons)
	ActivityNew    = "new"    // persons whose first event is on the day
	ActivityBuyers = "buyers" // persons with a purchase on the day
)

// ActivityKinds are the rows of each day, in order.
var ActivityKinds = [...]string{ActivityPeople, ActivityKnown, ActivityNew, ActivityBuyers}

// ActivityRow is one set of a day: its kind, the day's first moment (in
// the zone the day was cut in: a reader checks it against its own),
// size and members (roaring's portable serialization of 32-bit person
// numbers).
type ActivityRow struct {
	Kind   string
	Start  int64
	Count  uint64
	People []byte
}

// dayActivity are the sets of one day, in ActivityKinds order.
type dayActivity [len(ActivityKinds)]*roaring.Bitmap

func newDayActivity() *dayActivity {
	var a dayActivity
	for i := range a {
		a[i] = roaring.New()
	}
	return &a
}

const (
	actPeople = iota
	actKnown
	actNew
	actBuyers
)

// A person's activity as applied (node.actState).
const (
	actNone    = iota // in no set
	actApplied        // in the sets actSum and actFirst say
	actUnknown        // restored: in the sets, actSum and actFirst unknown
)

// actDay is a day of a person's as applied: day number << 1 | bought.
type actDay = int32

// actHash mixes a day code into the sum a person remembers.
func actHash(c actDay) uint64 {
	x := uint64(uint32(c)) + 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// personDays returns the days of person p's parts (sorted, each with its
// purchase bit). It only reads the engine.
func personDays(p *node) []actDay {
	mem := p.members()
	var out []actDay
	for _, n := range mem {
		for _, nd := range n.days {
			c := nd.num << 1
			if x := nd.pd.x; x != nil && len(x.purchases) > 0 {
				c |= 1
			}
			out = append(out, c)
		}
	}
	if len(mem) > 1 {
		slices.Sort(out)
		// A day of two parts, one with a purchase: keep the one with.
		k := 0
		for _, c := range out {
			if k > 0 && out[k-1]>>1 == c>>1 {
				out[k-1] |= c & 1
				continue
			}
			out[k] = c
			k++
		}
		out = out[:k]
	}
	return out
}

// number gives n a person number if it has none.
func (e *Engine) number(n *node) {
	if n.num == 0 && (n.kind == KindBrowser || n.kind == KindUser) {
		e.nextNum++
		n.num = e.nextNum
		e.stateDirty[n] = true // its row holds the number
	}
}

// dayAct returns day d's sets, making them.
func (e *Engine) dayAct(d int32) *dayActivity {
	a := e.act[d]
	if a == nil {
		a = newDayActivity()
		e.act[d] = a
	}
	return a
}

// actAdd adds number x to set k of day d.
func (e *Engine) actAdd(d int32, k int, x uint32) {
	if e.dayAct(d)[k].CheckedAdd(x) {
		e.actDirty[d] = true
	}
}

// actRemove takes number x out of set k of day d.
func (e *Engine) actRemove(d int32, k int, x uint32) {
	if a := e.act[d]; a != nil && a[k].CheckedRemove(x) {
		e.actDirty[d] = true
	}
}

// applyActivity brings the day sets up to date with person p, computed
// with days (personDays; nil when p is no longer a person).
func (e *Engine) applyActivity(p *node, person bool, days []actDay) {
	shrink := e.actShrink[p]
	if !person {
		if p.actState != actNone {
			e.actForget(p.num, nil)
			p.actState, p.actSum, p.actFirst = actNone, 0, 0
		}
		return
	}
	e.number(p)
	var sum uint64
	for _, c := range days {
		sum += actHash(c)
	}
	first := int32(0)
	if len(days) > 0 {
		first = days[0] >> 1
	}
	if p.actState == actApplied && !shrink && sum == p.actSum && (len(days) == 0 || first == p.actFirst) {
		return
	}
	x := p.num
	if p.actState == actUnknown || shrink {
		e.actForget(x, days)
	}
	known := p.kind == KindUser
	for _, c := range days {
		d := c >> 1
		e.actAdd(d, actPeople, x)
		if known {
			e.actAdd(d, actKnown, x)
		}
		if c&1 != 0 {
			e.actAdd(d, actBuyers, x)
		}
	}
	switch {
	case p.actState == actApplied && p.actFirst != first:
		e.actRemove(p.actFirst, actNew, x)
	case p.actState == actUnknown || shrink:
		// actForget took it out of every day's new set but the first.
	}
	if len(days) > 0 {
		e.actAdd(first, actNew, x)
	}
	p.actState, p.actSum, p.actFirst = actApplied, sum, first
	if len(days) == 0 {
		p.actState = actNone
	}
}

// learnActivity records that the day sets hold person p as its parts'
// days say (a restored person, its parts just opened).
func (e *Engine) learnActivity(p *node) {
	days := personDays(p)
	var sum uint64
	for _, c := range days {
		sum += actHash(c)
	}
	p.actState, p.actSum, p.actFirst = actApplied, sum, 0
	if len(days) == 0 {
		p.actState = actNone
		return
	}
	p.actFirst = days[0] >> 1
}

// actForget takes number x out of every day not in keep (sorted day
// codes; nil: every day), and out of the buyers of the days of keep
// without a purchase and out of the new set of every day but keep's
// first.
func (e *Engine) actForget(x uint32, keep []actDay) {
	e.stats.ActivitySearches++
	for d, a := range e.act {
		i, in := slices.BinarySearchFunc(keep, d, func(c actDay, d int32) int { return cmp.Compare(c>>1, d) })
		for k, set := range a {
			drop := !in
			switch {
			case in && k == actBuyers:
				drop = keep[i]&1 == 0
			case in && k == actNew:
				drop = i != 0
			}
			if drop && set.CheckedRemove(x) {
				e.actDirty[d] = true
			}
		}
	}
}

// activityRows returns the rows of the days whose sets changed (all:
// every day's).
func (e *Engine) activityRows(all bool) map[int32][]ActivityRow {
	days := e.actDirty
	if all || e.actWhole {
		days = make(map[int32]bool, len(e.act))
		for d := range e.act {
			days[d] = true
		}
	}
	out := make(map[int32][]ActivityRow, len(days))
	for d := range days {
		a := e.act[d]
		if a == nil {
			a = newDayActivity()
		}
		rows := make([]ActivityRow, len(a))
		for k, set := range a {
			set.RunOptimize()
			b, err := set.ToBytes()
			if err != nil {
				panic(fmt.Sprintf("facts: cannot encode the %s of day %s: %v", ActivityKinds[k], DayName(d), err))
			}
			rows[k] = ActivityRow{Kind: ActivityKinds[k], Start: e.DayStart(d), Count: set.GetCardinality(), People: b}
		}
		out[d] = rows
	}
	return out
}

// ActivityRows returns the rows of every day's sets.
func (e *Engine) ActivityRows() map[int32][]ActivityRow {
	return e.activityRows(true)
}

// Activity sets one day's set from its row, on a restore (before Finish).
func (rs *Restoring) Activity(day int32, kind string, people []byte) error {
	k := slices.Index(ActivityKinds[:], kind)
	if k < 0 {
		return fmt.Errorf("activity row of %s: unknown kind %q", DayName(day), kind)
	}
	set := roaring.New()
	if _, err := set.ReadFrom(bytes.NewReader(people)); err != nil {
		return fmt.Errorf("activity row %s of %s: %w", kind, DayName(day), err)
	}
	rs.e.dayAct(day)[k] = set
	return nil
}

// CheckActivity compares the day sets with the sets computed from every
// person's days (tests: Config.CheckActivity); parts still encoded are
// decoded aside.
func (e *Engine) CheckActivity() error {
	want := map[int32]*dayActivity{}
	seen := map[uint32]*node{}
	for _, p := range e.nodes {
		if !isPerson(p) {
			continue
		}
		if p.num == 0 {
			return fmt.Errorf("person %x has no number", p.ref[:])
		}
		if o := seen[p.num]; o != nil {
			return fmt.Errorf("persons %x and %x have the same number %d", p.ref[:], o.ref[:], p.num)
		}
		seen[p.num] = p
		var days []actDay
		for _, n := range p.members() {
			part := n
			if n.enc != nil {
				part = &node{ref: n.ref, kind: n.kind}
				d := stateDecoder{b: n.enc}
				d.nodeBody(e, part)
				if d.err != nil {
					return fmt.Errorf("part %x does not decode: %v", n.ref[:], d.err)
				}
			}
			for _, nd := range part.days {
				c := nd.num << 1
				if x := nd.pd.x; x != nil && len(x.purchases) > 0 {
					c |= 1
				}
				days = append(days, c)
			}
		}
		slices.Sort(days)
		for i, c := range days {
			d := c >> 1
			a := want[d]
			if a == nil {
				a = newDayActivity()
				want[d] = a
			}
			a[actPeople].Add(p.num)
			if p.kind == KindUser {
				a[actKnown].Add(p.num)
			}
			if c&1 != 0 {
				a[actBuyers].Add(p.num)
			}
			if i == 0 {
				a[actNew].Add(p.num)
			}
		}
	}
	empty := newDayActivity()
	for d := range merged(want, e.act) {
		w, g := want[d], e.act[d]
		if w == nil {
			w = empty
		}
		if g == nil {
			g = empty
		}
		for k := range w {
			if !w[k].Equals(g[k]) {
				extra := roaring.AndNot(g[k], w[k])
				missing := roaring.AndNot(w[k], g[k])
				return fmt.Errorf("day %s, %s: %d numbers too many (%v), %d missing (%v)", DayName(d), ActivityKinds[k],
					extra.GetCardinality(), head(extra), missing.GetCardinality(), head(missing))
			}
		}
	}
	return nil
}

func merged(a, b map[int32]*dayActivity) map[int32]bool {
	out := make(map[int32]bool, len(a)+len(b))
	for d := range a {
		out[d] = true
	}
	for d := range b {
		out[d] = true
	}
	return out
}

// head returns the first few members of a set.
func head(s *roaring.Bitmap) []uint32 {
	var out []uint32
	it := s.Iterator()
	for it.HasNext() && len(out) < 8 {
		out = append(out, it.Next())
	}
	return out
}

// checkActivity panics when Config.CheckActivity is set and the day sets
// differ from those computed from every person.
func (e *Engine) checkActivity() {
	if !e.cfg.CheckActivity {
		return
	}
	if err := e.CheckActivity(); err != nil {
		panic("facts: CheckActivity: " + err.Error())
	}
}
