package facts

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

func (e *Engine) clearOutputs() {
	for d := range e.dirtyEventDays {
		if dd := e.days[d]; dd != nil {
			for _, ev := range dd.fresh {
				ev.out = true
			}
			dd.fresh, dd.rewrite, dd.dirty = nil, false, false
		}
	}
	clear(e.dirtyEventDays)
	// The visits' partitions as output: whole days first (every visit of
	// the day is in it, and no other), then the changes.
	if len(e.wholeVisitDays) > 0 {
		for id, d := range e.visitOut {
			if e.wholeVisitDays[d] {
				delete(e.visitOut, id)
			}
		}
		for d := range e.wholeVisitDays {
			for v := range e.visitsByDay[d] {
				e.visitOut[v.id] = d
			}
		}
	}
	for id, v := range e.dirtyVisits {
		if v == nil {
			delete(e.visitOut, id)
			continue
		}
		e.visitOut[id] = e.DayOf(v.start)
	}
	clear(e.dirtyVisits)
	clear(e.dirtyVisitDays)
	clear(e.reclaimed)
	clear(e.dirtyPeople)
	clear(e.dirtyIdents)
	clear(e.dirtyMembers)
	clear(e.wholeVisitDays)
	clear(e.wholePeople)
	clear(e.wholeIdentities)
	clear(e.wholeMembers)
}

// Flush brings the derived state up to date and returns what changed
// since the last Flush (Changes). When writing it fails, give it back
// with Restore so the next Flush includes it.
func (e *Engine) Flush() *Changes {
	e.compute()
	ch := e.build(false)
	e.stateChanges(ch, false)
	e.checkActivity()
	// The day sets are output even after a Settle: a new engine's
	// numbers are not those of the sets stored.
	ch.Activity, ch.WholeActivity = e.activityRows(false), e.actWhole
	clear(e.actDirty)
	e.actWhole = false
	e.clearOutputs()
	if len(e.eraseRows) > 0 || len(e.eraseVisits) > 0 {
		ch.EraseRows = make(map[int32][]Ref, len(e.eraseRows))
		for d, units := range e.eraseRows {
			refs := make([]Ref, 0, len(units))
			for u := range units {
				refs = append(refs, u)
			}
			slices.SortFunc(refs, func(a, b Ref) int { return slices.Compare(a[:], b[:]) })
			ch.EraseRows[d] = refs
			e.erasing[d] = units
		}
		ch.ErasedVisits = e.eraseVisits
		e.eraseRows, e.eraseVisits = map[int32]map[Ref]bool{}, map[int32][]Ref{}
	}
	return ch
}

// All returns the full rows of every partition (for tests and replay).
func (e *Engine) All() *Changes {
	e.compute()
	ch := e.build(true)
	e.stateChanges(ch, true)
	e.checkActivity()
	ch.Activity, ch.WholeActivity = e.activityRows(true), true
	return ch
}

// Restore has the next Flush output again what ch holds, which was not
// stored: the days of events in full, and the partitions of the keyed
// tables in ch whole (their stored contents are unknown).
func (e *Engine) Restore(ch *Changes) {
	for d := range ch.EventDays {
		if dd := e.days[d]; dd != nil {
			// The rows appended were not stored: write the day whole.
			dd.rewrite = true
			e.markEventDay(dd)
		}
	}
	for d := range ch.VisitDays {
		if e.days[d] == nil && len(e.visitsByDay[d]) == 0 {
			continue // a day not in memory: its erased visits, below
		}
		// A cold day with residents is read back whole before it is
		// written (ThawForFlush).
		e.wholeVisitDays[d] = true
		e.dirtyVisitDays[d] = true
	}
	// Rows of erased persons on days not in memory: taken out at the next
	// Flush, or with the whole day if a thaw brought it back meanwhile.
	for d, units := range ch.EraseRows {
		delete(e.erasing, d)
		if dd := e.days[d]; dd != nil && e.cold[d] == nil {
			dd.rewrite = true
			e.markEventDay(dd)
			continue
		}
		rows := e.eraseRows[d]
		if rows == nil {
			rows = make(map[Ref]bool, len(units))
			e.eraseRows[d] = rows
		}
		for _, u := range units {
			rows[u] = true
		}
	}
	for d, ids := range ch.ErasedVisits {
		if e.cold[d] == nil && (e.days[d] != nil || len(e.visitsByDay[d]) > 0) {
			continue // written whole (above)
		}
		for _, id := range ids {
			if _, ok := e.dirtyVisits[id]; !ok {
				e.visitOut[id] = d
				e.dirtyVisits[id] = nil
			}
		}
		e.eraseVisits[d] = append(e.eraseVisits[d], ids...)
	}
	// Rows Reclaim had written: again, unless their day is written whole
	// (from memory) or a newer one waits.
	for d, rows := range ch.Reclaimed {
		if e.wholeVisitDays[d] {
			continue
		}
		m := e.reclaimed[d]
		if m == nil {
			m = map[Ref]VisitRow{}
			e.reclaimed[d] = m
		}
		for _, r := range rows {
			if _, ok := m[r.ID]; !ok {
				m[r.ID] = r
			}
		}
	}
	e.restoreState(ch)
	for d := range ch.Activity {
		e.actDirty[d] = true
	}
	if ch.WholeActivity {
		e.actWhole = true
	}
	for b := range ch.People {
		e.wholePeople[b] = true
	}
	for b := range ch.Identities {
		e.wholeIdentities[b] = true
	}
	for b := range ch.Members {
		e.wholeMembers[b] = true
	}
}

// Dirty reports whether a Flush would return anything.
func (e *Engine) Dirty() bool {
	return len(e.dirtyEventDays) > 0 || len(e.dirtyVisits) > 0 || len(e.dirtyPeople) > 0 ||
		len(e.dirtyIdents) > 0 || len(e.dirtyMembers) > 0 || len(e.wholeVisitDays) > 0 ||
		len(e.wholePeople) > 0 || len(e.wholeIdentities) > 0 || len(e.wholeMembers) > 0 || len(e.dirtyUnits) > 0 ||
		len(e.dirtySessions) > 0 || len(e.dirtyBrowsers) > 0 || len(e.dirtyParts) > 0 ||
		len(e.dirtyPersons) > 0 || len(e.dirtyIdentity) > 0 || e.segmentsAll || len(e.eraseRows) > 0 ||
		len(e.reclaimed) > 0 || len(e.actDirty) > 0 || e.actWhole
}

// FrozenSinceFlush reports whether days went cold (Freeze) since the
// last Flush: the next one has state rows to write for them.
func (e *Engine) FrozenSinceFlush() bool { return len(e.summaryDirty) > 0 }

func (e *Engine) build(all bool) *Changes {
	ch := &Changes{
		EventDays:       map[int32][]EventRow{},
		ConversionDays:  map[int32][]ConversionRow{},
		EventAppend:     map[int32]bool{},
		VisitDays:       map[int32][]VisitRow{},
		People:          map[int][]*PersonRow{},
		Identities:      map[int][]IdentityRow{},
		Members:         map[int][]MemberRow{},
		WholeVisitDays:  map[int32]bool{},
		WholePeople:     map[int]bool{},
		WholeIdentities: map[int]bool{},
		WholeMembers:    map[int]bool{},
	}
	// Each partition's rows are one task: tasks only read the engine
	// (and sort their own day's events), so they run in parallel, and
	// their results are put in ch in order afterwards.
	var tasks []func()
	var mu sync.Mutex
	dayKeys := make([]int32, 0, len(e.days))
	if all {
		for d := range e.days {
			dayKeys = append(dayKeys, d)
		}
	} else {
		for d := range e.dirtyEventDays {
			dayKeys = append(dayKeys, d)
		}
	}
	for _, d := range dayKeys {
		dd := e.days[d]
		appendOnly := !all && dd != nil && !dd.rewrite
		tasks = append(tasks, func() {
			var rows []EventRow
			var conv []ConversionRow
			if appendOnly {
				rows, conv = e.rowsOf(dd, dd.fresh), e.conversionsOf(dd.fresh)
			} else {
				rows, conv = e.eventRows(d), e.conversionRows(d)
			}
			mu.Lock()
			defer mu.Unlock()
			if appendOnly {
				ch.EventAppend[d] = true
			}
			ch.EventDays[d], ch.ConversionDays[d] = rows, conv
		})
	}

	// Visits: whole days, and the changes of the others by day.
	wholeDays := e.wholeVisitDays
	if all {
		wholeDays = make(map[int32]bool, len(e.visitsByDay))
		for d := range e.visitsByDay {
			wholeDays[d] = true
		}
	}
	for d := range wholeDays {
		tasks = append(tasks, func() {
			rows := e.visitRows(d)
			mu.Lock()
			defer mu.Unlock()
			ch.VisitDays[d] = rows
			ch.WholeVisitDays[d] = true
		})
	}
	if !all {
		changed := map[int32][]*visit{}
		gone := map[int32][]Ref{}
		for id, v := range e.dirtyVisits {
			at, stored := e.visitOut[id]
			day := int32(0)
			if v != nil {
				day = e.DayOf(v.start)
				if !wholeDays[day] {
					changed[day] = append(changed[day], v)
				}
			}
			if stored && (v == nil || at != day) && !wholeDays[at] {
				gone[at] = append(gone[at], id)
			}
		}
		days := map[int32]bool{}
		for d := range changed {
			days[d] = true
		}
		for d := range gone {
			days[d] = true
		}
		for d := range e.reclaimed {
			if !wholeDays[d] {
				if rows := e.reclaimRows(d); len(rows) > 0 {
					days[d] = true
					if ch.Reclaimed == nil {
						ch.Reclaimed = map[int32][]VisitRow{}
					}
					ch.Reclaimed[d] = rows
				}
			}
		}
		for d := range days {
			vs, ids, re := changed[d], gone[d], ch.Reclaimed[d]
			tasks = append(tasks, func() {
				rows := make([]VisitRow, 0, len(vs)+len(ids)+len(re))
				for _, id := range ids {
					rows = append(rows, VisitRow{ID: id, Deleted: true})
				}
				for _, v := range vs {
					rows = append(rows, e.visitRow(v))
				}
				rows = append(rows, re...)
				sortVisitRows(rows)
				mu.Lock()
				defer mu.Unlock()
				ch.VisitDays[d] = rows
			})
		}
	}

	// People, identities and members: whole buckets, and the changes of
	// the others.
	var people, idents, members [Buckets][]Ref
	if !all {
		for ref := range e.dirtyPeople {
			people[Bucket(ref)] = append(people[Bucket(ref)], ref)
		}
		for ref := range e.dirtyIdents {
			idents[Bucket(ref)] = append(idents[Bucket(ref)], ref)
		}
		for ref := range e.dirtyMembers {
			members[Bucket(ref)] = append(members[Bucket(ref)], ref)
		}
	}
	for b := range Buckets {
		if all || e.wholePeople[b] {
			// Before the tasks: opening a part changes the engine.
			for ref := range e.bx.persons[b] {
				e.open(e.nodes[ref])
			}
		}
	}
	for b := range Buckets {
		switch {
		case all || e.wholePeople[b]:
			tasks = append(tasks, func() {
				rows := e.personRows(b)
				mu.Lock()
				defer mu.Unlock()
				ch.People[b] = rows
				ch.WholePeople[b] = true
			})
		case len(people[b]) > 0:
			refs := people[b]
			tasks = append(tasks, func() {
				rows := e.personChanges(b, refs)
				mu.Lock()
				defer mu.Unlock()
				ch.People[b] = rows
			})
		}
		switch {
		case all || e.wholeIdentities[b]:
			tasks = append(tasks, func() {
				rows := e.identityRows(b)
				mu.Lock()
				defer mu.Unlock()
				ch.Identities[b] = rows
				ch.WholeIdentities[b] = true
			})
		case len(idents[b]) > 0:
			refs := idents[b]
			tasks = append(tasks, func() {
				rows := e.identityChanges(b, refs)
				mu.Lock()
				defer mu.Unlock()
				ch.Identities[b] = rows
			})
		}
		switch {
		case all || e.wholeMembers[b]:
			tasks = append(tasks, func() {
				rows := e.memberRows(b)
				mu.Lock()
				defer mu.Unlock()
				ch.Members[b] = rows
				ch.WholeMembers[b] = true
			})
		case len(members[b]) > 0:
			refs := members[b]
			tasks = append(tasks, func() {
				rows := e.memberChanges(b, refs)
				if len(rows) == 0 {
					return // memberships changed back
				}
				mu.Lock()
				defer mu.Unlock()
				ch.Members[b] = rows
			})
		}
	}
	runParallel(tasks, e.cfg.BuildWorkers)
	return ch
}

// runParallel runs the tasks on up to workers goroutines (GOMAXPROCS
// when workers is 0), and returns when all are done.
func runParallel(tasks []func(), workers int) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(tasks))
	if workers <= 1 {
		for _, t := range tasks {
			t()
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(tasks) {
					return
				}
				tasks[i]()
			}
		}()
	}
	wg.Wait()
}
