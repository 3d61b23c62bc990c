package facts

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/bits"
	"slices"

	"github.com/mfhq/mf/storage/records"
)

// Cold days.
//
// A day whose visits have all ended some time ago (the hot window, see
// Freeze) leaves memory: its events, its visits and the cluster entries
// of its units go, and what stays is a coldDay (a few words and a filter
// of its event ids) plus, on each part, the touch of each of its visits
// (node.frozen), which the person's first and last touch need. The parts'
// day activity (partDays) stays: it is the person's history.
//
// An event that needs a cold day (it falls on one, its visits can merge
// with one of the day's, or its id may be one of the day's) has the day
// thawed first: the caller reads the day's rows back from the events table
// and gives them to Thaw, which links them back as they were. The engine
// then goes on as if they had never left, so the facts stay a function of
// the set of events, whatever leaves memory when.

// coldDay is what is kept of a cold day.
type coldDay struct {
	// lo and hi span the visits that have events on the day (epoch ms):
	// thawing the day thaws every cold day they touch too.
	lo, hi int64
	// visits and sum summarise the rows of the visits that start on the
	// day as they were stored: their count and the sum of their hashes.
	visits int
	sum    uint64
	// ids filters the day's event ids (a resend on the next day).
	ids bloom
}

// bloom is a Bloom filter of event ids: 10 bits and 4 probes per id, so
// about 1% of the ids it never saw read as maybe there.
type bloom struct {
	bits []uint64
	mask uint64
}

func newBloom(n int) bloom {
	m := uint64(64)
	for m < uint64(n)*10 {
		m <<= 1
	}
	return bloom{bits: make([]uint64, m/64), mask: m - 1}
}

func (b *bloom) probes(id records.UUID) (uint64, uint64) {
	h1 := binary.LittleEndian.Uint64(id[0:8])*0x9e3779b97f4a7c15 ^ binary.LittleEndian.Uint64(id[8:16])
	h1 ^= h1 >> 29
	h2 := bits.RotateLeft64(h1*0xbf58476d1ce4e5b9, 31) | 1
	return h1, h2
}

func (b *bloom) add(id records.UUID) {
	h, d := b.probes(id)
	for range 4 {
		i := h & b.mask
		b.bits[i/64] |= 1 << (i % 64)
		h += d
	}
}

func (b *bloom) has(id records.UUID) bool {
	if len(b.bits) == 0 {
		return false
	}
	h, d := b.probes(id)
	for range 4 {
		i := h & b.mask
		if b.bits[i/64]&(1<<(i%64)) == 0 {
			return false
		}
		h += d
	}
	return true
}

// coldHas reports whether an id may be one of a cold day's next to dn.
func (e *Engine) coldHas(id records.UUID, dn int32) bool {
	for _, o := range [...]int32{dn - 1, dn + 1} {
		if c := e.cold[o]; c != nil && c.ids.has(id) {
			return true
		}
	}
	return false
}

// ColdDays returns how many days are cold.
func (e *Engine) ColdDays() int { return len(e.cold) }

// ResidentDays returns how many cold days hold residents: events of
// visits that also have events on a day still in memory (Freeze).
func (e *Engine) ResidentDays() int {
	n := 0
	for d := range e.cold {
		if e.days[d] != nil {
			n++
		}
	}
	return n
}

// HotEvents returns how many events are in memory.
func (e *Engine) HotEvents() int {
	n := 0
	for _, d := range e.days {
		n += len(d.events)
	}
	return n
}

// HotDays returns how many days have events in memory.
func (e *Engine) HotDays() int { return len(e.days) }

// pendingCompute reports whether added events, sessions or sign-ins wait
// for a compute.
func (e *Engine) pendingCompute() bool {
	return len(e.dirtyUnits) > 0 || len(e.dirtySessions) > 0 || len(e.dirtyBrowsers) > 0
}

// Freeze lets go of the days whose visits all ended before hot minus the
// visit timeout (epoch ms; the processor passes the time its project's
// newest batch was received minus the hot window) and which hold nothing
// unwritten: they become cold. A visit goes cold with every day it has
// events on, so no visit is ever half in memory. Days before final are
// final: no event can arrive for them (ingest's 30 days), what is kept of
// them goes, and an event for one is counted in Stats.TooLate and dropped.
// final 0 sets nothing final.
func (e *Engine) Freeze(hot, final int64) {
	if final > 0 {
		// Last: the days that go cold now are final at once too, as a
		// fold that froze them first would have them.
		defer e.finalize(e.DayOf(final) - 1)
	}
	limit := e.DayOf(hot) - 1
	// Work not computed yet (a backlog applies batches while a commit is
	// in flight) is left to the next Flush rather than computed now,
	// which would compute twice what it touches: only what it cannot
	// change goes cold. A new event changes visits within the visit
	// timeout of it (the day before its own at most) and a session visit
	// anywhere it spans. A sign-in changes the rows of its browser's
	// visits, but those that go cold are written again from their rows.
	//
	// Only the days such work reaches are held, not every day after the
	// oldest: a backlog always has work pending, and a late event among
	// its batches (a day weeks back) otherwise kept every day since in
	// memory until the backlog ended.
	var blocked map[int32]bool
	if e.pendingCompute() {
		blocked = map[int32]bool{}
		for d := range e.dirtyEventDays {
			// The visits a new event may join end or start within a
			// visit timeout of it: they reach the day before its own, its
			// own or the day after (one more before, for margin). A visit
			// that reaches a day held stays whole (a resident, below).
			for k := d - 2; k <= d+1; k++ {
				blocked[k] = true
			}
		}
		block := func(v *visit) {
			if v.first == nil {
				return // not computed yet: no events on other days
			}
			for d := e.DayOf(v.start); d <= e.DayOf(v.end); d++ {
				blocked[d] = true
			}
		}
		for v := range e.dirtySessions {
			block(v)
		}
		// A browser whose sign-ins changed holds none of its visits: a
		// visit that goes cold before the compute moves its claim has its
		// row written again from the visits table (reclaim marks it,
		// claimMayMove). A backlog always has such browsers, with visits
		// on every recent day, and holding them kept some twenty days of
		// events in memory through a 10M-event build.
	}
	var cand []int32
	for n := range e.days {
		if n <= limit {
			cand = append(cand, n)
		}
	}
	for n := range e.visitsByDay {
		if n <= limit && e.days[n] == nil {
			cand = append(cand, n)
		}
	}
	if len(cand) == 0 {
		return
	}
	slices.Sort(cand)
	timeout := e.cfg.VisitTimeout.Milliseconds()
	ok := make(map[int32]bool, len(cand))
	for _, n := range cand {
		if dd := e.days[n]; e.dirtyEventDays[n] || e.dirtyVisitDays[n] || blocked[n] || dd != nil && len(dd.fresh) > 0 {
			continue
		}
		open := false
		for v := range e.visitsByDay[n] {
			if v.end+timeout >= hot {
				open = true
				break
			}
		}
		if !open {
			ok[n] = true
		}
	}
	frozen := make([]int32, 0, len(ok))
	for _, n := range cand {
		if ok[n] {
			frozen = append(frozen, n)
		}
	}
	if len(frozen) == 0 {
		return
	}
	// A visit goes cold with every day it has events on, or not at all: it
	// goes when each of its days goes (or holds nothing in memory). A visit
	// that also has events on a day that stays is a resident: it and its
	// events stay in memory, on days that otherwise go cold (a day whose
	// visits cross midnight into today goes cold but for them). Without
	// residents the days of steady traffic, chained by visits across each
	// midnight, never went cold at all.
	has := func(d int32) bool { return e.days[d] != nil || e.visitsByDay[d] != nil }
	goes := make(map[*visit]bool)
	visitGoes := func(v *visit) bool {
		g, seen := goes[v]
		if !seen {
			g = true
			for d := e.DayOf(v.start); g && d <= e.DayOf(v.end); d++ {
				g = ok[d] || !has(d)
			}
			goes[v] = g
		}
		return g
	}
	for _, n := range frozen {
		c := e.cold[n]
		if c == nil {
			c = &coldDay{lo: math.MaxInt64, hi: math.MinInt64}
			e.cold[n] = c
		}
		e.summaryDirty[n] = true
		if dd := e.days[n]; dd != nil && len(c.ids.bits) == 0 {
			c.ids = newBloom(len(dd.events)) // residents going later are added
		}
	}
	// Summaries first (rows read the events), then let go.
	type goneVisit struct {
		v   *visit
		row uint64
	}
	var gone []goneVisit
	for _, n := range frozen {
		c := e.cold[n]
		for v := range e.visitsByDay[n] {
			if !visitGoes(v) {
				continue
			}
			r := e.visitRow(v)
			h := r.hash()
			c.visits++
			c.sum += h
			for d := n; d <= e.DayOf(v.end); d++ {
				if cd := e.cold[d]; cd != nil {
					cd.lo, cd.hi = min(cd.lo, v.start), max(cd.hi, v.end)
					e.summaryDirty[d] = true
				}
			}
			gone = append(gone, goneVisit{v, h})
		}
	}
	// The events that go: those of visits that go and those of no visit.
	// What stays of a day is its residents' events (and its arena, until
	// they go too).
	units := map[*node]bool{}
	for _, n := range frozen {
		dd := e.days[n]
		if dd == nil {
			continue
		}
		c := e.cold[n]
		keep := make([]*event, 0)
		for _, ev := range dd.events {
			if v := e.visitOf(ev); v != nil && !visitGoes(v) {
				keep = append(keep, ev)
				continue
			}
			c.ids.add(ev.ID)
			delete(dd.ids, ev.ID)
			if ev.clusterable() {
				units[ev.unit] = true
			}
		}
		if len(keep) == 0 {
			delete(e.days, n)
		} else {
			dd.events = slices.Clip(keep)
		}
	}
	for _, g := range gone {
		v := g.v
		e.freezeVisit(v, g.row)
		n := e.DayOf(v.start)
		if m := e.visitsByDay[n]; m != nil {
			delete(m, v)
			if len(m) == 0 {
				delete(e.visitsByDay, n)
			}
		}
	}
	for u := range units {
		// An event that went is no longer in its day's index.
		u.cluster = slices.DeleteFunc(u.cluster, func(ev *event) bool { return ok[ev.d.num] && ev.d.ids[ev.ID] != ev })
		if len(u.cluster) == 0 {
			u.cluster = nil
		}
		if u.kind == KindVisitor && len(u.cluster) == 0 && len(u.visits) == 0 {
			delete(e.nodes, u.ref)
			e.lastBrowser = nil
		}
	}
}

// finalize drops what is kept of the cold days up to through and makes
// them final.
func (e *Engine) finalize(through int32) {
	if e.final && through <= e.finalThrough {
		return
	}
	for n, c := range e.cold {
		if n <= through {
			if c.lo <= c.hi {
				e.finalSpan[n] = [2]int64{c.lo, c.hi}
			}
			delete(e.cold, n)
			e.summaryDirty[n] = true
		}
	}
	e.final, e.finalThrough = true, through
}

// freezeVisit lets go of a visit whose days go cold: each of its parts
// keeps its touch (node.frozen), with the hash of its row.
func (e *Engine) freezeVisit(v *visit, row uint64) {
	t := v.info()
	t.row = row
	t.parts = uint8(min(len(v.parts), 255))
	pp := e.personPart(v)
	for _, p := range v.parts {
		p.partVisits.remove(v)
		t.self = p == pp
		p.frozen = append(p.frozen, t)
		e.stateDirty[p] = true
	}
	if v.owner != nil {
		v.owner.removeVisit(v)
	}
	if v.session {
		delete(e.sessions, v.id)
	}
	delete(e.visitOut, v.id) // stored; Thaw puts it back
}

// ThawPlan returns the cold days that must be thawed before b is added
// (sorted): the days its events fall on, the days whose visits can merge
// with them, the neighbouring days that may hold their ids, and every
// cold day the visits of those touch.
func (e *Engine) ThawPlan(b *records.Batch) []int32 {
	if len(e.cold) == 0 {
		return nil
	}
	var want map[int32]bool
	timeout := e.cfg.VisitTimeout.Milliseconds()
	for i := range b.Events {
		t, id := b.Events[i].Time, b.Events[i].ID
		dn := e.DayOf(t)
		if e.final && dn <= e.finalThrough {
			continue
		}
		add := func(d int32) {
			if want == nil {
				want = map[int32]bool{}
			}
			want[d] = true
		}
		if e.cold[dn] != nil {
			add(dn)
		}
		for _, o := range [...]int32{dn - 1, dn + 1} {
			if c := e.cold[o]; c != nil && (c.ids.has(id) || e.days[o] != nil && e.days[o].ids[id] != nil) {
				add(o) // a resend of one of its events, cold or a resident
			}
		}
		for d := e.DayOf(t - timeout); d <= e.DayOf(t+timeout); d++ {
			if c := e.cold[d]; c != nil && c.lo < t+timeout && c.hi > t-timeout {
				add(d)
			}
		}
	}
	return e.closure(want)
}

// ThawNeeded returns the cold days to thaw after an Add (sorted): when an
// event replaced the earliest sign-in of a user on a browser, the next one
// may be on a cold day.
func (e *Engine) ThawNeeded() []int32 {
	if len(e.thawWant) == 0 {
		return nil
	}
	want := e.thawWant
	e.thawWant = map[int32]bool{}
	return e.closure(want)
}

// closure adds to want every cold day that a visit with events on a day
// of want touches, and returns the cold days of want, sorted.
func (e *Engine) closure(want map[int32]bool) []int32 {
	if len(want) == 0 {
		return nil
	}
	queue := make([]int32, 0, len(want))
	for d := range want {
		queue = append(queue, d)
	}
	for len(queue) > 0 {
		d := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		c := e.cold[d]
		if c == nil || c.lo > c.hi {
			continue
		}
		for x := e.DayOf(c.lo); x <= e.DayOf(c.hi); x++ {
			if !want[x] && e.cold[x] != nil {
				want[x] = true
				queue = append(queue, x)
			}
		}
	}
	out := make([]int32, 0, len(want))
	for d := range want {
		if e.cold[d] != nil {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// ThawedEvent is a row of the events table of a cold day: the event
// (Derived: the matches it was processed with), its unit, and the visit
// and channel its row shows (Visit zero and Channel "" for none).
type ThawedEvent struct {
	Event
	Unit    Ref
	Visit   Ref
	Channel string
}

// Thawing brings cold days back into memory (Engine.Thaw).
type Thawing struct {
	e      *Engine
	before map[Ref]bool
	cold   map[int32]*coldDay
	stored map[*event]storedRow
	back   map[*node]map[Ref]bool // visits to take out of parts' frozen touches
	// partial are the days of ThawUnits: they stay cold, only the rows
	// of units bring their visits back (as residents).
	partial map[int32]*coldDay
	units   map[Ref]bool
	// residents and residentDays (a restore, Restoring.Finish): of these
	// cold days, the rows of these visits come back as residents.
	residents    map[Ref]bool
	residentDays map[int32]bool
}

// storedRow is what an event's stored row shows of its visit.
type storedRow struct {
	visit   Ref
	channel string
}

// Thaw starts bringing cold days back (as ThawPlan or ThawNeeded named
// them): give it every row of the events table of each day with Add, then
// call Finish. Nothing is written again unless it differs from what is
// stored: a day whose events' visits or channels are not what their rows
// show is rewritten, and a day whose visits' rows differ from those stored
// (a claim that changed while they were cold) has its visits written
// again.
func (e *Engine) Thaw(days []int32) *Thawing {
	e.compute() // so that what the thaw makes dirty can be told apart
	t := &Thawing{e: e, before: make(map[Ref]bool, len(e.dirtyVisits)), cold: make(map[int32]*coldDay, len(days)),
		stored: map[*event]storedRow{}, back: map[*node]map[Ref]bool{}}
	for id := range e.dirtyVisits {
		t.before[id] = true
	}
	for _, d := range days {
		c := e.cold[d]
		if c == nil {
			continue
		}
		// A day with residents (Freeze): their rows are stored as they
		// are now unless the day waits to be written, and the visits of
		// theirs starting on it count in its sums as they are now.
		cc := *c
		if dd := e.days[d]; dd != nil && !dd.dirty {
			t.storeResidents(dd)
		}
		for v := range e.visitsByDay[d] {
			r := e.visitRow(v)
			cc.visits++
			cc.sum += r.hash()
		}
		t.cold[d] = &cc
		delete(e.cold, d)
		e.summaryDirty[d] = true
	}
	return t
}

// ThawForFlush returns the cold days that must be thawed before the next
// Flush (sorted): days holding residents (Freeze) whose partition the
// Flush would write whole, which needs every row of the day in memory
// (a resident's row changed, or a failed commit is written again).
func (e *Engine) ThawForFlush() []int32 {
	e.compute()
	var want map[int32]bool
	add := func(d int32) {
		if want == nil {
			want = map[int32]bool{}
		}
		want[d] = true
	}
	for d := range e.dirtyEventDays {
		if dd := e.days[d]; dd != nil && dd.rewrite && e.cold[d] != nil {
			add(d)
		}
	}
	for d := range e.wholeVisitDays {
		if e.cold[d] != nil {
			add(d)
		}
	}
	return e.closure(want)
}

// ClaimDays returns the cold days that hold visits of browsers whose
// claim may move (sorted): each cold visit's first day through the last
// day any visit of that day reaches. Read them back with ThawUnits.
func (e *Engine) ClaimDays() []int32 {
	if len(e.claimWant) == 0 {
		return nil
	}
	want := map[int32]bool{}
	for b := range e.claimWant {
		for _, ti := range b.frozen {
			d := e.DayOf(ti.at)
			c := e.cold[d]
			if c == nil {
				continue
			}
			last := d
			if c.hi >= c.lo {
				last = max(d, e.DayOf(c.hi))
			}
			for x := d; x <= last; x++ {
				if e.cold[x] != nil {
					want[x] = true
				}
			}
		}
	}
	if len(want) == 0 {
		clear(e.claimWant)
		return nil
	}
	out := make([]int32, 0, len(want))
	for d := range want {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// ThawUnits brings back the visits of the browsers ClaimDays was for, and
// only them, from the days it named: give it every row of the events
// table of those days with Add, then Finish. The days stay cold, the
// visits come back as residents (Freeze), so a sign-in reads back a
// browser's own visits instead of whole days.
func (e *Engine) ThawUnits(days []int32) *Thawing {
	e.compute()
	t := &Thawing{e: e, before: make(map[Ref]bool, len(e.dirtyVisits)), cold: map[int32]*coldDay{},
		stored: map[*event]storedRow{}, back: map[*node]map[Ref]bool{},
		partial: make(map[int32]*coldDay, len(days)), units: make(map[Ref]bool, len(e.claimWant))}
	for id := range e.dirtyVisits {
		t.before[id] = true
	}
	for b := range e.claimWant {
		t.units[b.ref] = true
	}
	clear(e.claimWant)
	for _, d := range days {
		c := e.cold[d]
		if c == nil {
			continue
		}
		t.partial[d] = c
		if dd := e.days[d]; dd != nil && !dd.dirty {
			t.storeResidents(dd)
		}
	}
	return t
}

// Skips reports whether a row of unit is of no use to the thaw (a
// ThawUnits for other units): the caller need not decode it.
func (t *Thawing) Skips(unit Ref) bool { return t.partial != nil && !t.units[unit] }

// Units returns the units a ThawUnits reads back (sorted; nil for a
// Thaw of whole days): the caller may read only their rows.
func (t *Thawing) Units() []Ref {
	if t.partial == nil {
		return nil
	}
	out := make([]Ref, 0, len(t.units))
	for u := range t.units {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b Ref) int { return slices.Compare(a[:], b[:]) })
	return out
}

// storeResidents records the rows of a day's residents as stored (the
// day waits for no write).
func (t *Thawing) storeResidents(dd *day) {
	for _, ev := range dd.events {
		if !ev.out {
			continue
		}
		var r storedRow
		if v := t.e.visitOf(ev); v != nil {
			r = storedRow{visit: v.id, channel: v.touch.Channel}
		}
		t.stored[ev] = r
	}
}

// Add links a stored event back (its strings are copied).
func (t *Thawing) Add(r ThawedEvent) {
	e := t.e
	dn := e.DayOf(r.Time)
	if t.cold[dn] == nil && (t.partial[dn] == nil || !t.units[r.Unit]) && (!t.residentDays[dn] || !t.residents[r.Visit]) {
		return // not a day (or a unit, or a resident) being thawed
	}
	if e.erasedRow(dn, r.Unit) {
		return // an erased person's, on its way out of the table
	}
	d := e.days[dn]
	if d == nil {
		d = &day{num: dn, ids: make(map[records.UUID]*event, e.dayHint)}
		e.days[dn] = d
	}
	if _, dup := d.ids[r.ID]; dup {
		return
	}
	in := r.Event
	in.Derived = true
	ev := d.pack(&in)
	e.insert(d, ev, &in, true)
	t.stored[ev] = storedRow{visit: r.Visit, channel: e.in.get(r.Channel)}
	if ev.part != nil && !r.Visit.IsZero() {
		m := t.back[ev.part]
		if m == nil {
			m = map[Ref]bool{}
			t.back[ev.part] = m
		}
		m[r.Visit] = true
	}
	e.stats.ThawedEvents++
}

// Finish recomputes what the thawed days hold and marks for writing only
// what differs from the stored rows.
func (t *Thawing) Finish() {
	e := t.e
	if t.partial != nil {
		t.finishUnits()
		return
	}
	for p, ids := range t.back {
		p.frozen = slices.DeleteFunc(p.frozen, func(ti touchInfo) bool { return ids[ti.id] })
		if len(p.frozen) == 0 {
			p.frozen = nil
		}
		e.markPart(p)
	}
	e.compute()
	// Events: a day is rewritten only if a row would show another visit.
	for dn := range t.cold {
		d := e.days[dn]
		if d == nil {
			continue
		}
		same := true
		for _, ev := range d.events {
			r, ok := t.stored[ev]
			var id Ref
			ch := ""
			if v := e.visitOf(ev); v != nil {
				id, ch = v.id, v.touch.Channel
			}
			if !ok || id != r.visit || ch != r.channel {
				same = false
				break
			}
		}
		if same && d.dirty {
			d.dirty, d.rewrite = false, false
			delete(e.dirtyEventDays, dn)
		}
		// A day whose erased rows were left out is written whole: the
		// rewrite that takes them out of the table is then not needed
		// (or, under way, made again).
		if e.eraseRows[dn] != nil || e.erasing[dn] != nil {
			d.rewrite = true
			e.markEventDay(d)
			delete(e.eraseRows, dn)
		}
	}
	// Visits: those of a day whose rows sum up as stored are not written
	// again; else the day's partition is written whole.
	for dn, c := range t.cold {
		n, sum := 0, uint64(0)
		for v := range e.visitsByDay[dn] {
			r := e.visitRow(v)
			n++
			sum += r.hash()
		}
		if n != c.visits || sum != c.sum {
			e.wholeVisitDays[dn] = true
			e.dirtyVisitDays[dn] = true
			continue
		}
		for v := range e.visitsByDay[dn] {
			e.visitOut[v.id] = dn
			if !t.before[v.id] {
				if w, ok := e.dirtyVisits[v.id]; ok && w == v {
					delete(e.dirtyVisits, v.id)
				}
			}
		}
	}
	e.stats.ThawedDays += int64(len(t.cold))
}

// hash summarises a visit row (every field the table stores): the hash
// of its other fields plus one of its person, so that a claim that moves
// changes a day's summary (coldDay.sum) by personHash(new) −
// personHash(old) without the rest of the row (Reclaim).
func (r *VisitRow) hash() uint64 { return r.hashOthers() + personHash(r.Person) }

// personHash mixes a person's ref into 64 bits (zero for none).
func personHash(p Ref) uint64 {
	if p.IsZero() {
		return 0
	}
	x := binary.LittleEndian.Uint64(p[0:8]) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(p[8:16]), 29)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// hashOthers is hash without the person.
func (r *VisitRow) hashOthers() uint64 {
	h := fnv.New64a()
	var b [8]byte
	i64 := func(v int64) {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
	str := func(s string) {
		i64(int64(len(s)))
		h.Write([]byte(s))
	}
	bo := func(v bool) {
		if v {
			i64(1)
		} else {
			i64(0)
		}
	}
	h.Write(r.ID[:])
	h.Write(r.Unit[:])
	bo(r.Session)
	i64(r.Start)
	i64(r.End)
	i64(int64(r.Events))
	i64(int64(r.Pageviews))
	bo(r.Consented)
	t := &r.Touch
	for _, s := range [...]string{t.Channel, t.Source, t.Medium, t.Campaign, t.Term, t.Content, t.AdPlatform,
		t.ClickID, t.RefHost, t.RefName, r.LandingHost, r.LandingPath, r.ExitPath} {
		str(s)
	}
	if c := r.Client; c != nil {
		for _, s := range [...]string{c.Source, c.Country, c.Region, c.Device, c.Browser, c.OS, c.Locale} {
			str(s)
		}
		bo(c.Consented)
		bo(c.Server)
	}
	return h.Sum64()
}

// finishUnits ends a ThawUnits: the visits read back leave their days'
// summaries (they are residents now and count again when they go cold),
// a visit whose row is as stored is not written again, and a day where
// something read back does not come out as stored is read back whole
// before the next Flush writes it (ThawForFlush).
func (t *Thawing) finishUnits() {
	e := t.e
	type stored struct {
		row uint64
		day int32
	}
	back := map[Ref]stored{}
	for p, ids := range t.back {
		for _, ti := range p.frozen {
			if ids[ti.id] {
				back[ti.id] = stored{row: ti.row, day: e.DayOf(ti.at)}
			}
		}
		p.frozen = slices.DeleteFunc(p.frozen, func(ti touchInfo) bool { return ids[ti.id] })
		if len(p.frozen) == 0 {
			p.frozen = nil
		}
		e.markPart(p)
	}
	e.compute()
	for id, s := range back {
		if c := t.partial[s.day]; c != nil {
			c.visits--
			c.sum -= s.row
			e.summaryDirty[s.day] = true
		}
		e.visitOut[id] = s.day
	}
	for dn := range t.partial {
		d := e.days[dn]
		if d == nil {
			continue
		}
		same := true
		for _, ev := range d.events {
			r, ok := t.stored[ev]
			var id Ref
			ch := ""
			if v := e.visitOf(ev); v != nil {
				id, ch = v.id, v.touch.Channel
			}
			if !ok || id != r.visit || ch != r.channel {
				same = false
				break
			}
		}
		switch {
		case same && d.dirty:
			d.dirty, d.rewrite = false, false
			delete(e.dirtyEventDays, dn)
		case !same:
			d.rewrite = true
			e.markEventDay(d)
		}
	}
	// A visit read back is written again only if its row changed; one
	// that did not come back as it was stored (another id) has its day
	// written whole, read back whole first.
	found := map[Ref]bool{}
	for dn := range t.partial {
		for v := range e.visitsByDay[dn] {
			s, ok := back[v.id]
			if !ok {
				continue
			}
			found[v.id] = true
			if t.before[v.id] {
				continue
			}
			if r := e.visitRow(v); r.hash() == s.row {
				if w, ok := e.dirtyVisits[v.id]; ok && w == v {
					delete(e.dirtyVisits, v.id)
				}
			}
		}
	}
	for id, s := range back {
		if !found[id] {
			e.wholeVisitDays[s.day] = true
			e.dirtyVisitDays[s.day] = true
		}
	}
	e.stats.ThawedUnitDays += int64(len(t.partial))
}
