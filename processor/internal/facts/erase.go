package facts

import (
	"math"
	"slices"
)

// Erasure of a person (docs/privacy.md): every event whose part is one of
// the person's nodes (the user and the browsers they claim, or an
// unclaimed browser) is taken out, and the facts are recomputed as if
// they had never been seen: visits merge or vanish, claims move to whoever
// else signed in, the person's rows are deleted. Events of other people
// on a shared browser stay (they are theirs).

// personNode returns the person node of ref: a user or an unclaimed
// browser itself, a claimed browser's claimer; nil when ref is no one.
func (e *Engine) personNode(ref Ref) *node {
	n := e.nodes[ref]
	if n == nil || n.kind == KindVisitor {
		return nil
	}
	e.open(n)
	return personOf(n)
}

// ErasePlan returns the cold days to thaw before Erase (sorted). A person
// whose cold visits are theirs alone (alone) needs none: Erase takes their
// rows out of the days not in memory without reading them back. Another
// needs every cold day holding their activity, with every cold day their
// visits touch.
func (e *Engine) ErasePlan(ref Ref) []int32 {
	e.compute() // claims as the events added so far make them
	p := e.personNode(ref)
	if p == nil || len(e.cold) == 0 && !e.final {
		return nil
	}
	mem := p.members()
	if e.alone(p, mem) {
		return nil
	}
	want := map[int32]bool{}
	var finals []int32
	add := func(d int32) {
		switch {
		case e.cold[d] != nil:
			want[d] = true
		case e.final && d <= e.finalThrough && !want[d]:
			want[d] = true
			finals = append(finals, d)
		}
	}
	for _, n := range mem {
		for _, nd := range n.days {
			add(nd.num)
		}
		for _, t := range n.frozen {
			add(e.DayOf(t.at))
		}
	}
	// Final days are read back too, each as a cold day whose visits'
	// rows are unknown (so they are written whole), with every final day
	// their visits touch: no late event can reach them, but the person's
	// rows there must go, and the other person's visits there change.
	for len(finals) > 0 {
		d := finals[len(finals)-1]
		finals = finals[:len(finals)-1]
		c := &coldDay{lo: math.MaxInt64, hi: math.MinInt64, visits: -1}
		if s, ok := e.finalSpan[d]; ok {
			c.lo, c.hi = s[0], s[1]
			for x := e.DayOf(s[0]); x <= e.DayOf(s[1]); x++ {
				add(x)
			}
		}
		e.cold[d] = c
		e.summaryDirty[d] = true
		e.stats.FinalDaysRead++
	}
	return e.closure(want)
}

// alone reports whether the person p (with its nodes mem) can be erased
// from the days not in memory without reading them back: no other person
// has an event in a visit of theirs on those days or on one of their
// browsers (no one else signed in on a browser of theirs, they signed in
// on no browser they do not claim, no other part touches their cold
// visits). Every row of those days whose unit is one of mem is then
// theirs, and every row of theirs has such a unit; their cold visits and
// their rows go without changing anyone else's.
func (e *Engine) alone(p *node, mem []*node) bool {
	set := make(map[*node]bool, len(mem))
	for _, n := range mem {
		set[n] = true
	}
	for b := range p.signed {
		if !set[b] {
			return false
		}
	}
	ids := map[Ref]bool{}
	for _, n := range mem {
		for u := range n.signIns {
			if u != p {
				return false
			}
		}
		for _, t := range n.frozen {
			ids[t.id] = true
		}
	}
	if len(ids) == 0 {
		return true
	}
	// The touches of every other part; those still encoded (restored,
	// not reached since) are read without being opened: an erasure
	// must not decode a million persons' histories.
	for _, n := range e.nodes {
		if set[n] {
			continue
		}
		if n.enc != nil {
			if encodedTouch(n.enc, ids) {
				return false
			}
			continue
		}
		for _, t := range n.frozen {
			if ids[t.id] {
				return false
			}
		}
	}
	return true
}

// eraseOut takes the rows of the person's nodes mem out of the days not in
// memory, cold or final (alone must hold): their events and conversions
// (eraseRows, counted from the parts' day activity), and their cold
// visits, whose rows' hashes leave their days' summaries. It returns how
// many events go. Those of a cold day's residents (Freeze) are among
// them: Erase takes them out of memory too, which has the day read back
// before it is written (ThawForFlush), without the erased rows.
func (e *Engine) eraseOut(mem []*node) int {
	events := 0
	for _, n := range mem {
		for _, nd := range n.days {
			if nd.pd == nil || e.cold[nd.num] == nil && e.days[nd.num] != nil {
				continue // a day in memory: Erase takes them out
			}
			units := e.eraseRows[nd.num]
			if units == nil {
				units = make(map[Ref]bool, len(mem))
				e.eraseRows[nd.num] = units
			}
			for _, m := range mem {
				units[m.ref] = true
			}
			events += int(nd.pd.events)
		}
	}
	seen := map[Ref]bool{}
	for _, n := range mem {
		for _, t := range n.frozen {
			if seen[t.id] {
				continue
			}
			seen[t.id] = true
			d := e.DayOf(t.at)
			if c := e.cold[d]; c != nil {
				c.visits--
				c.sum -= t.row
				e.summaryDirty[d] = true
			}
			e.visitOut[t.id] = d
			e.dirtyVisits[t.id] = nil
			e.eraseVisits[d] = append(e.eraseVisits[d], t.id)
		}
	}
	return events
}

// erasedRow reports whether a stored row of day dn with unit is an erased
// person's that a commit takes out (or is taking out).
func (e *Engine) erasedRow(dn int32, unit Ref) bool {
	return e.eraseRows[dn][unit] || e.erasing[dn][unit]
}

// Stored tells the engine that the commit of ch succeeded: the rows of
// erased persons it took out of days not in memory are gone from the
// tables.
func (e *Engine) Stored(ch *Changes) {
	for d := range ch.EraseRows {
		delete(e.erasing, d)
	}
}

// Erase takes the person of ref out (the cold days ErasePlan names must
// be in memory): from the days in memory, and, when their cold visits are
// theirs alone, from the days not in memory (cold or final: the next
// Flush names their rows in Changes.EraseRows). It returns the person's
// ref and how many events went; ok is false when ref is no one the engine
// knows.
func (e *Engine) Erase(ref Ref) (person Ref, events int, ok bool) {
	// The claims as the events added so far make them: a replay adds
	// the whole log without computing, and the person is then who claims
	// which browsers at this point of the log.
	e.compute()
	p := e.personNode(ref)
	if p == nil {
		return Ref{}, 0, false
	}
	mem := p.members()
	set := make(map[*node]bool, len(mem))
	for _, n := range mem {
		set[n] = true
	}
	alone := e.alone(p, mem)
	if alone {
		events += e.eraseOut(mem)
	}
	theirs := func(ev *event) bool { return ev.part != nil && set[ev.part] }
	for _, d := range e.days {
		var gone []*event
		d.events = slices.DeleteFunc(d.events, func(ev *event) bool {
			if theirs(ev) {
				gone = append(gone, ev)
				return true
			}
			return false
		})
		if len(gone) == 0 {
			continue
		}
		d.fresh = slices.DeleteFunc(d.fresh, theirs)
		d.rewrite = true
		e.markEventDay(d)
		for _, ev := range gone {
			delete(d.ids, ev.ID)
			switch {
			case !ev.SessionID.IsZero():
				if v := e.sessions[ev.SessionID]; v != nil {
					v.members = slices.DeleteFunc(v.members, func(o *event) bool { return o == ev })
					e.markSession(v)
				}
			case ev.clusterable():
				ev.unit.removeCluster(ev)
				e.markUnit(ev.unit)
			}
		}
		if !alone || e.cold[d.num] == nil {
			events += len(gone) // a cold day's residents counted in eraseOut
		}
	}
	// Their activity, cold visits' touches and sign-ins go; the browsers
	// they signed in on are claimed again by whoever else did.
	for _, n := range mem {
		if len(n.days) > 0 {
			e.actShrink[p] = true // its days go
		}
		n.days = nil
		n.frozen = nil
		e.markPart(n)
		if n.kind == KindUser {
			for b := range n.signed {
				delete(b.signIns, n)
				e.dirtyBrowsers[b] = true
			}
			n.signed = nil
		}
	}
	e.compute()
	// Nodes with nothing left are forgotten: a later event with the same
	// ids starts a new person. A browser another person still signs in
	// on stays theirs.
	for _, n := range mem {
		if n.kind == KindBrowser && len(n.signIns) > 0 {
			continue
		}
		n.erased = true
		e.dirtyPersons[n] = true
		e.dirtyIdentity[n] = true
		delete(e.nodes, n.ref)
		if n.kind == KindUser {
			delete(e.users, n.raw)
		}
	}
	refs := make(map[Ref]bool, len(mem))
	for _, n := range mem {
		refs[n.ref] = true
	}
	for anon, r := range e.anonRefs {
		if refs[r] {
			delete(e.anonRefs, anon) // raw anonymousIds of theirs
		}
	}
	e.lastBrowser = nil
	e.compute()
	return p.ref, events, true
}
