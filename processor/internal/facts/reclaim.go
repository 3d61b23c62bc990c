package facts

import "slices"

// Claims that move on cold days.
//
// A browser's claim (the user it counts for) can move while visits of its
// are cold: its first sign-in, or an earlier one that arrives late. The
// rows of those visits that credit the browser's person (touchInfo.self)
// then credit someone else. They are not rebuilt from the events: the
// caller reads them back from the visits table (ReclaimDays names the
// partitions, ReclaimWants the units), gives them to Reclaim, and the
// next Flush writes them again with the new person, as changes of their
// partitions. The days stay cold and no event is read. Each day's summary
// (coldDay.sum) and the visits' touches follow the new rows: a row's hash
// is that of its other fields plus one of its person (VisitRow.hash).
//
// A browser one of whose cold visits has parts whose copies of the touch
// cannot all be found (a session with other browsers' events) has its
// visits read back from the events instead (ClaimDays, ThawUnits).

// ReclaimDays returns the cold days (sorted) whose visits table partitions
// hold rows of visits whose person may change with a claim that moved,
// and makes ready to take them with Reclaim. Call it before ClaimDays,
// which reads back the events of the browsers it leaves.
func (e *Engine) ReclaimDays() []int32 {
	if len(e.claimWant) == 0 {
		return nil
	}
	e.compute()
	want := map[int32]map[Ref]*node{}
	for b := range e.claimWant {
		found := true
		for _, ti := range b.frozen {
			if ti.self && ti.parts > 1 && e.cold[e.DayOf(ti.at)] != nil && e.touchCopies(b, ti.id) != int(ti.parts) {
				found = false
				break
			}
		}
		if !found {
			continue // ClaimDays reads its visits back from the events
		}
		delete(e.claimWant, b)
		for _, ti := range b.frozen {
			d := e.DayOf(ti.at)
			if !ti.self || e.cold[d] == nil {
				continue
			}
			m := want[d]
			if m == nil {
				m = map[Ref]*node{}
				want[d] = m
			}
			m[ti.id] = b
			if e.reclaimUnits == nil {
				e.reclaimUnits = map[Ref]bool{}
			}
			e.reclaimUnits[b.ref] = true
		}
	}
	if len(want) == 0 {
		return nil
	}
	e.reclaimWant = want
	days := make([]int32, 0, len(want))
	for d := range want {
		days = append(days, d)
	}
	slices.Sort(days)
	e.stats.ReclaimDays += int64(len(days))
	return days
}

// touchCopies counts the copies of the touch of cold visit id that b and
// the users who signed in on b keep: every part a visit of browser b can
// have, unless it is a session with other browsers' events.
func (e *Engine) touchCopies(b *node, id Ref) int {
	n := 0
	count := func(p *node) {
		for _, ti := range p.frozen {
			if ti.id == id {
				n++
			}
		}
	}
	count(b)
	for u := range b.signIns {
		count(u)
	}
	return n
}

// ReclaimWants reports whether rows of unit are of use to Reclaim: the
// caller need not decode the others.
func (e *Engine) ReclaimWants(unit Ref) bool { return e.reclaimUnits[unit] }

// Reclaim takes a row of day d's partition of the visits table as stored.
// A row of a visit ReclaimDays named whose person is no longer its part's
// is written again by the next Flush, crediting the new person.
func (e *Engine) Reclaim(d int32, r VisitRow) {
	b := e.reclaimWant[d][r.ID]
	if b == nil {
		return
	}
	delete(e.reclaimWant[d], r.ID)
	if p, ok := e.reclaimed[d][r.ID]; ok {
		r = p // written again already, not stored yet (Restore)
	}
	np := personOf(b).ref
	if r.Person == np {
		return
	}
	delta := personHash(np) - personHash(r.Person)
	if c := e.cold[d]; c != nil {
		c.sum += delta
		e.summaryDirty[d] = true
	}
	fix := func(p *node) {
		for i := range p.frozen {
			if p.frozen[i].id == r.ID {
				p.frozen[i].row += delta
				e.stateDirty[p] = true
			}
		}
	}
	fix(b)
	for u := range b.signIns {
		fix(u)
	}
	r.Person = np
	m := e.reclaimed[d]
	if m == nil {
		m = map[Ref]VisitRow{}
		e.reclaimed[d] = m
	}
	m[r.ID] = r
	e.stats.ReclaimedVisits++
}

// ReclaimDone ends a Reclaim: a visit whose row was not among those given
// (the table misses it, which is a bug: Stats.ReclaimMissing) has its
// browser's visits read back from the events (ClaimDays) instead.
func (e *Engine) ReclaimDone() {
	for _, m := range e.reclaimWant {
		for _, b := range m {
			e.stats.ReclaimMissing++
			e.claimWant[b] = true
		}
	}
	e.reclaimWant, e.reclaimUnits = nil, nil
}

// reclaimRows returns the rows Reclaim has the next Flush write on day d,
// leaving out those of visits written (or deleted) otherwise.
func (e *Engine) reclaimRows(d int32) []VisitRow {
	m := e.reclaimed[d]
	rows := make([]VisitRow, 0, len(m))
	for id, r := range m {
		if _, ok := e.dirtyVisits[id]; !ok {
			rows = append(rows, r)
		}
	}
	return rows
}

// Compute brings the derived state up to date with the events added
// (claims, visits, persons), as Flush does first: a caller deciding what
// to read before a Flush (ReclaimDays) then sees the claims those events
// moved.
func (e *Engine) Compute() { e.compute() }

// ClaimsPending reports whether browsers whose claim may have moved wait
// for their cold visits to be written again (ReclaimDays, ClaimDays).
func (e *Engine) ClaimsPending() bool { return len(e.claimWant) > 0 }

// PendingClaimDays returns the cold days (sorted) holding visits whose
// rows may have to be written again for claims still pending: what a
// state rebuilt from the tables must write again (RewriteVisitDays) if
// they are not done before it.
func (e *Engine) PendingClaimDays() []int32 {
	var days []int32
	for b := range e.claimWant {
		for _, ti := range b.frozen {
			if d := e.DayOf(ti.at); ti.self && e.cold[d] != nil && !slices.Contains(days, d) {
				days = append(days, d)
			}
		}
	}
	slices.Sort(days)
	return days
}

// PendingClaimRows reports whether the days of PendingClaimDays hold at
// most limit cold visits: about what a reclaim of them reads.
func (e *Engine) PendingClaimRows(limit int) bool {
	n := 0
	seen := map[int32]bool{}
	for b := range e.claimWant {
		for _, ti := range b.frozen {
			d := e.DayOf(ti.at)
			if c := e.cold[d]; ti.self && c != nil && !seen[d] {
				seen[d] = true
				if n += max(c.visits, 0); n > limit {
					return false
				}
			}
		}
	}
	return true
}

// RewriteVisitDays has the next Flush write the visits partitions of days
// whole from the events (days not cold nor in memory are left): for a
// state rebuilt from the tables while claims were pending
// (PendingClaimDays), whose rows it cannot tell from the others.
func (e *Engine) RewriteVisitDays(days []int32) {
	for _, d := range days {
		if e.cold[d] != nil || e.days[d] != nil || len(e.visitsByDay[d]) > 0 {
			e.wholeVisitDays[d] = true
			e.dirtyVisitDays[d] = true
		}
	}
}
