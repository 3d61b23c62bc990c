package facts

import (
	"cmp"
	"slices"
	"strings"
)

// eventRows returns the rows of day dn of the events table.
func (e *Engine) eventRows(dn int32) []EventRow {
	d := e.days[dn]
	if d == nil {
		return nil
	}
	return e.rowsOf(d, d.events)
}

// rowsOf returns the rows of events of day d, in no particular order
// (SortEventRows).
func (e *Engine) rowsOf(d *day, events []*event) []EventRow {
	view := d.strs.view()
	rows := make([]EventRow, len(events))
	for i, ev := range events {
		r := &rows[i]
		r.ev, r.strs = ev, view
		if ev.unit != nil {
			r.Unit = ev.unit.ref
		}
		if v := e.visitOf(ev); v != nil {
			r.Visit = v.id
			r.Channel = v.touch.Channel
		}
	}
	return rows
}

func (e *Engine) conversionRows(dn int32) []ConversionRow {
	d := e.days[dn]
	if d == nil {
		return nil
	}
	return e.conversionsOf(d.events)
}

func (e *Engine) conversionsOf(events []*event) []ConversionRow {
	var rows []ConversionRow
	for _, ev := range events {
		if ev.actions == 0 {
			continue
		}
		var unit, owner, vis Ref
		if ev.unit != nil {
			unit = ev.unit.ref
		}
		if ev.part != nil {
			owner = ev.part.ref
		}
		if v := e.visitOf(ev); v != nil {
			vis = v.id
		}
		for id := range strings.SplitSeq(ev.Actions(), ",") {
			role := ""
			if a := e.actByID[id]; a != nil {
				role = a.role
			}
			rows = append(rows, ConversionRow{Time: ev.Time, EventID: ev.ID, Action: id, Role: role,
				Owner: owner, Unit: unit, Visit: vis, HasValue: ev.HasValue, Value: ev.Value,
				Currency: ev.ValueCurrency(), Consented: ev.Client.Consented})
		}
	}
	slices.SortFunc(rows, func(a, b ConversionRow) int {
		return cmp.Or(strings.Compare(a.Action, b.Action), cmp.Compare(a.Time, b.Time), slices.Compare(a.EventID[:], b.EventID[:]))
	})
	return rows
}

func (e *Engine) visitRows(dn int32) []VisitRow {
	vs := e.visitsByDay[dn]
	rows := make([]VisitRow, 0, len(vs))
	for v := range vs {
		rows = append(rows, e.visitRow(v))
	}
	sortVisitRows(rows)
	return rows
}

// personPart returns the part whose person a visit's row credits: that of
// the event its touch was decided from, else of its first event with one;
// nil when none.
func (e *Engine) personPart(v *visit) *node {
	switch {
	case v.touchEv != nil && v.touchEv.part != nil:
		return v.touchEv.part
	case len(v.parts) > 0:
		for _, ev := range v.eventsOf(e) {
			if ev.part != nil {
				return ev.part
			}
		}
	}
	return nil
}

// visitRow returns the row of a live visit.
func (e *Engine) visitRow(v *visit) VisitRow {
	r := VisitRow{ID: v.id, Session: v.session, Start: v.start, End: v.end, Events: v.events,
		Pageviews: v.pageview, Consented: v.consented, Touch: *v.touch, ExitPath: v.exit}
	if v.owner != nil {
		r.Unit = v.owner.ref
	}
	if pp := e.personPart(v); pp != nil {
		r.Person = personOf(pp).ref
	}
	if te := v.touchEv; te != nil {
		r.LandingHost, r.LandingPath, r.Client = te.Host(), te.Path(), te.Client
	}
	return r
}

// personRows computes the rows of every person of bucket b again: only
// the hash of a person's row is kept (bucketIndex), and a whole bucket
// is written only after a failed commit, a change of segments or for a
// replay.
func (e *Engine) personRows(b int) []*PersonRow {
	rows := make([]*PersonRow, 0, len(e.bx.persons[b]))
	all := make([]PersonRow, len(e.bx.persons[b]))
	i := 0
	for ref := range e.bx.persons[b] {
		st := newPersonState(e.computePerson(e.nodes[ref]))
		st.row(&all[i])
		rows = append(rows, &all[i])
		i++
	}
	slices.SortFunc(rows, func(a, b *PersonRow) int { return slices.Compare(a.Ref[:], b.Ref[:]) })
	return rows
}

func (e *Engine) identityRows(b int) []IdentityRow {
	rows := make([]IdentityRow, 0, len(e.bx.identities[b]))
	for _, n := range e.bx.identities[b] {
		if n.kind != KindBrowser || n.claimer == nil {
			continue
		}
		rows = append(rows, IdentityRow{Unit: n.ref, Person: n.claimer.ref, ClaimedAt: n.claimAt, Shared: len(n.signIns) > 1})
	}
	slices.SortFunc(rows, func(a, b IdentityRow) int { return slices.Compare(a.Unit[:], b.Unit[:]) })
	return rows
}

func (e *Engine) memberRows(b int) []MemberRow {
	var rows []MemberRow
	for p, segs := range e.bx.members[b] {
		for _, s := range segs {
			rows = append(rows, MemberRow{Segment: s, Person: p})
		}
	}
	slices.SortFunc(rows, func(a, b MemberRow) int {
		return cmp.Or(strings.Compare(a.Segment, b.Segment), slices.Compare(a.Person[:], b.Person[:]))
	})
	return rows
}

// personChanges returns the rows of the changed persons of bucket b (a
// deletion for a ref that is no longer a person), by ref.
func (e *Engine) personChanges(b int, refs []Ref) []*PersonRow {
	slices.SortFunc(refs, func(a, b Ref) int { return bytesCompare16(&a, &b) })
	rows := make([]PersonRow, len(refs))
	out := make([]*PersonRow, len(refs))
	for i, ref := range refs {
		if p := e.dirtyPeople[ref]; p != nil {
			p.row(&rows[i])
		} else {
			rows[i].Ref, rows[i].Deleted = ref, true
		}
		out[i] = &rows[i]
	}
	return out
}

// identityChanges returns the rows of the browsers of bucket b whose claim
// changed (a deletion for one no longer claimed), by unit.
func (e *Engine) identityChanges(b int, refs []Ref) []IdentityRow {
	slices.SortFunc(refs, func(a, b Ref) int { return bytesCompare16(&a, &b) })
	rows := make([]IdentityRow, 0, len(refs))
	for _, ref := range refs {
		n := e.bx.identities[b][ref]
		if n == nil || n.kind != KindBrowser || n.claimer == nil {
			rows = append(rows, IdentityRow{Unit: ref, Deleted: true})
			continue
		}
		rows = append(rows, IdentityRow{Unit: n.ref, Person: n.claimer.ref, ClaimedAt: n.claimAt, Shared: len(n.signIns) > 1})
	}
	return rows
}

// memberChanges returns the membership rows that changed for the persons
// of bucket b since they were last output: a row for each segment a
// person entered, a deletion for each it left; by segment and person.
func (e *Engine) memberChanges(b int, refs []Ref) []MemberRow {
	var rows []MemberRow
	for _, ref := range refs {
		was, now := e.dirtyMembers[ref], e.bx.members[b][ref]
		for _, s := range now {
			if !slices.Contains(was, s) {
				rows = append(rows, MemberRow{Segment: s, Person: ref})
			}
		}
		for _, s := range was {
			if !slices.Contains(now, s) {
				rows = append(rows, MemberRow{Segment: s, Person: ref, Deleted: true})
			}
		}
	}
	slices.SortFunc(rows, func(a, b MemberRow) int {
		return cmp.Or(strings.Compare(a.Segment, b.Segment), slices.Compare(a.Person[:], b.Person[:]))
	})
	return rows
}
