package facts

import "slices"

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
	return personOf(n)
}

// ErasePlan returns the cold days holding activity of the person of ref
// (sorted, with every cold day their visits touch): thaw them before
// Erase.
func (e *Engine) ErasePlan(ref Ref) []int32 {
	p := e.personNode(ref)
	if p == nil || len(e.cold) == 0 {
		return nil
	}
	want := map[int32]bool{}
	for _, n := range p.members() {
		for _, nd := range n.days {
			if e.cold[nd.num] != nil {
				want[nd.num] = true
			}
		}
		for _, t := range n.frozen {
			if d := e.DayOf(t.at); e.cold[d] != nil {
				want[d] = true
			}
		}
	}
	return e.closure(want)
}

// Erase takes the person of ref out (their days must be in memory:
// ErasePlan). It returns the person's ref and how many events went;
// ok is false when ref is no one the engine knows.
func (e *Engine) Erase(ref Ref) (person Ref, events int, ok bool) {
	p := e.personNode(ref)
	if p == nil {
		return Ref{}, 0, false
	}
	mem := p.members()
	set := make(map[*node]bool, len(mem))
	for _, n := range mem {
		set[n] = true
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
		events += len(gone)
	}
	// Their activity, cold visits' touches and sign-ins go; the browsers
	// they signed in on are claimed again by whoever else did.
	for _, n := range mem {
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
