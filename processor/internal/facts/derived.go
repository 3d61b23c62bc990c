package facts

import (
	"hash/maphash"
	"slices"
)

// personState is a computed person in a compact form (about half the
// size of its PersonRow: the touches and the client are pointers to
// shared values); row expands it. It is kept only from the compute that
// changed the person to the Flush that outputs its row (dirtyPeople):
// what stays of every person is the hash of its row (bucketIndex), and a
// partition written whole computes its persons again (personRows).
type personState struct {
	core        personCore
	first, last touchInfo
	client      *Client
	revenue     Money
}

// personCore are the comparable scalars of a personState.
type personCore struct {
	ref                                 Ref
	userID, name, email, stage          string
	lastPath, traits                    string
	known, hasName, hasEmail            bool
	shared, intent                      bool
	firstSeen, lastSeen, visits, active int64
	events, pageviews, orders, value    int64
	browsers, firstPurchase             int64
}

// newPersonState compacts a computed person.
func newPersonState(f *personFacts) personState {
	r := f.row
	return personState{
		core: personCore{ref: r.Ref, userID: r.UserID, name: r.Name, email: r.Email, stage: r.Stage,
			lastPath: r.LastPath, traits: r.Traits, known: r.Known, hasName: r.HasName,
			hasEmail: r.HasEmail, shared: r.SharedBrowser, intent: r.Intent,
			firstSeen: r.FirstSeen, lastSeen: r.LastSeen, visits: r.Visits, active: r.ActiveDays,
			events: r.Events, pageviews: r.Pageviews, orders: r.Orders, value: r.Value,
			browsers: r.Browsers, firstPurchase: r.FirstPurchase},
		first: f.first, last: f.last, client: f.client, revenue: r.Revenue,
	}
}

// row expands the state into the person's row.
func (s *personState) row(out *PersonRow) {
	c := &s.core
	*out = PersonRow{Revenue: s.revenue}
	r := &out.personScalars
	r.Ref, r.UserID, r.Known, r.Name, r.Email = c.ref, c.userID, c.known, c.name, c.email
	r.HasName, r.HasEmail, r.Stage = c.hasName, c.hasEmail, c.stage
	r.FirstSeen, r.LastSeen, r.Visits, r.ActiveDays = c.firstSeen, c.lastSeen, c.visits, c.active
	r.Events, r.Pageviews, r.Orders, r.Value = c.events, c.pageviews, c.orders, c.value
	r.FirstTouch, r.LastTouch = touchOf(s.first), touchOf(s.last)
	if cl := s.client; cl != nil {
		r.Country, r.Region, r.Device = cl.Country, cl.Region, cl.Device
		r.Browser, r.OS, r.Locale = cl.Browser, cl.OS, cl.Locale
	}
	r.LastPath, r.Traits, r.Browsers, r.SharedBrowser = c.lastPath, c.traits, c.browsers, c.shared
	r.FirstPurchase, r.Intent = c.firstPurchase, c.intent
}

// hash returns a hash of the row the state gives (never 0), under the
// engine's seed: equal rows hash alike, and two rows that differ hash
// alike with a chance of 2^-64.
func (s *personState) hash(seed maphash.Seed) uint64 {
	var r PersonRow
	s.row(&r)
	return r.hash(seed)
}

// hash returns a hash of every field of the row (never 0).
func (r *PersonRow) hash(seed maphash.Seed) uint64 {
	h := maphash.Comparable(seed, r.personScalars)
	for _, a := range r.Revenue {
		h = h*0x9e3779b97f4a7c15 + maphash.Comparable(seed, a)
	}
	if r.Deleted {
		h = ^h
	}
	return h | 1
}

// bucketIndex holds the per-bucket indexes: persons by ref, with the hash
// of their row as last computed (personState.hash).
type bucketIndex struct {
	persons    [Buckets]map[Ref]uint64
	identities [Buckets]map[Ref]*node
	members    [Buckets]map[Ref][]string
}

func (e *Engine) bucketsInit() {
	for i := range Buckets {
		e.bx.persons[i] = map[Ref]uint64{}
		e.bx.identities[i] = map[Ref]*node{}
		e.bx.members[i] = map[Ref][]string{}
	}
}

// compute brings the derived state up to date with the events added:
// claims, visits, persons and memberships, marking the partitions that
// change.
func (e *Engine) compute() {
	for b := range e.dirtyBrowsers {
		e.reclaim(b)
		e.stateDirty[b] = true // its sign-ins changed
	}
	clear(e.dirtyBrowsers)
	for v := range e.dirtySessions {
		e.resession(v)
	}
	clear(e.dirtySessions)
	e.epochSessions++
	for n := range e.dirtyUnits {
		e.recluster(n)
	}
	clear(e.dirtyUnits)
	e.epochUnits++
	for n := range e.dirtyParts {
		if p := personOf(n); p != nil {
			e.dirtyPersons[p] = true
		}
	}
	clear(e.dirtyParts)
	e.epochParts++
	if e.segmentsAll {
		for _, n := range e.nodes {
			if isPerson(n) {
				e.dirtyPersons[n] = true
			}
		}
	}
	e.recomputePersons(e.segmentsAll)
	clear(e.dirtyPersons)
	e.segmentsAll = false
	for n := range e.dirtyIdentity {
		b := Bucket(n.ref)
		_, had := e.bx.identities[b][n.ref]
		claimed := n.kind == KindBrowser && n.claimer != nil
		switch {
		case claimed:
			e.bx.identities[b][n.ref] = n
			e.dirtyIdents[n.ref] = true
		case had:
			delete(e.bx.identities[b], n.ref)
			e.dirtyIdents[n.ref] = true
		}
	}
	clear(e.dirtyIdentity)
}

// personUpdate is a dirty person recomputed: its new state when it
// changed, its membership when it changed or must be written again.
type personUpdate struct {
	p          *node
	state      *personState // nil: unchanged (or no longer a person), or settling
	changed    bool         // the row's hash changed (state holds it unless settling)
	hash       uint64       // of state's row
	members    []string
	setMembers bool
	days       []actDay // the person's days (personDays)
}

// recomputePersons updates the cached rows and memberships of the dirty
// persons (or removes them for nodes that are no longer persons). The
// persons are computed in parallel (Config.BuildWorkers): computing only
// reads the engine; their results are then applied in turn.
func (e *Engine) recomputePersons(forceMembers bool) {
	ups := make([]personUpdate, 0, len(e.dirtyPersons))
	for p := range e.dirtyPersons {
		e.open(p) // before the tasks: opening a part changes the engine
		ups = append(ups, personUpdate{p: p})
	}
	const chunk = 256
	var tasks []func()
	for lo := 0; lo < len(ups); lo += chunk {
		part := ups[lo:min(lo+chunk, len(ups))]
		tasks = append(tasks, func() {
			for i := range part {
				e.computePersonUpdate(&part[i], forceMembers)
			}
		})
	}
	runParallel(tasks, e.cfg.BuildWorkers)
	defer clear(e.actShrink)
	for i := range ups {
		u := &ups[i]
		b := Bucket(u.p.ref)
		e.applyActivity(u.p, isPerson(u.p), u.days)
		if !isPerson(u.p) {
			if _, ok := e.bx.persons[b][u.p.ref]; ok {
				delete(e.bx.persons[b], u.p.ref)
				e.dirtyPeople[u.p.ref] = nil
			}
			e.setMembers(b, u.p.ref, nil)
			continue
		}
		if u.changed {
			e.bx.persons[b][u.p.ref] = u.hash
			if !e.settling {
				e.dirtyPeople[u.p.ref] = u.state
			}
		}
		if u.setMembers {
			e.setMembers(b, u.p.ref, u.members)
		}
	}
}

// computePersonUpdate computes a dirty person (it only reads the engine).
func (e *Engine) computePersonUpdate(u *personUpdate, forceMembers bool) {
	if !isPerson(u.p) {
		return
	}
	u.days = personDays(u.p)
	old, had := e.bx.persons[Bucket(u.p.ref)][u.p.ref]
	f := e.computePerson(u.p)
	st := newPersonState(f)
	if h := st.hash(e.seed); !had || h != old {
		u.changed, u.hash = true, h
		if !e.settling {
			u.state = &st
		}
	} else if !forceMembers {
		return
	}
	u.members, u.setMembers = e.membership(f), true
}

// setMembers records a person's membership, keeping the counts.
func (e *Engine) setMembers(b int, ref Ref, mem []string) {
	cur, had := e.bx.members[b][ref]
	if had && slices.Equal(cur, mem) || !had && len(mem) == 0 {
		return
	}
	for _, s := range cur {
		e.segCount[s]--
	}
	for _, s := range mem {
		e.segCount[s]++
	}
	e.membersDirty[ref] = true // its state row
	if _, ok := e.dirtyMembers[ref]; !ok {
		// The membership as output before (slices are replaced, never
		// modified).
		e.dirtyMembers[ref] = cur
	}
	if len(mem) == 0 {
		delete(e.bx.members[b], ref)
	} else {
		e.bx.members[b][ref] = mem
	}
}

// ReevaluateSegments has the next compute evaluate every person's
// membership again: for an engine restored with the memberships stored
// under other segment definitions.
func (e *Engine) ReevaluateSegments() { e.segmentsAll = true }

// Members returns how many persons are in the segment with ref.
func (e *Engine) Members(ref string) int { return e.segCount[ref] }

// Settle computes the derived state and forgets which partitions changed:
// for an engine rebuilt from tables that already hold its outputs.
func (e *Engine) Settle() {
	// The persons' rows are not kept for output (the tables hold them):
	// a settle after a load computes every person, and keeping their
	// rows until clearOutputs held a gigabyte at a million people.
	e.settling = true
	e.compute()
	e.settling = false
	e.clearOutputs()
}

// RewriteMembers has the next Flush output every partition of the members
// table whole (membership stored under other segment definitions).
func (e *Engine) RewriteMembers() {
	for b := range Buckets {
		e.wholeMembers[b] = true
	}
}
